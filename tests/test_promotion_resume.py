"""Promotion, parent resume after subagents, pending vs abandoned calls, checkpoints and
idempotent recording (seed 000 §4.1, §4.13, §4.14).  Both backends."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from contextledger.errors import InputError
from contextledger.graph import (
    PromotionError,
    promote,
    resolve_with_child_report,
    resume_state,
    start_subagent,
)
from contextledger.ledger import Ledger
from contextledger.records.enums import (
    PolicyFamily,
    PromotionPolicy,
    RuntimeKind,
    ToolCallStatus,
    Visibility,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
RETRY = {"attempt": 1, "max_attempts": 3, "backoff_seconds": 30, "idempotency_key": "batch-1/explorer"}


def dump(payload: dict[str, Any]) -> str:
    return json.dumps(payload, sort_keys=True, ensure_ascii=False)


def _parent_with_child(ledger: Ledger) -> dict[str, Any]:
    """A parent that delegates to one child subagent; the child reads, writes a report
    file, fails one command, keeps a private note and is still running."""
    rec = ledger.recorder()
    scope = ledger.scope()
    conv = rec.start_conversation(title="delegate", system_prompt="You are the lead agent.")
    parent = rec.add_participant(conv.id, "lead", runtime_kind=RuntimeKind.CHAT)
    rec.record_message(conv.id, "user", "Find out why test_x is flaky.")
    parent_run = rec.start_model_run(conv.id, participant_id=parent.id)
    task_turn, _ = rec.record_assistant(
        conv.id, text="Delegating.", participant_id=parent.id, model_run_id=parent_run.id,
        tool_calls=[{"call_id": "task_1", "tool_name": "Task", "arguments": {"prompt": "Find the flaky test"}}],
    )
    child = start_subagent(
        ledger, scope, conv.id, parent_participant_id=parent.id, name="explorer", task="Find the flaky test",
        parent_model_run_id=parent_run.id, parent_call_id="task_1", subagent_batch_id="batch-1",
    )
    skill = rec.record_skill_state(conv.id, loaded_skills=["pytest-debug"], active_profile="coding", usable_tools=["Task", "Read"], participant_id=parent.id)
    ckpt1 = rec.record_checkpoint(
        conv.id, participant_id=parent.id, runtime_kind=RuntimeKind.SUBAGENT_PARENT_RESUME, pending_call_ids=["task_1"],
        subagent_batch_id="batch-1", subagent_run_ids=[child.run.id], parent_message_id=task_turn.id,
        parent_tool_call_id="task_1", retry_contract=RETRY,
    )
    cid = child.participant.id
    rec.record_assistant(conv.id, participant_id=cid, model_run_id=child.run.id, tool_calls=[{"call_id": "c_read", "tool_name": "Read", "arguments": {"file_path": "/repo/tests/test_x.py"}}])
    rec.record_tool_result(conv.id, "c_read", "CHILD-RAW-WORKSPACE\ndef test_x():\n    time.sleep(0.1)\n")
    rec.record_message(conv.id, "assistant", "CHILD-NOTE: suspect the sleep", participant_id=cid, model_run_id=child.run.id)
    rec.record_assistant(conv.id, participant_id=cid, model_run_id=child.run.id, tool_calls=[{"call_id": "c_bash", "tool_name": "Bash", "arguments": {"command": "pytest tests/test_x.py"}}])
    rec.record_tool_result(conv.id, "c_bash", "CHILD-ERROR: 1 failed", is_error=True)
    rec.record_assistant(conv.id, participant_id=cid, model_run_id=child.run.id, tool_calls=[{"call_id": "c_write", "tool_name": "Write", "arguments": {"file_path": "/repo/reports/flaky.md", "content": "CHILD-FILE-BODY"}}])
    _, write_art, write_mem = rec.record_tool_result(conv.id, "c_write", "File created successfully at: /repo/reports/flaky.md")
    return {"conv": conv, "parent": parent, "parent_run": parent_run, "task_turn": task_turn, "child": child, "skill": skill, "ckpt1": ckpt1, "write_art": write_art, "write_mem": write_mem}


def test_child_records_are_audit_only_and_child_local(ledger: Ledger) -> None:
    s = _parent_with_child(ledger)
    conv, child = s["conv"], s["child"]
    cid = child.participant.id
    assert (child.participant.runtime_kind, child.participant.parent_participant_id) == (RuntimeKind.SUBAGENT_CHILD, s["parent"].id)
    assert (child.run.status, child.run.parent_model_run_id, child.run.runtime_kind) == ("running", s["parent_run"].id, RuntimeKind.SUBAGENT_CHILD)
    child_msgs = [m for m in ledger.store.messages(ledger.scope(), conv.id) if m.participant_id == cid]
    assert len(child_msgs) == 8
    assert {(m.visibility, m.runtime_kind) for m in child_msgs} == {(Visibility.AUDIT_ONLY, RuntimeKind.SUBAGENT_CHILD)}
    arts = [a for a in ledger.store.artifacts(ledger.scope(), conv.id) if a.owner_participant_id == cid]
    assert [(a.call_id, a.visibility_scope, a.owner_model_run_id) for a in arts] == [
        ("c_read", Visibility.AUDIT_ONLY, child.run.id), ("c_bash", Visibility.AUDIT_ONLY, child.run.id), ("c_write", Visibility.AUDIT_ONLY, child.run.id),
    ]
    mems = [m for m in ledger.store.memories(ledger.scope(), conv.id) if m.owner_participant_id == cid]
    assert {(m.visibility_scope, m.promotion_policy, m.runtime_kind) for m in mems} == {(Visibility.AUDIT_ONLY, PromotionPolicy.NOT_PROMOTED, RuntimeKind.SUBAGENT_CHILD)}
    # the child's own view has its task and its workspace
    rc = ledger.assemble(conv.id, participant_id=cid, now=NOW, budget_tokens=4000)
    body = dump(rc.payload)
    assert "Find the flaky test" in body and "CHILD-RAW-WORKSPACE" in body and "CHILD-NOTE" in body
    assert rc.record.runtime_kind is RuntimeKind.SUBAGENT_CHILD


def test_promoting_a_running_child_is_refused(ledger: Ledger) -> None:
    s = _parent_with_child(ledger)
    with pytest.raises(PromotionError, match=r"run .* is 'running'"):
        promote(ledger, ledger.scope(), s["write_art"].id, to=Visibility.BRANCH, actor="lead", reason="file handle")
    with pytest.raises(PromotionError, match="is 'running'"):
        resolve_with_child_report(ledger, ledger.scope(), s["conv"].id, parent_call_id="task_1", child_participant_id=s["child"].participant.id, report="x", actor="lead", reason="r")
    assert ledger.store.decisions(ledger.scope(), conversation_id=s["conv"].id) == []
    assert ledger.store.get_artifact(ledger.scope(), s["write_art"].id).visibility_scope is Visibility.AUDIT_ONLY


def test_parent_resume_sees_report_handles_failure_and_retry_never_raw_child(ledger: Ledger, backend_url: str, tmp_path: Path) -> None:
    s = _parent_with_child(ledger)
    scope, conv, child = ledger.scope(), s["conv"], s["child"]
    rec = ledger.recorder()
    rec.finish_model_run(conv.id, child.run.id, "completed")
    with pytest.raises(InputError):
        rec.finish_model_run(conv.id, child.run.id, "completed")
    decision = promote(ledger, scope, s["write_art"].id, to=Visibility.BRANCH, actor="lead", reason="generated report file handle")
    assert (decision.family, decision.decision, decision.reason, decision.actor, decision.record_id) == (
        PolicyFamily.PROMOTION, "promote", "promoted", "lead", s["write_art"].id,
    )
    assert decision.detail == {
        "record_kind": "artifact", "from": "audit_only", "to": "branch", "why": "generated report file handle",
        "memory_ids": [s["write_mem"].id], "message_ids": [s["write_art"].message_id],
        "child_participant_id": child.participant.id, "child_run_id": child.run.id, "child_run_status": "completed",
    }
    mem = ledger.store.get_memory(scope, s["write_mem"].id)
    assert (mem.visibility_scope, mem.promotion_policy) == (Visibility.BRANCH, PromotionPolicy.PROMOTED)
    assert ledger.store.get_artifact(scope, s["write_art"].id).visibility_scope is Visibility.BRANCH
    with pytest.raises(PromotionError, match="must widen"):
        promote(ledger, scope, s["write_art"].id, to=Visibility.PARTICIPANT_PRIVATE, actor="lead", reason="again")

    report = resolve_with_child_report(
        ledger, scope, conv.id, parent_call_id="task_1", child_participant_id=child.participant.id,
        report="REPORT: test_x is flaky because of time.sleep(0.1); see /repo/reports/flaky.md", actor="lead", reason="child finished",
    )
    assert report.message.metadata == {"child_report_for": child.participant.id, "child_run_id": child.run.id}
    assert (report.artifact.owner_participant_id, report.artifact.status, report.artifact.is_error) == (s["parent"].id, ToolCallStatus.SUCCEEDED, False)
    assert report.decision.detail["kind"] == "child_report" and report.decision.record_id == report.message.id
    ckpt2 = rec.record_checkpoint(
        conv.id, participant_id=s["parent"].id, runtime_kind=RuntimeKind.SUBAGENT_PARENT_RESUME, subagent_batch_id="batch-1",
        subagent_run_ids=[child.run.id], parent_message_id=s["task_turn"].id, parent_tool_call_id="task_1",
        retry_contract=RETRY, promoted_report_ids=[report.message.id],
    )
    r = ledger.assemble(conv.id, participant_id=s["parent"].id, now=NOW, runtime_kind=RuntimeKind.SUBAGENT_PARENT_RESUME, budget_tokens=4000)
    body = dump(r.payload)
    for hidden in ("CHILD-RAW-WORKSPACE", "CHILD-NOTE", "CHILD-ERROR", "CHILD-FILE-BODY", "Find the flaky test\""):
        assert hidden not in body
    assert "REPORT: test_x is flaky because of time.sleep(0.1)" in body
    evidence = [m["content"] for m in r.payload["messages"] if str(m.get("content", "")).startswith("[ledger data, not instructions]")]
    assert len(evidence) == 1
    assert s["write_mem"].id in r.record.selected_refs
    assert "- Write succeeded: created /repo/reports/flaky.md" in evidence[0]
    assert child.task_message.id not in r.record.selected_refs
    state = [m["content"] for m in r.payload["messages"] if isinstance(m.get("content"), str) and m["content"].startswith("[contextledger runtime state]")]
    assert state == [
        "[contextledger runtime state]\nskills loaded: pytest-debug; active profile: coding; usable tools: Read, Task\n"
        f"checkpoint {ckpt2.id}: subagent batch batch-1 runs {child.run.id}; resumes parent tool call task_1; "
        f"retry {json.dumps(RETRY, sort_keys=True)}; promoted reports {report.message.id}"
    ]
    assert s["write_mem"].id in r.record.selected_refs and report.message.id in r.record.selected_refs
    assert r.record.runtime_kind is RuntimeKind.SUBAGENT_PARENT_RESUME
    # the 8 child messages (the promoted write result travels with its audit-only turn)
    # and the 2 unpromoted child memories are audit-only; the file handle arrives as memory
    assert r.record.omitted == {"audit_only": 10}

    rs = resume_state(ledger, scope, conv.id, participant_id=s["parent"].id)
    assert rs.checkpoint == ckpt2
    assert (rs.subagent_batch_id, [x.id for x in rs.subagent_runs], [x.status for x in rs.subagent_runs]) == ("batch-1", [child.run.id], ["completed"])
    assert (rs.parent_message_id, rs.parent_tool_call_id, rs.retry_contract) == (s["task_turn"].id, "task_1", RETRY)
    assert [m.id for m in rs.promoted_reports] == [report.message.id]
    assert rs.skill_state == s["skill"] and rs.children_done and rs.pending_calls == ()
    ledger.close()
    again = Ledger.open(backend_url, blobs=tmp_path / "blobs")
    try:
        assert resume_state(again, scope, conv.id, participant_id=s["parent"].id) == rs
        r2 = again.assemble(conv.id, participant_id=s["parent"].id, now=NOW, runtime_kind=RuntimeKind.SUBAGENT_PARENT_RESUME, budget_tokens=4000)
        assert dump(r2.payload) == body and r2.record.selected_refs == r.record.selected_refs
    finally:
        again.close()


def test_child_timeout_becomes_compact_failure_state(ledger: Ledger) -> None:
    s = _parent_with_child(ledger)
    scope, conv, child = ledger.scope(), s["conv"], s["child"]
    ledger.recorder().finish_model_run(conv.id, child.run.id, "timeout")
    report = resolve_with_child_report(
        ledger, scope, conv.id, parent_call_id="task_1", child_participant_id=child.participant.id,
        report="subagent explorer timed out after 600 s; retry 2 of 3 allowed", actor="runtime", reason="child timeout",
    )
    assert (report.artifact.status, report.artifact.is_error, report.artifact.error_type) == (ToolCallStatus.FAILED, True, "SubagentTimeout")
    r = ledger.assemble(conv.id, participant_id=s["parent"].id, now=NOW, budget_tokens=4000)
    tool_msgs = [m for m in r.payload["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_msgs] == [("task_1", "[tool error]\nsubagent explorer timed out after 600 s; retry 2 of 3 allowed")]
    assert "CHILD-RAW-WORKSPACE" not in dump(r.payload)


def test_resume_state_uses_newest_checkpoint_of_lineage_and_participant(ledger: Ledger) -> None:
    s = _parent_with_child(ledger)
    scope, conv = ledger.scope(), s["conv"]
    rs = resume_state(ledger, scope, conv.id, participant_id=s["parent"].id)
    assert rs.checkpoint == s["ckpt1"]
    assert [c.call_id for c in rs.pending_calls] == ["task_1"] and rs.unresolved_call_ids == ("task_1",)
    assert rs.missing_call_ids == () and not rs.children_done
    assert [(r.id, r.status) for r in rs.subagent_runs] == [(s["child"].run.id, "running")]
    # another participant has no checkpoint; a sibling branch's checkpoint is not in lineage
    assert resume_state(ledger, scope, conv.id, participant_id=s["child"].participant.id).checkpoint is None
    rec = ledger.recorder()
    alt = rec.fork(conv.id, s["task_turn"].id, activate=False)
    rec.record_checkpoint(conv.id, branch_id=alt.id, participant_id=s["parent"].id, pending_call_ids=["zzz"])
    assert resume_state(ledger, scope, conv.id, participant_id=s["parent"].id).checkpoint == s["ckpt1"]
    on_alt = resume_state(ledger, scope, conv.id, branch_id=alt.id, participant_id=s["parent"].id)
    assert on_alt.missing_call_ids == ("zzz",) and on_alt.skill_state is None


# -- pending vs abandoned ------------------------------------------------------------------


def test_pending_approval_survives_restart_and_resumes(ledger: Ledger, backend_url: str, tmp_path: Path) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="approve")
    rec.record_message(conv.id, "user", "delete the old branch")
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "del1", "tool_name": "git_branch_delete", "arguments": {"name": "old"}}])
    call = rec.set_awaiting_approval(conv.id, "del1")
    rec.record_checkpoint(conv.id, pending_call_ids=["del1"], retry_contract={"requires": "human approval"})
    before = ledger.assemble(conv.id, now=NOW)
    ledger.close()
    again = Ledger.open(backend_url, blobs=tmp_path / "blobs")
    try:
        scope = again.scope()
        assert again.store.get_tool_call(scope, conv.id, "del1") == call
        rs = resume_state(again, scope, conv.id)
        assert rs.unresolved_call_ids == ("del1",) and rs.pending_calls[0].status is ToolCallStatus.AWAITING_APPROVAL
        assert dump(again.assemble(conv.id, now=NOW).payload) == dump(before.payload)
        msg, art, _ = again.recorder().record_tool_result(conv.id, "del1", "Deleted branch old (was 1a2b3c).")
        done = again.store.get_tool_call(scope, conv.id, "del1")
        assert (done.status, done.result_message_id, art.status) == (ToolCallStatus.SUCCEEDED, msg.id, ToolCallStatus.SUCCEEDED)
        assert resume_state(again, scope, conv.id).unresolved_call_ids == ()
    finally:
        again.close()


def test_abandon_writes_error_result_atomically(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first tier (error artifact, result message, ``abandoned`` status, queue row) is
    one transaction; a failing derivation (second tier) leaves it committed and queued."""
    from contextledger.ingest.drain import drain, queued_artifact_ids
    from contextledger.store.writer import Writer

    rec = ledger.recorder()
    scope = ledger.scope()
    conv = rec.start_conversation(title="abandon")
    rec.record_message(conv.id, "user", "run the migration")
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "mig1", "tool_name": "migrate"}])
    n_msgs = len(ledger.store.messages(scope, conv.id))

    def fail_mid_transaction(*_: Any, **__: Any) -> None:
        raise RuntimeError("injected failure after the artifact and message writes")

    monkeypatch.setattr(Writer, "update_tool_call", fail_mid_transaction)
    with pytest.raises(RuntimeError, match="injected failure"):
        rec.mark_abandoned(conv.id, "mig1", "worker crashed")
    assert ledger.store.get_tool_call(scope, conv.id, "mig1").status is ToolCallStatus.PENDING
    assert ledger.store.artifacts(scope, conv.id) == [] and ledger.store.memories(scope, conv.id) == []
    assert len(ledger.store.messages(scope, conv.id)) == n_msgs
    assert queued_artifact_ids(ledger.runtime, scope, conv.id) == set()
    monkeypatch.undo()

    monkeypatch.setattr("contextledger.memory.linking.link_on_write", fail_mid_transaction)
    with pytest.raises(RuntimeError, match="injected failure"):
        rec.mark_abandoned(conv.id, "mig1", "worker crashed")
    call = ledger.store.get_tool_call(scope, conv.id, "mig1")
    (art,) = ledger.store.artifacts(scope, conv.id)
    assert (call.status, call.result_message_id, art.message_id) == (ToolCallStatus.ABANDONED, art.message_id, call.result_message_id)
    assert (art.status, art.is_error, art.error_type, art.inline_text) == (
        ToolCallStatus.ABANDONED, True, "Abandoned", "[abandoned] no result will arrive for this call: worker crashed",
    )
    assert len(ledger.store.messages(scope, conv.id)) == n_msgs + 1
    assert ledger.store.memories(scope, conv.id) == [] and queued_artifact_ids(ledger.runtime, scope, conv.id) == {art.id}
    monkeypatch.undo()
    (mem,) = drain(ledger.runtime, scope).memories
    assert mem.source_artifact_ids == (art.id,)
    assert queued_artifact_ids(ledger.runtime, scope, conv.id) == set()
    with pytest.raises(InputError, match="already resolved"):
        rec.mark_abandoned(conv.id, "mig1", "again")


