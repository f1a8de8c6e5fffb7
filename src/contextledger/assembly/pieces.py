"""Pieces: what the stages of one assembly pass along.

A :class:`Piece` is a rendered unit (or a block of task state, or one evidence line) with
its selection-time cost in tokens, its budget bucket and shape: the shape stage
(:mod:`.shape`) makes them, the budget stage (:mod:`.budget`) keeps, reshapes or drops
them, stage-2 rehydration (:mod:`.rehydrate`) swaps raw payloads in, and the request is
built from them in ``order``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from contextledger.providers.base import WireMessage, speaker_labelled
from contextledger.records.enums import ResolutionState, Shape
from contextledger.records.models import ToolMemory
from contextledger.records.parts import TextPart, ToolCallPart, ToolResultPart

if TYPE_CHECKING:
    from contextledger.assembly.evaluate import Evaluator
    from contextledger.assembly.units import Unit
    from contextledger.tokens import Tokenizer

__all__ = ["NOTE_SEQ", "PROBE_BUCKET", "Piece", "called_tools", "first_text", "message_cost", "outdated"]

NOTE_SEQ = 10**12
"""``order[0]`` of task-state notes (working set, runtime state): placed by the request
builder before the last user turn (:meth:`~contextledger.assembly.budget.Budgeter.build`)."""

PROBE_BUCKET = "\x00probe"
"""Bucket name of cost-probe renderings (renamed when a probe rendering is kept)."""


@dataclass(kw_only=True, slots=True, eq=False)
class Piece:
    """A rendered unit with its selection-time cost (pieces compare by identity).

    Attributes:
        unit: the history unit rendered (``None`` for task state and evidence lines).
        messages: the wire messages it sends (empty for an evidence line).
        cost: selection-time estimate of those messages (o200k tokens).
        bucket: the budget bucket it counts in (seed 001 §9 budget buckets).
        shape: the shape of its results (raw, extract, stale marker, reference …).
        mandatory: kept by every drop step (task statement, current input, recovery and
            runtime state).
        order: ``(seq, index)``: where it stands in the request.
        memory_ids / raw_artifacts: memories shown and artifacts sent raw.
        line: the text of an evidence line (sent with the others in one retrieval block).
    """

    unit: Unit | None
    messages: list[WireMessage]
    cost: int
    bucket: str
    shape: Shape
    mandatory: bool = False
    order: tuple[int, int] = (0, 0)
    memory_ids: tuple[str, ...] = ()
    raw_artifacts: tuple[str, ...] = ()
    confidence: float = 1.0
    stale: bool = False
    extra_refs: tuple[str, ...] = ()
    memory: ToolMemory | None = None
    task_statement: bool = False
    newest_result: bool = False
    """The newest tool exchange of the current turn: what the next step depends on (kept
    raw while it fits, else cut to a head-and-tail excerpt by lines; never dropped)."""
    working_set: bool = False
    file_artifacts: tuple[tuple[str, ...], ...] = ()
    """Of a working-set list naming every file in play: per file, the artifacts of its
    newest exchange (see ``working_set.without_redundant_listing``)."""
    evict: tuple[int, int, int, int, tuple[int, int]] | None = None
    """The eviction key of an evidence line, once computed (see ``drop_order.eviction_key``)."""
    line: str | None = None
    """The text of an evidence line (``unit`` is ``None``, ``messages`` empty): lines are
    sent together in one retrieval block."""


def line_record(p: Piece) -> tuple[str, str]:
    """``(record id, record kind)`` an evidence line shows: its memory, else the recalled
    message named in ``extra_refs``."""
    return (p.memory_ids[0], "memory") if p.memory_ids else (p.extra_refs[0], "message")


def message_cost(tok: Tokenizer, msgs: list[WireMessage]) -> int:
    """Selection-time cost of ``msgs`` (o200k tokens): 4 per message, its name, every
    text, tool-call name, arguments and id (+8), result call id (+4), 85 per image.  A
    speaker-labelled message counts its first text with the label every format puts in
    front of it (:func:`~contextledger.providers.base.speaker_labelled`; the label alone
    when it has no text part), and its name once more (the Chat Completions ``name``)."""
    total = 0
    for m in msgs:
        total += 4
        label = m.name if m.role != "tool" else None
        if label:
            total += tok.count(label) + 1
            if not any(isinstance(p, TextPart) for p in m.parts):
                total += tok.count(speaker_labelled("", label))
        for p in m.parts:
            if isinstance(p, ToolCallPart):
                total += tok.count(p.tool_name) + tok.count(p.arguments_json) + tok.count(p.call_id) + 8
                continue
            text = p.text if isinstance(p, (TextPart, ToolResultPart)) else getattr(p, "text", None)
            if isinstance(text, str):
                if label and isinstance(p, TextPart):
                    text, label = speaker_labelled(text, label), None
                total += tok.count(text)
            if isinstance(p, ToolResultPart):
                total += tok.count(p.call_id) + 4
            elif p.kind == "image":
                total += 85
    return total


def called_tools(p: Piece) -> tuple[str, ...]:
    """Tool names of the calls ``p`` sends (one entry per call)."""
    if p.unit is None or not p.unit.calls:
        return ()
    return tuple(x.tool_name for m in p.messages for x in m.parts if isinstance(x, ToolCallPart))


def first_text(msg: WireMessage) -> str:
    """The text of a message's first text part ("" when it has none)."""
    for p in msg.parts:
        if isinstance(p, TextPart):
            return p.text
    return ""


def outdated(mem: ToolMemory, ev: Evaluator) -> bool:
    """Superseded by a newer observation, or a file read whose file changed later (as
    stored, or through a link that holds on this request's lineage)."""
    return mem.superseded_by is not None or mem.resolution_state in (ResolutionState.SUPERSEDED, ResolutionState.STALE) or mem.id in ev.lineage.stale or mem.id in ev.lineage.superseded
