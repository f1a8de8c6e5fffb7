"""The neutral, in-memory form every importer produces before anything is stored.

Importers only *parse*; :func:`contextledger.ingest.loader.load_transcript` writes an
``ImportedTranscript`` to the store in one transaction (so a failure leaves no partial
conversation).  Tool results carry their full raw text here: truncation never happens
before the raw artifact is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from contextledger.records.enums import MessageKind, Role, RuntimeKind
from contextledger.records.parts import Part

__all__ = ["ImportedMessage", "ImportedParticipant", "ImportedTranscript"]


@dataclass(kw_only=True)
class ImportedParticipant:
    """A participant found in a transcript.

    Attributes:
        key: importer-local key (``"main"``, ``"subagent:agent-a2898e3"``).
        parent_key: the parent participant for a child subagent.
    """

    key: str
    name: str
    runtime_kind: RuntimeKind = RuntimeKind.CHAT
    parent_key: str | None = None
    provider: str | None = None
    model: str | None = None


@dataclass(kw_only=True)
class ImportedMessage:
    """One transcript node.

    Attributes:
        key: unique within the transcript (source uuid, or ``"line:12"`` / ``"msg:3"``).
        parent_key: the node this one follows.  ``None`` means "the previous message in
            list order" for linear formats, or a root for tree formats (``tree=True``).
        parts: content; ``ToolResultPart.text`` holds the *full* raw result.
        attachments: raw bytes of images/binaries referenced by ``blob_key`` in ``parts``.
        source_ref: ``"line 12"`` / ``"record 3"`` / ``"messages[4]"`` for error messages.
    """

    key: str
    parent_key: str | None = None
    role: Role
    kind: MessageKind = MessageKind.CHAT
    parts: list[Part] = field(default_factory=list)
    participant_key: str = "main"
    speaker_label: str | None = None
    source_ref: str = ""
    created_at: datetime | None = None
    model: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    attachments: dict[str, bytes] = field(default_factory=dict)


@dataclass(kw_only=True)
class ImportedTranscript:
    """A whole parsed transcript.

    Attributes:
        format: ``"openai-chat"``, ``"claude-code"`` or ``"swe-agent"``.
        path: the main file (subagent files are folded in as child participants).
        tree: ``True`` when ``parent_key`` links form a tree (Claude Code); the active path
            is the one leading to ``active_leaf_key``.
        tools: provider tool schemas found in the file (OpenAI function format).
        notes: recorded handling of source faults (renamed duplicate call ids, calls left
            without a result, skipped lines) — shown by ``import`` and kept on the
            conversation's metadata.
        content_key: ``sha256:<hex>`` of the input bytes (idempotent re-import).
    """

    format: str
    path: str
    title: str = ""
    messages: list[ImportedMessage] = field(default_factory=list)
    participants: list[ImportedParticipant] = field(default_factory=list)
    tree: bool = False
    active_leaf_key: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    content_key: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