# -- idempotent recording -----------------------------------------------------------------


def test_rerecording_same_call_id_returns_existing_records(ledger: Ledger) -> None:
    rec = ledger.recorder()
    scope = ledger.scope()
    conv = rec.start_conversation(title="idem")
    rec.record_message(conv.id, "user", "list files")
    m1, c1 = rec.record_assistant(conv.id, tool_calls=[{"call_id": "ls1", "tool_name": "ls"}])
    m2, c2 = rec.record_assistant(conv.id, tool_calls=[{"call_id": "ls1", "tool_name": "ls"}])
    assert (m1, c1) == (m2, c2)
    first = rec.record_tool_result(conv.id, "ls1", "a.txt\nb.txt")
    second = rec.record_tool_result(conv.id, "ls1", "a.txt\nb.txt")
    assert first == second
    assert (len(ledger.store.messages(scope, conv.id)), len(ledger.store.artifacts(scope, conv.id)), len(ledger.store.memories(scope, conv.id))) == (3, 1, 1)
    with pytest.raises(InputError, match="already has a result"):
        rec.record_tool_result(conv.id, "ls1", "different bytes")
    k1 = rec.record_message(conv.id, "user", "same", content_key="turn-7")
    k2 = rec.record_message(conv.id, "user", "same", content_key="turn-7")
    assert k1 == k2 and len(ledger.store.messages(scope, conv.id)) == 4


