"""Memory links respect participants and branches (seed 000 §4.8–4.10).

* Audience: a memory supersedes or stales only memories whose whole audience also sees
  it (a participant-private or audit-only result never hides, or marks, what others see);
  the assembly never names a successor the viewer cannot see.
* Lineage: a write on a fork never makes the parent branch's read stale; it does on the
  fork and on the fork's descendants (the link is kept on the fork's memory).
* Repeated user constraints are listed once in the system block.

The pure rules run on hand-made memories; the end-to-end tests run on SQLite and
PostgreSQL and assert exact records and payload texts.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from contextledger.assembly.assembler import AssemblyResult
from contextledger.assembly.families import ConflictEvaluator, FreshnessEvaluator, LineageLinks
from contextledger.assembly.render import constraint_key, system_blocks
from contextledger.bench.scale import build_shape, scale_now
from contextledger.handles import memory_handle
from contextledger.ledger import Ledger
from contextledger.memory.links import LINEAGE_STALE_KEY, audience, plan_links, reaches
from contextledger.policy.loader import default_policy, policy_from_mapping
from contextledger.policy.rules import Rule
from contextledger.records.enums import (
    OmissionReason,
    PromotionPolicy,
    ProvenanceRank,
    ResolutionState,
    Visibility,
)
from contextledger.records.models import ToolMemory

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _mem(mid: str, seq: int, **over: Any) -> ToolMemory:
    fields: dict[str, Any] = {
        "id": mid,
        "tenant_id": "t1",
        "conversation_id": "c1",
        "branch_id": "main",
        "seq": seq,
        "source_artifact_ids": (f"art_{mid}",),
        "source_tool": "Read",
        "summary": f"summary of {mid}",
        "subject_key": "file:src/a.py",
        "payload": {"extractor": "file_read", "content_sha256": "sha256:1"},
        "owner_participant_id": "agent",
        "observed_at": T0,
        "created_at": T0,
    }
    fields.update(over)
    return ToolMemory(**fields)


def _private(mid: str, seq: int, owner: str = "reviewer", **over: Any) -> ToolMemory:
    return _mem(mid, seq, visibility_scope=Visibility.PARTICIPANT_PRIVATE, owner_participant_id=owner, **over)


def _edit(mid: str, seq: int, **over: Any) -> ToolMemory:
    return _mem(mid, seq, source_tool="Edit", payload={"extractor": "file_write", "applied": True}, **over)


# -- audience ------------------------------------------------------------------------------


def test_audience_per_visibility_owner_sharing_and_promotion() -> None:
    assert audience(_mem("a", 1)) is None
    assert audience(_mem("a", 1, visibility_scope=Visibility.CONVERSATION)) is None
    assert audience(_private("a", 1, shared_with_participants=("agent", "judge"))) == {"reviewer", "agent", "judge"}
    assert audience(_private("a", 1, owner=None)) == frozenset()  # type: ignore[arg-type]
    assert audience(_mem("a", 1, visibility_scope=Visibility.AUDIT_ONLY, owner_participant_id="worker")) == {"worker"}
    assert audience(_mem("a", 1, visibility_scope=Visibility.AUDIT_ONLY, owner_participant_id=None)) == frozenset()
    assert audience(_mem("a", 1, promotion_policy=PromotionPolicy.NOT_PROMOTED)) == {"agent"}
    # an unowned, unpromoted memory is the shared view's (``None``) alone
    assert audience(_mem("a", 1, owner_participant_id=None, promotion_policy=PromotionPolicy.AUDIT_ONLY)) == {None}
    shared = _mem("s", 1)
    private = _private("p", 2)
    assert reaches(shared, private) and not reaches(private, shared)
    assert reaches(_private("p2", 3, shared_with_participants=("agent",)), private)
    assert not reaches(private, _private("p3", 4, owner="agent"))


def test_a_private_read_neither_supersedes_nor_stales_a_shared_one() -> None:
    shared_read = _mem("r1", 1)
    private_read = _private("r2", 2)
    plan = plan_links(private_read, [shared_read])
    assert plan.new is private_read and plan.updated == ()
    # nor does a private or audit-only edit make the shared read stale
    for writer in (_edit("w1", 3, visibility_scope=Visibility.PARTICIPANT_PRIVATE, owner_participant_id="reviewer"),
                   _edit("w2", 3, visibility_scope=Visibility.AUDIT_ONLY, owner_participant_id="worker")):
        plan = plan_links(writer, [shared_read, private_read])
        # the reviewer's own read is stale after the reviewer's edit; the shared one is not
        stale = {m.id: m.resolution_state for m in plan.updated}
        assert stale == ({"r2": ResolutionState.STALE} if writer.id == "w1" else {})
        assert LINEAGE_STALE_KEY not in plan.new.payload


def test_a_shared_read_supersedes_a_private_one() -> None:
    private_read = _private("r1", 1)
    shared_read = _mem("r2", 2)
    plan = plan_links(shared_read, [private_read])
    assert plan.new.supersedes == ("r1",)
    assert [(m.id, m.superseded_by, m.resolution_state) for m in plan.updated] == [("r1", "r2", ResolutionState.SUPERSEDED)]


def test_a_conflict_needs_the_same_audience_on_both_sides() -> None:
    user = _mem("u", 1, provenance_rank=ProvenanceRank.USER_STATED, visibility_scope=Visibility.PARTICIPANT_PRIVATE, owner_participant_id="agent")
    # a lower-ranked shared memory reaches the private one but not the reverse: a
    # conflict marks both sides, so the shared side would name the private id — no link
    model = _mem("m", 2, provenance_rank=ProvenanceRank.MODEL_DERIVED)
    plan = plan_links(model, [user])
    assert plan.new is model and plan.updated == ()
    model_private = _mem("m2", 3, provenance_rank=ProvenanceRank.MODEL_DERIVED, visibility_scope=Visibility.PARTICIPANT_PRIVATE, owner_participant_id="agent")
    plan = plan_links(model_private, [user])
    assert plan.new.conflicts_with == ("u",) and plan.new.resolution_state is ResolutionState.CONFLICTED
    assert [(m.id, m.conflicts_with) for m in plan.updated] == [("u", ("m2",))]


# -- lineage -----------------------------------------------------------------------------------


def test_links_to_inherited_history_are_kept_on_the_new_memory_only() -> None:
    parent_read = _mem("r1", 1)
    fork_edit = _edit("w1", 5, branch_id="fork")
    plan = plan_links(fork_edit, [parent_read])
    assert plan.updated == ()
    assert plan.new.payload[LINEAGE_STALE_KEY] == ["r1"]
    fork_read = _mem("r2", 6, branch_id="fork")
    plan = plan_links(fork_read, [parent_read, plan.new])
    # same content as the parent's read: the fork's read supersedes it on the fork only
    assert plan.updated == () and plan.new.supersedes == ("r1",)
    assert plan.new.superseded_by is None and LINEAGE_STALE_KEY not in plan.new.payload
    # a second edit on the fork does not list the read again (stale on this lineage)
    again = plan_links(_edit("w2", 7, branch_id="fork"), [parent_read, fork_edit.model_copy(update={"payload": {**fork_edit.payload, LINEAGE_STALE_KEY: ["r1"]}})])
    assert LINEAGE_STALE_KEY not in again.new.payload


def test_a_link_recorded_across_branches_does_not_hold_on_the_parent() -> None:
    # a parent read superseded by a read on a fork (recorded before links respected
    # branches): on the parent it is current until the parent's own next read
    parent_read = _mem("r1", 1, superseded_by="fork_read", resolution_state=ResolutionState.SUPERSEDED)
    plan = plan_links(_mem("r3", 9), [parent_read])
    assert [(m.id, m.superseded_by) for m in plan.updated] == [("r1", "r3")]
    assert plan.new.supersedes == ("r1",)
    # a parent read made stale by a fork edit is stale again on the parent by its own edit
    stale_read = _mem("r4", 2, resolution_state=ResolutionState.STALE, limits="file changed later (fork_edit)")
    plan = plan_links(_edit("w9", 10, branch_id="fork2"), [stale_read])
    assert plan.new.payload[LINEAGE_STALE_KEY] == ["r4"]


def test_lineage_links_decide_the_evaluators() -> None:
    pol = default_policy()
    links = LineageLinks()
    conflict = ConflictEvaluator(pol, lineage=links)
    fresh = FreshnessEvaluator(pol, T0, lineage=links)
    parent_read = _mem("r1", 1)
    legacy = _mem("r2", 2, superseded_by="p9", resolution_state=ResolutionState.SUPERSEDED)
    assert conflict.check(parent_read) is None and not fresh.is_stale(parent_read)
    links.note(_private("p9", 3), visible=False)
    links.note(_mem("w1", 4, branch_id="fork", payload={"extractor": "file_write", LINEAGE_STALE_KEY: ["r1"]}), visible=True)
    links.note(_mem("r5", 5, branch_id="fork", supersedes=("r1",)), visible=True)
    verdict = conflict.check(parent_read)
    assert verdict is not None and (verdict.reason, verdict.detail) == (OmissionReason.SUPERSEDED, "superseded by r5 on this branch")
    assert FreshnessEvaluator(pol, T0, lineage=links).is_stale(parent_read)
    # a successor the viewer cannot see does not hide the memory and is never named
    assert conflict.check(legacy) is None and links.successor(legacy) is None
    assert links.successor(parent_read) == "r5"
    # a successor not among the request's memories still supersedes, unnamed
    unknown = _mem("r6", 6, superseded_by="elsewhere", resolution_state=ResolutionState.SUPERSEDED)
    assert conflict.check(unknown) is not None and links.successor(unknown) is None


# -- end to end: participants --------------------------------------------------------------


def _payload(r: AssemblyResult) -> str:
    return json.dumps(r.payload, sort_keys=True, ensure_ascii=False)


def _names(r: AssemblyResult, mem: ToolMemory) -> bool:
    """Whether the payload names ``mem``: by its handle (``m12``, as payloads quote
    records) or by its full id."""
    text = _payload(r)
    return mem.id in text or re.search(rf"(?<![A-Za-z0-9_]){memory_handle(mem)}(?![A-Za-z0-9_])", text) is not None


def _tool_text(r: AssemblyResult, call_id: str) -> str:
    found = [m["content"] for m in r.payload["messages"] if m["role"] == "tool" and m.get("tool_call_id") == call_id]
    assert len(found) == 1, call_id
    return str(found[0])


def _agent_and_private_read(ledger: Ledger) -> tuple[str, ToolMemory, ToolMemory]:
    """The n=11 coding history: the agent's read (c000007) and the reviewer's private
    read of the same bytes (c000009)."""
    conv_id, _ = build_shape(ledger, 11, "coding")
    scope, store = ledger.scope(), ledger.store
    arts = {a.call_id: a for a in store.artifacts(scope, conv_id)}
    mems = {m.source_artifact_ids[0]: m for m in store.memories(scope, conv_id, segments=None)}
    return conv_id, mems[arts["c000007"].id], mems[arts["c000009"].id]


def test_a_private_read_does_not_hide_the_agents_read(ledger: Ledger) -> None:
    conv_id, agent_read, private_read = _agent_and_private_read(ledger)
    scope, store = ledger.scope(), ledger.store
    # the reviewer's private read returns the same bytes as the agent's read
    assert private_read.visibility_scope is Visibility.PARTICIPANT_PRIVATE
    assert (agent_read.payload["content_sha256"], agent_read.subject_key) == (private_read.payload["content_sha256"], private_read.subject_key)
    assert (agent_read.resolution_state, agent_read.superseded_by) == (ResolutionState.CURRENT, None)
    assert private_read.supersedes == ()
    people = {p.name: p.id for p in store.participants(scope, conv_id)}
    for viewer in (None, people["agent"]):
        r = ledger.assemble(conv_id, participant_id=viewer, now=scale_now(11, "coding"), persist=False)
        text = _tool_text(r, "c000007")
        assert text.startswith('     1→"""Module 002 of pkg: batch handlers."""')
        assert not _names(r, private_read) and "c000009" not in _payload(r)
        assert "superseded" not in text


def test_a_legacy_private_successor_is_neither_obeyed_nor_named(ledger: Ledger) -> None:
    conv_id, agent_read, private_read = _agent_and_private_read(ledger)
    scope, store = ledger.scope(), ledger.store
    # a link as recorded before links respected audiences
    with store.writer(scope) as w:
        w.update_memory(agent_read.model_copy(update={"superseded_by": private_read.id, "resolution_state": ResolutionState.SUPERSEDED}))
        w.update_memory(private_read.model_copy(update={"supersedes": (agent_read.id,)}))
    people = {p.name: p.id for p in store.participants(scope, conv_id)}
    r = ledger.assemble(conv_id, participant_id=people["agent"], now=scale_now(11, "coding"), persist=False, trace=True)
    assert _tool_text(r, "c000007").startswith('     1→"""Module 002 of pkg')
    assert not _names(r, private_read)
    assert not [d for d in r.trace if d["record_id"] == agent_read.id and d["reason"] == "superseded"]


