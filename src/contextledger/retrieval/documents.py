"""What of a record is searchable: the text the keyword route indexes and the text the
semantic route embeds (seed 001 §4.5).

* a user, assistant or moderator chat message (also a child's report): its text parts;
* a tool memory: its tool, subject, summary and the labels its extractor recorded, plus
  — when the artifact is at hand — the call's arguments and the raw result's text
  (its :func:`~contextledger.limits.scan_window`, up to :data:`RAW_DOC_TOKENS` distinct
  tokens), so an identifier deep in a file read or an error code deep in a log is found
  by its own words, whether the result is stored inline or as a blob
  (:func:`searchable_artifact`).

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

from contextledger.limits import scan_window
from contextledger.records.enums import MessageKind, Role
from contextledger.records.models import Message, ToolArtifact, ToolMemory
from contextledger.retrieval.text import MAX_DOC_TOKENS, tokens

__all__ = [
    "RAW_DOC_TOKENS",
    "RAW_HEAD_CHARS",
    "RecordKind",
    "is_query_side",
    "keyword_text",
    "keyword_tokens",
    "message_text",
    "scope_token",
    "searchable_artifact",
    "semantic_text",
]

RecordKind = Literal["message", "memory"]
"""The kinds of record the retrieval index holds."""

RAW_HEAD_CHARS = 4000
"""Characters of a tool call's arguments shown or embedded as a head; the keyword route
reads the arguments' and the result's whole scan windows."""

RAW_DOC_TOKENS = 1500
"""Distinct keyword tokens indexed for a memory with its raw result (a record without
one keeps :data:`~contextledger.retrieval.text.MAX_DOC_TOKENS`): a 13 kB source file
holds about a thousand."""

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

    ``artifact``: the memory's source artifact when at hand (the scan windows of its
    arguments and of its inline text are added; see :func:`searchable_artifact`)."""
    if isinstance(record, Message):
        return message_text(record)
    parts = [record.source_tool, record.subject_key or "", record.summary, _labels(record)]
    if artifact is not None:
        parts.append(scan_window(artifact.arguments_json))
        if artifact.inline_text:
            parts.append(scan_window(artifact.inline_text))
    return "\n".join(p for p in parts if p)


def keyword_tokens(record: Message | ToolMemory, artifact: ToolArtifact | None = None) -> list[str]:
    """The keyword route's index tokens of ``record`` (:func:`keyword_text` through
    :func:`~contextledger.retrieval.text.tokens`, in first-occurrence order): at most
    :data:`RAW_DOC_TOKENS` for a memory indexed with its artifact, else
    :data:`~contextledger.retrieval.text.MAX_DOC_TOKENS`; ``[]`` when not indexed."""
    text = keyword_text(record, artifact)
    if not text:
        return []
    return tokens(text, limit=RAW_DOC_TOKENS if artifact is not None else MAX_DOC_TOKENS)


def searchable_artifact(artifact: ToolArtifact, text: str | None) -> ToolArtifact:
    """``artifact`` as the retrieval index reads it when its result is recorded: its
    inline text replaced by ``text``, the screened text of the whole result (the redacted
    text of a secret-like one; ``None`` for a binary payload), so a result kept as a blob
    is searchable like an inline one and a secret never enters the index.  The stored
    row is not changed."""
    if artifact.inline_text == text:
        return artifact
    return artifact.model_copy(update={"inline_text": text})


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
