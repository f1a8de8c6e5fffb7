"""Stage 6: shape — each unit rendered raw or reduced (raw / memory extract / stale marker
/ reference), plus the task-state pieces.

Seed 001 §9 *Compression Engine* (externalise, extract, summarise, structure) and §4
Shape (the same information in several forms); seed 000 §4.3, §4.7–4.8.  A tool exchange
(an assistant turn with all its calls and results) is rendered whole.  A result is sent
raw when the unit is hot (recent tail, protected) or raw costs no more than its memory,
and only when it is allowed raw (retention, privacy, provider), small enough and current;
otherwise its memory's view stands for it.  A superseded result, or a read of a file
written later, is never sent raw.  Tool output is framed as data (the serializer's
banner), never as instructions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from contextledger.assembly.pieces import NOTE_SEQ, PROBE_BUCKET, Piece, message_cost
from contextledger.assembly.render import (
    DATA_BANNER,
    artifact_ref,
    assistant_turn,
    call_narration,
    observation_text,
    pending_call_text,
    render_content_parts,
    result_message,
    runtime_state_text,
)
from contextledger.assembly.units import Unit, derived
from contextledger.providers.base import WireMessage
from contextledger.records.enums import MessageKind, OmissionReason, ResolutionState, Role, Shape
from contextledger.records.models import ToolArtifact, ToolCall, ToolMemory
from contextledger.records.parts import (
    BinaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

if TYPE_CHECKING:
    from contextledger.assembly.candidates import CandidateSet
    from contextledger.assembly.evaluate import Evaluator, MemoryView
    from contextledger.assembly.temperature import Heat
    from contextledger.assembly.visibility import VisibleUnits
    from contextledger.tokens import Tokenizer

__all__ = ["Shaped", "Shaper", "shape_pieces", "unit_order"]


@dataclass(kw_only=True)
class _Exchange:
    """What rendering an exchange's calls collects."""

    calls: list[ToolCall] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    results: list[WireMessage] = field(default_factory=list)
    memory_ids: list[str] = field(default_factory=list)
    raw_artifacts: list[str] = field(default_factory=list)
    shape: Shape = Shape.RAW
    confidence: float = 1.0
    stale: bool = False


