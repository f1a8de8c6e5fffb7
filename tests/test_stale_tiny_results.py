"""A marker is a reduction: an outdated result (stale, or its file written since) whose raw
text with the one-line note the policy asks for costs no more than its marker is sent raw
under that note; a larger one keeps its marker; a policy that omits stale records omits it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from contextledger.ledger import Ledger
from contextledger.policy.loader import load_policy

T0 = datetime(2026, 5, 1, 10, 0, tzinfo=UTC)
TINY = "     1\tdef add(a, b):\n     2\t    return a - b\n"
LARGE = "".join(f"{i:6d}\tline {i} of a long module with enough words to cost tokens\n" for i in range(1, 80))


def _session(led: Ledger, read_text: str) -> tuple[str, Any]:
    rec = led.recorder()
    conv = rec.start_conversation(system_prompt="You are a coding agent.")
    rec.record_message(conv.id, "user", "Fix add in /repo/calc.py.")
    rec.record_assistant(conv.id, text="Reading.", tool_calls=[{"call_id": "r1", "tool_name": "Read", "arguments": {"file_path": "/repo/calc.py"}}])
    _, _, mem = rec.record_tool_result(conv.id, "r1", read_text, observed_at=T0)
    rec.record_assistant(conv.id, text="Fixing.", tool_calls=[{"call_id": "e1", "tool_name": "Edit", "arguments": {"file_path": "/repo/calc.py", "old_string": "return a - b", "new_string": "return a + b"}}])
    rec.record_tool_result(conv.id, "e1", "The file /repo/calc.py has been updated.", observed_at=T0 + timedelta(seconds=5))
    rec.record_message(conv.id, "user", "Now run the tests.")
    return conv.id, mem


def _read_result(payload: dict[str, Any]) -> str:
    return str(next(m["content"] for m in payload["messages"] if m.get("tool_call_id") == "r1"))


def test_a_tiny_stale_result_is_sent_raw_under_its_note(tmp_path: Path) -> None:
    led = Ledger.open(home=tmp_path)
    conv, mem = _session(led, TINY)
    res = led.assemble(conv, provider="openai-chat", budget_tokens=4000, now=T0 + timedelta(seconds=10))
    assert _read_result(res.payload) == f"[stale memory m{mem.seq} · Read · observed 10 s ago]\n" + TINY
    art = mem.source_artifact_ids[0]
    assert [(d["decision"], d.get("shape")) for d in res.trace if d["record_id"] == art] == [("include", "raw")]


def test_a_large_stale_result_keeps_its_marker(tmp_path: Path) -> None:
    led = Ledger.open(home=tmp_path)
    conv, mem = _session(led, LARGE)
    text = _read_result(led.assemble(conv, provider="openai-chat", budget_tokens=4000, now=T0 + timedelta(seconds=10)).payload)
    assert text.startswith(f"[stale memory m{mem.seq} · Read · observed 10 s ago]\nRead succeeded: read /repo/calc.py") and "line 40 of a long module" not in text


def test_a_policy_that_omits_stale_records_omits_the_tiny_one_too(tmp_path: Path) -> None:
    led = Ledger.open(home=tmp_path / "home")
    conv, _mem = _session(led, TINY)
    f = tmp_path / "omit.toml"
    f.write_text('[freshness]\nstale_mode = "omit"\n', encoding="utf-8")
    res = led.assemble(conv, provider="openai-chat", budget_tokens=4000, now=T0 + timedelta(seconds=10), policy=load_policy(f))
    assert "def add(a, b)" not in json.dumps(res.payload) and "stale result omitted by policy" in _read_result(res.payload)
