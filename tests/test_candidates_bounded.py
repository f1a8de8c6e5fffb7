"""The candidate set stays bounded on long histories (seed 000 §8 R8): failed calls and
system-role runtime records anywhere in the lineage no longer all become candidates.

* recovery reads the newest ``recovery_window`` failed calls (the assembler: 20 with the
  default policy) and the newest :data:`UNRESOLVED_WINDOW` pending and awaiting-approval
  calls, with their exchanges;
* the head outside the window reads only system/developer *chat* messages — the first
  and the newest :data:`HEAD_SYSTEM_WINDOW` of each role — never progress or meta records.

On histories that differ only in the number of failures and progress records the
candidate set is the same size; the newest failures, every unresolved call, the system
prompt and the latest failing test's error line still reach the request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextledger.assembly.candidates import (
    HEAD_SYSTEM_WINDOW,
    UNRESOLVED_WINDOW,
    CandidateSet,
    collect_candidates,
)
from contextledger.assembly.retrieval import DEFAULT_ROUTER, RETRIEVED, RetrievalRouter
from contextledger.bench.scale import build_shape, scale_now
from contextledger.bench.scale_coding import final_error_line
from contextledger.ledger import Ledger
from contextledger.providers.registry import validate_payload
from contextledger.records.enums import MessageKind, Role, ToolCallStatus
from contextledger.records.models import ToolCall

FAILED = ToolCallStatus.FAILED
SYSTEM_PROMPT = "You are a careful coding agent working in the pkg repository."
FINAL_ERROR = "E   AssertionError: parse('a,\"b,c\"') returned 3 fields, expected 2"


def _candidates(ledger: Ledger, conv_id: str, router: RetrievalRouter = DEFAULT_ROUTER, **over: int) -> CandidateSet:
    """The candidate set the assembler collects at a 4,000-token budget (default policy)."""
    args = {"recent_window": 80, "max_candidates": 160, "recovery_window": 20} | over
    return collect_candidates(ledger.store, ledger.scope(), conv_id, None, router=router, **args)


def _lineage_calls(ledger: Ledger, conv_id: str, status: ToolCallStatus) -> list[ToolCall]:
    sc = ledger.scope()
    segs = ledger.store.lineage(sc, ledger.store.get_conversation(sc, conv_id).active_branch_id)
    return sorted(ledger.store.tool_calls(sc, conv_id, segs, statuses=[status]), key=lambda c: (c.seq, c.id))


def _payload_text(payload: dict[str, Any]) -> str:
    """The text contents of an OpenAI Chat payload's messages, one per line."""
    return "\n".join(m["content"] for m in payload["messages"] if isinstance(m.get("content"), str))


# -- the coding-agent scale history -------------------------------------------------------


@pytest.fixture(scope="module")
def coding(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Ledger, dict[int, str]]]:
    """The coding history of the scale run at 600 and 900 calls (23 and 34 failed test
    runs), two conversations of one SQLite ledger."""
    ledger = Ledger.open(home=tmp_path_factory.mktemp("coding"))
    try:
        yield ledger, {n: build_shape(ledger, n, "coding")[0] for n in (600, 900)}
    finally:
        ledger.close()


def test_coding_candidates_do_not_grow_with_failures(coding: tuple[Ledger, dict[int, str]]) -> None:
    ledger, convs = coding
    assert [len(_lineage_calls(ledger, convs[n], FAILED)) for n in (600, 900)] == [23, 34]
    # without recall the candidate set is the same at both lengths; the retrieval stage
    # adds the exchanges of at most RETRIEVED (12) older memories it ranks for the request
    plain = [(len(c.messages), len(c.calls)) for c in (_candidates(ledger, convs[n], router=RetrievalRouter(())) for n in (600, 900))]
    assert plain == [(120, 58), (120, 58)]
    # (which older memories tie in the fusion depends on record ids, so on the build)
    sizes = [(len(c.messages), len(c.calls)) for c in (_candidates(ledger, convs[n]) for n in (600, 900))]
    assert all(120 < m <= 120 + 2 * RETRIEVED and 58 < k <= 58 + RETRIEVED for m, k in sizes), sizes
    # every failure of the lineage as a candidate (the read before the bound) grows with them
    unbounded = _candidates(ledger, convs[900], router=RetrievalRouter(()), recovery_window=10**6)
    assert (len(unbounded.messages), len(unbounded.calls), sum(c.status is FAILED for c in unbounded.calls)) == (148, 72, 34)


