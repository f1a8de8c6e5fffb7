"""Stage 1a: collect a *bounded* candidate set for one request (seed 000 §8 R8).

Reads, in a single read transaction and a fixed number of indexed queries (never one
query per record):

* the lineage segments of the active branch (seed 000 §4.10);
* the newest ``recent_window`` messages of the lineage; older than them, the system and
  developer chat messages that may reach the request (the first and the newest
  :data:`HEAD_SYSTEM_WINDOW` of each role; progress and meta records of role system are
  runtime-only and never read) and the first user message (the task statement);
* the tool calls, artifacts and memories of those messages;
* the newest unresolved and failed tool calls anywhere in the lineage, with their
  exchanges (recovery, seed 000 §4.6): the newest ``recovery_window`` failed calls and
  the newest :data:`UNRESOLVED_WINDOW` calls pending and awaiting approval each;
* the newest ``max_candidates`` memories of the lineage (older evidence as retrieval);
* pinned rules, the latest skill state and checkpoint;
* counts of what lies outside: other branches (``out_of_lineage``) and the lineage
  history older than the window, read from the per-branch counters
  (``store/counters.py``), not counted over the history.

The candidate set size is bounded by the policy, whatever the history length, and so
is the work: every query is an index range bounded by the window or by a limit (the
filtered reads by role and kind or by status read the newest rows up to a limit), a
read by a list of ids, or a counters row (docs/query-plans.md).
The reads are prepared statements (``store/reads.py``): compiled once, run on the
reader's DBAPI connection, lists of ids bound as one parameter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

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
from contextledger.store.base import LineageSegment, Scope
from contextledger.store.counters import in_lineage
from contextledger.store.reads import LineageReads
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
    recovery_window: int = 20,
) -> CandidateSet:
    """Collect the bounded candidate set (see module docstring).

    Args:
        recent_window: the newest messages of the lineage read as the raw window.
        max_candidates: the newest memories of the lineage read.
        recovery_window: the newest failed tool calls of the lineage read, wherever they
            are, with their exchanges (recovery protects at most
            ``policy.recovery.max_failed_kept`` unresolved failures, the newest; the
            assembler reads ``max(16, 4 * max_failed_kept)``).

    Raises:
        NotFoundError: unknown conversation or branch in scope.
    """
    with store.reader() as conn:
        reads = LineageReads(store, conn, scope, conversation_id)
        conv = reads.conversation()
        branch = branch_id or conv.active_branch_id
        segments = reads.lineage(branch)
        totals, outside = reads.totals_and_outside(segments)
        window = reads.newest_messages(segments, recent_window)
        window_start = window[0].seq if window else 0
        head: list[Message] = []
        if window and window_start > totals["min_seq"]:
            # only chat messages of these roles reach the request (render.system_blocks)
            head = reads.head_messages(segments, _HEAD_ROLES, MessageKind.CHAT.value, before=window_start, last=HEAD_SYSTEM_WINDOW)
            first_user = reads.first_user(segments)
            # moderator instructions steer every later turn (seed 000 §9.3 debate): the
            # newest few are candidates wherever they are (ix_messages_kind)
            head += reads.newest_messages(segments, _MODERATOR_WINDOW, MessageKind.MODERATOR.value)
            head = [m for m in head if m.seq < window_start] + ([first_user] if first_user and first_user.seq < window_start else [])
        in_window_ids = [m.id for m in window]
        # by message id / call id the rows are found through their own indexes; they lie on
        # the branch of their message or call, so the lineage holds them (checked in Python)
        calls = _in_lineage(reads.calls_by_message(in_window_ids), segments) if in_window_ids else []
        recovery = reads.newest_calls(segments, _recovery_limits(recovery_window))
        known = {c.id for c in calls}
        extra_calls = [c for c in recovery if c.id not in known]
        # bring the whole exchange of an out-of-window recovery call into view
        extra_msg_ids = sorted({c.message_id for c in extra_calls} | {c.result_message_id for c in extra_calls if c.result_message_id})
        extra_msgs = reads.messages_by_id(segments, extra_msg_ids) if extra_msg_ids else []
        if extra_msgs:
            siblings = _in_lineage(reads.calls_by_message([m.id for m in extra_msgs]), segments)
            extra_calls = [c for c in siblings if c.id not in known]
            result_ids = sorted({c.result_message_id for c in extra_calls if c.result_message_id} - set(extra_msg_ids))
            if result_ids:
                extra_msgs += reads.messages_by_id(segments, result_ids)
        all_calls = sorted(calls + extra_calls, key=lambda c: (c.seq, c.call_index))
        call_ids = [c.call_id for c in all_calls]
        artifacts = {a.call_id: a for a in _in_lineage(reads.artifacts_by_call_id(call_ids), segments)} if call_ids else {}
        memories = reads.newest_memories(segments, max_candidates)
        have = {m.id for m in memories}
        art_ids = {a.id for a in artifacts.values()}
        need = sorted(art_ids - {a for m in memories for a in m.source_artifact_ids})
        if need:
            memories += [m for m in reads.memories_by_artifact(segments, need) if m.id not in have]
        # cold → hot (seed 001 §3): older memories that share content terms with the
        # current request join the candidates, with their exchanges (so their raw
        # evidence can be rehydrated); bounded by ``RETRIEVED`` whatever the history
        recalled = _recall(reads, segments, window, {m.id for m in memories})
        if recalled:
            memories += recalled
            art_by_id = sorted({a for m in recalled for a in m.source_artifact_ids})
            old_arts = [a for a in _in_lineage(reads.artifacts_by_id(art_by_id), segments) if a.call_id not in artifacts] if art_by_id else []
            old_calls = _in_lineage(reads.calls_by_call_id([a.call_id for a in old_arts]), segments) if old_arts else []
            have_calls = {c.id for c in all_calls}
            old_calls = [c for c in old_calls if c.id not in have_calls]
            msg_ids = sorted({c.message_id for c in old_calls} | {c.result_message_id for c in old_calls if c.result_message_id} - {m.id for m in window + extra_msgs + head})
            if msg_ids:
                extra_msgs += reads.messages_by_id(segments, msg_ids)
                all_calls = sorted(all_calls + old_calls, key=lambda c: (c.seq, c.call_index))
                artifacts.update({a.call_id: a for a in old_arts})
        memories.sort(key=lambda m: (m.seq, m.id))
        messages = {m.id: m for m in head + window + extra_msgs}
        rules = reads.rule_bodies()
        participants = reads.participants()
        skills = reads.skill_states(segments)
        checkpoints = reads.checkpoints(segments)
        compactions = reads.newest_messages(segments, 8, MessageKind.COMPACTION.value)
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

HEAD_SYSTEM_WINDOW = 32
"""Most system (and most developer) chat messages older than the window read, the
newest; the first of each role (the system prompt) is read besides."""

_HEAD_ROLES = (Role.SYSTEM.value, Role.DEVELOPER.value)

UNRESOLVED_WINDOW = 64
"""Most pending (and most awaiting-approval) calls read anywhere in the lineage, the
newest, with their exchanges (recovery never reduces an unresolved call)."""


def _recovery_limits(recovery_window: int) -> list[tuple[str, int]]:
    """``(status, newest calls read)`` of the recovery read."""
    return [
        (ToolCallStatus.PENDING.value, UNRESOLVED_WINDOW),
        (ToolCallStatus.AWAITING_APPROVAL.value, UNRESOLVED_WINDOW),
        (ToolCallStatus.FAILED.value, recovery_window),
    ]

RETRIEVED = 12
"""Most older memories recalled by term match into one candidate set."""

_PER_TERM = 64
_MAX_TERMS = 12


def _recall(reads: LineageReads, segments: list[LineageSegment], window: list[Message], have: set[str]) -> list[ToolMemory]:
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
    rows = [r for r in reads.term_matches(terms, _PER_TERM) if r[0] not in have and in_lineage(segments, r[2], r[3])]
    per_term: dict[str, int] = {}
    for _, term, _, _ in rows:
        per_term[term] = per_term.get(term, 0) + 1
    score: dict[str, float] = {}
    newest: dict[str, int] = {}
    for mem_id, term, _, seq in rows:
        score[mem_id] = score.get(mem_id, 0.0) + 1.0 / per_term[term]
        newest[mem_id] = seq
    best = sorted(score, key=lambda k: (-score[k], -newest[k], k))[:RETRIEVED]
    return reads.memories_by_id(best) if best else []


_R = TypeVar("_R", ToolCall, ToolArtifact)


def _in_lineage(rows: list[_R], segments: list[LineageSegment]) -> list[_R]:
    return [r for r in rows if in_lineage(segments, r.branch_id, r.seq)]
