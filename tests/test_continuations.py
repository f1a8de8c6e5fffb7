"""The output of a long-running command belongs to the command
(``memory/continuation.py``): Codex's ``write_stdin`` of a session continues the output
of the ``exec_command`` that started it, and a result still running is never a read.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import real_params
from contextledger.ledger import Ledger
from contextledger.memory.continuation import SESSION_KEY, running_session
from tool_dialects import Call, write_codex

SKILL = "\n".join(f"line {i} of the skill" for i in range(1, 41))


def _running(session: int) -> str:
    return f"Chunk ID: a21e41\nWall time: 1.0037 seconds\nProcess running with session ID {session}\nOriginal token count: 0\nOutput:\n"


def _exited(text: str) -> str:
    return f"Chunk ID: 853167\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 120\nOutput:\n{text}\n"


def test_a_continuations_output_is_the_commands_output(tmp_path: Path) -> None:
    calls = [
        Call(name="exec_command", args={"cmd": "sed -n '1,40p' docs/SKILL.md", "workdir": "/repo", "yield_time_ms": 1000}, result=_running(48230), call_id="c1"),
        Call(name="write_stdin", args={"session_id": 48230, "chars": "", "yield_time_ms": 1000}, result=_exited(SKILL), call_id="c2"),
        Call(name="write_stdin", args={"session_id": 48230, "chars": "\u0003"}, result="write_stdin failed: stdin is closed for this session", call_id="c3"),
    ]
    led = Ledger.open(home=tmp_path / "home")
    try:
        conv = led.import_file(write_codex(tmp_path, calls)).conversation_id
        mems = {m.call_id: m for m in led.store.memories(led.scope(), conv)}
        r = led.assemble(conv, budget_tokens=16000, persist=False)
    finally:
        led.close()
    started, continued, ctrl_c = mems["c1"], mems["c2"], mems["c3"]
    # the running result is a running command, not an (empty) read of the file
    assert started.payload["extractor"] == "command" and started.subject_key == "session:48230"
    assert started.summary.startswith("exec_command running: $ sed -n '1,40p' docs/SKILL.md")
    assert started.payload[SESSION_KEY] == {"id": 48230, "tool": "exec_command", "arguments_json": json.dumps(calls[0].args), "call_id": "c1"}
    # the continuation is the command's read of the file, naming the command's call
    assert continued.payload["extractor"] == "file_read" and continued.subject_key == "file:/repo/docs/SKILL.md"
    assert continued.payload["continues_call"] == "c1" and continued.source_tool == "write_stdin"
    assert continued.summary.startswith("exec_command succeeded: read /repo/docs/SKILL.md lines 1-40")
    # a continuation that failed itself is its own result
    assert ctrl_c.summary.startswith("write_stdin ") and "continues_call" not in ctrl_c.payload
    body = json.dumps(r.payload, ensure_ascii=False)
    assert "line 40 of the skill" in body or "exec_command succeeded: read /repo/docs/SKILL.md lines 1-40" in body
    assert "$ (no command)" not in body and "SKILL.md empty" not in body


REAL = real_params("codemie-code/codex/*.jsonl")


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name if isinstance(p, Path) else str(p))
def test_real_codex_continuations_belong_to_their_commands(tmp_path: Path, path: Path) -> None:
    started: dict[int, str] = {}  # session -> the exec_command call that started it
    continuations: dict[str, str] = {}  # write_stdin call -> its command's call
    args: dict[str, dict[str, object]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        p = json.loads(line).get("payload") or {}
        if p.get("type") == "function_call":
            args[p["call_id"]] = {"name": p["name"], **json.loads(p["arguments"])}
        elif p.get("type") == "function_call_output" and isinstance(p.get("output"), str):
            a = args.get(p["call_id"], {})
            session = running_session(p["output"])
            if a.get("name") == "write_stdin" and a.get("session_id") in started and p["output"].startswith("Chunk ID: "):
                continuations[p["call_id"]] = started[int(str(a["session_id"]))]
            elif a.get("name") == "exec_command" and session is not None:
                started[session] = p["call_id"]
    if not continuations:
        pytest.skip(f"{path.name}: no command output read through write_stdin")
    led = Ledger.open(home=tmp_path / "home")
    try:
        conv = led.import_file(path).conversation_id
        mems = {m.call_id: m for m in led.store.memories(led.scope(), conv)}
    finally:
        led.close()
    for call, command in continuations.items():
        m = mems[call]
        assert m.payload.get("continues_call") == command, (call, m.summary)
        assert m.summary.startswith("exec_command "), m.summary
        assert "$ (no command)" not in m.summary, m.summary
    for m in mems.values():
        raw = m.payload.get(SESSION_KEY)
        if isinstance(raw, dict):  # still running: a command, never a read or a search of nothing
            assert m.payload["extractor"] not in ("file_read", "search", "test_run"), m.summary
            assert re.match(r"exec_command (running|failed): ", m.summary), m.summary