@pytest.mark.parametrize("n", [600, 900])
def test_coding_newest_failures_are_candidates(coding: tuple[Ledger, dict[int, str]], n: int) -> None:
    ledger, convs = coding
    cands = _candidates(ledger, convs[n])
    newest = _lineage_calls(ledger, convs[n], FAILED)[-20:]
    have = {c.id for c in cands.calls}
    assert [c.id for c in newest if c.id not in have] == []
    # with the exchange of each: the requesting message and the failing result
    ids = {m.id for m in cands.messages}
    assert all(c.message_id in ids and c.result_message_id in ids for c in newest)


@pytest.mark.parametrize("n", [600, 900])
def test_coding_assembly_keeps_the_latest_error_and_the_system_prompt(coding: tuple[Ledger, dict[int, str]], n: int) -> None:
    ledger, convs = coding
    res = ledger.assemble(convs[n], provider="openai-chat", budget_tokens=4000, now=scale_now(n, "coding"), persist=False, replay="estimate")
    assert validate_payload("openai-chat", res.payload) == []
    messages = res.payload["messages"]
    assert messages[0]["role"] == "system"
    assert messages[0]["content"].startswith("You are a coding agent working in the user's repository.")
    assert final_error_line(n) in _payload_text(res.payload)
    assert res.record.assembled_tokens <= 4000


# -- a recorded history: failures, progress records, unresolved calls ---------------------


def _record(ledger: Ledger, failures: int, progress: int, *, reminders: int = 0, pending: int = 1) -> str:
    """System prompt, task; one call awaiting approval and ``pending`` pending calls;
    ``reminders`` system chat messages; ``failures`` rounds of ``progress`` progress
    records (role system), a failing test run and an edit; 50 reads (beyond the 80-message
    window); a final failing run and the user's question."""
    rec = ledger.recorder()
    conv = rec.start_conversation(title=f"bounded {failures}", system_prompt=SYSTEM_PROMPT)
    rec.record_message(conv.id, "user", "Make tests/test_parse.py pass. Do not change the public API of src/pkg.")
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "deploy_1", "tool_name": "Bash", "arguments": {"command": "make deploy"}}])
    rec.set_awaiting_approval(conv.id, "deploy_1")
    for k in range(pending):
        rec.record_assistant(conv.id, tool_calls=[{"call_id": f"watch_{k}", "tool_name": "Bash", "arguments": {"command": f"tail -f build_{k}.log"}}])
    for k in range(reminders):
        rec.record_message(conv.id, "system", f"Reminder {k}: run the linters before every commit.")
    for i in range(failures):
        for k in range(progress):
            rec.record_message(conv.id, "system", json.dumps({"type": "hook_progress", "round": i, "step": k}), kind=MessageKind.PROGRESS)
        rec.record_assistant(conv.id, tool_calls=[{"call_id": f"t{i}", "tool_name": "Bash", "arguments": {"command": f"python -m pytest tests/test_parse.py -k case_{i}"}}])
        rec.record_tool_result(conv.id, f"t{i}", f"collected 1 item\nE   AssertionError: case_{i} returned {i}, expected {i + 1}\n1 failed", is_error=True)
        rec.record_assistant(conv.id, tool_calls=[{"call_id": f"e{i}", "tool_name": "Edit", "arguments": {
            "file_path": f"src/pkg/mod_{i}.py", "old_string": f"return {i}", "new_string": f"return {i + 1}"}}])
        rec.record_tool_result(conv.id, f"e{i}", "updated")
    for j in range(50):
        rec.record_assistant(conv.id, tool_calls=[{"call_id": f"r{j}", "tool_name": "Read", "arguments": {"file_path": f"src/pkg/util_{j}.py"}}])
        rec.record_tool_result(conv.id, f"r{j}", f"     1\tdef util_{j}() -> int:\n     2\t    return {j}\n")
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "final", "tool_name": "Bash", "arguments": {"command": "python -m pytest -q"}}])
    rec.record_tool_result(conv.id, "final", FINAL_ERROR + "\n1 failed, 41 passed", is_error=True)
    rec.record_message(conv.id, "user", "What still fails?")
    return conv.id


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Ledger, dict[tuple[int, int], str]]]:
    """Histories of 25 failures × 2 progress records and 50 × 4 (50 and 200 progress
    records), one ledger."""
    ledger = Ledger.open(home=tmp_path_factory.mktemp("recorded"))
    try:
        yield ledger, {(f, p): _record(ledger, f, p) for f, p in ((25, 2), (50, 4))}
    finally:
        ledger.close()


def _system_role(cands: CandidateSet) -> list[tuple[str, str]]:
    return [(m.kind.value, str(getattr(m.parts[0], "text", ""))[:30]) for m in cands.messages if m.role is Role.SYSTEM]