class Shaper:
    """Renders units for one request (one instance per assembly).

    Args:
        tok: the tokenizer costs are counted with.
    """

    def __init__(self, tok: Tokenizer) -> None:
        self.tok = tok
        self._probe: tuple[object, Evaluator] | None = None

    def cost(self, msgs: list[WireMessage]) -> int:
        """Selection-time cost of ``msgs`` (:func:`~contextledger.assembly.pieces.message_cost`)."""
        return message_cost(self.tok, msgs)

    def render_unit(self, u: Unit, ev: Evaluator, *, raw: bool, bucket: str, mandatory: bool, order: tuple[int, int]) -> Piece:
        """``u`` as a :class:`Piece`: raw (``raw``) or shaped; decisions on ``ev``."""
        head = u.messages[0]
        name = (head.speaker_label or ev.label_of(head.participant_id)) if ev.multi_party else head.speaker_label
        for p in head.parts:
            if isinstance(p, ThinkingPart):
                ev.omit_part(head, OmissionReason.RUNTIME_ONLY, "thinking is kept in the ledger, not sent")
        if any(isinstance(p, BinaryPart) for p in head.parts):
            ev.shape_record(head.id, "message", Shape.REFERENCE, OmissionReason.UNSUPPORTED_CONTENT, "binary part sent as a placeholder with its reference")
        msgs: list[WireMessage] = []
        acc = _Exchange()
        if u.kind in ("user", "assistant"):
            parts = render_content_parts(head)
            if parts:
                msgs.append(WireMessage(role="user" if u.kind == "user" else "assistant", parts=parts, name=name, ref=head.id))
            ev.include(head.id, "message", Shape.RAW, bucket)
        elif u.kind in ("exchange", "observation"):
            msgs = self._render_exchange(u, ev, acc, raw=raw, name=name)
            ev.include(head.id, "message", acc.shape, bucket)
        return Piece(
            unit=u, messages=msgs, cost=self.cost(msgs), bucket=bucket, shape=acc.shape, mandatory=mandatory, order=order,
            memory_ids=tuple(acc.memory_ids), raw_artifacts=tuple(acc.raw_artifacts), confidence=acc.confidence, stale=acc.stale,
        )

    def _render_exchange(self, u: Unit, ev: Evaluator, acc: _Exchange, *, raw: bool, name: str | None) -> list[WireMessage]:
        head = u.messages[0]
        foreign = ev.foreign(u)
        for c in u.calls:
            self._render_call(u, c, ev, acc, raw=raw, foreign=foreign)
        msgs: list[WireMessage] = []
        if u.kind == "observation":
            if head.role is Role.ASSISTANT:
                msgs.append(assistant_turn(head, [], acc.extra, name))
            else:
                msgs.extend(WireMessage(role="user", parts=(TextPart(text=e),), ref=head.id) for e in acc.extra)
            msgs.extend(acc.results)
            return msgs
        calls, extra = acc.calls, acc.extra
        # a signed turn in the tail is the one a tool loop continues: the provider gets it
        # whole (the proxy sends it as the client did), so it is rendered and counted whole
        signed = raw and any(isinstance(p, ThinkingPart) and p.signature for p in head.parts)
        big_args = not signed and any(len(c.arguments_json) > ev.tool_max_bytes(c.tool_name) for c in calls)
        compact = (not raw) or big_args
        if compact and any(len(c.arguments_json) > 160 for c in calls):
            ev.shape_record(head.id, "message", Shape.EXTRACT, OmissionReason.REPLACED_BY_MEMORY, "long tool-call arguments cut; the exact call is in the ledger")
        # the assistant turn depends only on its records and texts: made once per
        # message record and arguments across requests
        msgs.append(derived(head, ("turn", tuple(c.id for c in calls), tuple(extra), name, compact), lambda: assistant_turn(head, calls, extra, name, compact=compact)))
        msgs.extend(acc.results)
        return msgs

    def _render_call(self, u: Unit, c: ToolCall, ev: Evaluator, acc: _Exchange, *, raw: bool, foreign: bool) -> None:
        art = u.artifacts.get(c.call_id)
        mem = u.memories.get(art.id) if art else None
        if c.status.unresolved or art is None:
            acc.extra.append(pending_call_text(c))
            ev.protect(c.id, "tool_call", "unresolved call rendered as recovery state")
            return
        hidden = ev.artifact_hidden(art)
        if hidden is not None:
            # the turn is visible but this result is not (seed 000 §4.9): no raw payload,
            # no memory text, only the fact that a result exists
            ev.omit_record(art.id, "artifact", hidden, "result private to its owner")
            if mem is not None:
                ev.omit_record(mem.id, "memory", hidden, "derived from a private result")
            label = ev.label_of(art.owner_participant_id) or "another participant"
            if foreign:
                acc.extra.append(call_narration(c, ev.label_of(c.participant_id) or "another participant", None))
                ev.omit_record(c.id, "tool_call", OmissionReason.OTHER_PARTICIPANT_TOOLS, "rendered as non-callable narration")
                return
            text = f"[result withheld: private to {label}]"
            if u.kind == "observation":
                acc.results.append(WireMessage(role="user", parts=(TextPart(text=observation_text(c, text)),), ref=None))
            else:
                acc.calls.append(c)
                acc.results.append(result_message(c, text, is_error=art.is_error, ref=None))
            return
        text, s, used_raw, mv = self.result_text(c, art, mem, ev, raw=raw)
        if mv is not None:
            acc.confidence = min(acc.confidence, mem.confidence if mem else 1.0)
            acc.stale = acc.stale or mv.stale
        if s is not Shape.RAW:
            acc.shape = s
        if mem is not None and not used_raw:
            acc.memory_ids.append(mem.id)
        if used_raw:
            acc.raw_artifacts.append(art.id)
        if foreign:
            acc.extra.append(call_narration(c, ev.label_of(c.participant_id) or "another participant", text if not used_raw else None))
            ev.omit_record(c.id, "tool_call", OmissionReason.OTHER_PARTICIPANT_TOOLS, "rendered as non-callable narration")
        elif u.kind == "observation":
            acc.results.append(WireMessage(role="user", parts=(TextPart(text=observation_text(c, text)),), ref=art.id))
        else:
            acc.calls.append(c)
            acc.results.append(result_message(c, text, is_error=art.is_error, images=_images(u, c), ref=art.id))

    def raw_lower_bound(self, u: Unit, ev: Evaluator) -> int:
        """A lower bound of the cost of ``u`` rendered raw (tokens): the raw result texts
        :meth:`result_text` would send, less 2 tokens each for a prefix joined before
        them; 0 for units whose results would not be sent raw as tool results.  Reads no
        trace state and records nothing."""
        if u.kind != "exchange" or ev.foreign(u):
            return 0
        total = 0
        for c in u.calls:
            art = u.artifacts.get(c.call_id)
            if art is None or art.inline_text is None or c.status.unresolved or art.size_bytes > ev.tool_max_bytes(c.tool_name):
                continue
            mem = u.memories.get(art.id)
            if mem is not None and _superseded(mem, ev):
                continue
            if ev.artifact_hidden(art) is not None or not ev.raw_allowed(art)[0]:
                continue
            total += max(0, self.tok.count(art.inline_text) - 2)
        return total

    def result_text(self, c: ToolCall, art: ToolArtifact, mem: ToolMemory | None, ev: Evaluator, *, raw: bool) -> tuple[str, Shape, bool, MemoryView | None]:
        """The text standing for one result, its shape, whether it is the raw payload, and
        the memory view used: raw when allowed and small, else the memory view (extract /
        stale marker / restricted summary / reference)."""
        limit = ev.tool_max_bytes(c.tool_name)
        raw_ok, reason = ev.raw_allowed(art)
        # a superseded result, or a file read whose file was written later, is never
        # shown raw, not even in the recent tail: the model would read an outdated
        # observation as current (seed 000 §4.7-4.8; seed 001 §5: the pre-edit read is
        # stale after the edit); the exchange keeps the marker and its successor
        superseded = mem is not None and _superseded(mem, ev)
        if superseded:
            raw = False
        if not raw and not superseded and raw_ok and mem is not None and art.inline_text is not None and art.size_bytes <= limit:
            raw = self._raw_is_cheaper(art.inline_text, mem, ev)
        if raw and raw_ok and art.size_bytes <= limit and art.inline_text is not None:
            view = ev.memory_view(mem, in_exchange=True) if mem is not None else None
            prefix = view.raw_prefix if view is not None else ""
            ev.include(art.id, "artifact", Shape.RAW, "raw")
            return prefix + art.inline_text, Shape.RAW, True, view
        if superseded and mem is not None:
            why = f"superseded by {mem.superseded_by}" if mem.superseded_by else "the file changed later"
            ev.shape_record(art.id, "artifact", Shape.REFERENCE, OmissionReason.SUPERSEDED if mem.superseded_by else OmissionReason.STALE, f"{why}: the raw result is outdated")
        elif raw and not raw_ok:
            if (redacted := ev.withhold_raw(art, mem, limit, reason)) is not None:
                return redacted, Shape.EXTRACT, False, None
        elif raw and art.size_bytes > limit:
            ev.shape_record(art.id, "artifact", Shape.REFERENCE, OmissionReason.REPLACED_BY_MEMORY, f"{art.size_bytes} bytes above the {limit}-byte tool output limit")
        else:
            ev.shape_record(art.id, "artifact", Shape.EXTRACT, OmissionReason.REPLACED_BY_MEMORY, "older than the recent tail")
        if mem is None:
            return f"{artifact_ref(art)} (no memory derived)", Shape.REFERENCE, False, None
        view = ev.memory_view(mem, in_exchange=True)
        if view is None:
            return f"[result omitted: {ev.last_reason(mem.id)}] {artifact_ref(art)}", Shape.REFERENCE, False, None
        return view.text, view.shape, False, view

    def _raw_is_cheaper(self, raw_text: str, mem: ToolMemory, ev: Evaluator) -> bool:
        """A memory is a reduction: never send one that costs more than the raw result
        (memory views read no trace state, so one scratch copy of the assembly's
        evaluator serves every probe; its quiet copies share ``freshness``)."""
        hit = self._probe
        if hit is None or hit[0] is not ev.freshness:
            hit = self._probe = (ev.freshness, ev.quiet())
        probe = hit[1].memory_view(mem, in_exchange=True)
        return probe is not None and not probe.stale and self.tok.count(raw_text) <= self.tok.count(probe.text)


