"""Raw exchanges whose evidence lines lose nothing: their raw form is only framing.

Seed 001 §9 (the drop order keeps evidence and gives up form first) and DESIGN.md
pipeline step 4.  A tool exchange sent raw costs its call, its result wrapper and (in
every format) the declaration of the tool it called; its evidence lines cost only their
text.  When every word and number of its raw results is also in its lines, the two
forms carry the same facts and the difference is the format's framing.  The budget
stage turns such an exchange into its lines before it evicts any evidence line, so a
format's framing is never paid for with evidence: the same history and policy keep the
same facts in Chat Completions, Responses and Messages payloads.

A *word* is a maximal run of ``\\w`` characters (Unicode letters, digits, ``_``); the
comparison is exact (case kept).  The lines of such an exchange name its call ids
(``· call <id>``: the handle a parent or a retry refers to), which the raw form carried
as framing.  The call's arguments are the model's own request, not evidence, and are
not compared.  Failed, abandoned and unresolved calls never qualify
(recovery state stays raw while unresolved, seed 000 §4.8).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from contextledger.assembly.pieces import Piece
from contextledger.records.models import ToolMemory

__all__ = ["LINE_STEPS", "call_ids_by_memory", "lines_cost", "lossless_exchanges", "name_calls", "words"]

LINE_STEPS = {
    "compress_old_history": ("retrieval", "tool_results", "long_term_memory"),
    "shorten_recent_tail": ("recent_tail",),
}
"""Drop step → the buckets whose units it turns into lines before it evicts lines
(:func:`~contextledger.assembly.drop_order.drop_once`)."""

_WORD = re.compile(r"\w+")


def words(text: str) -> frozenset[str]:
    """The words of ``text`` (maximal ``\\w+`` runs, case kept)."""
    return frozenset(_WORD.findall(text))


def raw_result_texts(p: Piece) -> list[str]:
    """The texts of the results ``p`` sends raw (tool messages and observations whose
    ``ref`` is one of its raw artifacts)."""
    raw = set(p.raw_artifacts)
    return [t for m in p.messages if m.ref in raw for t in (getattr(part, "text", None) for part in m.parts) if isinstance(t, str)]


def is_lossless(p: Piece, line_of: Callable[[ToolMemory], str | None]) -> bool:
    """Whether ``p`` is a succeeded tool exchange sent raw whose evidence lines
    (``line_of(memory)``: the line the budget stage would show, ``None`` when the memory
    has none) hold every word of its raw results.  Empty results qualify only with a
    line per result."""
    u = p.unit
    if u is None or not u.calls or not p.raw_artifacts or u.failed_calls or u.unresolved_calls:
        return False
    if any(a not in u.memories for a in p.raw_artifacts):
        return False
    lines = [line_of(u.memories[a]) for a in p.raw_artifacts]
    if any(line is None for line in lines):
        return False
    shown: set[str] = set()
    for line in lines:
        shown.update(words(line or ""))
    return all(words(t) <= shown for t in raw_result_texts(p))


def lossless_exchanges(step: str, chosen: Iterable[Piece], line_of: Callable[[ToolMemory], str | None]) -> list[Piece]:
    """The raw exchanges of ``chosen`` that ``step`` should turn into lines before it
    evicts an evidence line: ``[]`` unless ``step`` is a line step whose own units are
    all gone (its next drop evicts a line); else every lossless exchange
    (:func:`is_lossless`) of the recent tail — the newest result included — oldest
    first.  Protected units (recovery state, the current input) are never in the recent
    tail bucket."""
    buckets = LINE_STEPS.get(step)
    pieces = list(chosen)
    if buckets is None or any(not p.mandatory and p.bucket in buckets for p in pieces):
        return []
    return sorted((p for p in pieces if p.bucket == "recent_tail" and is_lossless(p, line_of)), key=lambda p: p.order)


def call_ids_by_memory(p: Piece) -> dict[str, str]:
    """Memory id → the call id of the exchange ``p`` whose result it was derived from."""
    u = p.unit
    out: dict[str, str] = {}
    for c in u.calls if u is not None else ():
        art = u.artifacts.get(c.call_id) if u is not None else None
        mem = u.memories.get(art.id) if u is not None and art is not None else None
        if mem is not None:
            out[mem.id] = c.call_id
    return out


def _named(line: str, call_id: str) -> str:
    return f"{line} · call {call_id}"


def lines_cost(p: Piece, line_of: Callable[[ToolMemory], str | None], count: Callable[[str], int]) -> int:
    """Tokens the evidence lines of ``p`` (with their call ids) add to a retrieval block:
    each line's tokens + 2 (its line break and separator)."""
    ids = call_ids_by_memory(p)
    mems = p.unit.memories.values() if p.unit is not None else ()
    return sum(count(_named(line_of(m) or "", ids.get(m.id, ""))) + 2 for m in mems)


def name_calls(p: Piece, added: list[Piece], count: Callable[[str], int]) -> None:
    """Append the call id to each evidence line in ``added`` (lines just made from
    ``p``), updating its ``cost``; lines of memories without a call stay as they are."""
    ids = call_ids_by_memory(p)
    for n in added:
        call_id = ids.get(n.memory_ids[0]) if n.memory_ids and n.line is not None else None
        if call_id is not None and n.line is not None:
            n.line = _named(n.line, call_id)
            n.cost = count(n.line) + 2
