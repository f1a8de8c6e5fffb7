"""Branch and participant boundaries of assembly (seed 000 §4.9, §4.10; seed 001 §4 "Boundary").

Every test runs on SQLite and PostgreSQL and asserts the exact payload messages, the exact
selected records and the exact omission counts.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from contextledger.assembly.assembler import AssemblyResult
from contextledger.errors import InputError, NotFoundError
from contextledger.ledger import Ledger
from contextledger.records.enums import PrivacyClass, RuntimeKind, ToolCallStatus, Visibility

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def texts(result: AssemblyResult) -> list[tuple[str, str]]:
    """(role, content text) of every OpenAI Chat payload message."""
    out = []
    for m in result.payload["messages"]:
        content = m.get("content")
        if isinstance(content, list):
            content = " | ".join(str(c.get("text", c.get("type"))) for c in content)
        if m.get("tool_calls"):
            content = (content or "") + " calls " + ",".join(c["id"] for c in m["tool_calls"])
        out.append((m["role"], content or ""))
    return out


def dump(result: AssemblyResult) -> str:
    return json.dumps(result.payload, sort_keys=True, ensure_ascii=False)


# -- branches ---------------------------------------------------------------------------


def _three_turns(ledger: Ledger) -> tuple[Any, list[Any]]:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="branches", system_prompt="You are terse.")
    msgs = []
    for q, a in (("q1", "a1"), ("q2", "a2"), ("q3", "a3")):
        msgs.append(rec.record_message(conv.id, "user", q))
        msgs.append(rec.record_assistant(conv.id, text=a)[0])
    return conv, msgs


def test_fork_inherits_lineage_without_copying(ledger: Ledger) -> None:
    conv, msgs = _three_turns(ledger)
    rec = ledger.recorder()
    before = len(ledger.store.messages(ledger.scope(), conv.id))
    branch = rec.fork(conv.id, msgs[1].id)
    assert len(ledger.store.messages(ledger.scope(), conv.id)) == before  # nothing copied
    assert (branch.parent_branch_id, branch.fork_message_id, branch.fork_seq) == (conv.root_branch_id, msgs[1].id, msgs[1].seq)
    assert ledger.store.get_conversation(ledger.scope(), conv.id).active_branch_id == branch.id
    q = rec.record_message(conv.id, "user", "q2-alt")
    r = ledger.assemble(conv.id, now=NOW)
    assert texts(r) == [("system", "You are terse."), ("user", "q1"), ("assistant", "a1"), ("user", "q2-alt")]
    assert r.record.selected_refs == (msgs[0].id, msgs[1].id, q.id)
    assert r.record.omitted == {"out_of_lineage": 4}
    assert r.record.branch_excluded == 4
    root = ledger.assemble(conv.id, branch_id=conv.root_branch_id, now=NOW)
    assert [t for _, t in texts(root)] == ["You are terse.", "q1", "a1", "q2", "a2", "q3", "a3"]
    assert root.record.omitted == {"out_of_lineage": 1}


def test_fork_unknown_message(ledger: Ledger) -> None:
    conv, _ = _three_turns(ledger)
    with pytest.raises(NotFoundError):
        ledger.recorder().fork(conv.id, "msg_missing")


def test_regenerate_creates_sibling_and_old_answer_is_out_of_lineage(ledger: Ledger) -> None:
    conv, msgs = _three_turns(ledger)
    rec = ledger.recorder()
    sibling = rec.regenerate(conv.id, msgs[5].id)
    assert (sibling.parent_branch_id, sibling.fork_message_id) == (conv.root_branch_id, msgs[4].id)
    new = rec.record_assistant(conv.id, text="a3-regenerated")[0]
    assert new.branch_id == sibling.id and new.parent_message_id == msgs[4].id
    r = ledger.assemble(conv.id, now=NOW, trace=True)
    assert [t for _, t in texts(r)] == ["You are terse.", "q1", "a1", "q2", "a2", "q3", "a3-regenerated"]
    assert msgs[5].id not in r.record.selected_refs
    assert r.record.omitted == {"out_of_lineage": 1}
    old = ledger.assemble(conv.id, branch_id=conv.root_branch_id, now=NOW)
    assert [t for _, t in texts(old)][-1] == "a3"
    assert old.record.omitted == {"out_of_lineage": 1}
    with pytest.raises(InputError):
        rec.regenerate(conv.id, ledger.store.messages(ledger.scope(), conv.id)[0].id)


def test_branch_send_takes_explicit_parent_and_inherits_only_its_lineage(ledger: Ledger) -> None:
    conv, msgs = _three_turns(ledger)
    rec = ledger.recorder()
    branch, sent = rec.branch_send(conv.id, msgs[3].id, "idea: try q2 differently")
    assert branch.runtime_kind is RuntimeKind.BRANCH_SEND
    assert (branch.fork_message_id, sent.parent_message_id, sent.runtime_kind) == (msgs[3].id, msgs[3].id, RuntimeKind.BRANCH_SEND)
    r = ledger.assemble(conv.id, branch_id=branch.id, now=NOW, runtime_kind=RuntimeKind.BRANCH_SEND)
    assert [t for _, t in texts(r)] == ["You are terse.", "q1", "a1", "q2", "a2", "idea: try q2 differently"]
    assert r.record.runtime_kind is RuntimeKind.BRANCH_SEND
    assert r.record.omitted == {"out_of_lineage": 2}
    with pytest.raises(NotFoundError):
        rec.branch_send(conv.id, "msg_nope", "x")


def test_sibling_tool_state_never_enters_and_is_counted_apart_from_budget(ledger: Ledger) -> None:
    """Two branches each read a different document id; the active branch never sees the
    sibling's artifact or memory, and exclusions are ``out_of_lineage``, not ``budget``."""
    rec = ledger.recorder()
    conv = rec.start_conversation(title="docs")
    q = rec.record_message(conv.id, "user", "Open the quarterly report.")
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "s1", "tool_name": "open_doc", "arguments": {"id": "DOC-SIBLING-1"}}])
    rec.record_tool_result(conv.id, "s1", "DOC-SIBLING-1: revenue 10")
    rec.record_assistant(conv.id, text="Revenue was 10 (DOC-SIBLING-1).")
    active = rec.fork(conv.id, q.id)
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "b1", "tool_name": "open_doc", "arguments": {"id": "DOC-ACTIVE-2"}}])
    rec.record_tool_result(conv.id, "b1", "DOC-ACTIVE-2: revenue 12")
    r = ledger.assemble(conv.id, branch_id=active.id, now=NOW, budget_tokens=2000)
    assert "DOC-SIBLING-1" not in dump(r)
    assert "DOC-ACTIVE-2: revenue 12" in dump(r)
    # sibling: 3 messages (assistant call, tool result, answer) + 1 artifact + 1 memory
    assert r.record.omitted == {"out_of_lineage": 5}
    assert r.record.branch_excluded == 5
    assert "budget" not in r.record.omitted


