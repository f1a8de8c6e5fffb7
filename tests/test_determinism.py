"""Determinism (seed 000 §5.6): the same graph + policy version + ``now`` give the same
selection, whatever the insertion order of unrelated records, the completion order of
parallel tool results, or the creation times behind the ids."""

from __future__ import annotations

import json
import re
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger.ledger import Ledger

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
ID = re.compile(
    r"\b(?:msg|art|mem|call|conv|br|part|run|asm|dec|skill|ckpt|rule)_[0-9A-Za-z]{16,26}\b"
    r"|(?:(?<=\[memory )|(?<=\[stale memory )|(?<=\[artifact )|(?<=superseded by ))[ma][1-9][0-9]*\b"
)


def normalise(payload: dict[str, Any]) -> str:
    """Replace every record id, and every handle (``m12``, ``a12``), by its ordinal of
    first appearance: handles number records in the order they were recorded, so results
    that completed in another order carry other numbers (the same selection)."""
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    seen: dict[str, str] = {}

    def sub(m: re.Match[str]) -> str:
        return seen.setdefault(m.group(0), f"<id{len(seen)}>")

    return ID.sub(sub, text)


def build(home: Path, result_order: list[int], noise_before: int, noise_tenant: bool) -> tuple[dict[str, Any], dict[str, int]]:
    led = Ledger.open(home=home)
    rec = led.recorder()
    for i in range(noise_before):  # unrelated conversations written first
        other = rec.start_conversation(title=f"noise {i}")
        rec.record_message(other.id, "user", "unrelated " * 20)
        rec.record_assistant(other.id, tool_calls=[{"call_id": "c0", "tool_name": "Bash", "arguments": {"command": "ls"}}])
        rec.record_tool_result(other.id, "c0", "noise output")
    if noise_tenant:
        nrec = led.recorder(led.scope("other-tenant"))
        nc = nrec.start_conversation(title="fix login")
        nrec.record_message(nc.id, "user", "Login redirect fails; find the cause.")
    conv = rec.start_conversation(title="fix login", system_prompt="You are a coding agent.")
    rec.record_message(conv.id, "user", "Login redirect fails; find the cause. Do not change the public API.")
    rec.record_assistant(conv.id, text="Reading files in parallel.", tool_calls=[
        {"call_id": f"r{i}", "tool_name": "Read", "arguments": {"file_path": f"/src/auth/m{i}.ts"}} for i in range(4)
    ])
    for i in result_order:  # results arrive in completion order
        rec.record_tool_result(conv.id, f"r{i}", "\n".join(f"{n}\texport function f{i}_{n}() {{ return {n}; }}" for n in range(1, 60)), observed_at=NOW)
    rec.record_assistant(conv.id, text="Running tests.", tool_calls=[{"call_id": "t1", "tool_name": "Bash", "arguments": {"command": "pnpm test auth"}}])
    rec.record_tool_result(conv.id, "t1", "FAIL src/auth/session.test.ts\n  ● redirects after login\n    TypeError: user.id should be string\nTests: 1 failed, 11 passed", is_error=True, observed_at=NOW)
    rec.record_message(conv.id, "user", "What next?")
    res = led.assemble(conv.id, provider="anthropic", budget_tokens=1500, now=NOW)
    led.close()
    return res.payload, dict(res.record.omitted)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(order=st.permutations([0, 1, 2, 3]), noise=st.integers(min_value=0, max_value=3), tenant=st.booleans())
def test_selection_is_independent_of_insertion_order_and_unrelated_records(order: list[int], noise: int, tenant: bool) -> None:
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        base_payload, base_omitted = build(Path(a), [0, 1, 2, 3], 0, False)
        payload, omitted = build(Path(b), list(order), noise, tenant)
    assert normalise(payload) == normalise(base_payload)
    assert omitted == base_omitted


def test_results_follow_call_order_not_completion_order(tmp_path: Path) -> None:
    payload, _ = build(tmp_path, [3, 1, 0, 2], 0, False)
    ids = [b["tool_use_id"] for m in payload["messages"] if m["role"] == "user" for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
    reads = [i for i in ids if i.startswith("r")]
    assert reads == ["r0", "r1", "r2", "r3"]