def test_recorded_candidates_do_not_grow_with_failures_or_progress(recorded: tuple[Ledger, dict[tuple[int, int], str]]) -> None:
    ledger, convs = recorded
    small, large = _candidates(ledger, convs[(25, 2)]), _candidates(ledger, convs[(50, 4)])
    # 80 window messages, the system prompt, the task, 20 failed exchanges (2 messages
    # each); 38 calls in the window, 20 failed, 2 unresolved
    assert [(len(c.messages), len(c.calls)) for c in (small, large)] == [(122, 60), (122, 60)]
    for cands in (small, large):
        assert _system_role(cands) == [("chat", SYSTEM_PROMPT[:30])]
        assert sum(c.status is FAILED for c in cands.calls) == 20
    # the unbounded reads: every failure (and, before the head bound, every progress record)
    every = _candidates(ledger, convs[(50, 4)], recovery_window=10**6)
    assert (len(every.messages), sum(c.status is FAILED for c in every.calls)) == (184, 51)
    progress = [m for m in ledger.store.messages(ledger.scope(), convs[(50, 4)], roles=[Role.SYSTEM.value]) if m.kind is MessageKind.PROGRESS]
    assert len(progress) == 200


def test_recorded_newest_failures_and_unresolved_calls_are_candidates(recorded: tuple[Ledger, dict[tuple[int, int], str]]) -> None:
    ledger, convs = recorded
    for conv_id in convs.values():
        cands = _candidates(ledger, conv_id)
        failed = [c.call_id for c in cands.calls if c.status is FAILED]
        newest = [c.call_id for c in _lineage_calls(ledger, conv_id, FAILED)][-20:]
        assert failed == newest and newest[-1] == "final"
        assert [(c.call_id, c.status) for c in cands.calls if c.status.unresolved] == [
            ("deploy_1", ToolCallStatus.AWAITING_APPROVAL), ("watch_0", ToolCallStatus.PENDING),
        ]


def test_recorded_assembly_keeps_the_system_prompt_the_error_and_the_unresolved_calls(recorded: tuple[Ledger, dict[tuple[int, int], str]]) -> None:
    ledger, convs = recorded
    for conv_id in convs.values():
        res = ledger.assemble(conv_id, provider="openai-chat", budget_tokens=4000, persist=False)
        assert validate_payload("openai-chat", res.payload) == []
        # the task that states the constraint is sent raw, so the constraint is not restated
        assert res.payload["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
        assert "Do not change the public API of src/pkg." in str(res.payload["messages"][1]["content"])
        text = _payload_text(res.payload)
        assert FINAL_ERROR in text
        assert '[awaiting approval, no result yet: deploy_1 Bash({"command":"make deploy"})]' in text
        assert '[pending, no result yet: watch_0 Bash({"command":"tail -f build_0.log"})]' in text
        assert "final" in {c["id"] for m in res.payload["messages"] for c in m.get("tool_calls") or []}
        assert "hook_progress" not in text


def test_unresolved_calls_beyond_the_bound(tmp_path: Path) -> None:
    """More pending calls than :data:`UNRESOLVED_WINDOW`: the newest 64 are candidates."""
    ledger = Ledger.open(home=tmp_path)
    try:
        conv_id = _record(ledger, 0, 0, pending=UNRESOLVED_WINDOW + 6)
        cands = _candidates(ledger, conv_id)
        pending = [c.call_id for c in cands.calls if c.status is ToolCallStatus.PENDING]
        assert pending == [f"watch_{k}" for k in range(6, UNRESOLVED_WINDOW + 6)]
        assert [c.call_id for c in cands.calls if c.status is ToolCallStatus.AWAITING_APPROVAL] == ["deploy_1"]
    finally:
        ledger.close()


def test_system_chat_messages_first_and_newest(tmp_path: Path) -> None:
    """Recorded system chat messages (system authority) outside the window: the system
    prompt and the newest :data:`HEAD_SYSTEM_WINDOW` reach the system text; older ones
    do not."""
    ledger = Ledger.open(home=tmp_path)
    try:
        conv_id = _record(ledger, 2, 1, reminders=HEAD_SYSTEM_WINDOW + 8)
        cands = _candidates(ledger, conv_id)
        chat = [text for kind, text in _system_role(cands) if kind == "chat"]
        assert chat == [SYSTEM_PROMPT[:30]] + [f"Reminder {k}: run the linters bef"[:30] for k in range(8, HEAD_SYSTEM_WINDOW + 8)]
        assert [kind for kind, _ in _system_role(cands)] == ["chat"] * (HEAD_SYSTEM_WINDOW + 1)
        system = ledger.assemble(conv_id, provider="openai-chat", budget_tokens=4000, persist=False).payload["messages"][0]["content"]
        assert system.startswith(SYSTEM_PROMPT + "\n\nReminder 8: ")
        assert f"Reminder {HEAD_SYSTEM_WINDOW + 7}: " in system and "Reminder 7: " not in system
    finally:
        ledger.close()