def test_rebuilt_after_restart_equals_live(ledger: Ledger, backend_url: str, tmp_path: Path) -> None:
    """Regression: fork from an older point, keep writing on the abandoned branch after
    the fork; the assembly rebuilt after close/reopen equals the live one byte for byte."""
    conv, msgs = _three_turns(ledger)
    rec = ledger.recorder()
    alt = rec.fork(conv.id, msgs[1].id, activate=False)
    rec.record_message(conv.id, "user", "alt question", branch_id=alt.id)
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "x1", "tool_name": "grep", "arguments": {"p": "TODO"}}], branch_id=alt.id)
    rec.record_tool_result(conv.id, "x1", "src/a.py:3: TODO fix")
    # writes on the root branch after the fork (the branch abandoned by ``alt``)
    rec.record_message(conv.id, "user", "q4 on root", branch_id=conv.root_branch_id)
    rec.record_assistant(conv.id, text="a4 on root", branch_id=conv.root_branch_id)
    live = ledger.assemble(conv.id, branch_id=alt.id, now=NOW, trace=True)
    live_root = ledger.assemble(conv.id, branch_id=conv.root_branch_id, now=NOW, trace=True)
    ledger.close()
    reopened = Ledger.open(backend_url, blobs=tmp_path / "blobs")
    try:
        again = reopened.assemble(conv.id, branch_id=alt.id, now=NOW, trace=True)
        again_root = reopened.assemble(conv.id, branch_id=conv.root_branch_id, now=NOW, trace=True)
    finally:
        reopened.close()
    for a, b in ((live, again), (live_root, again_root)):
        assert dump(a) == dump(b)
        assert a.record.payload_sha256 == b.record.payload_sha256
        assert a.record.selected_refs == b.record.selected_refs
        assert a.record.omitted == b.record.omitted
        assert [(d["record_id"], d["decision"], d["reason"]) for d in a.trace] == [(d["record_id"], d["decision"], d["reason"]) for d in b.trace]
    assert [t for _, t in texts(live)][:4] == ["You are terse.", "q1", "a1", "alt question"]
    assert "a4 on root" not in dump(live) and "q2" not in dump(live)
    assert live.record.omitted == {"out_of_lineage": 6}
    assert live_root.record.omitted == {"out_of_lineage": 5}


