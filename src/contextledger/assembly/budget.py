"""Stage 7: budget — keep, reshape or drop pieces until the request fits.

Seed 001 §9 *Context Budgeter* (token budget, budget buckets, the drop order, the
ContextPlan) and DESIGN.md pipeline step 4.  Selection works on estimates and confirms
with an exact count of the serialized payload; every step is recorded in the trace.
Format parity (issue 26): a request is costed as the larger of its Chat Completions
count (:data:`NEUTRAL`, the format-independent cost) and its own format's count, so the
same history, policy, budget and ``now`` select the same records in every format — a
format with more framing (Anthropic's 346-token tool-use prompt) pays for it, and the
room a format with less framing leaves is filled last, with its own exact count
(:meth:`Budgeter.fill_format_room`).
Drop steps, in policy order (:mod:`.drop_order`): low-confidence retrieval → expired
memory → large tool results become artifact references (raw results above
``tool_output.max_tokens // 4`` tokens) → compress old history (an old exchange becomes
one evidence line, then the oldest lines and units go) → shorten the recent tail (oldest
first).  Mandatory pieces (task statement, current input, recovery state, runtime
state) are not dropped by these steps.  Evidence lines go least valuable first
(:func:`~contextledger.assembly.drop_order.eviction_key`).  Room freed by a later step
(e.g. no tool declarations once the last exchange is a line) goes back to the newest
dropped user messages, then to the best evicted lines, then to the newest dropped
assistant messages.  If the mandatory pieces alone exceed the budget, the last resort
(:mod:`.last_resort`).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from contextledger.assembly.drop_order import DropState, drop_once, eviction_key
from contextledger.assembly.last_resort import (
    cut_task_statement,
    shrink_mandatory,
    truncate_system,
)
from contextledger.assembly.lossless import lines_cost, lossless_exchanges, name_calls
from contextledger.assembly.pieces import (
    NOTE_SEQ,
    Piece,
    called_tools,
    first_text,
    line_record,
    outdated,
)
from contextledger.assembly.render import memory_line, retrieval_block, stale_line_parts
from contextledger.assembly.units import derived
from contextledger.assembly.working_set import drop_working_set
from contextledger.memory.terms import memory_terms, query_terms
from contextledger.providers.base import NeutralRequest, ToolSchema, WireMessage
from contextledger.providers.openai_chat import missing_tool_schema
from contextledger.records.enums import OmissionReason, Shape
from contextledger.records.parts import ToolCallPart, ToolResultPart

if TYPE_CHECKING:
    from contextledger.assembly.evaluate import Evaluator
    from contextledger.assembly.shape import Shaper
    from contextledger.policy.model import Policy
    from contextledger.records.models import ToolMemory

__all__ = ["FORMAT_ROOM_DETAIL", "NEUTRAL", "Budgeter", "Selection"]

NEUTRAL = "openai-chat"
"""The format whose exact count is a selection's format-independent cost: the same
history, policy, budget and ``now`` select the same records in every format
(:meth:`Budgeter.exact`), a format with more framing pays for it, and a format with
less fills the room it leaves at the end (:meth:`Budgeter.fill_format_room`)."""

FORMAT_ROOM_DETAIL = "room left by the format's smaller framing"
"""Trace detail of a record given back by :meth:`Budgeter.fill_format_room`."""

_ORDER = attrgetter("order")
_MAX_ROUNDS = 400
_MAX_LAST_RESORT = 32


@dataclass(frozen=True, kw_only=True)
class Selection:
    """What the budget stage chose: the ``request`` built from ``chosen`` units and
    state, ``notes`` (evidence lines, one retrieval block) and the (possibly cut)
    ``system`` blocks."""

    request: NeutralRequest
    chosen: list[Piece]
    notes: list[Piece]
    system: tuple[str, ...]


class Budgeter:
    """Selects the pieces of one request within ``budget`` tokens.

    Args:
        count / serialize: the provider registry's ``count_payload_tokens`` and
            ``serialize`` (exact counts of candidate payloads in the :data:`NEUTRAL`
            format and in ``provider``'s, :meth:`exact`; wire forms and counts of
            unchanged messages are reused between rounds through their memos).
        recalled: memory id → relevance points of the retrieval router's fused ranking
            for this request (evidence lines it recalled are evicted after the others
            of their freshness class; :func:`~contextledger.assembly.drop_order.eviction_key`).
    """

    def __init__(
        self, *, policy: Policy, shaper: Shaper, ev: Evaluator, budget: int, provider: str, tools: tuple[ToolSchema, ...], count: Any, serialize: Any,
        recalled: Mapping[str, int] | None = None,
    ) -> None:
        self.policy, self.shaper, self.tok, self.ev = policy, shaper, shaper.tok, ev
        self.budget, self.provider, self.tools = budget, provider, tools
        self._count, self._serialize = count, serialize
        self.serial_memo: dict[int, Any] = {}  # of the neutral count (``sent_cost`` reads them)
        self.count_memo: dict[int, Any] = {}
        self._format_memos: tuple[dict[int, Any], dict[int, Any]] = ({}, {})
        self.format_only = False  # the final refill: the format's own count (:meth:`fill_format_room`)
        from contextledger.providers.registry import ADDITIVE_PROVIDERS

        # a count that is a sum over its wire messages, each counted once
        self.additive = NEUTRAL in ADDITIVE_PROVIDERS
        self.terms: frozenset[str] = frozenset()
        self.recalled: Mapping[str, int] = recalled or {}
        self._keys: dict[tuple[str, tuple[int, int]], tuple[int, int, int, int, tuple[int, int]]] = {}
        self.drop = DropState(policy=policy, shaper=shaper, large=max(64, policy.tool_output.max_tokens // 4), evict_key=self.evict_key)
        self.notes: list[Piece] = []
        self._grouped: set[tuple[str, str]] = set()  # (age, hint) of stale lines in ``notes``
        self._undeclared: dict[str, int] = {}
        self._ever_lines: set[str] = set()
        self._lines_sorted = True  # ``notes`` is in ``order`` (a refill appends out of order)
        self._notes_scratch = ev.quiet()

    # -- exact counts ----------------------------------------------------------------
    def build(self, ps: list[Piece], ns: list[Piece], sysb: tuple[str, ...]) -> NeutralRequest:
        """The request of pieces ``ps`` (in order; the retrieval block of lines ``ns``
        after the first piece that is not a task-state note; task-state notes — working set, runtime state, order
        ``(NOTE_SEQ, …)`` — just before the last user turn, so the request ends as the
        client's did and nothing is added after the newest tool output) and system
        blocks ``sysb``."""
        ordered = sorted(ps, key=_ORDER)
        notes = [p for p in ordered if p.order[0] >= NOTE_SEQ]
        if notes:  # task-state notes go before the last user turn, never after the newest tool output
            ordered = [p for p in ordered if p.order[0] < NOTE_SEQ]
            at = next((i for i in range(len(ordered) - 1, -1, -1) if ordered[i].unit is not None and ordered[i].unit.is_turn_start), 0)  # type: ignore[union-attr]
            ordered[at:at] = notes
        msgs: list[WireMessage] = []
        # the evidence block follows the first recorded piece (a compaction summary, the
        # task statement) — never a note placed before it, so nothing recalled leads
        lead = next((i for i, p in enumerate(ordered) if p.order[0] < NOTE_SEQ), 0)
        msgs.extend(m for p in ordered[: lead + 1] for m in p.messages)
        if ns:
            lines = [n.line or "" for n in sorted(ns, key=_ORDER)]
            msgs.append(retrieval_block(lines))
        for p in ordered[lead + 1 :]:
            msgs.extend(p.messages)
        return NeutralRequest(system=sysb, messages=tuple(msgs), tools=self.tools)

    def exact(self, req: NeutralRequest) -> int:
        """The selection cost of ``req``, in tokens: the larger of its exact count in
        the :data:`NEUTRAL` format and in the request's own format — the format's extra
        framing is paid, its savings never change what is selected (they are spent by
        :meth:`fill_format_room`).  The format's exact count alone while
        :attr:`format_only` is set.  Either way the format's own count is at most this."""
        neutral = 0
        if not self.format_only or self.provider == NEUTRAL:
            neutral = int(self._count(NEUTRAL, self._serialize(NEUTRAL, req, resolve_blob=None, memo=self.serial_memo), memo=self.count_memo))
            if self.provider == NEUTRAL:
                return neutral
        serial_memo, count_memo = self._format_memos
        own = int(self._count(self.provider, self._serialize(self.provider, req, resolve_blob=None, memo=serial_memo), memo=count_memo))
        return max(neutral, own)

    def sent_cost(self, p: Piece) -> int:
        """Tokens ``p``'s messages took in the last exact count, read from the memos (an
        additive provider's count is a sum over its wire messages, each counted once);
        the selection estimate ``p.cost`` when not all of them were counted or the
        provider's count is not such a sum."""
        if not self.additive or not p.messages:
            return p.cost
        total = 0
        for m in p.messages:
            hit = self.serial_memo.get(id(m))
            if hit is None or hit[0] is not m:
                if m.role == "tool":
                    continue  # counted with the assistant turn it answers
                return p.cost
            for w in hit[2]:
                c = self.count_memo.get(id(w))
                if c is None or c[0] is not w:
                    return p.cost
                total += c[1]
        return total

    def declarations_freed(self, p: Piece) -> int | None:
        """Count ``p``'s calls out (it just left the selection); the tokens of the
        declarations of tools that lost their last call, from the memos (``None`` when
        one was not counted yet, or no tool is left: the tools block goes).  The
        serializer declares a called tool the request does not declare with a minimal
        schema while a call is sent, so dropping its last call saves more than its
        messages."""
        freed = 0
        declared = bool(self.tools)
        for name in called_tools(p):
            left = self._undeclared.get(name)
            if left is None:
                continue
            self._undeclared[name] = left - 1
            if left != 1:
                continue
            if not declared and not any(self._undeclared.values()):
                return None
            hit = self.serial_memo.get(id(missing_tool_schema(name)))
            c = self.count_memo.get(id(hit[1])) if hit is not None else None
            if c is None or c[0] is not hit[1]:  # type: ignore[index]
                return None
            freed += int(c[1])
        return freed

    # -- evidence lines --------------------------------------------------------------
    def evict_key(self, n: Piece) -> tuple[int, int, int, int, tuple[int, int]]:
        """The eviction key of line ``n``: constant during one selection, so computed
        once (terms are a regex pass), and across selections for the same memory record
        and request terms."""
        v = n.evict
        if v is not None:
            return v
        k = (n.memory_ids[0] if n.memory_ids else "", n.order)
        v = self._keys.get(k)
        if v is None:
            mem, terms, recalled = n.memory, self.terms, self.recalled
            if mem is None:
                v = eviction_key(n, terms, recalled)
            else:
                points = recalled.get(mem.id, 0)
                v = derived(mem, ("evict", terms, points, n.order), lambda: eviction_key(n, terms, recalled))
            self._keys[k] = v
        n.evict = v
        return v

    def to_notes(self, p: Piece) -> int:
        """Turn a unit into its evidence lines; returns a lower bound of the tokens they
        add to the retrieval block: a line's own tokens, or only its body for a stale
        line that joins a group of the same age and hint
        (:func:`~contextledger.assembly.render.group_stale_lines`).  With the exact
        costs of the dropped messages (:meth:`sent_cost`) the estimated saving is then
        an upper bound, so an estimate never runs past the first drop that fits."""
        if p.unit is None:
            return 0
        notes = self.notes
        # memories already shown as lines are not added twice: ``_ever_lines`` holds every
        # memory ever made a line, so most units skip the scan of ``notes``
        have = {m for n in notes for m in n.memory_ids} if any(m.id in self._ever_lines for m in p.unit.memories.values()) else set()
        added = 0
        for mem in sorted(p.unit.memories.values(), key=lambda m: (m.seq, m.id)):
            if mem.id in have:
                continue
            view = self._notes_scratch.memory_view(mem)  # views read no trace state: one scratch copy serves all
            if view is None:
                continue
            line = memory_line(mem, view.text)
            cost = self.tok.count(line) + 2
            parts = stale_line_parts(line) if self.additive else None
            if parts is not None and (parts[0], parts[2]) in self._grouped:
                added += self.tok.count(parts[1])
            else:
                added += cost - 2 if self.additive else cost
                if parts is not None:
                    self._grouped.add((parts[0], parts[2]))
            notes.append(Piece(unit=None, messages=[], cost=cost, bucket="retrieval", shape=view.shape, order=(mem.seq, 1), memory_ids=(mem.id,), confidence=mem.confidence, stale=view.stale, memory=mem, line=line))
            self._ever_lines.add(mem.id)
            self.drop.evict_queue = None
            if self._lines_sorted:
                notes.insert(bisect.bisect_right(notes, notes[-1].order, hi=len(notes) - 1, key=_ORDER), notes.pop())
        if not self._lines_sorted:
            notes.sort(key=_ORDER)
            self._lines_sorted = True
        return added

    # -- selection -------------------------------------------------------------------
    def select(self, system: tuple[str, ...], pieces: list[Piece], retrieval: list[Piece]) -> Selection:
        """Select within the budget (rules in the module docstring); every decision is
        recorded on the evaluator."""
        chosen = list(pieces)
        self._read_current_input(chosen)
        self.notes = sorted(retrieval, key=_ORDER)
        self._ever_lines = {m for n in self.notes for m in n.memory_ids}
        declared = {t.name for t in self.tools}
        for p in chosen:
            for name in called_tools(p):
                if name not in declared:
                    self._undeclared[name] = self._undeclared.get(name, 0) + 1
        full = self.budget
        self.budget = full - self._newest_reserve(chosen)  # older context yields to the newest result first
        total = self._drop_steps(chosen, system)
        total = self._refill(chosen, system, total)
        self.budget = full
        sysb = self._last_resort(chosen, system, total)
        for n in self.notes:
            self.ev.include(*line_record(n), n.shape, "retrieval")
        return Selection(request=self.build(chosen, self.notes, sysb), chosen=chosen, notes=self.notes, system=sysb)

    def _newest_reserve(self, chosen: list[Piece]) -> int:
        """Tokens the drop steps leave free for the excerpt of the newest tool result when
        it is shown only as its memory (its raw text is above the tool output limit):
        its raw size, at most its tool's ``tool_output`` token cap, at most half the
        budget, less what its memory shows already; stage 2 fills them with its lines
        (:func:`~contextledger.assembly.rehydrate.excerpt_newest_result`).  0 when there
        is no such result or it may not be shown raw."""
        p = next((x for x in chosen if x.newest_result and x.memory_ids and x.unit is not None), None)
        if p is None or p.unit is None:
            return 0
        want = 0
        for art in p.unit.artifacts.values():
            mem = p.unit.memories.get(art.id)
            if mem is None or art.id in p.raw_artifacts or outdated(mem, self.ev) or not self.ev.raw_allowed(art)[0] or self.ev.artifact_hidden(art) is not None:
                continue
            want += min(art.result_tokens, self.policy.tool_output.limits_for(art.tool_name)[1])
        return max(0, min(want, self.budget // 2) - p.cost)

    def _read_current_input(self, chosen: list[Piece]) -> None:
        """The content terms of the current input (eviction relevance); when it asks for
        exact evidence, the exchange it is about keeps its place (not compressed into a
        line) so stage 2 can rehydrate it."""
        current = max((p for p in chosen if p.mandatory and p.unit is not None and p.unit.is_turn_start), key=_ORDER, default=None)
        current_text = " ".join(first_text(m) for m in current.messages) if current is not None else ""
        self.terms = terms = query_terms(current_text)
        if not (current_text and self.ev.rehydration.requested(current_text)):
            return
        about = [p for p in chosen if p.unit is not None and p.memory_ids and p.unit.kind in ("exchange", "observation") and any(not outdated(m, self.ev) for m in p.unit.memories.values())]
        scored = [(max(len(terms.intersection(memory_terms(m))) for m in p.unit.memories.values()), p.order, i) for i, p in enumerate(about) if p.unit is not None]
        if scored and max(scored)[0] > 0:
            about[max(scored)[2]].mandatory = True

    def _drop_steps(self, chosen: list[Piece], system: tuple[str, ...]) -> int:
        """Apply the drop steps in policy order until the request fits; returns its exact
        token count.  Within a step, drops run on estimates (savings are upper bounds)
        until the estimate fits, then one exact count confirms."""
        total = self.exact(self.build(chosen, self.notes, system))
        counted = True  # ``total`` is an exact count (else a lower-bound estimate)
        rounds = 0
        for step in [s.value for s in self.policy.budget.drop_order]:
            self.drop.stale_queue = None
            self.drop.evict_queue = None
            self._grouped.clear()
            if self.additive:
                self._grouped.update((x[0], x[2]) for x in (stale_line_parts(n.line or "") for n in self.notes) if x is not None)
            while total > self.budget and rounds < _MAX_ROUNDS:
                rounds += 1
                est, progressed, exhausted = self._estimate_run(step, chosen, total)
                if not progressed:
                    break
                if exhausted and self.additive:
                    # the step has nothing left and even the estimate (a lower bound:
                    # savings are upper bounds) is above budget: the next step runs
                    # anyway, so it starts from the estimate, not a new exact count
                    total, counted = est, False
                    continue
                total, counted = self.exact(self.build(chosen, self.notes, system)), True
        if not counted:
            total = self.exact(self.build(chosen, self.notes, system))
        return total

    def _estimate_run(self, step: str, chosen: list[Piece], total: int) -> tuple[int, bool, bool]:
        """Drop units of ``step`` until the estimate fits: ``(estimate, progressed,
        exhausted)``."""
        est, progressed = total, False
        sent_cost: Callable[[Piece], int] | None = self.sent_cost if self.additive else None
        while est > self.budget:
            self.drop.left = None
            if self._framing_before_evidence(step, chosen):
                return est, True, False  # count exactly: the lines replace the whole exchange
            saved = drop_once(self.drop, step, chosen, self.notes, self.ev, self.to_notes, sent_cost)
            if saved is None:
                return est, progressed, True
            progressed = True
            est -= saved
            if self.additive and self.drop.left is not None:
                freed = self.declarations_freed(self.drop.left)
                if freed is None:
                    break  # the saving is larger than estimated: count exactly now
                est -= freed
        return est, progressed, False

    def _framing_before_evidence(self, step: str, chosen: list[Piece]) -> bool:
        """Before ``step`` evicts an evidence line, the oldest raw exchange of the recent
        tail whose lines hold every word of its results becomes its lines, each naming
        its call id: only its framing goes (:mod:`.lossless`).  Returns whether one did."""
        if not self.notes:
            return False  # no evidence line left to protect

        def line_of(mem: ToolMemory) -> str | None:
            view = self._notes_scratch.memory_view(mem)
            return None if view is None else memory_line(mem, view.text)

        for p in lossless_exchanges(step, chosen, line_of):
            if lines_cost(p, line_of, self.tok.count) >= self.sent_cost(p):
                continue
            before = {id(n) for n in self.notes}
            self.declarations_freed(p)  # its calls leave the request (bookkeeping of undeclared tools)
            self._failure_to_lines(chosen, p, "raw exchange kept as its evidence lines, which hold every word of its results: its framing goes before any evidence")
            name_calls(p, [n for n in self.notes if id(n) not in before], self.tok.count)
            return True
        return False

    def _refill(self, chosen: list[Piece], sysb: tuple[str, ...], total: int, why: str = "room freed by later drop steps") -> int:
        """Later steps may free room (e.g. an exchange turned into a line drops the tool
        declarations): give it back first to the newest dropped user messages (the
        user's own words), then to the most valuable evicted evidence lines, then to the
        newest dropped assistant messages (``why``: the trace detail of each)."""
        ev = self.ev

        def restore_chat(p: Piece) -> None:
            for m in p.unit.messages if p.unit is not None else ():
                ev.restore(m.id, "message", why)

        total = self._give_back(chosen, sysb, total, chosen, self._dropped_chat("user"), restore_chat)
        lines = sorted(self.drop.evicted, key=self.evict_key, reverse=True)[:24]
        self._lines_sorted = False
        self.drop.evict_queue = None
        total = self._give_back(chosen, sysb, total, self.notes, lines, lambda n: ev.restore(*line_record(n), why))
        return self._give_back(chosen, sysb, total, chosen, self._dropped_chat("assistant"), restore_chat)

    def fill_format_room(self, sel: Selection) -> Selection:
        """``sel`` with the room its own format leaves below the selection cost
        (:meth:`exact`: a format whose framing is smaller than the :data:`NEUTRAL` one,
        a rehydrated exchange sent without tool framing) given back as the budget stage
        gives back room (:meth:`_refill`), each record confirmed by the format's exact
        count; every record of ``sel`` stays.  ``sel`` itself when nothing fits."""
        self.format_only = True
        try:
            chosen, self.notes = list(sel.chosen), list(sel.notes)
            total = self.exact(sel.request)
            if total >= self.budget:
                return sel
            sizes = (len(chosen), len(self.notes))
            self._refill(chosen, sel.system, total, FORMAT_ROOM_DETAIL)
            if (len(chosen), len(self.notes)) == sizes:
                return sel
            return replace(sel, request=self.build(chosen, self.notes, sel.system), chosen=chosen, notes=self.notes)
        finally:
            self.format_only = False

    def _dropped_chat(self, kind: str) -> list[Piece]:
        return sorted((p for p in self.drop.dropped_chat if p.unit is not None and p.unit.kind == kind), key=_ORDER, reverse=True)[:8]

    def _give_back(self, chosen: list[Piece], sysb: tuple[str, ...], total: int, target: list[Piece], candidates: list[Piece], restore: Callable[[Piece], None]) -> int:
        # membership by identity: pieces are distinct objects, and comparing them field
        # by field (messages, parts) was most of the refill's time
        present = {id(x) for x in target}
        for p in candidates:
            if total + p.cost > self.budget or id(p) in present:
                continue
            target.append(p)
            trial = self.exact(self.build(chosen, self.notes, sysb))
            if trial <= self.budget:
                total = trial
                present.add(id(p))
                restore(p)
            else:
                target.pop()
        return total

    def _last_resort(self, chosen: list[Piece], sysb: tuple[str, ...], total: int) -> tuple[str, ...]:
        """When the mandatory pieces alone exceed the budget (:mod:`.last_resort`);
        returns the system blocks (cut as the very last step)."""
        ev, attempts = self.ev, 0
        while total > self.budget and attempts < _MAX_LAST_RESORT:
            over = total - self.budget + 8 * (attempts + 1)
            failures = [p for p in chosen if p.mandatory and p.unit is not None and p.unit.failed_calls and not p.unit.unresolved_calls]
            if len(failures) > 1:
                # the oldest protected failure as evidence lines (the newest stays raw)
                self._failure_to_lines(chosen, min(failures, key=_ORDER), "older protected failure: kept as an evidence line to fit the budget")
            elif shrink_mandatory(self.drop, chosen, ev, over, cut=False) or self._recovery_calls_to_lines(chosen):
                pass
            elif failures and any(p.unit is not None and p.unit.memories for p in failures):
                # the newest failure as an evidence line: its memory keeps the error
                # line, and without a tool exchange no tool declarations are sent
                self._failure_to_lines(chosen, failures[0], "protected failure kept as an evidence line (error line kept) to fit the budget")
            elif (not drop_working_set(chosen, ev) and not shrink_mandatory(self.drop, chosen, ev, over, floor=self.budget // 8)
                  and not cut_task_statement(self.drop, chosen, ev, over) and not shrink_mandatory(self.drop, chosen, ev, over)
                  and not self._newest_to_lines(chosen)):
                sysb = truncate_system(self.tok, sysb, over, ev, chosen)
            total = self.exact(self.build(chosen, self.notes, sysb))
            attempts += 1
        if attempts and total <= self.budget:
            self._refill(chosen, sysb, total)  # the last resort may have freed more than it needed
        return sysb

    def _recovery_calls_to_lines(self, chosen: list[Piece]) -> bool:
        """A protected exchange that waits on an unresolved call keeps its text and the
        recovery text of that call; its resolved calls and their results leave the tool
        framing and become their evidence lines, each naming its call id (a format's
        tool framing — Anthropic's tool-use prompt alone is 346 tokens — is never what
        puts mandatory content over the budget).  One exchange per call, oldest first;
        returns whether one was there to give."""
        p = min((x for x in chosen if x.mandatory and x.unit is not None and x.unit.unresolved_calls and _sends_calls(x) and x.unit.memories), key=_ORDER, default=None)
        if p is None or p.unit is None:
            return False
        self.declarations_freed(p)  # its calls leave the request (bookkeeping of undeclared tools)
        sent = {m.ref for m in p.messages if m.role == "tool" or any(isinstance(x, ToolResultPart) for x in m.parts)}
        kept = [WireMessage(role=m.role, parts=tuple(x for x in m.parts if not isinstance(x, ToolCallPart)), name=m.name, ref=m.ref) for m in p.messages if m.ref not in sent or m.role == "assistant"]
        p.messages = [m for m in kept if m.parts]
        p.cost, p.raw_artifacts, p.shape = self.shaper.cost(p.messages), (), Shape.EXTRACT
        before = {id(n) for n in self.notes}
        self.to_notes(p)
        name_calls(p, [n for n in self.notes if id(n) not in before], self.tok.count)
        self.ev.shape_record(p.unit.key, "message", Shape.EXTRACT, OmissionReason.BUDGET, "resolved calls kept as evidence lines beside the pending call's recovery text: the tool framing does not fit the budget")
        return True

    def _newest_to_lines(self, chosen: list[Piece]) -> bool:
        """The newest exchange as its evidence lines, when even cut it does not fit (its
        memory keeps the facts; without a tool exchange no tool declarations are sent).
        Returns whether it was there to give."""
        p = next((x for x in chosen if x.newest_result and x.unit is not None and x.unit.memories), None)
        if p is None:
            return False
        self._failure_to_lines(chosen, p, "newest exchange kept as its evidence lines: even cut it does not fit the budget")
        return True

    def _failure_to_lines(self, chosen: list[Piece], p: Piece, why: str) -> None:
        chosen[:] = [x for x in chosen if x is not p]
        self.to_notes(p)
        assert p.unit is not None
        self.ev.omit_unit(p.unit, OmissionReason.BUDGET, why)


def _sends_calls(p: Piece) -> bool:
    return any(isinstance(x, ToolCallPart) for m in p.messages for x in m.parts)
