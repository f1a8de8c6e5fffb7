"""Conversations, capabilities, seq allocation, idempotent inserts, updates, deletion."""

from __future__ import annotations

import pytest

from contextledger.errors import NotFoundError
from contextledger.ids import new_id
from contextledger.records.enums import ResolutionState, Role, ToolCallStatus
from contextledger.records.models import Branch, Conversation, Message
from contextledger.records.parts import TextPart
from contextledger.store import schema as S
from contextledger.store.base import CAPABILITIES, Scope
from contextledger.store.sql import SqlStore

from .builders import add_call_and_result, add_text, at, fork, make_conversation

REQUIRED = {"transactions", "idempotent_content_keys", "lineage_queries", "blob_payloads", "multi_process_writers"}


def requires(store: SqlStore, capability: str) -> None:
    """Skip unless the store *declares* ``capability``."""
    if capability not in store.capabilities:
        pytest.skip(f"store does not declare {capability!r}")


def test_declared_capabilities(store: SqlStore) -> None:
    assert isinstance(store.capabilities, frozenset)
    assert store.capabilities == CAPABILITIES == REQUIRED


def test_create_and_get_conversation(store: SqlStore, scope_a: Scope) -> None:
    conv = make_conversation(store, scope_a, title="fix login", content_key="sha256:abc")
    got = store.get_conversation(scope_a, conv.id)
    assert got == conv
    assert store.find_conversation_by_content_key(scope_a, "sha256:abc") == conv
    assert store.find_conversation_by_content_key(scope_a, "sha256:other") is None
    [root] = store.branches(scope_a, conv.id)
    assert (root.id, root.parent_branch_id, root.fork_seq, root.name) == (conv.root_branch_id, None, None, "main")
    with pytest.raises(NotFoundError) as err:
        store.get_conversation(scope_a, "conv_missing")
    assert (err.value.kind, err.value.record_id) == ("conversation", "conv_missing")


def test_user_scope_filters_conversations(store: SqlStore) -> None:
    alice, bob = Scope(tenant_id="acme", user_id="alice"), Scope(tenant_id="acme", user_id="bob")
    ca = make_conversation(store, alice, title="a")
    cb = make_conversation(store, bob, title="b")
    assert [s.conversation.id for s in store.list_conversations(alice)] == [ca.id]
    assert [s.conversation.id for s in store.list_conversations(Scope(tenant_id="acme"))] == [ca.id, cb.id]
    with pytest.raises(NotFoundError):
        store.get_conversation(alice, cb.id)


def test_conversation_content_key_is_idempotent(store: SqlStore, scope_a: Scope) -> None:
    requires(store, "idempotent_content_keys")
    first = make_conversation(store, scope_a, content_key="sha256:same")
    again = Conversation(
        id=new_id("conv"), tenant_id="acme", root_branch_id="br_x", active_branch_id="br_x", content_key="sha256:same",
        created_at=at(5),
    )
    root = Branch(id="br_x", tenant_id="acme", conversation_id=again.id, created_at=at(5))
    with store.writer(scope_a) as w:
        assert w.add_conversation(again, root) is False
    assert [s.conversation.id for s in store.list_conversations(scope_a)] == [first.id]
    with pytest.raises(NotFoundError):
        store.get_branch(scope_a, "br_x")


def test_seq_allocation_is_consecutive(store: SqlStore, scope_a: Scope) -> None:
    conv = make_conversation(store, scope_a)
    with store.writer(scope_a) as w:
        assert w.allocate_seq(conv.id) == 1
        assert w.allocate_seq(conv.id, 3) == 2
        assert w.allocate_seq(conv.id) == 5
    with store.writer(scope_a) as w:
        assert w.allocate_seq(conv.id) == 6
        with pytest.raises(NotFoundError):
            w.allocate_seq("conv_missing")


def test_message_content_key_is_idempotent(store: SqlStore, scope_a: Scope) -> None:
    requires(store, "idempotent_content_keys")
    conv = make_conversation(store, scope_a)
    m = add_text(store, scope_a, conv, conv.root_branch_id, "hello", content_key="line:1")
    dup = m.model_copy(update={"id": new_id("msg"), "seq": 99})
    with store.writer(scope_a) as w:
        assert w.add_message(dup) is False
    assert [x.id for x in store.messages(scope_a, conv.id)] == [m.id]


def test_call_id_is_idempotent_for_calls_and_artifacts(store: SqlStore, scope_a: Scope) -> None:
    conv = make_conversation(store, scope_a)
    call, art, _ = add_call_and_result(store, scope_a, conv, conv.root_branch_id, "toolu_1", "ok")
    with store.writer(scope_a) as w:
        assert w.add_tool_call(call.model_copy(update={"id": new_id("call")})) is False
        assert w.add_artifact(art.model_copy(update={"id": new_id("art")})) is False
    assert [c.id for c in store.tool_calls(scope_a, conv.id)] == [call.id]
    assert [a.id for a in store.artifacts(scope_a, conv.id)] == [art.id]
    assert store.get_tool_call(scope_a, conv.id, "toolu_1") == call