# -- participants and ownership defaults ----------------------------------------------------


def test_ownership_defaults(ledger: Ledger) -> None:
    """Run state is participant-private; finalised output is branch context; a call with
    no participant is branch context (seed 000 §4.9)."""
    rec = ledger.recorder()
    conv = rec.start_conversation(title="own")
    a = rec.add_participant(conv.id, "a")
    rec.record_message(conv.id, "user", "go")
    turn, calls = rec.record_assistant(conv.id, tool_calls=[{"call_id": "c1", "tool_name": "ls"}], participant_id=a.id)
    msg, art, mem = rec.record_tool_result(conv.id, "c1", "a.txt")
    final, _ = rec.record_assistant(conv.id, text="done", participant_id=a.id)
    assert (turn.visibility, msg.visibility, art.visibility_scope, mem.visibility_scope) == (Visibility.PARTICIPANT_PRIVATE,) * 4
    assert (art.owner_participant_id, mem.owner_participant_id, calls[0].participant_id) == (a.id, a.id, a.id)
    assert final.visibility is Visibility.BRANCH
    plain, _ = rec.record_assistant(conv.id, tool_calls=[{"call_id": "c2", "tool_name": "ls"}])
    _, art2, _ = rec.record_tool_result(conv.id, "c2", "b.txt")
    assert (plain.visibility, art2.visibility_scope) == (Visibility.BRANCH, Visibility.BRANCH)


def _multi_model(ledger: Ledger) -> dict[str, Any]:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="multi", system_prompt="Answer the user.")
    a = rec.add_participant(conv.id, "model-a", provider="openai", model="gpt-a", runtime_kind=RuntimeKind.MULTI_MODEL)
    b = rec.add_participant(conv.id, "model-b", provider="anthropic", model="claude-b", runtime_kind=RuntimeKind.MULTI_MODEL)
    q = rec.record_message(conv.id, "user", "Summarise my inbox.")
    note = rec.record_message(conv.id, "assistant", "A-PRIVATE-NOTE: user prefers bullet points", participant_id=a.id, visibility=Visibility.PARTICIPANT_PRIVATE)
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "a1", "tool_name": "gmail_search", "arguments": {"q": "in:inbox"}}], participant_id=a.id)
    rec.record_tool_result(conv.id, "a1", '{"access_token": "ya29.OAUTH-SECRET", "messages": []}', privacy_class=PrivacyClass.OAUTH_DERIVED)
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "a2", "tool_name": "calendar_list"}], participant_id=a.id)
    rec.record_tool_result(conv.id, "a2", "A-TOOL-ERROR: quota exceeded", is_error=True)
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "b1", "tool_name": "web_search", "arguments": {"q": "inbox zero"}}], participant_id=b.id)
    rec.record_tool_result(conv.id, "b1", "B-RESULT: inbox zero method")
    fa, _ = rec.record_assistant(conv.id, text="A: your inbox is empty.", participant_id=a.id)
    fb, _ = rec.record_assistant(conv.id, text="B: nothing new today.", participant_id=b.id)
    q2 = rec.record_message(conv.id, "user", "Thanks. Anything else?")
    return {"conv": conv, "a": a, "b": b, "q": q, "note": note, "fa": fa, "fb": fb, "q2": q2}