def _superseded(mem: ToolMemory, ev: Evaluator) -> bool:
    """Superseded or stale (as stored or on this lineage): never sent raw."""
    return ev.conflict.check(mem) is not None or mem.resolution_state is ResolutionState.STALE or mem.id in ev.lineage.stale


def _images(u: Unit, c: ToolCall) -> tuple[Any, ...]:
    for m in u.messages[1:]:
        for p in m.parts:
            if isinstance(p, ToolResultPart) and p.call_id == c.call_id:
                return tuple(p.images)
            if isinstance(p, ToolCallPart) and p.call_id == c.call_id:
                return ()
    return ()


@dataclass(frozen=True, kw_only=True)
class Shaped:
    """The pieces of the request before the budget: every visible unit rendered, the
    compaction, the runtime state; ``in_view`` the memories they show."""

    pieces: list[Piece]
    in_view: set[str]


def newest_exchange(units: Sequence[Unit], current: int | None) -> int | None:
    """Index of the newest tool exchange answered after the current input (the result a
    tool loop's next step depends on; seed 001 §3: the current request's evidence is
    hot), or ``None`` when the current turn has none."""
    start = current if current is not None else 0
    for i in range(len(units) - 1, start - 1, -1):
        if units[i].kind == "exchange" and units[i].calls:
            return i
    return None


