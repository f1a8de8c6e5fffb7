"""Short, stable handles for the records a model sees: ``m12`` (memory), ``a12`` (artifact).

Record ids (:mod:`contextledger.ids`) are random; quoting them in a payload would make its
tokens — and so the budget decisions — depend on chance (a 26-character id costs ~15
tokens, and its count varies from id to id).  A payload therefore names a tool memory or
a tool artifact by its *handle*: a one-letter kind and the record's ``seq``, its
position in the conversation::

    [memory m12 · session · observed 2026-05-01T10:00Z]
    Read succeeded: read /src/a.py lines 1-40 … [artifact a12, 5,120 bytes]

Why the ``seq``: every tool artifact takes the ``seq`` of its result message, and every
message takes a fresh one — from the transcript position on import, else from the
conversation's counter (``conversations.next_seq``, allocated inside the writing
transaction under the conversation's row lock, so concurrent writers on PostgreSQL never
share one); a memory derived from an artifact keeps the artifact's ``seq``.  So a handle
is unique within its conversation across every branch, is known when the memory is
derived (before anything is written), and the same file imported twice gives the same
handles.  A memory and the artifact it was derived from share the number (``m12`` ↔
``a12``).  Handles are scoped to a conversation: resolving one needs the conversation
(an assembly, or ``--conversation``); a full id works everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = [
    "ARTIFACT_PREFIX",
    "HANDLE_PATTERN",
    "MEMORY_PREFIX",
    "NOT_SHOWN",
    "Handle",
    "HasSeq",
    "artifact_handle",
    "memory_handle",
    "not_shown",
    "parse_handle",
    "record_handle",
    "resolve_artifact_ref",
    "resolve_ref",
]

MEMORY_PREFIX = "m"
"""Handle prefix of a tool memory (``m12``)."""

ARTIFACT_PREFIX = "a"
"""Handle prefix of a tool artifact (``a12``)."""

NOT_SHOWN = "not in this request"
"""What :func:`not_shown` says of a cited handle whose record a payload does not show."""

HANDLE_PATTERN = r"[ma][1-9][0-9]*"
"""A handle as a regular expression (no anchors), for parsers of rendered text."""

_HANDLE = re.compile(r"(?P<kind>[ma])(?P<seq>[1-9][0-9]*)")

HandleKind = Literal["memory", "artifact"]


class HasSeq(Protocol):
    """A record with a per-conversation position (``ToolMemory``, ``ToolArtifact``)."""

    @property
    def seq(self) -> int: ...


@dataclass(frozen=True)
class Handle:
    """A parsed handle: ``kind`` (``"memory"`` / ``"artifact"``) and ``seq`` (≥ 1)."""

    kind: HandleKind
    seq: int

    def __str__(self) -> str:
        return f"{MEMORY_PREFIX if self.kind == 'memory' else ARTIFACT_PREFIX}{self.seq}"


def memory_handle(memory: HasSeq) -> str:
    """``"m<seq>"``: the handle a payload shows for a tool memory."""
    return f"{MEMORY_PREFIX}{memory.seq}"


def artifact_handle(artifact: HasSeq) -> str:
    """``"a<seq>"``: the handle a payload shows for a tool artifact."""
    return f"{ARTIFACT_PREFIX}{artifact.seq}"


def not_shown(handles: Sequence[str]) -> str:
    """How a payload cites handles whose records it does not show: the handles, then that
    they are not in this request and the command that fetches the first one's raw bytes::

        m17, a17 (not in this request; `contextledger rehydrate m17`)

    Every other citation of a handle is of a record labelled in the same payload
    (``[memory m12 · …``, ``[artifact a12, 5,120 bytes]``): a payload never names a
    record the model cannot find in it without saying so.

    Raises:
        ValueError: ``handles`` is empty.
    """
    if not handles:
        raise ValueError("no handles to cite")
    return f"{', '.join(handles)} ({NOT_SHOWN}; `contextledger rehydrate {handles[0]}`)"


def record_handle(kind: str, seq: int | None) -> str:
    """The name a payload gives a record of ``kind`` at ``seq``: ``m12`` (memory),
    ``a12`` (artifact), ``message 12`` (a message: the cut marker's ``(message 12)``);
    ``""`` for another kind or an unknown ``seq``.  For ``explain``, ``search`` and the
    inspector, shown next to the full id."""
    if seq is None:
        return ""
    return {"memory": f"{MEMORY_PREFIX}{seq}", "artifact": f"{ARTIFACT_PREFIX}{seq}", "message": f"message {seq}"}.get(kind, "")


def parse_handle(text: str) -> Handle | None:
    """The :class:`Handle` that ``text`` spells (surrounding blanks ignored), or ``None``
    when ``text`` is not a handle (e.g. a full ``mem_…`` / ``art_…`` id).

    >>> parse_handle("m12")
    Handle(kind='memory', seq=12)
    >>> parse_handle("art_01JD8X9Q4M6Z3K2B7N5R8T1V0W") is None
    True
    """
    m = _HANDLE.fullmatch(text.strip())
    if m is None:
        return None
    return Handle(kind="memory" if m["kind"] == MEMORY_PREFIX else "artifact", seq=int(m["seq"]))


class HandleStore(Protocol):
    """What :func:`resolve_ref` needs of a store (``SqlStore`` has it)."""

    def id_at_seq(self, scope: Any, conversation_id: str, kind: str, seq: int) -> str: ...


def resolve_ref(store: HandleStore, scope: Any, conversation_id: str | None, ref: str) -> str:
    """The record id ``ref`` names: ``ref`` itself when it is not a handle (a full id),
    else the id of the memory / artifact at that ``seq`` of ``conversation_id``.

    Raises:
        InputError: ``ref`` is a handle and no conversation is given.
        NotFoundError: no record of the handle's kind at that ``seq`` in the conversation.
    """
    handle = parse_handle(ref)
    if handle is None:
        return ref.strip()
    if not conversation_id:
        from contextledger.errors import InputError

        raise InputError(f"{handle} is a handle, numbered within one conversation: name the conversation (--conversation CONV) or use the full {handle.kind} id")
    return store.id_at_seq(scope, conversation_id, handle.kind, handle.seq)


def resolve_artifact_ref(store: Any, scope: Any, conversation_id: str | None, ref: str) -> str:
    """The artifact id ``ref`` names: a full id, an artifact handle (``a12``), or a memory
    handle (``m12``: the artifact the memory was derived from).

    Raises:
        InputError / NotFoundError: see :func:`resolve_ref`.
    """
    handle = parse_handle(ref)
    record_id = resolve_ref(store, scope, conversation_id, ref)
    if handle is None or handle.kind == "artifact":
        return record_id
    sources = store.get_memory(scope, record_id).source_artifact_ids
    if not sources:
        from contextledger.errors import NotFoundError

        raise NotFoundError("artifact", f"source of memory {handle}")
    return str(sources[0])
