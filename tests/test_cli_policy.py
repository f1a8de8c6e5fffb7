"""``contextledger policy show | validate | diff``: versions, key-path errors, diffs."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from contextledger.cli.main import app
from contextledger.policy.loader import default_policy

runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    res = runner.invoke(app, list(args))
    return res.exit_code, res.output


def test_show_default_policy_json() -> None:
    code, out = run("policy", "show", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["version"] == default_policy().version
    assert data["version"].startswith("default@1.0.0+sha256:")
    assert data["policy"]["budget"]["drop_order"][-1] == "shorten_recent_tail"


def test_validate_reports_the_key_path(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[budget.buckets]\nrecent_tail = 1.5\n")
    code, out = run("policy", "validate", str(bad))
    assert code == 5
    assert "budget.buckets.recent_tail" in out and "Traceback" not in out
    typo = tmp_path / "typo.toml"
    typo.write_text("[budget]\nbukets = 1\n")
    code, out = run("policy", "validate", str(typo))
    assert code == 5 and "budget.bukets" in out


def test_validate_and_diff(tmp_path: Path) -> None:
    a = tmp_path / "a.toml"
    a.write_text("[freshness]\nstale_mode = \"mark\"\n")
    b = tmp_path / "b.toml"
    b.write_text("[freshness]\nstale_mode = \"omit\"\n[budget]\ndefault_budget_tokens = 8000\n")
    code, out = run("policy", "validate", str(b), "--json")
    assert code == 0 and json.loads(out)["valid"] is True
    code, out = run("policy", "diff", str(a), str(b), "--json")
    assert code == 0
    changes = {c["key_path"]: (c["old"], c["new"]) for c in json.loads(out)["changes"]}
    assert changes == {"budget.default_budget_tokens": (4000, 8000), "freshness.stale_mode": ("mark", "omit")}


def test_assemble_with_a_policy_file_records_its_version(tmp_path: Path) -> None:
    from contextledger.ledger import Ledger

    pol = tmp_path / "p.toml"
    pol.write_text("[budget]\ndefault_budget_tokens = 3000\n")
    led = Ledger.open(home=tmp_path / "home")
    rec = led.recorder()
    conv = rec.start_conversation()
    rec.record_message(conv.id, "user", "hi")
    led.close()
    code, out = run("--home", str(tmp_path / "home"), "assemble", conv.id, "--policy", str(pol), "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["budget_tokens"] == 3000 and data["policy_version"] != default_policy().version


def test_an_unreadable_policy_file_is_an_input_error(tmp_path: Path) -> None:
    """A missing file or a folder is exit 2 (README: unreadable file); an invalid
    policy stays exit 5.  The library error is still a PolicyError."""
    import pytest

    from contextledger.errors import InputError, PolicyError
    from contextledger.policy.loader import load_policy

    (tmp_path / "adir").mkdir()
    for path in (tmp_path / "nope.toml", tmp_path / "adir"):
        for cmd in (["policy", "validate", str(path)], ["policy", "show", str(path)], ["policy", "diff", str(path), str(path)]):
            res = runner.invoke(app, cmd)
            assert res.exit_code == 2, (cmd, res.output)
            assert res.stderr.startswith(f"error: {path}: cannot read policy file: ") and len(res.stderr.strip().splitlines()) == 1
        res = runner.invoke(app, ["policy", "validate", str(path), "--json"])
        assert json.loads(res.stderr)["exit_code"] == 2 and json.loads(res.stderr)["error"] == "PolicyFileError"
        with pytest.raises(PolicyError) as caught:
            load_policy(path)
        assert isinstance(caught.value, InputError)
