"""Stage 1: collect a *bounded* candidate set for one request (seed 000 §8 R8; seed 001
§9 step 2: collect candidates from transcript, state, memory and tools).

Reads, in a single read transaction and a fixed number of indexed queries (never one
query per record):

* the lineage segments of the active branch (seed 000 §4.10);
* the newest ``recent_window`` messages of the lineage; older than them, the system and
  developer chat messages that may reach the request (the first and the newest
  :data:`HEAD_SYSTEM_WINDOW` of each role; progress and meta records of role system are
  runtime-only and never read), the task statement (the first user message in the
  user's own words, :mod:`~contextledger.assembly.task`) and, when the window holds no
  user request, the newest one (the current input);
* the tool calls, artifacts and memories of those messages;
* the newest unresolved and failed tool calls anywhere in the lineage, with their
  exchanges (recovery, seed 000 §4.6): the newest ``recovery_window`` failed calls and
  the newest :data:`UNRESOLVED_WINDOW` calls pending and awaiting approval each;
* the newest ``max_candidates`` memories of the lineage (older evidence as retrieval),
  and older ones the retrieval router recalls for the request — its current input, task
  statement and unresolved calls — with their exchanges
  (:mod:`~contextledger.assembly.retrieval`, bounded by its routes' limits);
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

from contextledger.assembly.retrieval import DEFAULT_ROUTER, RetrievalRouter
from contextledger.assembly.task import TASK_PROBE, states_task
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
    retrieval: dict[str, Any] | None = None
    """What the retrieval router did (:attr:`~contextledger.assembly.retrieval.Recalled.report`)."""
    relevance: dict[str, int] = field(default_factory=dict)
    recalled_messages: list[Message] = field(default_factory=list)
    """Older chat messages the retrieval router recalled (sent as evidence lines)."""
    retrieval_ms: float = 0.0
    """The router's ranking (:attr:`~contextledger.assembly.retrieval.Recalled.relevance`)."""

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
    router: RetrievalRouter = DEFAULT_ROUTER,
) -> CandidateSet:
    """Collect the bounded candidate set (see module docstring).

    Args:
        recent_window: the newest messages of the lineage read as the raw window.
        max_candidates: the newest memories of the lineage read.
        recovery_window: the newest failed tool calls of the lineage read, wherever they
            are, with their exchanges (recovery protects at most
            ``policy.recovery.max_failed_kept`` unresolved failures, the newest; the
            assembler reads ``max(16, 4 * max_failed_kept)``).
        router: recalls older memories relevant to the current input
            (:mod:`~contextledger.assembly.retrieval`).

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
        g = _Gathered(segments=segments, window=window, head=_head(reads, segments, window, totals["min_seq"]))
        in_window_ids = [m.id for m in window]
        # by message id / call id the rows are found through their own indexes; they lie on
        # the branch of their message or call, so the lineage holds them (checked in Python)
        g.calls = _in_lineage(reads.calls_by_message(in_window_ids), segments) if in_window_ids else []
        _add_recovery(reads, g, recovery_window)
        _add_memories(reads, g, max_candidates)
        # cold → hot (seed 001 §3): older memories relevant to the current request join
        # the candidates, with their exchanges (so their raw evidence can be rehydrated);
        # bounded by the router's limit whatever the history
        recalled = router.recall(store, reads, segments, window, g.head, g.calls, {m.id for m in g.memories})
        _add_recalled(reads, g, recalled.memories)
        g.memories.sort(key=lambda m: (m.seq, m.id))
        messages = {m.id: m for m in g.head + window + g.extra_msgs}
        rules, participants = reads.rule_bodies(), reads.participants()
        skills, checkpoints = reads.skill_states(segments), reads.checkpoints(segments)
        compactions = reads.newest_messages(segments, 8, MessageKind.COMPACTION.value)
    ours = [m for m in compactions if m.metadata.get("handoff_format") and isinstance(m.metadata.get("covers"), dict)]
    return CandidateSet(
        conversation=conv,
        branch_id=branch,
        segments=segments,
        messages=sorted(messages.values(), key=lambda m: m.seq),
        calls=g.calls,
        artifacts=g.artifacts,
        memories=g.memories,
        rules=rules,
        participants=participants,
        skill_states=skills[-20:],
        checkpoints=checkpoints[-20:],
        lineage_message_count=totals["messages"],
        lineage_min_seq=totals["min_seq"],
        out_of_lineage=outside,
        window_start_seq=window[0].seq if window else 0,
        compaction=ours[-1] if ours else None,
        totals=totals,
        retrieval=recalled.report,
        relevance=recalled.relevance,
        retrieval_ms=recalled.duration_ms,
        recalled_messages=recalled.messages,
    )


@dataclass(kw_only=True)
class _Gathered:
    """What collection has read so far (messages beyond the window, calls in ``(seq,
    call_index)`` order, artifacts by call id, memories)."""

    segments: list[LineageSegment]
    window: list[Message]
    head: list[Message]
    extra_msgs: list[Message] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    artifacts: dict[str, ToolArtifact] = field(default_factory=dict)
    memories: list[ToolMemory] = field(default_factory=list)


def _head(reads: LineageReads, segments: list[LineageSegment], window: list[Message], min_seq: int) -> list[Message]:
    """Messages older than the window that reach the request: system and developer chat
    messages (the first and newest :data:`HEAD_SYSTEM_WINDOW` of each role), the task
    statement (the first user message in the user's own words,
    :func:`~contextledger.assembly.task.states_task`, with the injected preambles before
    it), the current input when the window holds none (the newest user message in the
    user's own words) and the newest moderator instructions."""
    window_start = window[0].seq if window else 0
    if not window or window_start <= min_seq:
        return []
    # only chat messages of these roles reach the request (render.system_blocks)
    head = reads.head_messages(segments, _HEAD_ROLES, MessageKind.CHAT.value, before=window_start, last=HEAD_SYSTEM_WINDOW)
    head += _task_statement(reads.first_users(segments, TASK_PROBE))
    if not any(m.role is Role.USER and m.kind == MessageKind.CHAT and states_task(m) for m in window):
        # a long tool loop pushed the user's request out of the window: it is still the
        # request this turn answers
        newest = reads.head_messages(segments, (Role.USER.value,), MessageKind.CHAT.value, before=window_start, last=TASK_PROBE)
        head += next(([m] for m in reversed(newest) if states_task(m)), [])
    # moderator instructions steer every later turn (seed 000 §9.3 debate): the newest
    # few are candidates wherever they are (ix_messages_kind)
    head += reads.newest_messages(segments, _MODERATOR_WINDOW, MessageKind.MODERATOR.value)
    return list({m.id: m for m in head if m.seq < window_start}.values())


def _task_statement(firsts: list[Message]) -> list[Message]:
    """The first user messages up to and including the first that states the task (all
    of them when none does)."""
    for i, m in enumerate(firsts):
        if states_task(m):
            return firsts[: i + 1]
    return firsts


def _add_recovery(reads: LineageReads, g: _Gathered, recovery_window: int) -> None:
    """The newest unresolved and failed calls of the lineage, with their whole exchanges
    (calls, result messages, artifacts)."""
    segments = g.segments
    recovery = reads.newest_calls(segments, _recovery_limits(recovery_window))
    known = {c.id for c in g.calls}
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
    g.extra_msgs = extra_msgs
    g.calls = sorted(g.calls + extra_calls, key=lambda c: (c.seq, c.call_index))
    call_ids = [c.call_id for c in g.calls]
    g.artifacts = {a.call_id: a for a in _in_lineage(reads.artifacts_by_call_id(call_ids), segments)} if call_ids else {}


def _add_memories(reads: LineageReads, g: _Gathered, max_candidates: int) -> None:
    """The newest ``max_candidates`` memories of the lineage, and the memories of every
    artifact in view."""
    g.memories = reads.newest_memories(g.segments, max_candidates)
    have = {m.id for m in g.memories}
    art_ids = {a.id for a in g.artifacts.values()}
    need = sorted(art_ids - {a for m in g.memories for a in m.source_artifact_ids})
    if need:
        g.memories += [m for m in reads.memories_by_artifact(g.segments, need) if m.id not in have]


def _add_recalled(reads: LineageReads, g: _Gathered, recalled: list[ToolMemory]) -> None:
    """Recalled memories join the candidates with their exchanges."""
    if not recalled:
        return
    segments = g.segments
    g.memories += recalled
    art_by_id = sorted({a for m in recalled for a in m.source_artifact_ids})
    old_arts = [a for a in _in_lineage(reads.artifacts_by_id(art_by_id), segments) if a.call_id not in g.artifacts] if art_by_id else []
    old_calls = _in_lineage(reads.calls_by_call_id([a.call_id for a in old_arts]), segments) if old_arts else []
    have_calls = {c.id for c in g.calls}
    old_calls = [c for c in old_calls if c.id not in have_calls]
    msg_ids = sorted({c.message_id for c in old_calls} | {c.result_message_id for c in old_calls if c.result_message_id} - {m.id for m in g.window + g.extra_msgs + g.head})
    if msg_ids:
        g.extra_msgs += reads.messages_by_id(segments, msg_ids)
        g.calls = sorted(g.calls + old_calls, key=lambda c: (c.seq, c.call_index))
        g.artifacts.update({a.call_id: a for a in old_arts})


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

_R = TypeVar("_R", ToolCall, ToolArtifact)


def _in_lineage(rows: list[_R], segments: list[LineageSegment]) -> list[_R]:
    return [r for r in rows if in_lineage(segments, r.branch_id, r.seq)]