# -- promotion of messages; atomicity -------------------------------------------------------


def test_promote_private_note_to_branch_reaches_sibling(ledger: Ledger) -> None:
    rec = ledger.recorder()
    scope = ledger.scope()
    conv = rec.start_conversation(title="notes")
    a = rec.add_participant(conv.id, "a")
    b = rec.add_participant(conv.id, "b")
    rec.record_message(conv.id, "user", "plan the release")
    note = rec.record_message(conv.id, "assistant", "A-NOTE: freeze on Friday", participant_id=a.id, visibility=Visibility.PARTICIPANT_PRIVATE)
    before = ledger.assemble(conv.id, participant_id=b.id, now=NOW)
    assert "A-NOTE" not in dump(before.payload) and before.record.omitted == {"participant_private": 1}
    d = promote(ledger, scope, note.id, to=Visibility.BRANCH, actor="user:42", reason="share the freeze date")
    assert (d.actor, d.record_id, d.detail) == ("user:42", note.id, {
        "record_kind": "message", "from": "participant_private", "to": "branch", "why": "share the freeze date",
        "memory_ids": [], "message_ids": [note.id],
    })
    assert ledger.store.messages(scope, conv.id, ids=[note.id])[0].visibility is Visibility.BRANCH
    after = ledger.assemble(conv.id, participant_id=b.id, now=NOW)
    assert [(m["role"], m.get("name"), m["content"]) for m in after.payload["messages"]] == [
        ("user", None, "plan the release"), ("assistant", "a", "[a] A-NOTE: freeze on Friday"),
    ]
    assert after.record.omitted == {}
    with pytest.raises(InputError, match="actor"):
        promote(ledger, scope, note.id, to=Visibility.CONVERSATION, actor=" ", reason="x")