# -- end to end: branches ----------------------------------------------------------------------

_READ = "\n".join(f"{i + 1:6d}→line {i}" for i in range(5))
_EDITED = "The file src/a.py has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n     2→line one"


def _read_then_fork(ledger: Ledger) -> tuple[Any, Any, ToolMemory, Any]:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="fork edit", system_prompt="You are a coding agent.")
    rec.record_message(conv.id, "user", "Fix src/a.py")
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "r1", "tool_name": "Read", "arguments": {"file_path": "src/a.py"}}])
    read = rec.record_tool_result(conv.id, "r1", _READ, observed_at=T0)[2]
    ask = rec.record_message(conv.id, "user", "Try another approach.")
    fork = rec.fork(conv.id, ask.id, name="alt", activate=False)
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "e1", "tool_name": "Edit", "arguments": {"file_path": "src/a.py", "old_string": "line 1", "new_string": "line one"}}], branch_id=fork.id)
    edit = rec.record_tool_result(conv.id, "e1", _EDITED, observed_at=T0 + timedelta(seconds=5))[2]
    return conv, fork, read, edit


def _working_set(r: AssemblyResult) -> list[str]:
    blocks = [str(m["content"]) for m in r.payload["messages"] if "files read or edited on this branch" in str(m["content"])]
    assert len(blocks) == 1
    return [ln for ln in blocks[0].splitlines() if ln.startswith("- ")]


