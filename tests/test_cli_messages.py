"""What the command line says at its edges: a ``--now`` before the conversation's newest
message warns, a stray invalid byte is noted for every format, an unopenable path names
its OS cause, ``policy validate`` lists every error on its own line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextledger.cli.common import EXIT_INPUT
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


def _tau2(folder: Path, calls: list[object]) -> Path:
    sim = {"id": "sim-1", "task_id": "3", "trial": 0, "termination_reason": "user_stop", "messages": [
        {"role": "assistant", "content": "Hi! How can I help you today?", "turn_idx": 0},
        {"role": "user", "content": "Raise the retry budget in settings.py.", "turn_idx": 1},
        {"role": "assistant", "content": "Done. " + "The budget is raised. " * 10, "turn_idx": 2},
    ]}
    path = folder / "run.json"
    path.write_text(json.dumps({"info": {}, "tasks": [], "simulations": [sim]}), encoding="utf-8")
    return path


def _writers() -> dict[str, Callable[[Path, list[Any]], Path]]:
    import tool_dialects as D

    return {"claude-code": D.write_claude_code, "codex-rollout": D.write_codex, "gemini-cli": D.write_gemini,
            "openai-chat": D.write_chat, "aider-history": D.write_aider, "openai-responses": D.write_responses,
            "anthropic-messages": D.write_anthropic, "swe-agent": D.write_swe_agent, "tau2-bench": _tau2}


@pytest.mark.parametrize("fmt", ["claude-code", "codex-rollout", "gemini-cli", "openai-chat", "aider-history",
                                 "openai-responses", "anthropic-messages", "swe-agent", "tau2-bench"])
def test_a_stray_invalid_byte_is_noted_once_in_every_format(tmp_path: Path, fmt: str) -> None:
    from contextledger.ingest.importers import SUPPORTED_FORMATS

    assert sorted(_writers()) == sorted(SUPPORTED_FORMATS)
    path = _writers()[fmt](tmp_path, [])
    data = path.read_bytes()
    assert data.count(b"Raise the retry") == 1
    path.write_bytes(data.replace(b"Raise the retry", b"R\xe4ise the retry"))
    offset = path.read_bytes().index(b"\xe4")
    line = path.read_bytes()[:offset].count(b"\n") + 1
    note = (f"byte {offset}: not valid UTF-8 (invalid continuation byte); the file was decoded as Latin-1 (ISO-8859-1)" if fmt == "aider-history"
            else f"{path}: 1 invalid UTF-8 sequence(s) (line {line} byte {offset}) decoded as U+FFFD")
    res = runner.invoke(app, ["--home", str(tmp_path / "h"), "import", str(path), "--json"])
    assert res.exit_code == 0 and res.stderr == "", res.output
    [imported] = json.loads(res.stdout)
    assert imported["format"] == fmt and imported["notes"][0] == note and imported["notes"].count(note) == 1
    res = runner.invoke(app, ["--home", str(tmp_path / "h2"), "import", str(path)])
    assert res.exit_code == 0 and res.stderr == "", res.output
    assert res.stdout.count(note) == 1 and f"  note: {note}\n" in res.stdout


def _without_root_bypass() -> list[str]:
    """A command prefix under which file permissions hold: none for an ordinary user; for
    root, ``setpriv`` without the capabilities that bypass them (skips when refused)."""
    if os.geteuid() != 0:
        return []
    prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    if shutil.which("setpriv") is None or subprocess.run([*prefix, "true"], capture_output=True, check=False).returncode != 0:
        pytest.skip("running as root and setpriv cannot drop the permission-bypass capabilities")
    return prefix


def test_a_path_that_cannot_be_opened_names_the_os_cause(tmp_path: Path) -> None:
    good = (DATA / "airline_chat.json").read_bytes()
    (tmp_path / "dir").mkdir()
    (tmp_path / "dangling.json").symlink_to(tmp_path / "gone.json")
    (tmp_path / "loop").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop")
    cases = {
        "dir": "is a folder (Is a directory); give a transcript file",
        "dangling.json": f"dangling symlink to {tmp_path / 'gone.json'} (No such file or directory)",
        "loop": "symlink loop (Too many levels of symbolic links)",
        "missing.json": "no such file",
    }
    for name, reason in cases.items():
        res = runner.invoke(app, ["--home", str(tmp_path / "h"), "import", str(tmp_path / name)])
        assert res.exit_code == EXIT_INPUT and res.stdout == "" and res.stderr == f"error: {tmp_path / name}: {reason}\n", res.output
    res = runner.invoke(app, ["--home", str(tmp_path / "h"), "import", str(tmp_path / "loop"), "--json"])
    assert res.exit_code == EXIT_INPUT and res.stdout == ""
    assert json.loads(res.stderr) == {"error": "ImportFormatError", "message": f"{tmp_path / 'loop'}: {cases['loop']}",
                                      "exit_code": EXIT_INPUT, "path": str(tmp_path / "loop")}
    for bom, codec in ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")):
        wide = tmp_path / f"{codec}.json"
        wide.write_bytes(bom + good.decode("utf-8").encode(codec))
        res = runner.invoke(app, ["--home", str(tmp_path / "h16"), "import", str(wide), "--json"])
        assert res.exit_code == 0 and json.loads(res.stdout)[0]["format"] == "openai-chat", res.output

    closed, unreadable, policy = tmp_path / "closed", tmp_path / "unreadable.json", tmp_path / "p.toml"
    closed.mkdir()
    (closed / "chat.json").write_bytes(good)
    unreadable.write_bytes(good)
    policy.write_text("[budget]\n")
    for p in (closed, unreadable, policy):
        p.chmod(0)
    cli = [*_without_root_bypass(), sys.executable, "-m", "contextledger.cli.main"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    runs = {
        "import-file": ([*cli, "--home", str(tmp_path / "h"), "import", str(unreadable)], f"error: {unreadable}: cannot read file: Permission denied\n"),
        "import-folder": ([*cli, "--home", str(tmp_path / "h"), "import", str(closed / "chat.json")],
                          f"error: {closed / 'chat.json'}: a folder on its path cannot be searched (Permission denied)\n"),
        "policy": ([*cli, "policy", "validate", str(policy)], f"error: {policy}: cannot read policy file: Permission denied\n"),
    }
    try:
        for what, (argv, expected) in runs.items():
            done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
            assert (done.returncode, done.stdout, done.stderr) == (EXIT_INPUT, "", expected), what
    finally:
        closed.chmod(0o700)


def test_policy_validate_lists_every_error_on_its_own_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[budget.buckets]\nrecent_tail = 1.5\n[budget]\nbukets = 1\ndefault_budget_tokens = "x"\n')
    errors = [
        ("budget.default_budget_tokens", "expected an integer, got str 'x'"),
        ("budget.buckets.recent_tail", "must be between 0 and 1, got 1.5"),
        ("budget.bukets", "unknown key"),
    ]
    res = runner.invoke(app, ["policy", "validate", str(bad)])
    assert res.exit_code == 5 and res.stdout == ""
    assert res.stderr.splitlines() == [f"error: {bad}: {key}: {reason}" for key, reason in errors]
    res = runner.invoke(app, ["policy", "validate", str(bad), "--json"])
    assert res.exit_code == 5 and res.stdout == ""
    assert [json.loads(line) for line in res.stderr.splitlines()] == [
        {"error": "PolicyError", "message": f"{bad}: {key}: {reason}", "exit_code": 5, "key_path": key} for key, reason in errors
    ]
    one = tmp_path / "one.toml"
    one.write_text("[budget.buckets]\nrecent_tail = 1.5\n")
    res = runner.invoke(app, ["policy", "validate", str(one), "--json"])
    assert res.exit_code == 5 and json.loads(res.stderr)["key_path"] == "budget.buckets.recent_tail"
    from contextledger.errors import PolicyError
    from contextledger.policy.loader import load_policy

    with pytest.raises(PolicyError) as info:  # the library error keeps all of them, the first as its key path
        load_policy(bad)
    assert info.value.key_path == errors[0][0] and info.value.problems == tuple(errors)


def test_bench_real_rejects_a_malformed_budget_list_before_looking_for_the_manifest(tmp_path: Path) -> None:
    none, out = tmp_path / "no-data", tmp_path / "out"
    res = runner.invoke(app, ["bench", "real", "--data", str(none), "--budgets", "4k", "--out", str(out)])
    assert (res.exit_code, res.stdout, res.stderr) == (EXIT_INPUT, "", "error: --budgets: expected comma-separated whole numbers, got '4k'\n")
    res = runner.invoke(app, ["bench", "real", "--data", str(none), "--budgets", "4000", "--out", str(out)])
    assert res.exit_code == 4 and res.stderr == f"error: no such file or directory: {none / 'manifest.json'}\n"
    assert not out.exists()


def test_a_ledger_without_write_permission_is_readable(tmp_path: Path) -> None:
    """Ledger file and folder mode 0555 (permissions, not a read-only mount): listing,
    rehydrating, ``gc --dry-run`` and the inspector all read it; an import says why not."""
    import hashlib
    import urllib.request

    from contextledger.ledger import Ledger

    home = tmp_path / "home"
    conv = _imported(home)
    led = Ledger.open(home=home)
    art = max(led.store.artifacts(led.scope(), conv), key=lambda a: a.size_bytes)
    led.close()
    for p in [home, *home.rglob("*")]:
        p.chmod(0o555)
    cli = [*_without_root_bypass(), sys.executable, "-m", "contextledger.cli.main", "--home", str(home)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*cli, *args], capture_output=True, env=env, timeout=300, check=False)

    try:
        listed = run("conversations", "--json")
        assert listed.returncode == 0 and [c["conversation_id"] for c in json.loads(listed.stdout)] == [conv], listed.stderr
        raw = run("rehydrate", art.id)
        assert raw.returncode == 0 and "sha256:" + hashlib.sha256(raw.stdout).hexdigest() == art.sha256, raw.stderr
        gc = run("gc", "--dry-run")
        assert gc.returncode == 0 and gc.stdout.startswith(b"would delete: 0 unreferenced blobs"), gc.stderr
        write = run("import", str(DATA / "airline_chat.json"))
        assert write.returncode == 4 and write.stderr.startswith(b"error: ") and b"Traceback" not in write.stderr
        server = subprocess.Popen([*cli, "inspect", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            assert server.stdout is not None
            base = json.loads(b"".join(iter(server.stdout.readline, b"}\n")) + b"}")["base_url"]
            with urllib.request.urlopen(f"{base}/api/conversations", timeout=60) as resp:
                assert [c["id"] for c in json.loads(resp.read())] == [conv]
        finally:
            server.terminate()
            _, err = server.communicate(timeout=60)
        assert b"INFO" not in err, err  # no library log lines (the MCP session manager's)
    finally:
        for p in [home, *home.rglob("*")]:
            p.chmod(0o755)


def test_an_assembly_over_its_budget_warns_on_stderr_and_keeps_stdout_the_report(tmp_path: Path) -> None:
    conv = _imported(tmp_path)
    res = runner.invoke(app, ["--home", str(tmp_path), "assemble", conv, "--budget", "20"])
    assert res.exit_code == 0, res.stderr
    [line] = res.stderr.splitlines()
    assert line.startswith("warning: the mandatory content (system prompt, constraints, current request, recovery state) needs ")
    assert line.endswith(" tokens, more than the budget (20)") and "warning" not in res.stdout
    assert "budget 20;" in res.stdout
