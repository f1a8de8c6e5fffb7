"""Where each record of an assembly's decision table lies and what it says, in short:
its ``seq`` (transcript order), its handle (``m12``, ``a12``, ``message 12``:
:func:`contextledger.handles.record_handle`) and a one-line preview — a message's first
text line, a memory's summary, an artifact's tool name (never its raw result: a
secret-like result is not shown on a listing).  Seed 001 §9 ("Inspector")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from contextledger.handles import record_handle

if TYPE_CHECKING:
    from collections.abc import Sequence

    from contextledger.store.base import Scope
    from contextledger.store.sql import SqlStore

__all__ = ["PREVIEW_CHARS", "RecordPlace", "record_places"]

PREVIEW_CHARS = 80
"""Longest preview, in characters (cut at a word, ending ``…``)."""


@dataclass(frozen=True, kw_only=True)
class RecordPlace:
    """A record's ``seq``, ``handle`` and ``preview`` (see module docstring)."""

    seq: int
    handle: str
    preview: str


def _short(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if len(line) <= PREVIEW_CHARS:
        return line
    cut = line[: PREVIEW_CHARS - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut[PREVIEW_CHARS // 2 :] else cut) + "…"


def record_places(store: SqlStore, scope: Scope, conversation_id: str, ids: Sequence[str]) -> dict[str, RecordPlace]:
    """The :class:`RecordPlace` of each message, artifact and memory id in ``ids``
    (other ids — calls, rules, system pieces — and unknown ids are left out).  Three
    reads by id, bounded by ``ids``."""
    out: dict[str, RecordPlace] = {}
    msgs = [i for i in ids if i.startswith("msg_")]
    arts = [i for i in ids if i.startswith("art_")]
    mems = [i for i in ids if i.startswith("mem_")]
    for m in store.messages(scope, conversation_id, ids=msgs) if msgs else []:
        text = "\n".join(p.text for p in m.parts if p.kind == "text" and p.text) or f"({m.kind.value} {m.role.value})"
        out[m.id] = RecordPlace(seq=m.seq, handle=record_handle("message", m.seq), preview=_short(text))
    for a in store.artifacts(scope, conversation_id, ids=arts) if arts else []:
        out[a.id] = RecordPlace(seq=a.seq, handle=record_handle("artifact", a.seq), preview=f"{a.tool_name} result")
    for mem in store.memories(scope, conversation_id, ids=mems) if mems else []:
        out[mem.id] = RecordPlace(seq=mem.seq, handle=record_handle("memory", mem.seq), preview=_short(mem.summary))
    return out
