"""Stage 1a: collect a *bounded* candidate set for one request (seed 000 §8 R8).

Reads, in a single read transaction and a fixed number of indexed queries (never one
query per record):

* the lineage segments of the active branch (seed 000 §4.10);
* the newest ``recent_window`` messages of the lineage, plus every system message and
  the first user message (the task statement) wherever they are;
* the tool calls, artifacts and memories of those messages;
* unresolved and failed tool calls anywhere in the lineage (recovery, seed 000 §4.6);
* the newest ``max_candidates`` memories of the lineage (older evidence as retrieval);
* pinned rules, the latest skill state and checkpoint;
* counts of what lies outside: other branches (``out_of_lineage``) and the lineage
  history older than the window.

The candidate set size is bounded by the policy, whatever the history length.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from contextledger.errors import NotFoundError
from contextledger.records.enums import Role, ToolCallStatus
from contextledger.records.models import (
    ContinuationCheckpoint,
    Conversation,
    Message,
    Participant,
    SkillState,
    ToolArtifact,
    ToolCall,
    ToolMemory,
)
from contextledger.store import schema as S
from contextledger.store.base import LineageSegment, Scope
from contextledger.store.sql import SqlStore

__all__ = ["CandidateSet", "collect_candidates"]


@dataclass(kw_only=True)
class CandidateSet:
    """Everything one assembly may consider, plus counts of what it may not."""

    conversation: Conversation
    branch_id: str
    segments: list[LineageSegment]
    messages: list[Message]
    calls: list[ToolCall]
    artifacts: dict[str, ToolArtifact]
    memories: list[ToolMemory]
    rules: list[dict[str, Any]]
    participants: list[Participant]
    skill_states: list[SkillState]
    checkpoints: list[ContinuationCheckpoint]
    lineage_message_count: int
    lineage_min_seq: int
    out_of_lineage: dict[str, int] = field(default_factory=dict)
    window_start_seq: int = 0
    compaction: Message | None = None
    totals: dict[str, int] = field(default_factory=dict)

    @property
    def calls_by_message(self) -> dict[str, list[ToolCall]]:
        """Tool calls grouped by the assistant message that requested them."""
        out: dict[str, list[ToolCall]] = {}
        for c in self.calls:
            out.setdefault(c.message_id, []).append(c)
        return out


def _count_outside(conn: sa.Connection, scope: Scope, conversation_id: str, segments: list[LineageSegment]) -> dict[str, int]:
    from contextledger.store.sql import _segments_clause

    out: dict[str, int] = {}
    for name, table in (("message", S.messages), ("artifact", S.tool_artifacts), ("memory", S.tool_memories)):
        n = conn.execute(
            sa.select(sa.func.count()).where(
                table.c.tenant_id == scope.tenant_id,
                table.c.conversation_id == conversation_id,
                sa.not_(_segments_clause(table, segments)),
            )
        ).scalar_one()
        out[name] = int(n)
    return out


def collect_candidates(
    store: SqlStore,
    scope: Scope,
    conversation_id: str,
    branch_id: str | None,
    *,
    recent_window: int,
    max_candidates: int,
) -> CandidateSet:
    """Collect the bounded candidate set (see module docstring).

    Raises:
        NotFoundError: unknown conversation or branch in scope.
    """
    with store.reader() as conn:
        conv = store.get_conversation(scope, conversation_id, conn)
        branch = branch_id or conv.active_branch_id
        if store.get_branch(scope, branch, conn).conversation_id != conversation_id:
            raise NotFoundError(f"branch of conversation {conversation_id}", branch)
        segments = store.lineage(scope, branch, conn)
        totals = store.lineage_totals(scope, conversation_id, segments, conn)
        window = store.messages(scope, conversation_id, segments, last=recent_window, conn=conn)
        window_start = window[0].seq if window else 0
        head: list[Message] = []
        if window and window_start > totals["min_seq"]:
            head = store.messages(scope, conversation_id, segments, roles=[Role.SYSTEM.value, Role.DEVELOPER.value], conn=conn)
            first_user = _first_user(store, scope, conversation_id, segments, conn)
            head = [m for m in head if m.seq < window_start] + ([first_user] if first_user and first_user.seq < window_start else [])
        in_window_ids = [m.id for m in window]
        calls = store.tool_calls(scope, conversation_id, segments, message_ids=in_window_ids, conn=conn) if in_window_ids else []
        recovery = store.tool_calls(
            scope, conversation_id, segments,
            statuses=[ToolCallStatus.PENDING, ToolCallStatus.AWAITING_APPROVAL, ToolCallStatus.FAILED],
            conn=conn,
        )
        known = {c.id for c in calls}
        extra_calls = [c for c in recovery if c.id not in known]
        # bring the whole exchange of an out-of-window recovery call into view
        extra_msg_ids = sorted({c.message_id for c in extra_calls} | {c.result_message_id for c in extra_calls if c.result_message_id})
        extra_msgs = store.messages(scope, conversation_id, segments, ids=extra_msg_ids, conn=conn) if extra_msg_ids else []
        if extra_msgs:
            siblings = store.tool_calls(scope, conversation_id, segments, message_ids=[m.id for m in extra_msgs], conn=conn)
            extra_calls = [c for c in siblings if c.id not in known]
            result_ids = sorted({c.result_message_id for c in extra_calls if c.result_message_id} - set(extra_msg_ids))
            if result_ids:
                extra_msgs += store.messages(scope, conversation_id, segments, ids=result_ids, conn=conn)
        all_calls = sorted(calls + extra_calls, key=lambda c: (c.seq, c.call_index))
        call_ids = [c.call_id for c in all_calls]
        artifacts = {a.call_id: a for a in store.artifacts(scope, conversation_id, segments, call_ids=call_ids, conn=conn)} if call_ids else {}
        memories = store.memories(scope, conversation_id, segments, last=max_candidates, conn=conn)
        have = {m.id for m in memories}
        art_ids = {a.id for a in artifacts.values()}
        need = sorted(art_ids - {a for m in memories for a in m.source_artifact_ids})
        if need:
            memories += [m for m in store.memories(scope, conversation_id, segments, artifact_ids=need, conn=conn) if m.id not in have]
        memories.sort(key=lambda m: (m.seq, m.id))
        messages = {m.id: m for m in head + window + extra_msgs}
        rules = store.rule_bodies(scope, conversation_id, conn)
        participants = store.participants(scope, conversation_id, conn)
        skills = store.skill_states(scope, conversation_id, segments, conn)
        checkpoints = store.checkpoints(scope, conversation_id, segments, conn)
        outside = _count_outside(conn, scope, conversation_id, segments)
        compactions = store.messages(scope, conversation_id, segments, kinds=["compaction"], last=8, conn=conn)
        ours = [m for m in compactions if m.metadata.get("handoff_format") and isinstance(m.metadata.get("covers"), dict)]
        compaction = ours[-1] if ours else None
    return CandidateSet(
        conversation=conv,
        branch_id=branch,
        segments=segments,
        messages=sorted(messages.values(), key=lambda m: m.seq),
        calls=all_calls,
        artifacts=artifacts,
        memories=memories,
        rules=rules,
        participants=participants,
        skill_states=skills[-20:],
        checkpoints=checkpoints[-20:],
        lineage_message_count=totals["messages"],
        lineage_min_seq=totals["min_seq"],
        out_of_lineage=outside,
        window_start_seq=window_start,
        compaction=compaction,
        totals=totals,
    )


def _first_user(store: SqlStore, scope: Scope, conversation_id: str, segments: list[LineageSegment], conn: sa.Connection) -> Message | None:
    from contextledger.store.sql import _segments_clause

    t = S.messages
    row = conn.execute(
        sa.select(t.c.body)
        .where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id, _segments_clause(t, segments))
        .where(t.c.role == Role.USER.value, t.c.kind == "chat")
        .order_by(t.c.seq)
        .limit(1)
    ).first()
    return Message.model_validate(row.body) if row else None