LISTING = policy_from_mapping({"working_set": {"when_needed": False}})
"""The working-set list even where each file's newest exchange is sent raw (these tests read it)."""


def test_an_edit_on_a_fork_leaves_the_parents_read_current(ledger: Ledger) -> None:
    conv, fork, read, edit = _read_then_fork(ledger)
    scope, store = ledger.scope(), ledger.store
    stored = {m.id: m for m in store.memories(scope, conv.id, segments=None)}
    assert (stored[read.id].resolution_state, stored[read.id].limits) == (ResolutionState.CURRENT, None)
    assert stored[edit.id].payload[LINEAGE_STALE_KEY] == [read.id]
    now = T0 + timedelta(minutes=1)
    main = ledger.assemble(conv.id, branch_id=conv.root_branch_id, now=now, persist=False, policy=LISTING, trace=True)
    assert _tool_text(main, "r1") == _READ
    assert _working_set(main) == ["- src/a.py (read)"]
    assert not _names(main, edit) and "stale" not in main.record.omitted
    alt = ledger.assemble(conv.id, branch_id=fork.id, now=now, persist=False, policy=LISTING, trace=True)
    assert _tool_text(alt, "r1").startswith(f"[stale memory m{read.seq} · Read · observed 1 min ago]\nRead succeeded: read src/a.py lines 1-5")
    # stale on this lineage: never raw, not even in the recent tail (as for a read made
    # stale on its own branch)
    assert "line 0" not in _tool_text(alt, "r1")
    assert (read.source_artifact_ids[0], "stale") in {(d["record_id"], d["reason"]) for d in alt.trace if d["decision"] == "shape"}
    assert (read.id, "mark_stale", "stale_marked") in {(d["record_id"], d["decision"], d["reason"]) for d in alt.trace}
    assert _working_set(alt) == ["- src/a.py (edited)"]
    # a branch forked from the fork after its edit inherits the staleness; the parent
    # still does not see it
    rec = ledger.recorder()
    ask = rec.record_message(conv.id, "user", "And now?", branch_id=fork.id)
    grandchild = rec.fork(conv.id, ask.id, name="alt of alt", activate=False)
    deeper = ledger.assemble(conv.id, branch_id=grandchild.id, now=now, persist=False, policy=LISTING)
    assert _tool_text(deeper, "r1").startswith(f"[stale memory m{read.seq} ·")
    main_again = ledger.assemble(conv.id, branch_id=conv.root_branch_id, now=now, persist=False, policy=LISTING)
    assert main_again.payload == main.payload


