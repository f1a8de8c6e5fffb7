"""Branches and lineage (seed 000 §4.10): a child inherits its parent's records up to the
fork point, without copying; nested forks tighten the limit; lineage-scoped reads."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from contextledger.errors import NotFoundError
from contextledger.records.enums import Role, ToolCallStatus
from contextledger.records.models import Conversation
from contextledger.store.base import LineageSegment, Scope
from contextledger.store.sql import SqlStore

from .builders import add_call_and_result, add_text, fork, make_conversation


@dataclass
class Tree:
    conv: Conversation
    root: str
    a: str
    b: str
    c: str
    ids: dict[str, str]  # label -> record id (messages by seq label, calls/artifacts/memories by call id)


@pytest.fixture
def tree(store: SqlStore, scope_a: Scope) -> Tree:
    """root: text(1), r1 ask(2)/result(3), text(4) … r2 ask(10)/result(11)
    A = fork(root @3): a1 ask(5)/result(6)
    B = fork(A @5) (nested, between a1's ask and its result): text(7)
    C = fork(root @1) (an older point, created after A and B): c1 ask(8)/result(9)
    """
    conv = make_conversation(store, scope_a)
    root = conv.root_branch_id
    ids: dict[str, str] = {}
    ids["m1"] = add_text(store, scope_a, conv, root, "task statement").id
    for call_id, branch in (("r1", root),):
        call, art, mem = add_call_and_result(store, scope_a, conv, branch, call_id, f"result {call_id}", subject_key="file:/a.py")
        ids |= {call_id: call.id, f"art_{call_id}": art.id, f"mem_{call_id}": mem.id}
    ids["m4"] = add_text(store, scope_a, conv, root, "root continues").id
    a = fork(store, scope_a, conv, root, 3, "A").id
    call, art, mem = add_call_and_result(store, scope_a, conv, a, "a1", "result a1", status=ToolCallStatus.FAILED, subject_key="file:/a.py")
    ids |= {"a1": call.id, "art_a1": art.id, "mem_a1": mem.id}
    b = fork(store, scope_a, conv, a, 5, "B").id
    ids["b7"] = add_text(store, scope_a, conv, b, "on B", role=Role.ASSISTANT).id
    c = fork(store, scope_a, conv, root, 1, "C").id
    call, art, mem = add_call_and_result(store, scope_a, conv, c, "c1", "result c1", subject_key="file:/a.py")
    ids |= {"c1": call.id, "art_c1": art.id, "mem_c1": mem.id}
    call, art, mem = add_call_and_result(store, scope_a, conv, root, "r2", "result r2", status=ToolCallStatus.PENDING)
    ids |= {"r2": call.id, "art_r2": art.id, "mem_r2": mem.id}
    return Tree(conv=conv, root=root, a=a, b=b, c=c, ids=ids)


def test_lineage_segments(store: SqlStore, scope_a: Scope, tree: Tree) -> None:
    assert store.lineage(scope_a, tree.root) == [LineageSegment(branch_id=tree.root, max_seq=None)]
    assert store.lineage(scope_a, tree.a) == [LineageSegment(branch_id=tree.a), LineageSegment(branch_id=tree.root, max_seq=3)]
    assert store.lineage(scope_a, tree.b) == [
        LineageSegment(branch_id=tree.b),
        LineageSegment(branch_id=tree.a, max_seq=5),
        LineageSegment(branch_id=tree.root, max_seq=3),
    ]
    assert store.lineage(scope_a, tree.c) == [LineageSegment(branch_id=tree.c), LineageSegment(branch_id=tree.root, max_seq=1)]
    with pytest.raises(NotFoundError):
        store.lineage(scope_a, "br_missing")


def test_nested_fork_limit_tightens(store: SqlStore, scope_a: Scope, tree: Tree) -> None:
    """A grandchild forked above its parent's own fork point still sees the grandparent
    only up to the parent's fork point."""
    d = fork(store, scope_a, tree.conv, tree.a, 6, "D").id
    e = fork(store, scope_a, tree.conv, d, 99, "E").id
    assert store.lineage(scope_a, e) == [
        LineageSegment(branch_id=e),
        LineageSegment(branch_id=d, max_seq=99),
        LineageSegment(branch_id=tree.a, max_seq=6),
        LineageSegment(branch_id=tree.root, max_seq=3),
    ]


def _seqs(store: SqlStore, scope: Scope, tree: Tree, branch: str, **kw: object) -> list[int]:
    segs = store.lineage(scope, branch)
    return [m.seq for m in store.messages(scope, tree.conv.id, segs, **kw)]  # type: ignore[arg-type]


def test_lineage_scoped_messages(store: SqlStore, scope_a: Scope, tree: Tree) -> None:
    assert _seqs(store, scope_a, tree, tree.root) == [1, 2, 3, 4, 10, 11]
    assert _seqs(store, scope_a, tree, tree.a) == [1, 2, 3, 5, 6]
    assert _seqs(store, scope_a, tree, tree.b) == [1, 2, 3, 5, 7]
    assert _seqs(store, scope_a, tree, tree.c) == [1, 8, 9]
    assert [m.seq for m in store.messages(scope_a, tree.conv.id)] == list(range(1, 12))
    # windows and filters
    assert _seqs(store, scope_a, tree, tree.b, last=2) == [5, 7]
    assert _seqs(store, scope_a, tree, tree.b, last=50) == [1, 2, 3, 5, 7]
    assert _seqs(store, scope_a, tree, tree.a, min_seq=3) == [3, 5, 6]
    assert _seqs(store, scope_a, tree, tree.b, roles=["assistant"]) == [2, 5, 7]
    assert _seqs(store, scope_a, tree, tree.b, roles=["tool"]) == [3]
    assert _seqs(store, scope_a, tree, tree.c, ids=[tree.ids["m1"], tree.ids["m4"]]) == [1]
    assert _seqs(store, scope_a, tree, tree.root, kinds=["summary"]) == []


def test_lineage_scoped_calls_artifacts_memories(store: SqlStore, scope_a: Scope, tree: Tree) -> None:
    conv = tree.conv.id
    expect = {
        tree.root: (["r1", "r2"], ["r1", "r2"]),
        tree.a: (["r1", "a1"], ["r1", "a1"]),
        tree.b: (["r1", "a1"], ["r1"]),  # B forked after a1's call (5) but before its result (6)
        tree.c: (["c1"], ["c1"]),
    }
    for branch, (calls, results) in expect.items():
        segs = store.lineage(scope_a, branch)
        assert [c.call_id for c in store.tool_calls(scope_a, conv, segs)] == calls
        assert [a.call_id for a in store.artifacts(scope_a, conv, segs)] == results
        assert [m.call_id for m in store.memories(scope_a, conv, segs)] == results
    segs_a = store.lineage(scope_a, tree.a)
    pending_or_failed = [ToolCallStatus.PENDING, ToolCallStatus.FAILED]
    assert [c.call_id for c in store.tool_calls(scope_a, conv, segs_a, statuses=pending_or_failed)] == ["a1"]
    assert [c.call_id for c in store.tool_calls(scope_a, conv, statuses=pending_or_failed)] == ["a1", "r2"]
    assert [a.id for a in store.artifacts(scope_a, conv, segs_a, call_ids=["a1", "c1", "r2"])] == [tree.ids["art_a1"]]
    assert [m.id for m in store.memories(scope_a, conv, segs_a, subject_keys=["file:/a.py"])] == [tree.ids["mem_r1"], tree.ids["mem_a1"]]
    assert [m.id for m in store.memories(scope_a, conv, segs_a, artifact_ids=[tree.ids["art_c1"], tree.ids["art_a1"]])] == [tree.ids["mem_a1"]]
    assert [m.id for m in store.memories(scope_a, conv, segs_a, last=1)] == [tree.ids["mem_a1"]]
    assert [m.id for m in store.memories(scope_a, conv, subject_keys=["file:/a.py"])] == [
        tree.ids["mem_r1"], tree.ids["mem_a1"], tree.ids["mem_c1"],
    ]


def test_lineage_totals(store: SqlStore, scope_a: Scope, tree: Tree) -> None:
    segs = store.lineage(scope_a, tree.b)
    # token_count of text messages = word count (builders); tool-call messages carry 0
    assert store.lineage_totals(scope_a, tree.conv.id, segs) == {
        "messages": 5, "message_tokens": 2 + 2, "min_seq": 1, "max_seq": 7, "artifacts": 1, "artifact_tokens": 2,
        "memories": 1,
    }
    segs = store.lineage(scope_a, tree.root)
    assert store.lineage_totals(scope_a, tree.conv.id, segs) == {
        "messages": 6, "message_tokens": 2 + 2, "min_seq": 1, "max_seq": 11, "artifacts": 2, "artifact_tokens": 4,
        "memories": 2,
    }
    assert store.lineage_totals(scope_a, tree.conv.id, []) == {
        "messages": 0, "message_tokens": 0, "min_seq": 0, "max_seq": 0, "artifacts": 0, "artifact_tokens": 0,
        "memories": 0,
    }


def test_branches_listed_oldest_first(store: SqlStore, scope_a: Scope, tree: Tree) -> None:
    branches = store.branches(scope_a, tree.conv.id)
    # created_at = at(fork_seq): root 0, C 1, A 3, B 5
    assert [b.id for b in branches] == [tree.root, tree.c, tree.a, tree.b]
    assert store.get_branch(scope_a, tree.b).parent_branch_id == tree.a