def test_multi_model_each_sees_shared_transcript_and_only_its_own_state(ledger: Ledger) -> None:
    s = _multi_model(ledger)
    conv, a, b = s["conv"], s["a"], s["b"]
    rb = ledger.assemble(conv.id, participant_id=b.id, now=NOW, runtime_kind=RuntimeKind.MULTI_MODEL)
    body = dump(rb)
    for leaked in ("A-PRIVATE-NOTE", "A-TOOL-ERROR", "OAUTH-SECRET", "gmail_search", "calendar_list"):
        assert leaked not in body
    assert texts(rb) == [
        ("system", "Answer the user."), ("user", "Summarise my inbox."),
        ("assistant", "[model-b] calls b1"), ("tool", "B-RESULT: inbox zero method"),
        ("assistant", "[model-a] A: your inbox is empty."), ("assistant", "[model-b] B: nothing new today."), ("user", "Thanks. Anything else?"),
    ]
    names = [m.get("name") for m in rb.payload["messages"]]
    assert names == [None, None, "model-b", None, "model-a", "model-b", None]
    # A's note, A's two exchanges (turn + result each) and A's two memories
    assert rb.record.omitted == {"participant_private": 7}
    assert rb.record.participant_id == b.id and rb.record.runtime_kind is RuntimeKind.MULTI_MODEL

    ra = ledger.assemble(conv.id, participant_id=a.id, now=NOW)
    body_a = dump(ra)
    assert "A-PRIVATE-NOTE" in body_a and "A-TOOL-ERROR: quota exceeded" in body_a
    assert "OAUTH-SECRET" not in body_a  # oauth-derived raw payload withheld even from its owner
    assert "B-RESULT" not in body_a and "web_search" not in body_a
    assert ra.record.omitted == {"participant_private": 3, "privacy_restricted": 2}

    shared = ledger.assemble(conv.id, now=NOW)
    assert [t for _, t in texts(shared)] == [
        "Answer the user.", "Summarise my inbox.", "[model-a] A: your inbox is empty.", "[model-b] B: nothing new today.", "Thanks. Anything else?",
    ]
    assert shared.record.omitted == {"participant_private": 10}


def test_unresolved_call_visible_to_owner_not_to_sibling(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="pending")
    a = rec.add_participant(conv.id, "a")
    b = rec.add_participant(conv.id, "b")
    rec.record_message(conv.id, "user", "deploy")
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "dep1", "tool_name": "deploy", "arguments": {"env": "prod"}}], participant_id=a.id)
    rec.set_awaiting_approval(conv.id, "dep1")
    ra = ledger.assemble(conv.id, participant_id=a.id, now=NOW)
    assert texts(ra) == [
        ("user", "deploy"),
        ("assistant", '[a] [awaiting approval, no result yet: dep1 deploy({"env":"prod"})]'),
    ]
    assert [m.get("name") for m in ra.payload["messages"]] == [None, "a"]
    rb = ledger.assemble(conv.id, participant_id=b.id, now=NOW)
    assert "dep1" not in dump(rb)
    assert rb.record.omitted == {"participant_private": 1}
    assert ledger.store.get_tool_call(ledger.scope(), conv.id, "dep1").status is ToolCallStatus.AWAITING_APPROVAL
