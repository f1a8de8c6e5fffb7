"""Record builders for the conformance suite: plain records with fixed timestamps, written
through the public ``Writer`` API so every test states exactly what the store holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from contextledger.ids import new_id
from contextledger.records.enums import PolicyFamily, Role, ToolCallStatus
from contextledger.records.models import (
    Branch,
    ContextAssembly,
    Conversation,
    Message,
    PolicyDecision,
    ToolArtifact,
    ToolCall,
    ToolMemory,
)
from contextledger.records.parts import TextPart, ToolCallPart, ToolResultPart
from contextledger.store.base import Scope
from contextledger.store.blobs import sha256_key
from contextledger.store.sql import SqlStore

T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def at(seconds: int) -> datetime:
    """A fixed timestamp ``seconds`` after :data:`T0`."""
    return T0 + timedelta(seconds=seconds)


def make_conversation(
    store: SqlStore, scope: Scope, *, title: str = "t", content_key: str | None = None, created: int = 0
) -> Conversation:
    """Insert a conversation with its root branch ``main`` and return it."""
    conv_id = new_id("conv")
    root = Branch(id=new_id("br"), tenant_id=scope.tenant_id, conversation_id=conv_id, name="main", created_at=at(created))
    conv = Conversation(
        id=conv_id,
        tenant_id=scope.tenant_id,
        user_id=scope.user_id,
        title=title,
        root_branch_id=root.id,
        active_branch_id=root.id,
        content_key=content_key,
        created_at=at(created),
    )
    with store.writer(scope) as w:
        assert w.add_conversation(conv, root) is True
    return conv


def fork(store: SqlStore, scope: Scope, conv: Conversation, parent_branch_id: str, fork_seq: int, name: str) -> Branch:
    """Insert a branch forked from ``parent_branch_id`` at ``fork_seq`` (no copying)."""
    b = Branch(
        id=new_id("br"),
        tenant_id=scope.tenant_id,
        conversation_id=conv.id,
        parent_branch_id=parent_branch_id,
        fork_seq=fork_seq,
        name=name,
        created_at=at(fork_seq),
    )
    with store.writer(scope) as w:
        w.add_branch(b)
    return b


def add_text(
    store: SqlStore, scope: Scope, conv: Conversation, branch_id: str, text: str, *, role: Role = Role.USER,
    content_key: str | None = None,
) -> Message:
    """Append one text message (seq allocated from the conversation) and return it."""
    with store.writer(scope) as w:
        seq = w.allocate_seq(conv.id)
        m = Message(
            id=new_id("msg"),
            tenant_id=scope.tenant_id,
            conversation_id=conv.id,
            branch_id=branch_id,
            seq=seq,
            role=role,
            parts=(TextPart(text=text),),
            content_key=content_key,
            token_count=len(text.split()),
            created_at=at(seq),
        )
        assert w.add_message(m) is True
    return m


def add_call_and_result(
    store: SqlStore, scope: Scope, conv: Conversation, branch_id: str, call_id: str, result: str,
    *, status: ToolCallStatus = ToolCallStatus.SUCCEEDED, subject_key: str | None = None,
) -> tuple[ToolCall, ToolArtifact, ToolMemory]:
    """Record an assistant tool call, its result message, artifact (inline) and memory."""
    raw = result.encode("utf-8")
    with store.writer(scope) as w:
        seq = w.allocate_seq(conv.id)
        ask = Message(
            id=new_id("msg"), tenant_id=scope.tenant_id, conversation_id=conv.id, branch_id=branch_id, seq=seq,
            role=Role.ASSISTANT, parts=(ToolCallPart(call_id=call_id, tool_name="Read", arguments_json="{}"),),
            created_at=at(seq),
        )
        w.add_message(ask)
        call = ToolCall(
            id=new_id("call"), tenant_id=scope.tenant_id, conversation_id=conv.id, branch_id=branch_id,
            message_id=ask.id, seq=seq, call_id=call_id, tool_name="Read", created_at=at(seq),
        )
        assert w.add_tool_call(call) is True
        rseq = w.allocate_seq(conv.id)
        art_id = new_id("art")
        res = Message(
            id=new_id("msg"), tenant_id=scope.tenant_id, conversation_id=conv.id, branch_id=branch_id, seq=rseq,
            role=Role.TOOL, parent_message_id=ask.id,
            parts=(ToolResultPart(call_id=call_id, artifact_id=art_id, text=result),), created_at=at(rseq),
        )
        w.add_message(res)
        art = ToolArtifact(
            id=art_id, tenant_id=scope.tenant_id, conversation_id=conv.id, branch_id=branch_id, tool_call_id=call.id,
            call_id=call_id, tool_name="Read", status=status, inline_text=result, sha256=sha256_key(raw),
            size_bytes=len(raw), result_tokens=len(result.split()), message_id=res.id, seq=rseq,
            observed_at=at(rseq), created_at=at(rseq),
        )
        assert w.add_artifact(art) is True
        call = call.model_copy(update={"status": status, "result_message_id": res.id})
        w.update_tool_call(call)
        mem = ToolMemory(
            id=new_id("mem"), tenant_id=scope.tenant_id, conversation_id=conv.id, branch_id=branch_id, seq=rseq,
            source_artifact_ids=(art.id,), source_tool="Read", call_id=call_id, summary=result[:40],
            subject_key=subject_key, observed_at=at(rseq), created_at=at(rseq),
        )
        w.add_memory(mem)
    return call, art, mem


def make_assembly(scope: Scope, conv: Conversation, branch_id: str, *, created: int, participant_id: str | None = None) -> ContextAssembly:
    """A context assembly record with distinctive counts."""
    return ContextAssembly(
        id=new_id("asm"), tenant_id=scope.tenant_id, conversation_id=conv.id, branch_id=branch_id,
        participant_id=participant_id, provider="openai-chat", model="m", budget_tokens=4000, now=at(created),
        policy_version="default@1", assembler_version="v-test", legacy_message_count=12, assembled_message_count=7,
        replay_tokens=900, assembled_tokens=400, token_delta=-500, raw_artifact_count=3, selected_memory_count=2,
        rehydrated_count=1, selected_refs=("msg_a", "mem_b"), omitted={"budget": 2, "out_of_lineage_branch": 1},
        branch_excluded=1, timings_ms={"query": 1.5}, created_at=at(created),
    )


def make_decision(scope: Scope, conv: Conversation, *, assembly_id: str | None, record_id: str | None, created: int) -> PolicyDecision:
    """A policy decision record."""
    return PolicyDecision(
        id=new_id("dec"), tenant_id=scope.tenant_id, conversation_id=conv.id, assembly_id=assembly_id,
        family=PolicyFamily.FRESHNESS, decision="stale_marker", record_id=record_id, reason="stale",
        detail={"age_s": 7200}, created_at=at(created),
    )
