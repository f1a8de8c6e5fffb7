"""Retention: delete an artifact's raw payload, keep its evidence trail (seed 000 §4.15).

The artifact row keeps its sha256, byte size and memory; the inline text and the blob
(unless another artifact still holds the same bytes) are removed; derived memories keep
only metadata and provenance (they may quote the payload); a retention PolicyDecision
records who and why.  Later assemblies omit the raw payload with reason
``retention_deleted``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import sqlalchemy as sa

from contextledger.ids import new_id
from contextledger.records.enums import PolicyFamily
from contextledger.records.models import PolicyDecision
from contextledger.store import schema as S
from contextledger.store.base import Scope

if TYPE_CHECKING:
    from contextledger.runtime import HasRuntime

__all__ = ["apply_retention"]


def apply_retention(source: HasRuntime, scope: Scope, artifact_id: str, *, reason: str, actor: str = "retention", now: datetime | None = None) -> None:
    """Delete the raw payload of ``artifact_id`` (rules in the module docstring), in one
    transaction; the blob is deleted after commit when no other artifact shares it.

    Raises:
        NotFoundError: unknown artifact in ``scope``.
    """
    store = source.runtime.store
    art = store.get_artifact(scope, artifact_id)
    now = now or datetime.now(UTC)
    day = now.date().isoformat()
    mems = store.memories(scope, art.conversation_id, artifact_ids=[art.id])
    with store.writer(scope) as w:
        w.update_artifact(art.model_copy(update={"deleted_at": now, "inline_text": None, "blob_key": None}))
        for m in mems:
            # a derived memory may quote the payload: keep only metadata and provenance
            w.update_memory(m.model_copy(update={
                "summary": f"{m.source_tool} {m.status.value}: payload deleted by retention on {day} ({art.size_bytes:,} bytes, {art.sha256[:19]})",
                "payload": {"retention": "deleted", "deleted_on": day, "size_bytes": art.size_bytes, "sha256": art.sha256},
                "limits": f"payload deleted by retention on {day}: {reason}",
            }))
        w.conn.execute(S.tool_artifacts.update().where(S.tool_artifacts.c.id == art.id, S.tool_artifacts.c.tenant_id == scope.tenant_id).values(inline_text=None, blob_key=None))
        w.add_decision(PolicyDecision(id=new_id("dec"), tenant_id=scope.tenant_id, conversation_id=art.conversation_id, family=PolicyFamily.RETENTION, decision="delete_payload", record_id=art.id, reason=reason, actor=actor, created_at=now))
        shared = 0
        if art.blob_key:
            t = S.tool_artifacts
            shared = int(w.conn.execute(sa.select(sa.func.count()).where(t.c.blob_key == art.blob_key, t.c.id != art.id, t.c.inline_text.is_(None))).scalar_one())
    if art.blob_key and not shared and hasattr(store.blobs, "delete"):
        store.blobs.delete(art.blob_key)
