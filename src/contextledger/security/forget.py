"""Deletion of a conversation or a whole tenant (seed 000 §4.15: account deletion removes
artifacts, memories and assembly logs).

:func:`forget_conversation` deletes, in one transaction, every row of the conversation in
every table (messages, calls, artifacts, memories and their terms, branches and counters,
participants, runs, runtime state, rules, assemblies, decisions) and the conversation
itself, and appends a ``deletion_audit`` row (event, tenant, conversation id, actor, row
counts — no content).  After the commit, each blob the conversation referenced and no
remaining row of any tenant references is deleted (blobs are content addressed and may be
shared).  :func:`forget_tenant` does this for each of the tenant's conversations (one
transaction each), then deletes the tenant's remaining rows (service API keys, the tenant
record).  Both work the same on SQLite and PostgreSQL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from contextledger.errors import NotFoundError
from contextledger.security.references import (
    blob_keys_of_messages,
    delete_blob,
    record_deletion,
    referenced_blob_keys,
)
from contextledger.store import schema as S
from contextledger.store.base import Scope

if TYPE_CHECKING:
    from contextledger.runtime import HasRuntime

__all__ = ["forget_conversation", "forget_tenant"]


def _conversation_blobs(conn: sa.Connection, tenant: str, conv_id: str) -> set[str]:
    a, m = S.tool_artifacts, S.messages
    keys = {str(k) for (k,) in conn.execute(sa.select(a.c.blob_key).where(a.c.tenant_id == tenant, a.c.conversation_id == conv_id, a.c.blob_key.is_not(None)))}
    bodies = (str(b) for (b,) in conn.execute(sa.select(sa.cast(m.c.body, sa.Text)).where(m.c.tenant_id == tenant, m.c.conversation_id == conv_id)))
    return keys | blob_keys_of_messages(bodies)


def _delete_unreferenced(ledger: HasRuntime, candidates: set[str]) -> int:
    if not candidates:
        return 0
    with ledger.runtime.store.reader() as conn:
        still = referenced_blob_keys(conn)
    gone = 0
    for key in sorted(candidates - still):
        if ledger.runtime.store.blobs.exists(key):
            delete_blob(ledger.runtime.store.blobs, key)
            gone += 1
    return gone


def forget_conversation(ledger: HasRuntime, scope: Scope, conversation_id: str, *, actor: str = "api") -> dict[str, Any]:
    """Delete one conversation and everything only it references (see the module
    docstring).  Returns ``{"conversation_id", "rows": {table: n}, "blobs_deleted",
    "audit_id"}``.

    Raises:
        NotFoundError: no such conversation in the tenant.
    """
    tenant = scope.tenant_id
    with ledger.runtime.store.writer(scope) as w:
        conn = w.conn
        c = S.conversations
        if conn.execute(sa.select(c.c.id).where(c.c.id == conversation_id, c.c.tenant_id == tenant)).first() is None:
            raise NotFoundError("conversation", conversation_id)
        blobs = _conversation_blobs(conn, tenant, conversation_id)
        rows: dict[str, int] = {}
        for table in reversed(S.metadata.sorted_tables):
            if "conversation_id" in table.c and "tenant_id" in table.c:
                n = conn.execute(table.delete().where(table.c.tenant_id == tenant, table.c.conversation_id == conversation_id)).rowcount
                if n:
                    rows[table.name] = int(n)
        rows["conversations"] = int(conn.execute(c.delete().where(c.c.id == conversation_id, c.c.tenant_id == tenant)).rowcount)
        audit_id = record_deletion(conn, event="forget_conversation", tenant_id=tenant, subject=conversation_id, actor=actor, counts={"rows": rows, "blobs_referenced": len(blobs)})
    ledger.runtime.store.forget_lineages()
    return {"conversation_id": conversation_id, "rows": rows, "blobs_deleted": _delete_unreferenced(ledger, blobs), "audit_id": audit_id}


def _tenant_has_rows(conn: sa.Connection, tenant_id: str) -> bool:
    """Whether any table (the deletion audit aside) holds a row of ``tenant_id``."""
    for table in S.metadata.sorted_tables:
        if table.name == "deletion_audit" or "tenant_id" not in table.c:
            continue
        if conn.execute(sa.select(sa.literal(1)).select_from(table).where(table.c.tenant_id == tenant_id).limit(1)).first() is not None:
            return True
    return conn.execute(sa.select(sa.literal(1)).select_from(S.tenants).where(S.tenants.c.id == tenant_id).limit(1)).first() is not None


def forget_tenant(ledger: HasRuntime, tenant_id: str, *, actor: str = "api") -> dict[str, Any]:
    """Delete every conversation of ``tenant_id`` (one transaction each), then the tenant's
    other rows.  Returns ``{"tenant_id", "conversations", "rows", "blobs_deleted",
    "audit_id"}``.

    Raises:
        NotFoundError: no row of any table belongs to ``tenant_id`` (a mistyped tenant):
            nothing is deleted and nothing audited.
    """
    scope = Scope(tenant_id=tenant_id)
    c = S.conversations
    with ledger.runtime.store.reader() as conn:
        conv_ids = [str(r[0]) for r in conn.execute(sa.select(c.c.id).where(c.c.tenant_id == tenant_id).order_by(c.c.id))]
        if not conv_ids and not _tenant_has_rows(conn, tenant_id):
            raise NotFoundError("tenant", tenant_id, "no conversation or other record of it; nothing deleted")
    rows: dict[str, int] = {}
    blobs_deleted = 0
    for conv_id in conv_ids:
        done = forget_conversation(ledger, scope, conv_id, actor=actor)
        blobs_deleted += done["blobs_deleted"]
        for k, v in done["rows"].items():
            rows[k] = rows.get(k, 0) + v
    with ledger.runtime.store.engine.begin() as conn:
        for table in S.metadata.sorted_tables:
            if table.name != "deletion_audit" and "tenant_id" in table.c:
                n = conn.execute(table.delete().where(table.c.tenant_id == tenant_id)).rowcount
                if n:
                    rows[table.name] = rows.get(table.name, 0) + int(n)
        n = conn.execute(S.tenants.delete().where(S.tenants.c.id == tenant_id)).rowcount
        if n:
            rows["tenants"] = int(n)
        audit_id = record_deletion(conn, event="forget_tenant", tenant_id=tenant_id, subject=tenant_id, actor=actor, counts={"conversations": len(conv_ids), "rows": rows, "blobs_deleted": blobs_deleted})
    return {"tenant_id": tenant_id, "conversations": len(conv_ids), "rows": rows, "blobs_deleted": blobs_deleted, "audit_id": audit_id}
