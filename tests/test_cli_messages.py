"""What the command line says at its edges: a ``--now`` before the conversation's newest
message warns, a stray invalid byte is noted for every format, an unopenable path names
its OS cause, ``policy validate`` lists every error on its own line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextledger.cli.main import app

DATA = Path(__file__).parent / "data"
runner = CliRunner()
NEWEST = "2026-02-01T10:00:08+00:00"  # the newest message of claude_code_session.jsonl


def _imported(home: Path) -> str:
    res = runner.invoke(app, ["--home", str(home), "import", str(DATA / "claude_code_session.jsonl"), "--json"])
    assert res.exit_code == 0, res.output
    return str(json.loads(res.stdout)[0]["conversation_id"])


@pytest.mark.parametrize("command", [
    ["assemble", "{conv}", "--json"],
    ["search", "{conv}", "port", "--json"],
    ["compact", "{conv}", "--keep", "2", "--json"],
])
def test_a_now_before_the_newest_message_warns_once_on_stderr(tmp_path: Path, command: list[str]) -> None:
    def run(home: Path, at: str) -> tuple[int, str, str]:
        conv = _imported(home)  # a fresh ledger each time: a compaction adds a message
        res = runner.invoke(app, ["--home", str(home), *[a.format(conv=conv) for a in command], "--now", at])
        return res.exit_code, res.stdout, res.stderr

    code, out, err = run(tmp_path / "early", "2026-01-31T09:00:00Z")
    assert code == 0, err
    assert err == (
        f"warning: --now 2026-01-31T09:00:00+00:00 is earlier than the conversation's newest message ({NEWEST}); "
        "records after it are still included and count as fresh\n"
    )
    assert isinstance(json.loads(out), dict)  # stdout is the JSON result alone
    for i, at in enumerate((NEWEST, "2026-02-02T00:00:00Z")):  # at or after the newest message: no warning
        code, out, err = run(tmp_path / f"later{i}", at)
        assert code == 0 and err == "", err
    home = tmp_path / "early"
    unknown = runner.invoke(app, ["--home", str(home), *[a.format(conv="conv_nope") for a in command], "--now", "2020-01-01T00:00:00Z"])
    assert unknown.exit_code == 3 and "warning" not in unknown.stderr
