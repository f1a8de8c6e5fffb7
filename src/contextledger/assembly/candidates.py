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
  history older than the window, read from the per-branch counters
  (``store/counters.py``), not counted over the history.

The candidate set size is bounded by the policy, whatever the history length, and so
is the work: every query is an index range bounded by the window, a filter on a
selective column (role, kind, status, ids), or a counters row (docs/query-plans.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

import sqlalchemy as sa

from contextledger.errors import NotFoundError
from contextledger.memory.terms import query_terms
from contextledger.records.enums import MessageKind, Role, ToolCallStatus
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
from contextledger.store.counters import in_lineage
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
            # moderator instructions steer every later turn (seed 000 §9.3 debate): the
            # newest few are candidates wherever they are (ix_messages_kind)
            head += store.messages(scope, conversation_id, segments, kinds=[MessageKind.MODERATOR.value], last=_MODERATOR_WINDOW, conn=conn)
            head = [m for m in head if m.seq < window_start] + ([first_user] if first_user and first_user.seq < window_start else [])
        in_window_ids = [m.id for m in window]
        # by message id / call id the rows are found through their own indexes; they lie on
        # the branch of their message or call, so the lineage holds them (checked in Python)
        calls = _in_lineage(store.tool_calls(scope, conversation_id, message_ids=in_window_ids, conn=conn), segments) if in_window_ids else []
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
            siblings = _in_lineage(store.tool_calls(scope, conversation_id, message_ids=[m.id for m in extra_msgs], conn=conn), segments)
            extra_calls = [c for c in siblings if c.id not in known]
            result_ids = sorted({c.result_message_id for c in extra_calls if c.result_message_id} - set(extra_msg_ids))
            if result_ids:
                extra_msgs += store.messages(scope, conversation_id, segments, ids=result_ids, conn=conn)
        all_calls = sorted(calls + extra_calls, key=lambda c: (c.seq, c.call_index))
        call_ids = [c.call_id for c in all_calls]
        artifacts = {a.call_id: a for a in _in_lineage(store.artifacts(scope, conversation_id, call_ids=call_ids, conn=conn), segments)} if call_ids else {}
        memories = store.memories(scope, conversation_id, segments, last=max_candidates, conn=conn)
        have = {m.id for m in memories}
        art_ids = {a.id for a in artifacts.values()}
        need = sorted(art_ids - {a for m in memories for a in m.source_artifact_ids})
        if need:
            memories += [m for m in store.memories(scope, conversation_id, segments, artifact_ids=need, conn=conn) if m.id not in have]
        # cold → hot (seed 001 §3): older memories that share content terms with the
        # current request join the candidates, with their exchanges (so their raw
        # evidence can be rehydrated); bounded by ``RETRIEVED`` whatever the history
        recalled = _recall(store, scope, conversation_id, segments, window, {m.id for m in memories}, conn)
        if recalled:
            memories += recalled
            art_by_id = sorted({a for m in recalled for a in m.source_artifact_ids})
            old_arts = [a for a in _in_lineage(store.artifacts(scope, conversation_id, ids=art_by_id, conn=conn), segments) if a.call_id not in artifacts]
            old_calls = _in_lineage(store.tool_calls(scope, conversation_id, call_ids=[a.call_id for a in old_arts], conn=conn), segments) if old_arts else []
            have_calls = {c.id for c in all_calls}
            old_calls = [c for c in old_calls if c.id not in have_calls]
            msg_ids = sorted({c.message_id for c in old_calls} | {c.result_message_id for c in old_calls if c.result_message_id} - {m.id for m in window + extra_msgs + head})
            if msg_ids:
                extra_msgs += store.messages(scope, conversation_id, segments, ids=msg_ids, conn=conn)
                all_calls = sorted(all_calls + old_calls, key=lambda c: (c.seq, c.call_index))
                artifacts.update({a.call_id: a for a in old_arts})
        memories.sort(key=lambda m: (m.seq, m.id))
        messages = {m.id: m for m in head + window + extra_msgs}
        rules = store.rule_bodies(scope, conversation_id, conn)
        participants = store.participants(scope, conversation_id, conn)
        skills = store.skill_states(scope, conversation_id, segments, conn)
        checkpoints = store.checkpoints(scope, conversation_id, segments, conn)
        outside = store.outside_lineage_counts(scope, conversation_id, segments, conn)
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


_MODERATOR_WINDOW = 4

RETRIEVED = 12
"""Most older memories recalled by term match into one candidate set."""

_PER_TERM = 64
_MAX_TERMS = 12


def _recall(
    store: SqlStore, scope: Scope, conversation_id: str, segments: list[LineageSegment], window: list[Message], have: set[str], conn: sa.Connection
) -> list[ToolMemory]:
    """Older lineage memories matching the content terms of the newest user message in
    the window (:func:`contextledger.memory.terms.query_terms`, at most 12 terms): the
    newest 64 index rows per term are read, scored by the sum of each matched term's
    rarity (``1 / rows found for it``, so a rare id outweighs a common word), and the
    best :data:`RETRIEVED` memories not already candidates are returned (ties: newest)."""
    current = next((m for m in reversed(window) if m.role is Role.USER and m.kind.value == "chat"), None)
    if current is None:
        return []
    text = " ".join(getattr(p, "text", "") for p in current.parts)
    terms = sorted(query_terms(text))[:_MAX_TERMS]
    if not terms:
        return []
    rows = [r for r in store.term_matches(scope, conversation_id, terms, per_term=_PER_TERM, conn=conn) if r[0] not in have and in_lineage(segments, r[2], r[3])]
    per_term: dict[str, int] = {}
    for _, term, _, _ in rows:
        per_term[term] = per_term.get(term, 0) + 1
    score: dict[str, float] = {}
    newest: dict[str, int] = {}
    for mem_id, term, _, seq in rows:
        score[mem_id] = score.get(mem_id, 0.0) + 1.0 / per_term[term]
        newest[mem_id] = seq
    best = sorted(score, key=lambda k: (-score[k], -newest[k], k))[:RETRIEVED]
    return store.memories(scope, conversation_id, ids=best, conn=conn) if best else []


_R = TypeVar("_R", ToolCall, ToolArtifact)


def _in_lineage(rows: list[_R], segments: list[LineageSegment]) -> list[_R]:
    return [r for r in rows if in_lineage(segments, r.branch_id, r.seq)]


def _first_user(store: SqlStore, scope: Scope, conversation_id: str, segments: list[LineageSegment], conn: sa.Connection) -> Message | None:
    """The lineage's first user chat message: the first of each segment (one ``LIMIT 1``
    probe of ``ix_messages_role`` per segment), then the lowest seq."""
    from contextledger.store.sql import _segments_clause

    t = S.messages
    best: Message | None = None
    for seg in segments:
        row = conn.execute(
            sa.select(t.c.body)
            .where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id, _segments_clause(t, [seg]))
            # ``kind || ''``: not indexable, so the probe goes through ix_messages_role
            # (role, branch, seq) and stops at the first user row; ix_messages_kind
            # (kind = chat, most rows) would walk the branch's chat rows to the first user one
            .where(t.c.role == Role.USER.value, t.c.kind.concat("") == "chat")
            .order_by(t.c.seq)
            .limit(1)
        ).first()
        if row is not None:
            m = Message.model_validate(row.body)
            if best is None or m.seq < best.seq:
                best = m
    return best
