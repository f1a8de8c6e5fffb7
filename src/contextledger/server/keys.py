"""Service API keys: each key maps to one tenant; only its sha256 is stored.

A key is ``clk_`` followed by 43 URL-safe characters (256 random bits), shown once by
``contextledger keys create --tenant T``.  A request presents it as
``x-contextledger-key: <key>`` (or ``Authorization: Bearer <key>`` on ``/api``); the
service looks up ``sha256(key)`` with one index probe.  A high-entropy random key needs no
slow password hash: its sha256 cannot be inverted by guessing.

Needs no optional package: the CLI uses it without the ``server`` extra.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import sqlalchemy as sa

from contextledger.errors import InputError
from contextledger.ids import new_id
from contextledger.store import schema as S

if TYPE_CHECKING:
    from contextledger.ledger import Ledger

__all__ = ["KEY_PREFIX", "ApiKey", "any_active_key", "create_key", "key_hash", "list_keys", "revoke_key", "tenant_of_key"]

KEY_PREFIX = "clk_"
"""Every key starts with this prefix (so a leaked key is recognisable in a scan)."""


@dataclass(frozen=True, kw_only=True)
class ApiKey:
    """A stored key (never the key itself).

    Attributes:
        id: ``key_…``; name it to revoke the key.
        tenant_id: the tenant every request with this key acts for.
        label: free text given at creation.
    """

    id: str
    tenant_id: str
    label: str
    created_at: str
    revoked_at: str | None = None


def key_hash(key: str) -> str:
    """``sha256:<hex>`` of a key's UTF-8 bytes (what the ``api_keys`` table stores)."""
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def create_key(ledger: Ledger, tenant_id: str, *, label: str = "") -> tuple[str, ApiKey]:
    """Create a key for ``tenant_id``; returns ``(key, record)``.  The key is returned only
    here: the table keeps its hash.

    Raises:
        InputError: an empty tenant or one longer than 64 characters.
    """
    if not tenant_id or len(tenant_id) > 64:
        raise InputError(f"tenant must be 1-64 characters, got {tenant_id!r}")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    record = ApiKey(id=new_id("key"), tenant_id=tenant_id, label=label, created_at=datetime.now(UTC).isoformat())
    body = {"id": record.id, "tenant_id": tenant_id, "label": label, "created_at": record.created_at}
    with ledger.store.engine.begin() as conn:
        conn.execute(S.api_keys.insert().values(id=record.id, tenant_id=tenant_id, key_hash=key_hash(key), created_at=record.created_at, body=body))
    return key, record


def list_keys(ledger: Ledger, tenant_id: str | None = None) -> list[ApiKey]:
    """Every stored key (of ``tenant_id`` when given), oldest first."""
    t = S.api_keys
    stmt = sa.select(t.c.id, t.c.tenant_id, t.c.created_at, t.c.revoked_at, t.c.body).order_by(t.c.created_at, t.c.id)
    if tenant_id is not None:
        stmt = stmt.where(t.c.tenant_id == tenant_id)
    with ledger.store.engine.connect() as conn:
        rows = conn.execute(stmt).all()
    return [ApiKey(id=r.id, tenant_id=r.tenant_id, label=str((r.body or {}).get("label", "")), created_at=r.created_at, revoked_at=r.revoked_at) for r in rows]


def revoke_key(ledger: Ledger, key_id: str) -> ApiKey:
    """Revoke a key (it stops working at once, on every worker).

    Raises:
        InputError: no such key.
    """
    t = S.api_keys
    with ledger.store.engine.begin() as conn:
        done = conn.execute(t.update().where(t.c.id == key_id, t.c.revoked_at.is_(None)).values(revoked_at=datetime.now(UTC).isoformat()).returning(t.c.id)).first()
    found = [k for k in list_keys(ledger) if k.id == key_id]
    if done is None and not found:
        raise InputError(f"no API key {key_id!r}")
    return found[0]


def tenant_of_key(ledger: Ledger, key: str) -> str | None:
    """The tenant of an active key, or ``None`` for an unknown or revoked one."""
    t = S.api_keys
    with ledger.store.engine.connect() as conn:
        row = conn.execute(sa.select(t.c.tenant_id).where(t.c.key_hash == key_hash(key), t.c.revoked_at.is_(None))).first()
    return None if row is None else str(row.tenant_id)


def any_active_key(ledger: Ledger) -> bool:
    """Whether at least one key is active (then every request must present one)."""
    t = S.api_keys
    with ledger.store.engine.connect() as conn:
        return conn.execute(sa.select(t.c.id).where(t.c.revoked_at.is_(None)).limit(1)).first() is not None