def test_promotion_and_its_decision_commit_together(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    from contextledger.store.sql import Writer

    s = _parent_with_child(ledger)
    scope = ledger.scope()
    ledger.recorder().finish_model_run(s["conv"].id, s["child"].run.id, "failed")

    def refuse(*_: Any, **__: Any) -> None:
        raise RuntimeError("injected failure while writing the decision")

    monkeypatch.setattr(Writer, "add_decision", refuse)
    with pytest.raises(RuntimeError, match="injected failure"):
        promote(ledger, scope, s["write_art"].id, to=Visibility.BRANCH, actor="lead", reason="handle")
    monkeypatch.undo()
    assert ledger.store.get_artifact(scope, s["write_art"].id).visibility_scope is Visibility.AUDIT_ONLY
    mem = ledger.store.get_memory(scope, s["write_mem"].id)
    assert (mem.visibility_scope, mem.promotion_policy) == (Visibility.AUDIT_ONLY, PromotionPolicy.NOT_PROMOTED)
    assert ledger.store.messages(scope, s["conv"].id, ids=[s["write_art"].message_id or ""])[0].visibility is Visibility.AUDIT_ONLY
    assert ledger.store.decisions(scope, conversation_id=s["conv"].id) == []
    d = promote(ledger, scope, s["write_art"].id, to=Visibility.BRANCH, actor="lead", reason="handle after failure")
    assert d.detail["child_run_status"] == "failed"
    assert ledger.store.decisions(scope, conversation_id=s["conv"].id) == [d]
