"""Tenant isolation: every read and write is scoped inside the query (DESIGN "Tenant";
seed 000 §4.9 ownership).  Two tenants hold overlapping content — same titles, content
keys, call ids and file contents (so even the content-addressed blob is shared) — and no
read returns, and no write touches, the other tenant's records.  A missing scope is a
denial (ScopeError) for every public method."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa

from contextledger.errors import NotFoundError, ScopeError
from contextledger.handles import artifact_handle, memory_handle, resolve_artifact_ref, resolve_ref
from contextledger.ledger import Ledger
from contextledger.records.enums import Role, ToolCallStatus
from contextledger.records.models import (
    ContextAssembly,
    Conversation,
    Message,
    PolicyDecision,
    ToolArtifact,
    ToolCall,
    ToolMemory,
)
from contextledger.records.parts import TextPart
from contextledger.store import schema as S
from contextledger.store.base import LineageSegment, Scope
from contextledger.store.sql import SqlStore, Writer

from .builders import at, make_assembly, make_decision

BIG_FILE = ("def handler(request):\n    return redirect('/login')\n" * 120).encode()  # > 4096 bytes


@dataclass
class World:
    conv: Conversation
    alt_branch: str
    messages: list[Message]
    calls: list[ToolCall]
    artifacts: list[ToolArtifact]
    memories: list[ToolMemory]
    assembly: ContextAssembly
    decision: PolicyDecision


def _populate(store: SqlStore, scope: Scope) -> World:
    """The same content for whichever tenant ``scope`` names."""
    led = Ledger(store)
    rec = led.recorder(scope)
    conv = rec.start_conversation(title="fix login", system_prompt="You are a coding agent.")
    with store.writer(scope) as w:
        w.update_conversation(conv.model_copy(update={"content_key": None, "metadata": {"k": "v"}}))
    user = rec.record_message(conv.id, "user", "Login redirect fails; never push to main.", content_key="line:1")
    rec.record_assistant(conv.id, text="Reading.", tool_calls=[{"call_id": "toolu_1", "tool_name": "Read", "arguments": {"file_path": "/src/app.py"}}])
    rec.record_tool_result(conv.id, "toolu_1", BIG_FILE)
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "toolu_2", "tool_name": "Bash", "arguments": {"command": "pytest -q"}}])
    rec.record_tool_result(conv.id, "toolu_2", "1 failed, 12 passed", is_error=True)
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "toolu_3", "tool_name": "Bash", "arguments": {"command": "ls"}}])
    rec.record_skill_state(conv.id, loaded_skills=("git",), usable_tools=("Bash",))
    rec.record_checkpoint(conv.id, pending_call_ids=("toolu_3",))
    rec.start_model_run(conv.id, provider="openai", model="m")
    rec.add_participant(conv.id, "critic")
    alt = rec.fork(conv.id, user.id, name="alt", activate=False)
    asm = make_assembly(scope, conv, conv.root_branch_id, created=50)
    dec = make_decision(scope, conv, assembly_id=asm.id, record_id="shared_record", created=50)
    with store.writer(scope) as w:
        w.add_assembly(asm, {"messages": [{"role": "user", "content": "x"}]})
        w.add_decision(dec)
    return World(
        conv=store.get_conversation(scope, conv.id),
        alt_branch=alt.id,
        messages=store.messages(scope, conv.id),
        calls=store.tool_calls(scope, conv.id),
        artifacts=store.artifacts(scope, conv.id),
        memories=store.memories(scope, conv.id),
        assembly=asm,
        decision=dec,
    )


@pytest.fixture
def worlds(store: SqlStore, scope_a: Scope, scope_b: Scope) -> tuple[World, World]:
    return _populate(store, scope_a), _populate(store, scope_b)


def test_overlapping_content_is_really_overlapping(store: SqlStore, worlds: tuple[World, World]) -> None:
    a, b = worlds
    assert a.conv.title == b.conv.title == "fix login"
    assert [c.call_id for c in a.calls] == [c.call_id for c in b.calls] == ["toolu_1", "toolu_2", "toolu_3"]
    assert a.artifacts[0].blob_key == b.artifacts[0].blob_key is not None  # one shared blob
    assert [m.content_key for m in a.messages] == [m.content_key for m in b.messages]
    assert len(a.messages) == len(b.messages) == 7


def _all_tenants(records: list[Any]) -> set[str]:
    return {r.tenant_id for r in records}


def test_reads_never_cross_tenants(store: SqlStore, scope_a: Scope, scope_b: Scope, worlds: tuple[World, World]) -> None:
    a, b = worlds
    segs_b = store.lineage(scope_b, b.conv.root_branch_id)
    cb = b.conv.id
    # reads addressed at B's records from A's scope: denied as "not found" or empty
    for fn in (
        lambda: store.get_conversation(scope_a, cb),
        lambda: store.get_branch(scope_a, b.conv.root_branch_id),
        lambda: store.lineage(scope_a, b.alt_branch),
        lambda: store.get_tool_call(scope_a, cb, "toolu_1"),
        lambda: store.get_artifact(scope_a, b.artifacts[0].id),
        lambda: store.read_artifact_bytes(scope_a, b.artifacts[0].id),
        lambda: store.read_artifact_bytes(scope_a, b.artifacts[0]),
        lambda: store.get_memory(scope_a, b.memories[0].id),
        lambda: store.get_assembly(scope_a, b.assembly.id),
    ):
        with pytest.raises(NotFoundError):
            fn()
    empties: dict[str, Callable[[], Any]] = {
        "branches": lambda: store.branches(scope_a, cb),
        "participants": lambda: store.participants(scope_a, cb),
        "messages": lambda: store.messages(scope_a, cb),
        "messages(segments)": lambda: store.messages(scope_a, cb, segs_b, last=3),
        "tool_calls": lambda: store.tool_calls(scope_a, cb, segs_b, statuses=list(ToolCallStatus)),
        "artifacts": lambda: store.artifacts(scope_a, cb, call_ids=["toolu_1"]),
        "memories": lambda: store.memories(scope_a, cb, subject_keys=[m.subject_key or "" for m in b.memories]),
        "skill_states": lambda: store.skill_states(scope_a, cb),
        "checkpoints": lambda: store.checkpoints(scope_a, cb),
        "rule_bodies": lambda: store.rule_bodies(scope_a, cb),
        "model_runs": lambda: store.model_runs(scope_a, cb),
        "decisions": lambda: store.decisions(scope_a, assembly_id=b.assembly.id),
        "decisions(conversation)": lambda: store.decisions(scope_a, conversation_id=cb),
    }
    for name, fn in empties.items():
        assert fn() == [], name
    assert store.latest_assembly(scope_a, cb, b.conv.root_branch_id, None) is None
    assert store.recent_assemblies(scope_a, cb, None) == []
    assert store.lineage_totals(scope_a, cb, segs_b) == {
        "messages": 0, "message_tokens": 0, "min_seq": 0, "max_seq": 0, "artifacts": 0, "artifact_tokens": 0, "memories": 0,
    }
    assert store.outside_lineage_counts(scope_a, cb, segs_b) == {"message": 0, "artifact": 0, "memory": 0}
    # A's own reads return exactly A's records, never B's twins
    assert [s.conversation.id for s in store.list_conversations(scope_a)] == [a.conv.id]
    [summary] = store.list_conversations(scope_a)
    assert (summary.message_count, summary.tool_call_count, summary.artifact_count) == (7, 3, 2)
    assert store.find_conversation_by_content_key(scope_a, "nothing") is None
    ca = a.conv.id
    assert _all_tenants(store.messages(scope_a, ca)) == {"acme"}
    assert [m.id for m in store.messages(scope_a, ca)] == [m.id for m in a.messages]
    assert [c.id for c in store.tool_calls(scope_a, ca)] == [c.id for c in a.calls]
    assert [x.id for x in store.artifacts(scope_a, ca, call_ids=["toolu_1", "toolu_2"])] == [x.id for x in a.artifacts]
    assert [m.id for m in store.memories(scope_a, ca)] == [m.id for m in a.memories]
    assert store.get_tool_call(scope_a, ca, "toolu_1").id == a.calls[0].id
    assert [d.id for d in store.decisions(scope_a, record_id="shared_record")] == [a.decision.id]
    assert [d.id for d in store.decisions(scope_a)] == [a.decision.id]
    assert store.latest_assembly(scope_a, ca, a.conv.root_branch_id, None) == a.assembly
    assert store.recent_assemblies(scope_a, ca, None) == [a.assembly]
    for reader in (store.branches, store.participants, store.skill_states, store.checkpoints, store.model_runs):
        records = reader(scope_a, ca)
        assert len(records) >= 1 and _all_tenants(records) == {"acme"}
    assert len(store.rule_bodies(scope_a, ca)) == len(store.rule_bodies(scope_b, cb)) >= 1
    assert store.read_artifact_bytes(scope_a, a.artifacts[0].id) == BIG_FILE


def test_handles_never_resolve_across_tenants(store: SqlStore, scope_a: Scope, scope_b: Scope, worlds: tuple[World, World]) -> None:
    """A handle (``m3`` / ``a3``) is a ``seq`` within one conversation; both tenants hold
    records at the same ``seq``s, and each scope resolves only to its own."""
    a, b = worlds
    ca, cb = a.conv.id, b.conv.id
    records = [("memory", a.memories[0], b.memories[0]), ("artifact", a.artifacts[0], b.artifacts[0])]
    for kind, rec_a, rec_b in records:
        assert rec_a.seq == rec_b.seq and rec_a.id != rec_b.id  # the same handle in both tenants
        # B's conversation named from A's scope: no record, whichever the seq
        with pytest.raises(NotFoundError):
            store.id_at_seq(scope_a, cb, kind, rec_b.seq)
        # each scope resolves the shared handle to its own record only
        assert store.id_at_seq(scope_a, ca, kind, rec_a.seq) == rec_a.id
        assert store.id_at_seq(scope_b, cb, kind, rec_b.seq) == rec_b.id
        with store.reader() as conn:
            assert store.id_at_seq(scope_b, cb, kind, rec_b.seq, conn=conn) == rec_b.id
            with pytest.raises(NotFoundError):
                store.id_at_seq(scope_b, ca, kind, rec_a.seq, conn=conn)
    mem_b, art_b = b.memories[0], b.artifacts[0]
    for ref in (memory_handle(mem_b), artifact_handle(art_b)):
        with pytest.raises(NotFoundError):
            resolve_ref(store, scope_a, cb, ref)
        with pytest.raises(NotFoundError):
            resolve_artifact_ref(store, scope_a, cb, ref)
    assert resolve_ref(store, scope_a, ca, memory_handle(a.memories[0])) == a.memories[0].id
    assert resolve_artifact_ref(store, scope_b, cb, memory_handle(mem_b)) == mem_b.source_artifact_ids[0]


def _snapshot(store: SqlStore, tenant: str) -> dict[str, list[Any]]:
    out = {}
    with store.reader() as conn:
        for table in S.metadata.sorted_tables:
            if "tenant_id" in table.c:
                rows = conn.execute(sa.select(table).where(table.c.tenant_id == tenant).order_by(*table.primary_key.columns)).all()
                out[table.name] = [tuple(r) for r in rows]
    return out


def test_writes_never_touch_another_tenant(store: SqlStore, scope_a: Scope, scope_b: Scope, worlds: tuple[World, World]) -> None:
    _, b = worlds
    before = _snapshot(store, "globex")
    call_b, art_b, mem_b = b.calls[2], b.artifacts[0], b.memories[0]
    relabel = {"tenant_id": "acme"}
    # B's records written through A's writer: the tenant check denies them
    denied: tuple[Callable[[Writer], object], ...] = (
        lambda w: w.update_tool_call(call_b.model_copy(update={"status": ToolCallStatus.ABANDONED})),
        lambda w: w.update_memory(mem_b.model_copy(update={"summary": "overwritten"})),
        lambda w: w.update_artifact(art_b),
        lambda w: w.update_conversation(b.conv.model_copy(update={"title": "hijacked"})),
        lambda w: w.add_message(b.messages[0].model_copy(update={"id": "msg_new"})),
        lambda w: w.add_decision(b.decision.model_copy(update={"id": "dec_new"})),
    )
    for write in denied:
        with pytest.raises(ScopeError), store.writer(scope_a) as w:
            write(w)
    # the same ids relabelled as A's: the query's tenant filter finds nothing to touch
    not_found: tuple[Callable[[Writer], object], ...] = (
        lambda w: w.update_tool_call(call_b.model_copy(update={"status": ToolCallStatus.ABANDONED, **relabel})),
        lambda w: w.update_memory(mem_b.model_copy(update={"summary": "overwritten", **relabel})),
        lambda w: w.update_artifact(art_b.model_copy(update=relabel)),
        lambda w: w.update_conversation(b.conv.model_copy(update={"title": "hijacked", **relabel})),
        lambda w: w.allocate_seq(b.conv.id),
        lambda w: w.add_message(b.messages[0].model_copy(update={"id": "msg_new", **relabel})),
        lambda w: w.add_tool_call(call_b.model_copy(update={"id": "call_new", **relabel})),
        lambda w: w.add_rule("rule_new", b.conv.id, None, 1, {"text": "x"}),
        lambda w: w.add_assembly(b.assembly.model_copy(update={"id": "asm_new", **relabel}), None),
    )
    for write in not_found:
        with pytest.raises(NotFoundError), store.writer(scope_a) as w:
            write(w)
    with pytest.raises(NotFoundError):
        store.delete_conversation(scope_a, b.conv.id)
    # A deleting its own twin conversation leaves B (and the shared blob) intact
    [summary] = store.list_conversations(scope_a)
    store.delete_conversation(scope_a, summary.conversation.id)
    assert store.list_conversations(scope_a) == []
    assert _snapshot(store, "globex") == before
    assert store.read_artifact_bytes(scope_b, art_b.id) == BIG_FILE


def test_same_keys_in_two_tenants_are_independent(store: SqlStore, scope_a: Scope, scope_b: Scope, worlds: tuple[World, World]) -> None:
    a, b = worlds
    rec_a, rec_b = Ledger(store).recorder(scope_a), Ledger(store).recorder(scope_b)
    # idempotent re-recording is per tenant: the twin call id in B does not block A
    msg_a, calls_a = rec_a.record_assistant(a.conv.id, tool_calls=[{"call_id": "toolu_1", "tool_name": "Read"}])
    assert [c.id for c in calls_a] == [a.calls[0].id] and msg_a.tenant_id == "acme"
    again = rec_a.record_message(a.conv.id, "user", "different text", content_key="line:1")
    assert again.id == a.messages[1].id
    m = Message(id="msg_fresh", tenant_id="globex", conversation_id=b.conv.id, branch_id=b.conv.root_branch_id, seq=100,
                role=Role.USER, parts=(TextPart(text="x"),), content_key="line:1", created_at=at(100))
    with store.writer(scope_b) as w:
        assert w.add_message(m) is False  # B's own line:1 exists
    assert rec_b.record_tool_result(b.conv.id, "toolu_3", "ok")[1].tenant_id == "globex"
    assert store.get_tool_call(scope_a, a.conv.id, "toolu_3").status is ToolCallStatus.PENDING


# -- missing scope ---------------------------------------------------------------------

SEG = [LineageSegment(branch_id="br")]
SCOPED_CALLS: dict[str, Callable[[SqlStore, Any], Any]] = {
    "writer": lambda s, sc: s.writer(sc).__enter__(),
    "get_conversation": lambda s, sc: s.get_conversation(sc, "c"),
    "find_conversation_by_content_key": lambda s, sc: s.find_conversation_by_content_key(sc, "k"),
    "list_conversations": lambda s, sc: s.list_conversations(sc),
    "delete_conversation": lambda s, sc: s.delete_conversation(sc, "c"),
    "branches": lambda s, sc: s.branches(sc, "c"),
    "get_branch": lambda s, sc: s.get_branch(sc, "b"),
    "lineage": lambda s, sc: s.lineage(sc, "b"),
    "participants": lambda s, sc: s.participants(sc, "c"),
    "messages": lambda s, sc: s.messages(sc, "c", SEG),
    "lineage_totals": lambda s, sc: s.lineage_totals(sc, "c", SEG),
    "outside_lineage_counts": lambda s, sc: s.outside_lineage_counts(sc, "c", SEG),
    "term_matches": lambda s, sc: s.term_matches(sc, "c", ["x"]),
    "recent_subject_memories": lambda s, sc: s.recent_subject_memories(sc, "c", SEG, "file:"),
    "tool_calls": lambda s, sc: s.tool_calls(sc, "c"),
    "get_tool_call": lambda s, sc: s.get_tool_call(sc, "c", "x"),
    "artifacts": lambda s, sc: s.artifacts(sc, "c"),
    "get_artifact": lambda s, sc: s.get_artifact(sc, "a"),
    "read_artifact_bytes": lambda s, sc: s.read_artifact_bytes(sc, "a"),
    "memories": lambda s, sc: s.memories(sc, "c"),
    "get_memory": lambda s, sc: s.get_memory(sc, "m"),
    "id_at_seq": lambda s, sc: s.id_at_seq(sc, "c", "memory", 1),
    "skill_states": lambda s, sc: s.skill_states(sc, "c"),
    "checkpoints": lambda s, sc: s.checkpoints(sc, "c"),
    "rule_bodies": lambda s, sc: s.rule_bodies(sc, "c"),
    "model_runs": lambda s, sc: s.model_runs(sc, "c"),
    "get_assembly": lambda s, sc: s.get_assembly(sc, "x"),
    "latest_assembly": lambda s, sc: s.latest_assembly(sc, "c", "b", None),
    "recent_assemblies": lambda s, sc: s.recent_assemblies(sc, "c", None),
    "decisions": lambda s, sc: s.decisions(sc),
}


def test_every_scoped_method_is_covered() -> None:
    """A new public method taking a scope must be added to the denial table."""
    scoped = {
        name
        for name, fn in inspect.getmembers(SqlStore, inspect.isfunction)
        if not name.startswith("_") and "scope" in inspect.signature(fn).parameters
    }
    assert scoped == set(SCOPED_CALLS)


@pytest.mark.parametrize("missing", [None, Scope(tenant_id="")], ids=["none", "empty-tenant"])
def test_missing_scope_is_denied(store: SqlStore, missing: Scope | None) -> None:
    for name, call in SCOPED_CALLS.items():
        with pytest.raises(ScopeError):
            call(store, missing)
        assert name
    with store.engine.connect() as conn, pytest.raises(ScopeError):
        Writer(store, conn, missing)
