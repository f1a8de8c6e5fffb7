"""Handles a request cites, settled against the records it shows (issue 25: a payload
never contradicts the transcript).

A payload names records by handle (:mod:`contextledger.handles`).  The place where a
record is shown carries its label — ``[memory m12 · …``, ``[stale memory m12 · …``,
``[artifact a12, 5,120 bytes]``, ``(artifact a12)`` — and every other mention of a handle
is a *citation*.  The rule: a cited handle is labelled somewhere in the same request, or
its citation says it is not shown and how to get it
(:func:`~contextledger.handles.not_shown`).

Which records a request shows is known only once the budget has chosen, so the last
step before serialization settles the citations the earlier stages wrote:

* a ``not in this request`` mark whose handles are all labelled is dropped (the
  compaction summary marks every record it covers, and an evidence line may show one);
* ``[superseded by m23: see the newer result]`` / ``[superseded by m23]`` whose successor
  is not labelled (dropped by the budget, or shown as its raw output) becomes
  ``[superseded by a newer result]``;
* ``[conflicts with m5, m9]`` keeps the labelled partners (``another memory`` when none).

Each rewrite only shortens a text, so a request that fitted its budget still does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from contextledger.handles import HANDLE_PATTERN, NOT_SHOWN
from contextledger.providers.base import NeutralRequest, WireMessage
from contextledger.records.parts import Part, TextPart, ToolResultPart

__all__ = ["labelled_handles", "message_texts", "settle_citations", "settle_messages", "settle_request"]

_H = HANDLE_PATTERN
_LABEL = re.compile(rf"\[(?:stale )?memory ({_H}) ·|\[artifact ({_H}), [\d,]+ bytes|\(artifact ({_H})\)")
_MARKED = re.compile(rf"(?P<hs>(?:{_H}, )*{_H}) \({NOT_SHOWN}; `contextledger rehydrate {_H}`\)")
_SUPERSEDED = re.compile(rf"\[superseded by (?P<h>{_H})(?P<see>: see the newer result)?\]")
_CONFLICTS = re.compile(rf"\[conflicts with (?P<hs>(?:{_H}, )*{_H})\]")
_LIST = re.compile(r", ")
_CHEAP = re.compile(rf"superseded by {_H}|conflicts with {_H}|{NOT_SHOWN}")


def labelled_handles(texts: Iterable[str]) -> set[str]:
    """The handles ``texts`` label (``{"m12", "a12"}``): where a record is shown."""
    return {g for text in texts for m in _LABEL.finditer(text) for g in m.groups() if g}


def settle_citations(text: str, labelled: set[str]) -> str:
    """``text`` with its citations settled against ``labelled`` (see module docstring);
    ``text`` itself when nothing changes."""
    if _CHEAP.search(text) is None:
        return text

    def marked(m: re.Match[str]) -> str:
        return m["hs"] if set(_LIST.split(m["hs"])) <= labelled else m[0]

    def superseded(m: re.Match[str]) -> str:
        return m[0] if m["h"] in labelled else "[superseded by a newer result]"

    def conflicts(m: re.Match[str]) -> str:
        kept = [h for h in _LIST.split(m["hs"]) if h in labelled]
        return f"[conflicts with {', '.join(kept) if kept else 'another memory'}]"

    return _CONFLICTS.sub(conflicts, _SUPERSEDED.sub(superseded, _MARKED.sub(marked, text)))


def _part_text(part: Part) -> str | None:
    if isinstance(part, (TextPart, ToolResultPart)):
        return part.text
    return None


def message_texts(messages: Iterable[WireMessage]) -> Iterator[str]:
    """The texts of the text and tool-result parts of ``messages``."""
    return (t for msg in messages for p in msg.parts if (t := _part_text(p)) is not None)


def settle_messages(messages: Sequence[WireMessage], labelled: set[str]) -> list[WireMessage]:
    """``messages`` with every text and tool-result part's citations settled against
    ``labelled`` (:func:`settle_citations`); an unchanged message is the same object.
    An epoch extension settles its new messages against the handles of the previous
    request and the new ones (the previous request itself is sent as it was)."""
    out: list[WireMessage] = []
    for msg in messages:
        parts: list[Part] = []
        for p in msg.parts:
            text = _part_text(p)
            settled = settle_citations(text, labelled) if text is not None else None
            parts.append(p.model_copy(update={"text": settled}) if settled is not None and settled != text else p)
        changed = any(a is not b for a, b in zip(parts, msg.parts, strict=True))
        out.append(WireMessage(role=msg.role, parts=tuple(parts), name=msg.name, ref=msg.ref) if changed else msg)
    return out


def settle_request(req: NeutralRequest) -> NeutralRequest:
    """``req`` with every text and tool-result part's citations settled against the
    handles its messages label (:func:`settle_citations`); ``req`` itself (the same
    object) when no citation changes, else a copy sharing every unchanged message."""
    messages = settle_messages(req.messages, labelled_handles(message_texts(req.messages)))
    if all(a is b for a, b in zip(messages, req.messages, strict=True)):
        return req
    return NeutralRequest(system=req.system, messages=tuple(messages), tools=req.tools)
