"""What of a record is searchable: the text the keyword route indexes and the text the
semantic route embeds (seed 001 §4.5).

* a user, assistant or moderator chat message (also a child's report): its text parts;
* a tool memory: its tool, subject, summary and the labels its extractor recorded, plus
  — when the artifact is at hand — the call's arguments and the head of the raw result
  (:data:`RAW_HEAD_CHARS`), so an error code or a value deep in a log is found by its
  own words.

Memories (with the head of their raw result), user messages and assistant text are
embedded (:func:`semantic_text`): they carry the facts and the questions — a
conversation without tool calls keeps its facts in its messages; tool-call arguments
are left to the keyword route.  A user message is embedded on the query side of an
asymmetric model (:func:`is_query_side`), so its stored vector is the request's query
vector.  Every function is pure and deterministic.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from contextledger.records.enums import MessageKind, Role
from contextledger.records.models import Message, ToolArtifact, ToolMemory

__all__ = [
    "RAW_HEAD_CHARS",
    "RecordKind",
    "is_query_side",
    "keyword_text",
    "message_text",
    "scope_token",
    "semantic_text",
]

RecordKind = Literal["message", "memory"]
"""The kinds of record the retrieval index holds."""

RAW_HEAD_CHARS = 4000
"""Characters of an inline raw result indexed for keywords beside its memory."""

SEMANTIC_CHARS = 1500
"""Characters of a record's text embedded (the model reads at most 256 word pieces)."""

_MESSAGE_ROLES = frozenset({Role.USER, Role.ASSISTANT})
_MESSAGE_KINDS = frozenset({MessageKind.CHAT, MessageKind.MODERATOR, MessageKind.CHILD_REPORT})


def scope_token(tenant_id: str, conversation_id: str) -> str:
    """The token that confines a full-text match to one tenant's conversation."""
    return "s" + hashlib.sha256(f"{tenant_id}\x00{conversation_id}".encode()).hexdigest()[:32]


def message_text(msg: Message) -> str | None:
    """The searchable text of a user / assistant chat message (``None``: not indexed —
    tool results are indexed through their memories, system text is always sent)."""
    if msg.role not in _MESSAGE_ROLES or msg.kind not in _MESSAGE_KINDS:
        return None
    text = "\n".join(p.text for p in msg.parts if p.kind == "text" and p.text).strip()
    return text or None


def _labels(mem: ToolMemory) -> str:
    ids = mem.payload.get("ids") if isinstance(mem.payload, dict) else None
    if not isinstance(ids, list):
        return ""
    return " ".join(f"{i.get('label') or ''} {i.get('id') or ''}" for i in ids if isinstance(i, dict))


def keyword_text(record: Message | ToolMemory, artifact: ToolArtifact | None = None) -> str | None:
    """The text tokenised for the keyword route (``None``: the record is not indexed).

    ``artifact``: the memory's source artifact when at hand (its arguments and the
    first :data:`RAW_HEAD_CHARS` characters of an inline result are added)."""
    if isinstance(record, Message):
        return message_text(record)
    parts = [record.source_tool, record.subject_key or "", record.summary, _labels(record)]
    if artifact is not None:
        parts.append(artifact.arguments_json[:RAW_HEAD_CHARS])
        if artifact.inline_text:
            parts.append(artifact.inline_text[:RAW_HEAD_CHARS])
    return "\n".join(p for p in parts if p)


def semantic_text(record: Message | ToolMemory, artifact: ToolArtifact | None = None) -> str | None:
    """The text embedded for the semantic route: a memory's summary followed by the
    head of its inline raw result when at hand (an extractor's summary may name the
    result's shape rather than its content), a chat message's text (``None``: not
    embedded)."""
    if isinstance(record, Message):
        text = message_text(record)
        return text[:SEMANTIC_CHARS] if text else None
    raw = f"\n{artifact.inline_text}" if artifact is not None and artifact.inline_text else ""
    return f"{record.source_tool}: {record.summary}{raw}"[:SEMANTIC_CHARS]


def is_query_side(record: Message | ToolMemory) -> bool:
    """Whether ``record`` is embedded as a query (a user message: it asks) rather than a
    document (E5's ``"query: "`` / ``"passage: "``; one side for a symmetric model)."""
    return isinstance(record, Message) and record.role is Role.USER
