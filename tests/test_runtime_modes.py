"""Each runtime mode with its own assembly boundary (seed 000 §4.13, §9.3), on both
backends: chat, debate, scheduled job, child subagent, and Claude Code imports whose
sidechains / subagent files are child participants with promoted reports.

"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from conftest import real_data_dir, require_real_data
from contextledger.graph import scheduled_turn, start_subagent
from contextledger.ledger import Ledger
from contextledger.records.enums import (
    MessageKind,
    PolicyFamily,
    RuntimeKind,
    Visibility,
)
from contextledger.records.parts import ImagePart, TextPart

NOW = datetime(2026, 1, 1, tzinfo=UTC)
MAROT = "marot-spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
VIEWER = "claude-code-viewer-dkimuson/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"


def dump(payload: dict[str, Any]) -> str:
    return json.dumps(payload, sort_keys=True, ensure_ascii=False)


# -- chat and scheduled job ------------------------------------------------------------------


def test_chat_turn(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="chat", system_prompt="Be brief.")
    u = rec.record_message(conv.id, "user", "What is WAL?")
    a, _ = rec.record_assistant(conv.id, text="Write-ahead logging.")
    u2 = rec.record_message(conv.id, "user", "And in SQLite?")
    r = ledger.assemble(conv.id, now=NOW)
    assert r.payload == {"messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is WAL?"},
        {"role": "assistant", "content": "Write-ahead logging."}, {"role": "user", "content": "And in SQLite?"},
    ]}
    assert (r.record.selected_refs, r.record.omitted, r.record.runtime_kind) == ((u.id, a.id, u2.id), {}, RuntimeKind.CHAT)


def test_scheduled_job_uses_the_chat_path(ledger: Ledger) -> None:
    rec = ledger.recorder()
    chat = rec.start_conversation(title="chat", system_prompt="Report daily.")
    rec.record_message(chat.id, "user", "Summarise yesterday's failed builds.")
    job = rec.start_conversation(title="job", system_prompt="Report daily.")
    turn = scheduled_turn(ledger, ledger.scope(), job.id, job_id="job-nightly-7", prompt="Summarise yesterday's failed builds.", provider="openai-chat", model="gpt-x")
    assert (turn.run.job_id, turn.run.runtime_kind, turn.run.status, turn.run.branch_id) == ("job-nightly-7", RuntimeKind.SCHEDULED_JOB, "running", job.root_branch_id)
    assert (turn.message.runtime_kind, turn.message.metadata, turn.message.kind) == (RuntimeKind.SCHEDULED_JOB, {"job_id": "job-nightly-7"}, MessageKind.CHAT)
    assert [r.id for r in ledger.store.model_runs(ledger.scope(), job.id)] == [turn.run.id]
    rj = ledger.assemble(job.id, now=NOW, runtime_kind=RuntimeKind.SCHEDULED_JOB)
    rc = ledger.assemble(chat.id, now=NOW)
    assert dump(rj.payload) == dump(rc.payload)
    assert (rj.record.runtime_kind, rj.record.selected_refs, rj.record.omitted) == (RuntimeKind.SCHEDULED_JOB, (turn.message.id,), {})
    done = rec.finish_model_run(job.id, turn.run.id, "completed", usage={"output_tokens": 12})
    assert (done.status, done.usage) == ("completed", {"output_tokens": 12})
    assert ledger.store.model_runs(ledger.scope(), job.id)[0] == done


# -- debate ------------------------------------------------------------------------------


def test_debate_keeps_speaker_labels_moderator_and_image_in_place(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="debate", system_prompt="Structured debate.")
    mod = rec.add_participant(conv.id, "moderator", role_label="Moderator", runtime_kind=RuntimeKind.DEBATE)
    pro = rec.add_participant(conv.id, "pro", role_label="Pro", runtime_kind=RuntimeKind.DEBATE)
    con = rec.add_participant(conv.id, "con", role_label="Con", runtime_kind=RuntimeKind.DEBATE)
    png = b"\x89PNG\r\n\x1a\nchart-bytes"
    key = ledger.store.blobs.put(png)
    rec.record_message(conv.id, "user", [TextPart(text="Motion: cats beat dogs. Evidence:"), ImagePart(media_type="image/png", blob_key=key, size_bytes=len(png)), TextPart(text="Discuss the chart.")])
    rec.record_message(conv.id, "user", "Pro opens; two sentences.", participant_id=mod.id, kind=MessageKind.MODERATOR, speaker_label="Moderator", runtime_kind=RuntimeKind.DEBATE)
    rec.record_assistant(conv.id, text="Cats are independent.", participant_id=pro.id, speaker_label="Pro", runtime_kind=RuntimeKind.DEBATE)
    rec.record_message(conv.id, "user", "Con responds.", participant_id=mod.id, kind=MessageKind.MODERATOR, speaker_label="Moderator", runtime_kind=RuntimeKind.DEBATE)
    r = ledger.assemble(conv.id, participant_id=con.id, now=NOW, runtime_kind=RuntimeKind.DEBATE)
    msgs = r.payload["messages"]
    assert [(m["role"], m.get("name")) for m in msgs] == [("system", None), ("user", None), ("user", "Moderator"), ("assistant", "Pro"), ("user", "Moderator")]
    assert [c["type"] for c in msgs[1]["content"]] == ["text", "image_url", "text"]
    assert msgs[1]["content"][1]["image_url"]["url"] == "data:image/png;base64,iVBORw0KGgpjaGFydC1ieXRlcw=="
    assert [msgs[2]["content"], msgs[3]["content"], msgs[4]["content"]] == ["[Moderator] Pro opens; two sentences.", "[Pro] Cats are independent.", "[Moderator] Con responds."]
    assert r.record.omitted == {} and r.record.runtime_kind is RuntimeKind.DEBATE
    ra = ledger.assemble(conv.id, participant_id=con.id, now=NOW, provider="anthropic", runtime_kind=RuntimeKind.DEBATE)
    first = ra.payload["messages"][0]["content"]
    assert [b["type"] for b in first] == ["text", "image", "text", "text"]
    assert first[3]["text"] == "[Moderator] Pro opens; two sentences."
    assert ra.payload["messages"][1]["content"][0]["text"] == "[Pro] Cats are independent."


# -- child subagent boundaries the assembler must still learn ---------------------------------


def _lead_and_child(ledger: Ledger) -> dict[str, Any]:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="lead", system_prompt="Lead agent.")
    lead = rec.add_participant(conv.id, "lead")
    rec.record_message(conv.id, "user", "USER-REQUEST: audit the repo")
    rec.record_assistant(conv.id, text="LEAD-PUBLIC-ANSWER: starting", participant_id=lead.id)
    child = start_subagent(ledger, ledger.scope(), conv.id, parent_participant_id=lead.id, name="scanner", task="CHILD-TASK: list TODOs")
    return {"conv": conv, "lead": lead, "child": child}


def test_child_assembly_includes_its_task(ledger: Ledger) -> None:
    s = _lead_and_child(ledger)
    r = ledger.assemble(s["conv"].id, participant_id=s["child"].participant.id, now=NOW)
    assert "CHILD-TASK: list TODOs" in dump(r.payload)
    assert r.record.runtime_kind is RuntimeKind.SUBAGENT_CHILD
    assert s["child"].task_message.visibility is Visibility.AUDIT_ONLY


def test_child_input_is_narrow(ledger: Ledger) -> None:
    s = _lead_and_child(ledger)
    r = ledger.assemble(s["conv"].id, participant_id=s["child"].participant.id, now=NOW)
    body = dump(r.payload)
    assert "USER-REQUEST" not in body and "LEAD-PUBLIC-ANSWER" not in body
    assert r.record.omitted == {"not_promoted": 2}


def test_checkpoint_of_one_participant_never_reaches_another(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="two")
    a = rec.add_participant(conv.id, "a")
    b = rec.add_participant(conv.id, "b")
    rec.record_message(conv.id, "user", "go")
    rec.record_checkpoint(conv.id, participant_id=a.id, retry_contract={"key": "A-PRIVATE-RETRY"})
    r = ledger.assemble(conv.id, participant_id=b.id, now=NOW)
    assert "A-PRIVATE-RETRY" not in dump(r.payload)
    assert r.record.omitted == {"participant_private": 1}


def test_resume_assembly_references_its_checkpoint(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="resume")
    lead = rec.add_participant(conv.id, "lead")
    rec.record_message(conv.id, "user", "continue")
    skill = rec.record_skill_state(conv.id, loaded_skills=["x"], participant_id=lead.id)
    ckpt = rec.record_checkpoint(conv.id, participant_id=lead.id, subagent_batch_id="b1")
    r = ledger.assemble(conv.id, participant_id=lead.id, now=NOW, runtime_kind=RuntimeKind.SUBAGENT_PARENT_RESUME)
    assert ckpt.id in r.record.selected_refs and skill.id in r.record.selected_refs


def test_private_result_under_visible_turn_is_not_narrated(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="narration")
    a = rec.add_participant(conv.id, "a")
    b = rec.add_participant(conv.id, "b")
    rec.record_message(conv.id, "user", "check status")
    rec.record_assistant(conv.id, text="Checking.", participant_id=a.id, visibility=Visibility.BRANCH, tool_calls=[{"call_id": "st1", "tool_name": "status"}])
    _, art, _ = rec.record_tool_result(conv.id, "st1", "A-PRIVATE-STATUS: token=abc")
    assert art.visibility_scope is Visibility.PARTICIPANT_PRIVATE
    r = ledger.assemble(conv.id, participant_id=b.id, now=NOW)
    assert "A-PRIVATE-STATUS" not in dump(r.payload)
    assert art.id not in r.record.selected_refs
    assert r.record.omitted == {"other_participant_tools": 1, "participant_private": 2}


# -- Claude Code imports: sidechains and subagent files ---------------------------------------


def _child_counts(ledger: Ledger, conversation_id: str) -> tuple[int, set[str]]:
    scope = ledger.scope()
    children = {p.id for p in ledger.store.participants(scope, conversation_id) if p.runtime_kind is RuntimeKind.SUBAGENT_CHILD}
    msgs = [m for m in ledger.store.messages(scope, conversation_id) if m.participant_id in children]
    arts = [a for a in ledger.store.artifacts(scope, conversation_id) if a.owner_participant_id in children]
    mems = [m for m in ledger.store.memories(scope, conversation_id) if m.owner_participant_id in children]
    assert {m.visibility for m in msgs} | {a.visibility_scope for a in arts} | {m.visibility_scope for m in mems} == {Visibility.AUDIT_ONLY}
    return len(msgs) + len(arts) + len(mems), {m.id for m in msgs} | {a.id for a in arts} | {m.id for m in mems}


def test_import_subagent_files_promoted_report(ledger: Ledger) -> None:
    require_real_data()
    res = ledger.import_file(real_data_dir() / MAROT)
    assert (res.created, res.participants, res.branches, res.promoted_reports) == (True, 3, 3, 1)
    scope = ledger.scope()
    parts = {p.id: p for p in ledger.store.participants(scope, res.conversation_id)}
    decisions = ledger.store.decisions(scope, conversation_id=res.conversation_id)
    assert [(d.family, d.decision, d.reason, d.actor) for d in decisions] == [(PolicyFamily.PROMOTION, "promote", "promoted", "import")]
    d = decisions[0]
    assert parts[d.detail["child_participant_id"]].name == "subagent:agent-a2898e3"
    report = ledger.store.messages(scope, res.conversation_id, ids=[d.record_id or ""])[0]
    assert report.metadata["child_report_for"] == "subagent:agent-a2898e3"
    assert parts[report.participant_id or ""].name == "main" and report.visibility is Visibility.BRANCH
    assert d.detail["artifact_id"] == report.parts[0].artifact_id  # type: ignore[union-attr]
    r = ledger.assemble(res.conversation_id, now=NOW, budget_tokens=30000)
    assert d.detail["memory_ids"][0] in r.record.selected_refs
    n_child, child_ids = _child_counts(ledger, res.conversation_id)
    assert n_child == 187
    assert not child_ids & set(r.record.selected_refs)
    assert r.record.omitted["out_of_lineage"] == n_child == r.record.branch_excluded
    again = ledger.import_file(real_data_dir() / MAROT)
    assert (again.created, again.conversation_id, again.notes) == (False, res.conversation_id, ["already imported: same content key; nothing written"])
    promotions = [x for x in ledger.store.decisions(scope, conversation_id=res.conversation_id) if x.family is PolicyFamily.PROMOTION]
    assert promotions == [d]
    assert len(ledger.store.list_conversations(scope)) == 1


def test_import_inline_sidechains_promoted_reports(ledger: Ledger) -> None:
    require_real_data()
    res = ledger.import_file(real_data_dir() / VIEWER)
    assert (res.participants, res.promoted_reports) == (6, 5)
    scope = ledger.scope()
    parts = {p.id: p.name for p in ledger.store.participants(scope, res.conversation_id)}
    decisions = ledger.store.decisions(scope, conversation_id=res.conversation_id)
    assert sorted(parts[d.detail["child_participant_id"]] for d in decisions) == [f"subagent:sidechain-{i}" for i in range(1, 6)]
    assert {(d.family, d.actor, d.detail["kind"]) for d in decisions} == {(PolicyFamily.PROMOTION, "import", "child_report")}
    r = ledger.assemble(res.conversation_id, now=NOW, budget_tokens=30000)
    assert {d.record_id for d in decisions} <= set(r.record.selected_refs)
    n_child, child_ids = _child_counts(ledger, res.conversation_id)
    assert n_child == 634
    assert not child_ids & set(r.record.selected_refs)
    # on the main lineage only its older TodoWrite plans are superseded (two plans, each
    # memory and artifact: the newest plan supersedes them); its two searches for the same
    # pattern ran in different folders (subjects "search:<pattern> in <folder>") and stay
    assert r.record.omitted == {"out_of_lineage": 634, "runtime_only": 1, "superseded": 4}
    again = ledger.import_file(real_data_dir() / VIEWER)
    assert again.created is False and len(ledger.store.messages(scope, res.conversation_id)) == res.messages