def test_a_read_on_a_fork_supersedes_the_parents_read_on_the_fork_only(ledger: Ledger) -> None:
    conv, fork, read, _ = _read_then_fork(ledger)
    rec = ledger.recorder()
    # other arguments, the same bytes (an identical call would be dropped as a duplicate)
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "r2", "tool_name": "Read", "arguments": {"file_path": "src/a.py", "limit": 2000}}], branch_id=fork.id)
    again = rec.record_tool_result(conv.id, "r2", _READ, observed_at=T0 + timedelta(seconds=9))[2]
    stored = {m.id: m for m in ledger.store.memories(ledger.scope(), conv.id, segments=None)}
    assert (stored[read.id].superseded_by, stored[read.id].resolution_state) == (None, ResolutionState.CURRENT)
    assert stored[again.id].supersedes == (read.id,)
    now = T0 + timedelta(minutes=1)
    main = ledger.assemble(conv.id, branch_id=conv.root_branch_id, now=now, persist=False, policy=LISTING)
    assert _tool_text(main, "r1") == _READ and not _names(main, again)
    alt = ledger.assemble(conv.id, branch_id=fork.id, now=now, persist=False, policy=LISTING)
    # the successor is sent raw, unlabelled: the note does not cite a handle the request never shows
    assert _tool_text(alt, "r1") == "[superseded by a newer result]" and _tool_text(alt, "r2") == _READ


