"""Citations: a payload never contradicts itself about which records it shows.

A payload names records by handle (:mod:`contextledger.handles`).  A *label* is the
header of the block that shows a record — ``[memory m12 · …``, ``[stale memory m12 · …``,
``[artifact a12, 5,120 bytes…`` — and a *citation* is a handle named in a note the
assembly writes about another record: ``[superseded by m86: see the newer result]``,
``[conflicts with m3, m5]``, ``limits: … file changed later (m45)``.  The rule:

* every citation names a record the payload labels; else it names the call whose raw
  result the payload sends (``[superseded by a newer result (call call_2)]``), or says
  that the record is not shown and how to get it: ``[superseded by a newer result (m86,
  not shown; rehydrate m86)]`` (:func:`cite_shown`).  The decision is made when the block is first sent
  (the budget stage's request, an epoch extension's new messages), never by rewriting
  a block sent before, so an append-stable prefix stays byte for byte;
* a cut never splits a marker ``[…]``: it falls before the marker or after it
  (:func:`clear_cut`).

Only the notes above are rewritten: the text of a tool result or a message is data and
is sent as recorded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from contextledger.handles import ARTIFACT_PREFIX, MEMORY_PREFIX
from contextledger.providers.base import WireMessage
from contextledger.records.parts import Part, TextPart, ToolResultPart

if TYPE_CHECKING:
    from contextledger.assembly.pieces import Piece

__all__ = ["CITATION", "LABEL", "MARKER", "CitationMemo", "cite_shown", "cite_text", "clear_cut", "cut_clear", "labels_in", "not_shown", "raw_calls"]

_MEM = r"m[1-9][0-9]*"

LABEL = re.compile(rf"\[(?:stale )?memory ({_MEM}) ·|\[artifact (a[1-9][0-9]*),")
"""The header of a block that shows a record (group 1: memory handle, 2: artifact handle)."""

CITATION = re.compile(
    rf"\[superseded by (?P<sup>{_MEM})(?P<see>: see the newer result)?"
    rf"|\[conflicts with (?P<con>{_MEM}(?:, {_MEM})*)\]"
    rf"|file changed later \((?P<chg>{_MEM})\)"
)
"""The notes that cite another memory by handle (one named group per form)."""

MARKER = re.compile(r"\[[^\[\]\n]{1,400}\]")
"""A bracketed marker on one line (``[artifact a12, 5,120 bytes]``, ``[… 40 tokens
omitted …]``): what a cut keeps whole."""


def not_shown(handle: str) -> str:
    """``"(m86, not shown; rehydrate m86)"``: how a note cites a record the payload does
    not label."""
    return f"({handle}, not shown; rehydrate {handle})"


def labels_in(texts: Iterable[str]) -> set[str]:
    """The handles labelled in ``texts`` (see :data:`LABEL`)."""
    out: set[str] = set()
    for text in texts:
        if "[" in text:
            for m in LABEL.finditer(text):
                out.add(m.group(1) or m.group(2))
    return out


def _rewrite(m: re.Match[str], shown: frozenset[str], calls: Mapping[str, str]) -> str:
    def other(h: str) -> str:
        return f"(call {calls[h]})" if h in calls else not_shown(h)

    if (h := m["sup"]) is not None:
        return m[0] if h in shown else f"[superseded by a newer result {other(h)}"
    if (h := m["chg"]) is not None:
        return m[0] if h in shown else f"file changed later {other(h)}"
    named = m["con"].split(", ")
    return "[conflicts with " + ", ".join(h if h in shown else f"another memory {other(h)}" for h in named) + "]"


def cite_text(text: str, shown: frozenset[str], calls: Mapping[str, str] | None = None) -> str:
    """``text`` with every citation of a handle outside ``shown`` by the call id the
    payload sends the record's raw result under (``calls``: handle → call id, e.g.
    ``(call call_2)``), else in the not-shown form (:func:`not_shown`); unchanged when it
    cites only handles in ``shown``."""
    if "[superseded by m" not in text and "[conflicts with m" not in text and "changed later (m" not in text:
        return text
    return CITATION.sub(lambda m: _rewrite(m, shown, calls or {}), text)


def cited(text: str) -> set[str]:
    """The handles ``text`` cites (see :data:`CITATION`)."""
    out: set[str] = set()
    for m in CITATION.finditer(text):
        out.update((m["sup"],) if m["sup"] else (m["chg"],) if m["chg"] else m["con"].split(", "))
    return out


def _texts(msg: WireMessage) -> list[str]:
    return [p.text for p in msg.parts if isinstance(p, (TextPart, ToolResultPart)) and isinstance(p.text, str)]


class CitationMemo:
    """Per-request memo of :func:`cite_shown`: the labels and citations of each message
    (by identity), and each rewritten message, so rebuilding the same request in every
    budget round returns the same objects (the serializer's memos stay valid)."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[WireMessage, frozenset[str], frozenset[str]]] = {}
        self._done: dict[tuple[int, frozenset[str], tuple[tuple[str, str], ...]], tuple[WireMessage, WireMessage]] = {}

    def facts(self, msg: WireMessage) -> tuple[frozenset[str], frozenset[str]]:
        """``(labels, citations)`` of ``msg``."""
        hit = self._seen.get(id(msg))
        if hit is not None and hit[0] is msg:
            return hit[1], hit[2]
        texts = _texts(msg)
        labels = frozenset(labels_in(texts))
        cites = frozenset(h for t in texts for h in cited(t))
        self._seen[id(msg)] = (msg, labels, cites)
        return labels, cites

    def rewritten(self, msg: WireMessage, missing: frozenset[str], shown: frozenset[str], calls: Mapping[str, str]) -> WireMessage:
        """``msg`` with its citations of ``missing`` handles by call id or in the
        not-shown form (:func:`cite_text`)."""
        key = (id(msg), missing, tuple(sorted((h, c) for h, c in calls.items() if h in missing)))
        hit = self._done.get(key)
        if hit is not None and hit[0] is msg:
            return hit[1]
        parts: list[Part] = list(msg.parts)
        for i, p in enumerate(parts):
            # only the note forms of :data:`CITATION` change: the rest of a text is sent as recorded
            if isinstance(p, (TextPart, ToolResultPart)) and isinstance(p.text, str) and (new := cite_text(p.text, shown, calls)) != p.text:
                parts[i] = p.model_copy(update={"text": new})
        out = WireMessage(role=msg.role, parts=tuple(parts), name=msg.name, ref=msg.ref)
        self._done[key] = (msg, out)
        return out


def cite_shown(
    msgs: Sequence[WireMessage], *, before: Iterable[str] = (), calls: Mapping[str, str] | None = None, memo: CitationMemo | None = None,
) -> list[WireMessage]:
    """``msgs`` with every citation of a handle that neither they nor ``before`` (the
    labels of a prefix sent earlier) label named by the call id of its raw result when
    the request sends it (``calls``), else in the not-shown form; messages that need no
    change are returned as they are (the same objects).

    Args:
        msgs: the messages first sent in this request, in order.
        before: handles labelled by what the request sends before ``msgs``.
        calls: handle (``m12`` and ``a12``) → call id of a raw result the request sends.
        memo: reused across builds of one request (see :class:`CitationMemo`).
    """
    memo = memo if memo is not None else CitationMemo()
    facts = [memo.facts(m) for m in msgs]
    if not any(c for _, c in facts):
        return list(msgs)
    shown = frozenset(before).union(*(lab for lab, _ in facts))
    out: list[WireMessage] = []
    for m, (_, cites) in zip(msgs, facts, strict=True):
        missing = cites - shown
        out.append(memo.rewritten(m, frozenset(missing), shown, calls or {}) if missing else m)
    return out


def raw_calls(pieces: Iterable[Piece]) -> dict[str, str]:
    """Handle (``m12`` and ``a12``: a memory shares its artifact's number) → call id of
    every result ``pieces`` send raw."""
    out: dict[str, str] = {}
    for p in pieces:
        if p.unit is None or not p.raw_artifacts:
            continue
        for call_id, art in p.unit.artifacts.items():
            if art.id in p.raw_artifacts:
                out[f"{MEMORY_PREFIX}{art.seq}"] = out[f"{ARTIFACT_PREFIX}{art.seq}"] = call_id
    return out


def clear_cut(text: str, pos: int, *, keep_after: bool = False) -> int:
    """A cut position of ``text`` near ``pos`` (characters) that splits no marker
    (:data:`MARKER`): ``pos`` itself when it falls outside every marker, else the start
    of the marker it falls in — or, with ``keep_after`` (the cut starts the kept tail),
    the end of that marker."""
    pos = max(0, min(pos, len(text)))
    lo = text.rfind("\n", 0, pos) + 1
    hi = text.find("\n", pos)
    for m in MARKER.finditer(text, lo, hi if hi >= 0 else len(text)):
        if m.start() < pos < m.end():
            return m.end() if keep_after else m.start()
        if m.start() >= pos:
            break
    return pos


def cut_clear(text: str, limit: int, cut: Callable[[str], str] = lambda s: s) -> str:
    """The first ``limit`` characters of ``text`` (``cut`` applied to a shortened text,
    e.g. to add an ellipsis), never ending inside a marker (:func:`clear_cut`)."""
    if len(text) <= limit:
        return text
    return cut(text[: clear_cut(text, limit)].rstrip())
