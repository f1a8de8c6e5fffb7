"""Read-only listings of an SQLite ledger through the standard library's ``sqlite3``,
for the commands that must start at once (``contextledger conversations``): neither
SQLAlchemy nor pydantic is imported, bodies are read with :func:`json.loads`.

The direct path applies only where it reads exactly what the store would: an SQLite
file named by a plain ``sqlite:///PATH`` URL that exists, whose schema is at the bundled
migrations' head (:func:`~contextledger.store.revisions.script_head`), with the columns
and JSON bodies the store writes.  Anywhere else (PostgreSQL, a URL with options, an
older schema that opening would migrate, an unreadable file) it answers ``None`` and the
caller takes the store's own path, which reports any error as it always does.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from contextledger.store.revisions import script_head

__all__ = ["ConversationRow", "list_conversations", "sqlite_path", "sqlite_read_only_query"]

_BUSY_TIMEOUT_S = 60.0
"""How long a read waits for a writer's lock (the store's busy timeout)."""

_LIST_CONVERSATIONS = (
    "SELECT c.body,"
    " (SELECT count(*) FROM messages m WHERE m.tenant_id = ? AND m.conversation_id = c.id),"
    " (SELECT count(*) FROM tool_calls t WHERE t.tenant_id = ? AND t.conversation_id = c.id),"
    " (SELECT count(*) FROM tool_artifacts a WHERE a.tenant_id = ? AND a.conversation_id = c.id)"
    " FROM conversations c WHERE c.tenant_id = ? ORDER BY c.created_at, c.id"
)
"""The statement of :meth:`~contextledger.store.read_graph.GraphReads.list_conversations`."""


@dataclass(frozen=True, kw_only=True)
class ConversationRow:
    """One conversation as ``contextledger conversations`` lists it (counts are rows of
    the tenant: messages, tool calls, tool artifacts)."""

    conversation_id: str
    title: str
    source: str
    source_path: str | None
    messages: int
    tool_calls: int
    artifacts: int
    created_at: datetime

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (``created_at`` in ISO 8601)."""
        return {
            "conversation_id": self.conversation_id, "title": self.title, "source": self.source, "source_path": self.source_path,
            "messages": self.messages, "tool_calls": self.tool_calls, "artifacts": self.artifacts, "created_at": self.created_at.isoformat(),
        }


def sqlite_read_only_query(path: str) -> str | None:
    """The SQLite URI query that opens the existing ledger file ``path`` read-only, or
    ``None`` when it can be opened for writing (or does not exist yet, or is ``:memory:``
    or a URI already).

    The file is read-only when it, or its folder, is not writable (a read-only mount,
    permissions): ``mode=ro``; when the folder is not writable and no ``-wal`` / ``-shm``
    file exists, SQLite cannot create the WAL index either, so the file is opened
    ``immutable=1`` (nobody can be writing it: a writer needs those files).
    """
    if not path or path == ":memory:" or path.startswith("file:"):
        return None
    file = Path(path)
    if not file.is_file():
        return None
    folder_writable = os.access(file.parent, os.W_OK)
    if folder_writable and os.access(file, os.W_OK):
        return None
    if not folder_writable and not any(Path(f"{path}{tail}").exists() for tail in ("-wal", "-shm")):
        return "mode=ro&immutable=1"
    return "mode=ro"


def sqlite_path(url: str) -> str | None:
    """The file of a plain ``sqlite:///PATH`` URL when it exists, else ``None`` (another
    backend, an in-memory database, a ``file:`` URI or a URL with query options)."""
    if not url.startswith("sqlite:///") or "?" in url:
        return None
    path = url[len("sqlite:///") :]
    if not path or path == ":memory:" or path.startswith("file:") or not Path(path).is_file():
        return None
    return path


def _connect(path: str) -> sqlite3.Connection:
    query = sqlite_read_only_query(path) or "mode=ro"
    return sqlite3.connect(f"file:{quote(path)}?{query}", uri=True, timeout=_BUSY_TIMEOUT_S, isolation_level=None)


def _row(body: str, messages: int, tool_calls: int, artifacts: int) -> ConversationRow:
    data = json.loads(body)
    return ConversationRow(
        conversation_id=str(data["id"]),
        title=str(data.get("title", "")),
        source=str(data.get("source", "recorder")),
        source_path=data.get("source_path"),
        messages=int(messages),
        tool_calls=int(tool_calls),
        artifacts=int(artifacts),
        created_at=datetime.fromisoformat(data["created_at"]),
    )


def list_conversations(url: str, tenant_id: str) -> list[ConversationRow] | None:
    """Every conversation of ``tenant_id`` in the SQLite ledger at ``url`` (oldest first,
    as the store lists them), read directly; ``None`` when the direct path does not apply
    (module docstring) or reading fails in any way — the caller then opens the ledger.

    Args:
        url: the resolved database URL (:func:`contextledger.config.resolve_config`).
        tenant_id: the tenant; an empty one is left to the store (which refuses it).
    """
    path = sqlite_path(url)
    head = script_head()
    if path is None or head is None or not tenant_id:
        return None
    try:
        conn = _connect(path)
        try:
            conn.execute("BEGIN")  # one snapshot for the revision check and the listing
            revision = conn.execute("SELECT version_num FROM alembic_version").fetchall()
            if revision != [(head,)]:
                return None
            rows = conn.execute(_LIST_CONVERSATIONS, (tenant_id,) * 4).fetchall()
        finally:
            conn.close()
        return [_row(*r) for r in rows]
    except (sqlite3.Error, ValueError, KeyError, TypeError):
        return None