def unit_order(u: Unit, i: int, covered_to: int) -> tuple[int, int]:
    """Request order of the ``i``-th visible unit: ``(seq, i)``; a unit of the compacted
    range that stays raw (recovery-protected, or the task statement of a cut goal) comes
    right after the summary, whose order is ``(covered_to, -1)``: nothing of the
    compacted range is sent before its summary."""
    return (covered_to, i) if u.seq <= covered_to else (u.seq, i)


def shape_pieces(visible: VisibleUnits, heat: Heat, ev: Evaluator, shaper: Shaper, cands: CandidateSet, now: datetime) -> Shaped:
    """Render every visible unit — raw in the recent tail and when protected, shaped
    before it; a probe rendering of the temperature stage is kept when its trace would be
    the same — then the compaction (its handoff text, before every unit of the range it
    covers that stays raw: :func:`unit_order`) and the runtime state (skill state,
    checkpoint) as mandatory task state."""
    pieces: list[Piece] = []
    in_view: set[str] = set()
    mandatory_at = (heat.first_user, heat.current)
    newest = newest_exchange(visible.units, heat.current)
    for i, u in enumerate(visible.units):
        in_tail = i >= heat.tail_start or i == newest
        mandatory = i in mandatory_at or i == newest or u.key in heat.protected or u.messages[0].kind == MessageKind.MODERATOR
        bucket = "current_input_task_state" if i in mandatory_at else ("recent_tail" if in_tail else ("tool_results" if u.calls else "retrieval"))
        if u.key in heat.protected and not in_tail:
            bucket = "current_input_task_state"
        raw = in_tail or u.key in heat.protected
        kept = heat.probed.get(i) if raw else None
        if kept is not None and ev.absorb(kept[1], bucket=(PROBE_BUCKET, bucket)):
            piece = kept[0]
            piece.bucket, piece.mandatory, piece.order = bucket, mandatory, unit_order(u, i, visible.covered_to)
        else:
            piece = shaper.render_unit(u, ev, raw=raw, bucket=bucket, mandatory=mandatory, order=unit_order(u, i, visible.covered_to))
        piece.task_statement = i == heat.first_user and heat.first_user != heat.current
        piece.newest_result = i == newest
        in_view.update(m.id for m in u.memories.values())
        pieces.append(piece)
    comp = visible.compaction
    if comp is not None:
        text = "\n".join(p.text for p in comp.parts if isinstance(p, TextPart))
        msg = WireMessage(role="user", parts=(TextPart(text=DATA_BANNER + "\n" + text),), ref=comp.id)
        ev.include(comp.id, "message", Shape.SUMMARY, "current_input_task_state")
        pieces.append(Piece(unit=None, messages=[msg], cost=shaper.cost([msg]), bucket="current_input_task_state", shape=Shape.SUMMARY, mandatory=True, order=(visible.covered_to, -1)))
    skill = ev.visible_state(cands.skill_states, "skill_state")
    ckpt = ev.visible_state(cands.checkpoints, "checkpoint")
    state = runtime_state_text(skill, ckpt, now)
    if state:
        refs = tuple(x.id for x in (ckpt, skill) if x is not None)
        msg = WireMessage(role="user", parts=(TextPart(text=state),), ref=refs[0])
        pieces.append(Piece(unit=None, messages=[msg], cost=shaper.cost([msg]), bucket="current_input_task_state", shape=Shape.STRUCTURED, mandatory=True, order=(NOTE_SEQ, 0), extra_refs=refs))
    return Shaped(pieces=pieces, in_view=in_view)
