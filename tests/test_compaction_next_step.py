"""After a compaction: the next step follows the newest user request, the verification
shows the recorded outcome, and the summary leads the request (nothing of the compacted
range is sent raw before it; no synthetic opener)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from contextledger.compaction.api import compact
from contextledger.ledger import Ledger

NOW = datetime(2026, 7, 1, tzinfo=UTC)


def test_summary_fields_and_its_place_in_the_request(tmp_path: Path) -> None:
    led = Ledger.open(home=tmp_path)
    rec = led.recorder()
    cid = rec.start_conversation(system_prompt="You are a coding agent.").id
    rec.record_message(cid, "user", "Fix the login redirect in src/auth.py.")
    rec.record_assistant(cid, text="Running tests.", tool_calls=[{"call_id": "c2", "tool_name": "Bash", "arguments": {"command": "pytest -q tests/test_auth.py"}}])
    rec.record_tool_result(cid, "c2", "FAILED tests/test_auth.py::test_redirect - AssertionError: x\n1 failed in 0.1s\n", is_error=True, observed_at=NOW)
    rec.record_message(cid, "user", "Also add a test for the logout redirect.")
    rec.record_assistant(cid, text="Checking.", tool_calls=[{"call_id": "c3", "tool_name": "Bash", "arguments": {"command": "pytest -q"}}])
    rec.record_tool_result(cid, "c3", "(output cut)\n", observed_at=NOW)
    plan, *_ = rec.record_assistant(cid, text="Checks pass. Next I will write the logout test.")
    latest = rec.record_message(cid, "user", "Now update the README too.")
    c = compact(led, led.scope(), cid, keep_recent_units=1, now=NOW)
    assert c.document["next_step"] == {
        "text": "Now update the README too.",
        "message_id": latest.id,
        "plan": {"text": "Next I will write the logout test.", "message_id": plan.id},
    }
    assert c.document["latest_verification"]["result"] == "succeeded (call status; no exit code or summary in the output)", c.document["latest_verification"]
    text = c.message.parts[0].text  # type: ignore[union-attr]
    assert f"Latest user request: Now update the README too. [message {latest.seq}]" in text
    out = led.assemble(cid, provider="anthropic", budget_tokens=8000, now=NOW)
    first = out.payload["messages"][0]
    assert first["role"] == "user" and "handoff summary" in first["content"][0]["text"]
    led.close()
