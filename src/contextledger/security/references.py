"""Which blobs rows reference, which blobs exist, and the deletion audit.

Shared by garbage collection (:mod:`~contextledger.security.gc`) and deletion
(:mod:`~contextledger.security.forget`): a blob may be deleted only when no row of any
tenant references it (blobs are content addressed and shared).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from contextledger.ids import new_id
from contextledger.security.screen import SECRETS_KEY
from contextledger.store import schema as S

__all__ = ["blob_keys_of_messages", "delete_blob", "iter_stored_blobs", "record_deletion", "referenced_blob_keys"]


def delete_blob(blobs: Any, key: str) -> None:
    """Delete ``key`` from a blob store that supports deletion (every bundled one does)."""
    remove = getattr(blobs, "delete", None)
    if remove is not None:
        remove(key)


def _walk_keys(value: Any, out: set[str]) -> None:
    # message bodies nest at most a few levels (parts → images); bounded recursion
    if isinstance(value, dict):
        for k, v in value.items():
            if k in ("blob_key", "raw_blob_key") and isinstance(v, str):
                out.add(v)
            else:
                _walk_keys(v, out)
    elif isinstance(value, list):
        for v in value:
            _walk_keys(v, out)


def blob_keys_of_messages(bodies: Iterable[str | dict[str, Any]]) -> set[str]:
    """Blob keys named in message bodies (image / binary parts, the sealed original of a
    redacted message)."""
    out: set[str] = set()
    for body in bodies:
        value = json.loads(body) if isinstance(body, str) else body
        _walk_keys({"parts": value.get("parts"), SECRETS_KEY: value.get("metadata", {}).get(SECRETS_KEY)}, out)
    return out


def _message_bodies(conn: Connection, where: Any = None) -> Iterator[str]:
    m = S.messages
    text = sa.cast(m.c.body, sa.Text)
    stmt = sa.select(text).where(sa.or_(text.like('%"blob_key": "sha256:%'), text.like('%"blob_key":"sha256:%'), text.like('%raw_blob_key%')))
    if where is not None:
        stmt = stmt.where(where)
    for (body,) in conn.execute(stmt):
        yield str(body)


def referenced_blob_keys(conn: Connection, where_artifacts: Any = None, where_messages: Any = None) -> set[str]:
    """Every blob key a row references (optionally only the rows the clauses select)."""
    a = S.tool_artifacts
    stmt = sa.select(a.c.blob_key).where(a.c.blob_key.is_not(None))
    if where_artifacts is not None:
        stmt = stmt.where(where_artifacts)
    keys = {str(k) for (k,) in conn.execute(stmt)}
    return keys | blob_keys_of_messages(_message_bodies(conn, where_messages))


def iter_stored_blobs(blobs: Any) -> Iterator[tuple[str, datetime | None, int]]:
    """``(key, written_at, size_bytes)`` of every blob in a store (local folder or blob
    table; a sealing store is looked through)."""
    from contextledger.security.crypto import SealingBlobStore
    from contextledger.store.blobs import LocalBlobStore, SqlBlobStore

    inner = blobs.inner if isinstance(blobs, SealingBlobStore) else blobs
    if isinstance(inner, SqlBlobStore):
        with inner.engine.connect() as conn:
            for key, created, size in conn.execute(sa.select(S.blobs.c.key, S.blobs.c.created_at, S.blobs.c.size_bytes)):
                yield str(key), created if created is None or created.tzinfo else created.replace(tzinfo=UTC), int(size)
    elif isinstance(inner, LocalBlobStore) and inner.root.exists():
        for dirpath, _dirs, files in os.walk(inner.root):
            for name in files:
                if len(name) == 64 and all(c in "0123456789abcdef" for c in name):
                    st = os.stat(os.path.join(dirpath, name))
                    yield f"sha256:{name}", datetime.fromtimestamp(st.st_mtime, UTC), st.st_size


def record_deletion(conn: Connection, *, event: str, tenant_id: str | None, subject: str | None, actor: str, counts: dict[str, Any]) -> str:
    """Append one row to the deletion audit (no content: event, scope ids, actor, counts)."""
    audit_id = new_id("del")
    now = datetime.now(UTC).isoformat()
    body = {"id": audit_id, "created_at": now, "event": event, "tenant_id": tenant_id, "subject": subject, "actor": actor, "counts": counts}
    conn.execute(S.deletion_audit.insert().values(id=audit_id, created_at=now, event=event, tenant_id=tenant_id, subject=subject, actor=actor, body=body))
    return audit_id