def test_an_edit_on_the_same_branch_still_makes_the_read_stale(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="same branch")
    rec.record_message(conv.id, "user", "Fix src/a.py")
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "r1", "tool_name": "Read", "arguments": {"file_path": "src/a.py"}}])
    read = rec.record_tool_result(conv.id, "r1", _READ, observed_at=T0)[2]
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "e1", "tool_name": "Edit", "arguments": {"file_path": "src/a.py", "old_string": "line 1", "new_string": "line one"}}])
    edit = rec.record_tool_result(conv.id, "e1", _EDITED, observed_at=T0 + timedelta(seconds=5))[2]
    stored = {m.id: m for m in ledger.store.memories(ledger.scope(), conv.id, segments=None)}
    assert (stored[read.id].resolution_state, stored[read.id].limits) == (ResolutionState.STALE, f"file changed later (m{edit.seq})")
    assert LINEAGE_STALE_KEY not in stored[edit.id].payload


# -- repeated constraints -----------------------------------------------------------------------


def _pinned(rid: str, text: str, order: int) -> Rule:
    return Rule.model_validate({"id": rid, "text": text, "strength": "soft", "source": f"msg_{rid}", "source_kind": "user_message", "pinned": True, "order": order})


def test_repeated_constraints_are_listed_once_as_first_stated() -> None:
    assert constraint_key("  Do not add new\tdependencies. ") == constraint_key("do not add new dependencies") == "do not add new dependencies"
    rules = [
        _pinned("c1", "Do not change the public API of src/pkg.", 1000),
        _pinned("c2", "Do not add new dependencies.", 2000),
        _pinned("c3", "do not add new  dependencies", 3000),
        _pinned("c4", "Do not change the public API of src/pkg.", 4000),
    ]
    blocks = system_blocks([], rules)
    assert blocks == ("Constraints stated by the user (verbatim, still in force):\n- Do not change the public API of src/pkg.\n- Do not add new dependencies.",)


def test_a_constraint_repeated_in_conversation_is_one_line(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="constraints", system_prompt="You are a coding agent.")
    for text in ("Fix the tests. Do not change the public API of src/pkg.", "Continue. Do not add new dependencies.",
                 "Continue. Do not change the public API of src/pkg.", "Continue. Do not add new dependencies."):
        rec.record_message(conv.id, "user", text)
    rec.record_message(conv.id, "assistant", "Working on it.")
    # compacted, the messages are no longer sent raw: the constraints are restated, once each
    ledger.compact(conv.id, keep_recent_units=1, now=T0)
    r = ledger.assemble(conv.id, now=T0, persist=False)
    system = str(r.payload["messages"][0]["content"])
    lines = [ln for ln in system.splitlines() if ln.startswith("- ")]
    assert lines == ["- Do not change the public API of src/pkg.", "- Do not add new dependencies."]