def test_update_paths(store: SqlStore, scope_a: Scope) -> None:
    conv = make_conversation(store, scope_a)
    root = conv.root_branch_id
    call, _, old = add_call_and_result(store, scope_a, conv, root, "c1", "v1", subject_key="file:/a.py")
    _, _, new = add_call_and_result(store, scope_a, conv, root, "c2", "v2", subject_key="file:/a.py")
    with store.writer(scope_a) as w:
        w.update_tool_call(call.model_copy(update={"status": ToolCallStatus.FAILED}))
        w.update_memory(old.model_copy(update={"superseded_by": new.id, "resolution_state": ResolutionState.SUPERSEDED}))
        w.update_memory(new.model_copy(update={"supersedes": (old.id,)}))
    assert store.get_tool_call(scope_a, conv.id, "c1").status is ToolCallStatus.FAILED
    assert [c.call_id for c in store.tool_calls(scope_a, conv.id, statuses=[ToolCallStatus.FAILED])] == ["c1"]
    got_old, got_new = store.get_memory(scope_a, old.id), store.get_memory(scope_a, new.id)
    assert (got_old.superseded_by, got_old.resolution_state) == (new.id, ResolutionState.SUPERSEDED)
    assert got_new.supersedes == (old.id,)
    assert [m.id for m in store.memories(scope_a, conv.id, subject_keys=["file:/a.py"])] == [old.id, new.id]
    branch = fork(store, scope_a, conv, root, 2, "alt")
    with store.writer(scope_a) as w:
        w.update_conversation(conv.model_copy(update={"active_branch_id": branch.id, "title": "renamed"}))
    got = store.get_conversation(scope_a, conv.id)
    assert (got.active_branch_id, got.title) == (branch.id, "renamed")


def test_update_of_unknown_record_is_not_found(store: SqlStore, scope_a: Scope) -> None:
    conv = make_conversation(store, scope_a)
    call, _, mem = add_call_and_result(store, scope_a, conv, conv.root_branch_id, "c1", "v1")
    with pytest.raises(NotFoundError) as err, store.writer(scope_a) as w:
        w.update_memory(mem.model_copy(update={"id": "mem_missing"}))
    assert (err.value.kind, err.value.record_id) == ("memory", "mem_missing")
    with pytest.raises(NotFoundError), store.writer(scope_a) as w:
        w.update_tool_call(call.model_copy(update={"id": "call_missing"}))


def test_writes_into_unknown_conversation_are_denied(store: SqlStore, scope_a: Scope) -> None:
    m = Message(id="msg_x", tenant_id="acme", conversation_id="conv_nowhere", branch_id="br", seq=1, role=Role.USER,
                parts=(TextPart(text="x"),), created_at=at(1))
    with pytest.raises(NotFoundError) as err, store.writer(scope_a) as w:
        w.add_message(m)
    assert (err.value.kind, err.value.record_id) == ("conversation", "conv_nowhere")


def test_writer_rolls_back_everything_on_error(store: SqlStore, scope_a: Scope) -> None:
    requires(store, "transactions")
    conv = make_conversation(store, scope_a)
    with pytest.raises(RuntimeError, match="boom"), store.writer(scope_a) as w:
        seq = w.allocate_seq(conv.id)
        w.add_message(Message(id="msg_rb", tenant_id="acme", conversation_id=conv.id, branch_id=conv.root_branch_id,
                              seq=seq, role=Role.USER, parts=(TextPart(text="x"),), created_at=at(1)))
        raise RuntimeError("boom")
    assert store.messages(scope_a, conv.id) == []
    with store.writer(scope_a) as w:
        assert w.allocate_seq(conv.id) == 1


def test_list_conversations_counts(store: SqlStore, scope_a: Scope) -> None:
    c1 = make_conversation(store, scope_a, title="one", created=1)
    c2 = make_conversation(store, scope_a, title="two", created=2)
    add_text(store, scope_a, c1, c1.root_branch_id, "hi")
    add_call_and_result(store, scope_a, c1, c1.root_branch_id, "c1", "r1")
    add_call_and_result(store, scope_a, c1, c1.root_branch_id, "c2", "r2")
    summaries = store.list_conversations(scope_a)
    assert [(s.conversation.id, s.message_count, s.tool_call_count, s.artifact_count) for s in summaries] == [
        (c1.id, 5, 2, 2),
        (c2.id, 0, 0, 0),
    ]


def _row_counts(store: SqlStore, conversation_id: str) -> dict[str, int]:
    import sqlalchemy as sa

    out = {}
    with store.reader() as conn:
        for table in S.metadata.sorted_tables:
            col = table.c.id if table.name == "conversations" else table.c.get("conversation_id")
            if col is None:
                continue
            out[table.name] = int(conn.execute(sa.select(sa.func.count()).where(col == conversation_id)).scalar_one())
    return out


def test_delete_conversation_removes_every_row(store: SqlStore, scope_a: Scope) -> None:
    from .builders import make_assembly, make_decision

    keep = make_conversation(store, scope_a, title="keep")
    conv = make_conversation(store, scope_a, title="gone")
    add_text(store, scope_a, keep, keep.root_branch_id, "stay")
    add_text(store, scope_a, conv, conv.root_branch_id, "bye")
    _, art, _ = add_call_and_result(store, scope_a, conv, conv.root_branch_id, "c1", "r1")
    fork(store, scope_a, conv, conv.root_branch_id, 1, "alt")
    asm = make_assembly(scope_a, conv, conv.root_branch_id, created=9)
    with store.writer(scope_a) as w:
        w.add_assembly(asm, {"messages": []})
        w.add_decision(make_decision(scope_a, conv, assembly_id=asm.id, record_id=art.id, created=9))
        w.add_rule("rule_1", conv.id, None, 1, {"text": "never push"})
    before = _row_counts(store, conv.id)
    assert before["messages"] == 3 and before["assemblies"] == 1 and before["rules"] == 1 and before["branches"] == 2
    store.delete_conversation(scope_a, conv.id)
    assert set(_row_counts(store, conv.id).values()) == {0}
    assert _row_counts(store, keep.id)["messages"] == 1
    with pytest.raises(NotFoundError):
        store.get_conversation(scope_a, conv.id)
    with pytest.raises(NotFoundError):
        store.delete_conversation(scope_a, conv.id)
