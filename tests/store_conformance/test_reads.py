"""The prepared reads of one assembly (``store/reads.py``) return exactly what the
store's general methods return — same records, same order — on every lineage shape
(one, two and three segments, a fork that tightens an older limit), and candidate
collection runs no statement through SQLAlchemy's execution path."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa

from contextledger.assembly.candidates import collect_candidates
from contextledger.errors import NotFoundError
from contextledger.ids import new_id
from contextledger.records.enums import MessageKind, Role, ToolCallStatus
from contextledger.records.models import (
    ContinuationCheckpoint,
    Conversation,
    Message,
    Participant,
    SkillState,
    ToolCall,
)
from contextledger.records.parts import TextPart
from contextledger.store import prepared
from contextledger.store.base import LineageSegment, Scope, SubjectEntry
from contextledger.store.reads import LineageReads
from contextledger.store.sql import SqlStore

from .builders import add_call_and_result, add_text, at, fork, make_conversation


@dataclass
class World:
    conv: Conversation
    branches: dict[str, str]  # name -> branch id
    ids: dict[str, str]  # label -> record id


def _message(store: SqlStore, scope: Scope, conv: Conversation, branch_id: str, text: str, role: Role, kind: MessageKind,
             metadata: dict[str, Any] | None = None) -> Message:
    with store.writer(scope) as w:
        seq = w.allocate_seq(conv.id)
        m = Message(id=new_id("msg"), tenant_id=scope.tenant_id, conversation_id=conv.id, branch_id=branch_id, seq=seq,
                    role=role, kind=kind, parts=(TextPart(text=text),), metadata=metadata or {}, created_at=at(seq))
        w.add_message(m)
    return m


def _populate(store: SqlStore, scope: Scope) -> World:
    """root: system(1), user task(2), r1(3,4 file:/a.py), moderator(5), r2 pending(6,7
    file:/b.py), compaction(8), then r3..r6 (file:/c3..c6.py), user(…);
    A = fork(root @4): a1 failed (file:/a.py), user;  B = fork(A @ a1's ask): text;
    C = fork(root @2) (an older point): c1 (cmd:ls), user."""
    conv = make_conversation(store, scope)
    root = conv.root_branch_id
    ids: dict[str, str] = {}
    ids["sys"] = _message(store, scope, conv, root, "You are careful.", Role.SYSTEM, MessageKind.CHAT).id
    ids["task"] = add_text(store, scope, conv, root, "fix the failing result parser").id
    call, art, mem = add_call_and_result(store, scope, conv, root, "r1", "result r1 parser ok", subject_key="file:/a.py")
    ids |= {"r1": call.id, "art_r1": art.id, "mem_r1": mem.id, "ask_r1": call.message_id}
    ids["mod"] = _message(store, scope, conv, root, "Focus on the parser.", Role.USER, MessageKind.MODERATOR).id
    a = fork(store, scope, conv, root, 4, "A").id
    call, art, mem = add_call_and_result(store, scope, conv, root, "r2", "result r2 pending", status=ToolCallStatus.PENDING, subject_key="file:/b.py")
    ids |= {"r2": call.id, "art_r2": art.id, "mem_r2": mem.id}
    ids["compaction"] = _message(store, scope, conv, root, "handoff", Role.USER, MessageKind.COMPACTION,
                                 {"handoff_format": "v1", "covers": {"from_seq": 1, "to_seq": 7}}).id
    call, art, mem = add_call_and_result(store, scope, conv, a, "a1", "result a1 parser failed", status=ToolCallStatus.FAILED, subject_key="file:/a.py")
    ids |= {"a1": call.id, "art_a1": art.id, "mem_a1": mem.id}
    b = fork(store, scope, conv, a, store.get_tool_call(scope, conv.id, "a1").seq, "B").id
    ids["b_text"] = add_text(store, scope, conv, b, "on B the parser", role=Role.ASSISTANT).id
    c = fork(store, scope, conv, root, 2, "C").id
    call, art, mem = add_call_and_result(store, scope, conv, c, "c1", "result c1 listing", subject_key="cmd:ls")
    ids |= {"c1": call.id, "art_c1": art.id, "mem_c1": mem.id}
    ids["c_user"] = add_text(store, scope, conv, c, "and on C?").id
    for i in range(3, 7):
        call, art, mem = add_call_and_result(store, scope, conv, root, f"r{i}", f"result r{i} parser step {i}", subject_key=f"file:/c{i}.py")
        ids |= {f"r{i}": call.id, f"art_r{i}": art.id, f"mem_r{i}": mem.id}
    ids["a_user"] = add_text(store, scope, conv, a, "retry the parser on A").id
    ids["root_user"] = add_text(store, scope, conv, root, "what about the parser result?").id
    with store.writer(scope) as w:
        w.add_rule("rule_1" + conv.id, conv.id, None, 2, {"id": "rule_1" + conv.id, "text": "never push"})
        w.add_rule("rule_2" + conv.id, conv.id, root, 3, {"id": "rule_2" + conv.id, "text": "run tests"})
        w.add_participant(Participant(id="p_agent" + conv.id, tenant_id=scope.tenant_id, conversation_id=conv.id, name="agent", created_at=at(1)))
        w.add_participant(Participant(id="p_peer" + conv.id, tenant_id=scope.tenant_id, conversation_id=conv.id, name="peer", created_at=at(0)))
        w.add_skill_state(SkillState(id="sk_1" + conv.id, tenant_id=scope.tenant_id, conversation_id=conv.id, branch_id=root, seq=3, created_at=at(3)))
        w.add_skill_state(SkillState(id="sk_2" + conv.id, tenant_id=scope.tenant_id, conversation_id=conv.id, branch_id=a, seq=9, created_at=at(9)))
        w.add_checkpoint(ContinuationCheckpoint(id="cp_1" + conv.id, tenant_id=scope.tenant_id, conversation_id=conv.id, branch_id=root, seq=4, created_at=at(4)))
    return World(conv=conv, branches={"root": root, "A": a, "B": b, "C": c}, ids=ids)


@pytest.fixture
def world(store: SqlStore, scope_a: Scope, scope_b: Scope) -> World:
    w = _populate(store, scope_a)
    _populate(store, scope_a)  # a second conversation of the tenant, same call ids
    _populate(store, scope_b)  # and another tenant's
    return w


BRANCHES = ("root", "A", "B", "C")


def test_every_read_equals_the_store_method(store: SqlStore, scope_a: Scope, world: World) -> None:
    conv = world.conv.id
    every_id = [*world.ids.values(), "msg_unknown"]
    with store.reader() as conn:
        reads = LineageReads(store, conn, scope_a, conv)
        assert reads.conversation() == store.get_conversation(scope_a, conv)
        assert reads.rule_bodies() == store.rule_bodies(scope_a, conv)
        assert [r["id"] for r in reads.rule_bodies()] == ["rule_1" + conv, "rule_2" + conv]
        assert reads.participants() == store.participants(scope_a, conv)
        assert [p.id for p in reads.participants()] == ["p_peer" + conv, "p_agent" + conv]
        shapes = set()
        for name in BRANCHES:
            branch = world.branches[name]
            segs = reads.lineage(branch)
            assert segs == store.lineage(scope_a, branch)
            shapes.add(tuple(s.max_seq is not None for s in segs))
            assert reads.totals_and_outside(segs) == (store.lineage_totals(scope_a, conv, segs), store.outside_lineage_counts(scope_a, conv, segs))
            for last in (1, 2, 3, 5, 100):
                assert reads.newest_messages(segs, last) == store.messages(scope_a, conv, segs, last=last), (name, last)
                assert reads.newest_memories(segs, last) == store.memories(scope_a, conv, segs, last=last), (name, last)
            for kind in (MessageKind.MODERATOR.value, MessageKind.COMPACTION.value):
                assert reads.newest_messages(segs, 8, kind) == store.messages(scope_a, conv, segs, kinds=[kind], last=8)
            roles = [Role.SYSTEM.value, Role.DEVELOPER.value]
            chat = MessageKind.CHAT.value
            head = reads.head_messages(segs, roles, chat, before=10**9, last=32)
            assert head == store.messages(scope_a, conv, segs, roles=roles, kinds=[chat])
            assert [m.id for m in head] == [world.ids["sys"]]
            assert reads.head_messages(segs, roles, chat, before=1, last=32) == []
            users = [m for m in store.messages(scope_a, conv, segs, roles=[Role.USER.value]) if m.kind is MessageKind.CHAT]
            assert reads.first_user(segs) == users[0]
            assert users[0].id == world.ids["task"]
            assert reads.messages_by_id(segs, every_id) == store.messages(scope_a, conv, segs, ids=every_id)
            statuses = [ToolCallStatus.PENDING, ToolCallStatus.AWAITING_APPROVAL, ToolCallStatus.FAILED]
            limits = [(s.value, 64) for s in statuses]
            assert reads.newest_calls(segs, limits) == store.tool_calls(scope_a, conv, segs, statuses=statuses)
            artifact_ids = [v for k, v in world.ids.items() if k.startswith("art_")]
            assert reads.memories_by_artifact(segs, artifact_ids) == store.memories(scope_a, conv, segs, artifact_ids=artifact_ids)
            assert reads.skill_states(segs) == store.skill_states(scope_a, conv, segs)
            assert reads.checkpoints(segs) == store.checkpoints(scope_a, conv, segs)
        assert shapes == {(False,), (False, True), (False, True, True)}
        message_ids = [m.id for m in store.messages(scope_a, conv)] + ["msg_unknown"]
        assert reads.calls_by_message(message_ids) == store.tool_calls(scope_a, conv, message_ids=message_ids)
        call_ids = ["r1", "r2", "a1", "c1", "r6", "nope"]
        assert reads.calls_by_call_id(call_ids) == store.tool_calls(scope_a, conv, call_ids=call_ids)
        assert reads.artifacts_by_call_id(call_ids) == store.artifacts(scope_a, conv, call_ids=call_ids)
        assert reads.artifacts_by_id(every_id) == store.artifacts(scope_a, conv, ids=every_id)
        assert reads.memories_by_id(every_id) == store.memories(scope_a, conv, ids=every_id)
        terms = ["parser", "result", "r1", "nothing"]
        matches = reads.term_matches(terms, 64)
        assert matches == store.term_matches(scope_a, conv, terms)
        assert {t for _, t, _, _ in matches} == {"parser", "result"}
        assert reads.term_matches(terms, 2) == store.term_matches(scope_a, conv, terms, per_term=2)
        assert reads.term_matches(["parser"], 64) == store.term_matches(scope_a, conv, ["parser"])


def _working_set(store: SqlStore, scope: Scope, conv: str, segs: list[LineageSegment], prefix: str, scan: int, limit: int) -> list[str]:
    """The working set computed from every memory of the lineage, in Python."""
    lineage = store.memories(scope, conv, segs)
    picked = []
    for s in segs:
        mine = sorted((m for m in lineage if m.branch_id == s.branch_id), key=lambda m: -m.seq)[:scan]
        picked += [m for m in mine if (m.subject_key or "").startswith(prefix)]
    newest = sorted(picked, key=lambda m: (m.seq, m.id), reverse=True)[:limit]
    return [m.id for m in sorted(newest, key=lambda m: (m.seq, m.id))]


@pytest.mark.parametrize(("scan", "limit"), [(600, 40), (3, 40), (600, 2), (1, 1)])
def test_recent_subject_memories(store: SqlStore, scope_a: Scope, world: World, scan: int, limit: int) -> None:
    conv = world.conv.id
    for name in BRANCHES:
        segs = store.lineage(scope_a, world.branches[name])
        got = store.recent_subject_memories(scope_a, conv, segs, "file:", scan=scan, limit=limit)
        assert [m.id for m in got] == _working_set(store, scope_a, conv, segs, "file:", scan, limit), name
        assert all(m.conversation_id == conv and m.tenant_id == "acme" for m in got)
    segs = store.lineage(scope_a, world.branches["root"])
    assert [m.subject_key for m in store.recent_subject_memories(scope_a, conv, segs, "file:", scan=600, limit=40)] == [
        "file:/a.py", "file:/b.py", "file:/c3.py", "file:/c4.py", "file:/c5.py", "file:/c6.py",
    ]
    c_segs = store.lineage(scope_a, world.branches["C"])
    assert [m.subject_key for m in store.recent_subject_memories(scope_a, conv, c_segs, "cmd:", scan=600, limit=40)] == ["cmd:ls"]
    assert store.recent_subject_memories(scope_a, conv, [], "file:") == []


@pytest.mark.parametrize("accept", ["all", "none", "branch"])
def test_recent_subject_memories_settled(store: SqlStore, scope_a: Scope, world: World, accept: str) -> None:
    """With ``settled``: per subject, the window's memories newest first up to the first
    accepted entry — computed here from the full window."""
    conv = world.conv.id
    tests: dict[str, Callable[[SubjectEntry], bool]] = {
        "all": lambda e: True,
        "none": lambda e: False,
        "branch": lambda e: e.visibility == "branch",
    }
    settled = tests[accept]
    seen: list[SubjectEntry] = []

    def spy(e: SubjectEntry) -> bool:
        seen.append(e)
        return settled(e)

    for name in BRANCHES:
        segs = store.lineage(scope_a, world.branches[name])
        full = store.recent_subject_memories(scope_a, conv, segs, "file:", scan=600, limit=40)
        done: set[str] = set()
        want: list[str] = []
        for m in sorted(full, key=lambda m: (m.seq, m.id), reverse=True):
            if m.subject_key in done:
                continue
            want.append(m.id)
            entry = SubjectEntry(id=m.id, seq=m.seq, subject_key=m.subject_key or "", visibility=m.visibility_scope.value, owner_participant_id=m.owner_participant_id)
            if settled(entry):
                done.add(m.subject_key or "")
        seen.clear()
        got = store.recent_subject_memories(scope_a, conv, segs, "file:", scan=600, limit=40, settled=spy)
        assert [m.id for m in got] == sorted(want, key=lambda i: next((m.seq, m.id) for m in full if m.id == i)), name
        # the entries carry the stored columns of their memories
        by_id = {m.id: m for m in full}
        assert len(seen) == len(got) and all(by_id[e.id].subject_key == e.subject_key and by_id[e.id].seq == e.seq and by_id[e.id].visibility_scope.value == e.visibility and by_id[e.id].owner_participant_id == e.owner_participant_id for e in seen)
        if accept == "none":
            assert [m.id for m in got] == [m.id for m in full]
        if accept == "all":
            assert len(got) == len({m.subject_key for m in full})
    assert store.recent_subject_memories(scope_a, conv, [], "file:", settled=settled) == []


def test_reads_stay_in_scope(store: SqlStore, scope_a: Scope, scope_b: Scope, world: World) -> None:
    conv = world.conv.id
    every_id = list(world.ids.values())
    with store.reader() as conn:
        other = LineageReads(store, conn, scope_b, conv)
        with pytest.raises(NotFoundError):
            other.conversation()
        with pytest.raises(NotFoundError):
            other.lineage(world.branches["root"])
        assert other.memories_by_id(every_id) == other.artifacts_by_id(every_id) == []
        assert other.calls_by_call_id(["r1", "a1"]) == []
        segs = [LineageSegment(branch_id=world.branches["root"])]
        assert other.messages_by_id(segs, every_id) == other.newest_messages(segs, 10) == []
        assert other.term_matches(["parser"], 64) == []
        mine = LineageReads(store, conn, scope_a, conv)
        other_conv = next(c.conversation.id for c in store.list_conversations(scope_a) if c.conversation.id != conv)
        with pytest.raises(NotFoundError, match="branch of conversation"):
            LineageReads(store, conn, scope_a, other_conv).lineage(world.branches["A"])
        with pytest.raises(NotFoundError, match="branch"):
            mine.lineage("br_unknown")


def test_collect_candidates_runs_prepared_statements_only(store: SqlStore, scope_a: Scope, world: World) -> None:
    through_sqlalchemy: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        through_sqlalchemy.append(statement)

    sa.event.listen(store.engine, "before_cursor_execute", seen)
    try:
        with prepared.capture() as fast:
            cands = collect_candidates(store, scope_a, world.conv.id, world.branches["A"], recent_window=3, max_candidates=2)
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", seen)
    assert [s for s in through_sqlalchemy if s.strip().upper() not in ("BEGIN", "COMMIT")] == []
    # 15 to 20 statements of candidate collection itself, plus the retrieval stage's
    # routes: semantic 1 (the query's stored vector; 2 when vectors exist), memory 1,
    # graph 3 (seeds, same subject, same artifact); artifact lookups only when the query
    # names ids, digests or paths; keyword: the collection statistics, one count per
    # query term and one read per term consumed (rarest first) — bounded by the query,
    # whatever the history length
    from contextledger.retrieval.text import MAX_QUERY_TOKENS

    keyword = [s for s in fast if "retrieval_fts" in str(s[0]) or "retrieval_docs" in str(s[0])]
    assert 19 <= len(fast) - len(keyword) <= 25
    assert 2 <= len(keyword) <= 1 + 2 * MAX_QUERY_TOKENS
    assert [m.id for m in cands.messages][:2] == [world.ids["sys"], world.ids["task"]]
    assert world.ids["a1"] in {c.id for c in cands.calls}
    assert cands.segments == store.lineage(scope_a, world.branches["A"])


# -- the bounded reads of the system head and of recovery --------------------------------

SYSTEM, DEVELOPER, CHAT = Role.SYSTEM.value, Role.DEVELOPER.value, MessageKind.CHAT.value
FAILED, PENDING, AWAITING = ToolCallStatus.FAILED, ToolCallStatus.PENDING, ToolCallStatus.AWAITING_APPROVAL


def _ask(store: SqlStore, scope: Scope, conv: Conversation, branch_id: str, statuses: Sequence[ToolCallStatus]) -> list[ToolCall]:
    """One assistant message requesting one call per status (same seq, call_index 0…)."""
    with store.writer(scope) as w:
        seq = w.allocate_seq(conv.id)
        ask = Message(id=new_id("msg"), tenant_id=scope.tenant_id, conversation_id=conv.id, branch_id=branch_id, seq=seq,
                      role=Role.ASSISTANT, parts=(TextPart(text="calling"),), created_at=at(seq))
        w.add_message(ask)
        calls = [ToolCall(id=new_id("call"), tenant_id=scope.tenant_id, conversation_id=conv.id, branch_id=branch_id, message_id=ask.id,
                          seq=seq, call_index=i, call_id=f"k{seq}_{i}", tool_name="Bash", status=st, created_at=at(seq))
                 for i, st in enumerate(statuses)]
        for c in calls:
            w.add_tool_call(c)
    return calls


def _history(store: SqlStore, scope: Scope, conv: Conversation, branch_id: str, rounds: int, tag: str) -> None:
    """``rounds`` steps of: a progress record (role system), every 3rd step a system
    chat message, every 5th a developer one, and an assistant message with two or
    three calls (failed pairs, pending, awaiting approval, succeeded)."""
    plans: list[list[ToolCallStatus]] = [[FAILED, FAILED], [FAILED, ToolCallStatus.SUCCEEDED], [PENDING, FAILED],
                                         [AWAITING, AWAITING, PENDING], [ToolCallStatus.SUCCEEDED, FAILED]]
    for i in range(rounds):
        _message(store, scope, conv, branch_id, f"{tag} progress {i}", Role.SYSTEM, MessageKind.PROGRESS)
        if i % 3 == 0:
            _message(store, scope, conv, branch_id, f"{tag} system {i}", Role.SYSTEM, MessageKind.CHAT)
        if i % 5 == 0:
            _message(store, scope, conv, branch_id, f"{tag} developer {i}", Role.DEVELOPER, MessageKind.CHAT)
        _ask(store, scope, conv, branch_id, plans[i % len(plans)])


def _long(store: SqlStore, scope: Scope) -> World:
    """root: system prompt, developer note, task, 30 steps; F forks root after step 20
    (seq 72) and adds 12 steps; G forks F after 6 of them and adds 8; H forks root at
    seq 30 (an older point) and adds 4."""
    conv = make_conversation(store, scope)
    root = conv.root_branch_id
    ids = {"sys": _message(store, scope, conv, root, "You are careful.", Role.SYSTEM, MessageKind.CHAT).id,
           "dev": _message(store, scope, conv, root, "Prefer small diffs.", Role.DEVELOPER, MessageKind.CHAT).id,
           "task": add_text(store, scope, conv, root, "make the tests pass").id}
    _history(store, scope, conv, root, 20, "root")
    f_at = store.lineage_totals(scope, conv.id, [LineageSegment(branch_id=root)])["max_seq"]
    f = fork(store, scope, conv, root, f_at, "F").id
    _history(store, scope, conv, root, 10, "root late")
    _history(store, scope, conv, f, 6, "F")
    g = fork(store, scope, conv, f, store.lineage_totals(scope, conv.id, store.lineage(scope, f))["max_seq"], "G").id
    _history(store, scope, conv, f, 6, "F late")
    _history(store, scope, conv, g, 8, "G")
    h = fork(store, scope, conv, root, 30, "H").id
    _history(store, scope, conv, h, 4, "H")
    return World(conv=conv, branches={"root": root, "F": f, "G": g, "H": h}, ids=ids)


@pytest.fixture
def long_world(store: SqlStore, scope_a: Scope, scope_b: Scope) -> World:
    w = _long(store, scope_a)
    _long(store, scope_a)
    _long(store, scope_b)
    return w


def _expected_head(store: SqlStore, scope: Scope, conv: str, segs: list[LineageSegment], before: int, last: int) -> list[str]:
    """The head read computed from every system/developer message of the lineage."""
    every = store.messages(scope, conv, segs, roles=[SYSTEM, DEVELOPER])
    picked: dict[str, int] = {}
    for role in (SYSTEM, DEVELOPER):
        mine = [m for m in every if m.role.value == role and m.kind.value == CHAT and m.seq < before]
        picked |= {m.id: m.seq for m in mine[:1] + (mine[-last:] if last else [])}
    return sorted(picked, key=picked.__getitem__)


def test_head_messages_are_the_first_and_newest_chat_messages(store: SqlStore, scope_a: Scope, long_world: World) -> None:
    conv = long_world.conv.id
    shapes = set()
    with store.reader() as conn:
        reads = LineageReads(store, conn, scope_a, conv)
        for name in long_world.branches:
            segs = reads.lineage(long_world.branches[name])
            shapes.add(tuple(s.max_seq is not None for s in segs))
            top = store.lineage_totals(scope_a, conv, segs)["max_seq"] + 1
            for before in (3, 40, 75, top):
                for last in (0, 1, 2, 5, 32):
                    got = reads.head_messages(segs, [SYSTEM, DEVELOPER], CHAT, before=before, last=last)
                    assert [m.id for m in got] == _expected_head(store, scope_a, conv, segs, before, last), (name, before, last)
            # below the window bound, the newest per role are the store's newest-last read
            for role in (SYSTEM, DEVELOPER):
                newest = store.messages(scope_a, conv, segs, roles=[role], kinds=[CHAT], last=4)
                first = store.messages(scope_a, conv, segs, roles=[role], kinds=[CHAT])[0]
                got = reads.head_messages(segs, [role], CHAT, before=top, last=4)
                assert got == sorted({m.id: m for m in [first, *newest]}.values(), key=lambda m: m.seq)
            every = reads.head_messages(segs, [SYSTEM, DEVELOPER], CHAT, before=top, last=10**6)
            assert every == store.messages(scope_a, conv, segs, roles=[SYSTEM, DEVELOPER], kinds=[CHAT])
            assert all(m.kind is MessageKind.CHAT for m in every) and len(every) >= 10
        root = reads.lineage(long_world.branches["root"])
        got = reads.head_messages(root, [SYSTEM, DEVELOPER], CHAT, before=10**9, last=2)
        assert [m.parts[0].text for m in got] == [  # type: ignore[union-attr]
            "You are careful.", "Prefer small diffs.", "root late developer 0", "root late developer 5", "root late system 6", "root late system 9",
        ]
    assert shapes == {(False,), (False, True), (False, True, True)}


def _expected_calls(store: SqlStore, scope: Scope, conv: str, segs: list[LineageSegment], limits: list[tuple[ToolCallStatus, int]]) -> list[str]:
    """The recovery read computed from every call of the lineage in those statuses."""
    picked = []
    for status, last in limits:
        mine = sorted(store.tool_calls(scope, conv, segs, statuses=[status]), key=lambda c: (c.seq, c.id))
        picked += mine[-last:] if last else []
    return [c.id for c in sorted(picked, key=lambda c: (c.seq, c.call_index))]


def test_newest_calls_per_status(store: SqlStore, scope_a: Scope, long_world: World) -> None:
    conv = long_world.conv.id
    with store.reader() as conn:
        reads = LineageReads(store, conn, scope_a, conv)
        for name in long_world.branches:
            segs = reads.lineage(long_world.branches[name])
            for failed, unresolved in ((0, 0), (1, 1), (2, 1), (3, 2), (7, 64), (10**6, 10**6)):
                limits = [(PENDING, unresolved), (AWAITING, unresolved), (FAILED, failed)]
                got = reads.newest_calls(segs, [(s.value, n) for s, n in limits])
                assert [c.id for c in got] == _expected_calls(store, scope_a, conv, segs, limits), (name, failed, unresolved)
            every = reads.newest_calls(segs, [(FAILED.value, 10**6), (PENDING.value, 10**6)])
            assert every == store.tool_calls(scope_a, conv, segs, statuses=[FAILED, PENDING])
            assert len([c for c in every if c.status is FAILED]) > 10
        # ties on seq: a limit that cuts through the newest failed pair (one message)
        # takes the call with the greater id
        root = reads.lineage(long_world.branches["root"])
        failed = store.tool_calls(scope_a, conv, root, statuses=[FAILED])
        pair_seq = max(c.seq for c in failed if sum(d.seq == c.seq for d in failed) == 2)
        newer = [c for c in failed if c.seq > pair_seq]
        got = reads.newest_calls(root, [(FAILED.value, len(newer) + 1)])
        pair = [c for c in failed if c.seq == pair_seq]
        assert len(pair) == 2 and got == sorted([max(pair, key=lambda c: c.id), *newer], key=lambda c: (c.seq, c.call_index))
        assert reads.newest_calls([], [(FAILED.value, 5)]) == reads.newest_calls(root, []) == []
