"""What the command line says at its edges: a ``--now`` before the conversation's newest
message warns, a stray invalid byte is noted for every format, an unopenable path names
its OS cause, ``policy validate`` lists every error on its own line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
