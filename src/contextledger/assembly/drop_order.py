"""The drop order of the budget stage: one unit of each drop step at a time.

Seed 001 §9 (over budget, drop in this order: low-confidence retrieval → expired memory
→ large tool results become artifact references → compress old history → shorten the
recent tail last) and seed 000 §4.7 (an expired observation keeps its stale marker with
the revalidation hint).  :func:`drop_once` applies one unit of a step and returns the
tokens it saved (an upper bound when the drop adds evidence lines: their cost is counted
as a lower bound); :class:`DropState` is what the steps remember within one selection.
Evidence lines go least valuable first (:func:`eviction_key`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING

from contextledger.assembly.pieces import Piece, line_record
from contextledger.assembly.render import stale_line_parts
from contextledger.memory.terms import memory_terms
from contextledger.records.enums import OmissionReason

if TYPE_CHECKING:
    from contextledger.assembly.evaluate import Evaluator
    from contextledger.assembly.shape import Shaper
    from contextledger.policy.model import Policy

__all__ = ["DropState", "drop_once", "eviction_key"]

ToNotes = Callable[[Piece], int | None]
"""Turns a unit's piece into its evidence lines; returns a lower bound of the tokens
they add."""

_EvictQueue = tuple[list[Piece], list[Piece], dict[tuple[str, str], int]]


@dataclass(kw_only=True)
class DropState:
    """What the drop steps remember during one selection.

    Attributes:
        large: raw results above this many tokens become references (step 3).
        reshaped: keys of units already rendered shaped by step 3 or the last resort.
        evicted: evidence lines taken out (candidates of the refill).
        dropped_chat: chat messages taken out (candidates of the refill).
        left: the piece the last drop step took out of ``chosen``.
        stale_queue / evict_queue: orderings made once per run of a step.
        evict_key: the eviction key of a line (memoised by the budgeter).
    """

    policy: Policy
    shaper: Shaper
    large: int
    evict_key: Callable[[Piece], tuple[int, int, int, int, tuple[int, int]]]
    reshaped: set[str] = field(default_factory=set)
    evicted: list[Piece] = field(default_factory=list)
    dropped_chat: list[Piece] = field(default_factory=list)
    left: Piece | None = None
    stale_queue: list[Piece] | None = None
    evict_queue: _EvictQueue | None = None


def drop_once(st: DropState, step: str, chosen: list[Piece], notes: list[Piece], ev: Evaluator, to_notes: ToNotes, sent_cost: Callable[[Piece], int] | None = None) -> int | None:
    """Apply one unit of drop ``step`` to ``chosen`` (units) and ``notes`` (evidence
    lines); returns the estimated tokens saved, or ``None`` when the step has nothing
    left to give.  ``sent_cost(piece)``: the tokens a piece's messages cost in the
    payload (default: its estimate ``cost``); given only when the provider's count is a
    sum over messages, which also makes a line leaving a group of stale lines save only
    its body."""
    cost_of: Callable[[Piece], int] = sent_cost or attrgetter("cost")
    if step == "low_confidence_retrieval":
        return _low_confidence(st, notes, ev)
    if step == "expired_memory":
        return _expired(st, chosen, ev, to_notes, cost_of)
    if step == "large_tool_results_to_refs":
        return _large_to_refs(st, chosen, ev)
    if step in ("compress_old_history", "shorten_recent_tail"):
        # old history first, the recent tail last (seed 001 §9): a unit becomes its
        # evidence lines; when no unit is left, the least valuable line goes
        buckets = ("retrieval", "tool_results", "long_term_memory") if step == "compress_old_history" else ("recent_tail",)
        why = f"drop order: {step.replace('_', ' ')}"
        units = [p for p in chosen if not p.mandatory and p.bucket in buckets]
        if units:
            return _unit_to_lines(st, min(units, key=lambda p: p.order), chosen, ev, to_notes, cost_of, why)
        if notes:
            return _evict_line(st, notes, ev, why, grouped=sent_cost is not None)
    return None


def _low_confidence(st: DropState, notes: list[Piece], ev: Evaluator) -> int | None:
    low = [n for n in notes if n.confidence < st.policy.promotion.auto_min_confidence]
    if not low:
        return None
    # the whole class goes at once (linear, not one scan per dropped line)
    drop = {id(n) for n in low}
    notes[:] = [n for n in notes if id(n) not in drop]
    for n in low:
        ev.omit_record(*line_record(n), OmissionReason.LOW_CONFIDENCE, "drop order: low-confidence retrieval")
    return sum(n.cost for n in low)


def _expired(st: DropState, chosen: list[Piece], ev: Evaluator, to_notes: ToNotes, cost_of: Callable[[Piece], int]) -> int | None:
    # an expired observation keeps only its one-line stale marker with the revalidation
    # hint (seed 000 §4.7): old exchanges holding only stale results become such lines;
    # the lines themselves go in compress_old_history oldest first; during this step
    # pieces only leave ``chosen`` (here), so the candidates are ordered once per step
    # (the budgeter resets the queue)
    if st.stale_queue is None:
        st.stale_queue = sorted((p for p in chosen if p.stale and not p.mandatory and p.bucket != "recent_tail" and p.unit is not None), key=lambda p: p.order, reverse=True)
    if not st.stale_queue:
        return None
    p = st.stale_queue.pop()
    chosen[:] = [x for x in chosen if x is not p]
    st.left = p
    cost = cost_of(p)
    added: int = to_notes(p) or 0
    ev.omit_unit(p.unit, OmissionReason.STALE, "drop order: expired memory kept as a stale marker line")  # type: ignore[arg-type]
    return max(1, cost - added)


def _large_to_refs(st: DropState, chosen: list[Piece], ev: Evaluator) -> int | None:
    big = sorted((p for p in chosen if p.raw_artifacts and not p.mandatory and p.unit is not None and p.unit.key not in st.reshaped and max_raw_tokens(st, p) > st.large), key=lambda p: (-p.cost, p.order))
    for p in big:
        assert p.unit is not None
        st.reshaped.add(p.unit.key)
        scratch = ev.quiet()
        shaped = st.shaper.render_unit(p.unit, scratch, raw=False, bucket=p.bucket, mandatory=False, order=p.order)
        if shaped.cost >= p.cost:
            continue
        # keep the probe rendering when its trace would be the same here
        chosen[chosen.index(p)] = shaped if ev.absorb(scratch) else st.shaper.render_unit(p.unit, ev, raw=False, bucket=p.bucket, mandatory=False, order=p.order)
        return p.cost - shaped.cost
    return None


def _unit_to_lines(st: DropState, p: Piece, chosen: list[Piece], ev: Evaluator, to_notes: ToNotes, cost_of: Callable[[Piece], int], why: str) -> int:
    cost = cost_of(p)
    chosen[:] = [x for x in chosen if x is not p]
    st.left = p
    if p.unit is not None and p.unit.kind in ("user", "assistant"):
        st.dropped_chat.append(p)
    added: int = to_notes(p) or 0
    if p.unit is not None:
        ev.omit_unit(p.unit, OmissionReason.BUDGET, why + " (kept as evidence lines)")
    return max(1, cost - added)


def _evict_line(st: DropState, notes: list[Piece], ev: Evaluator, why: str, *, grouped: bool) -> int:
    # least valuable first; ties: the earlier in ``notes`` (as ``min``).  The order is
    # made once for a run of evictions: lines are only added by turning a unit into
    # lines, which drops the queue
    q = st.evict_queue
    if q is None or q[0] is not notes:
        for x in notes:
            if x.evict is None:
                st.evict_key(x)
        ranked = sorted(range(len(notes)), key=lambda i: (notes[i].evict, i), reverse=True)
        groups: dict[tuple[str, str], int] = {}
        for x in notes:
            parts = stale_line_parts(x.line or "")
            if parts is not None:
                groups[parts[0], parts[2]] = groups.get((parts[0], parts[2]), 0) + 1
        q = st.evict_queue = (notes, [notes[i] for i in ranked], groups)
    n = q[1].pop()
    notes.remove(n)
    st.evicted.append(n)
    ev.omit_record(*line_record(n), OmissionReason.BUDGET, why + " (evidence line)")
    parts = stale_line_parts(n.line or "") if grouped else None
    if parts is not None:
        left = q[2][parts[0], parts[2]] = q[2].get((parts[0], parts[2]), 1) - 1
        if left:
            # the group stays: the line's body (and a separator) goes
            return min(n.cost, st.shaper.tok.count(parts[1]) + 2)
    return n.cost


def max_raw_tokens(st: DropState, p: Piece) -> int:
    """Tokens of the largest raw result text ``p`` sends."""
    best = 0
    for m in p.messages:
        if m.ref in p.raw_artifacts:
            for part in m.parts:
                t = getattr(part, "text", None)
                if isinstance(t, str):
                    best = max(best, st.shaper.tok.count(t))
    return best


_FRESHNESS_RANK = {"volatile": 0, "session": 1, "time_bounded": 2, "durable": 3, "permanent": 4}
_HANDLE = re.compile(r"\b(?:file_id|document_id|doc_id|attachment_id|thread_id)\b")


def eviction_key(note: Piece, terms: frozenset[str] = frozenset(), recalled: Mapping[str, int] | None = None) -> tuple[int, int, int, int, tuple[int, int]]:
    """Which evidence line goes first under budget pressure: short-lived observations
    before durable ones (generated-file handles, entity ids), successes before failures,
    then lines the retrieval router did not recall for this request before those it
    did, the better its fused rank the later (``recalled``: memory id → points, higher is
    more relevant; :attr:`~contextledger.assembly.retrieval.Recalled.relevance`), then
    lines sharing fewer content words with the current user input (``terms``; seed 001
    §3: what the current request asks about is hot), then the oldest (seed 000 §4.6-4.7:
    provenance and recovery context outlive volatile search results)."""
    mem = note.memory
    if mem is None:  # a recalled message's line ranks by its fused rank alone
        ref = note.extra_refs[0] if note.line is not None and note.extra_refs else ""
        return (0, 0, recalled.get(ref, 0) if recalled else 0, 0, note.order)
    failed = 1 if mem.status.value in ("failed", "abandoned") else 0
    rank = _FRESHNESS_RANK.get(mem.freshness_class.value, 1)
    if mem.payload.get("extractor") == "search" or "search" in mem.source_tool.lower():
        rank = 0  # search results are clues, not facts (seed 001 §6 problem 3)
    elif mem.payload.get("extractor") in ("generated_file", "file_write") or _HANDLE.search(mem.summary):
        rank = max(rank, _FRESHNESS_RANK["durable"])  # a file/document handle outlives observations
    relevance = len(terms.intersection(memory_terms(mem))) if terms else 0
    return (rank, failed, recalled.get(mem.id, 0) if recalled else 0, relevance, note.order)
