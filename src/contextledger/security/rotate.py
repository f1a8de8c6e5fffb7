"""Key rotation: a new current key, and every sealed payload re-sealed with it.

:func:`rotate_keys` (``contextledger encryption rotate``):

1. adds a fresh key in front of the keyring — written to the key file, or, when the keys
   come from ``CONTEXTLEDGER_KEYS`` or a provider, returned for the operator to install
   (the command prints the new ``CONTEXTLEDGER_KEYS`` value);
2. re-seals every sealed payload that a row references (artifact ``blob_key``, a redacted
   message's ``metadata["secrets"]["raw_blob_key"]``) with the new key, updates the row,
   and deletes the old envelope — one transaction per row, so an interrupted rotation
   leaves every row readable (the old keys stay in the keyring until you remove them);
3. reports how many payloads each key still seals (``sealed_by_key``: only the new key
   once rotation finished; an old key can then be dropped).
"""

from __future__ import annotations

import os
from collections import Counter
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from contextledger.errors import BackendError
from contextledger.records.models import Message, ToolArtifact
from contextledger.security.crypto import (
    Keyring,
    SealingBlobStore,
    is_sealed,
    parse_keys,
    sealed_key_id,
)
from contextledger.security.screen import SECRETS_KEY
from contextledger.store import schema as S
from contextledger.store.base import Scope

if TYPE_CHECKING:
    from pathlib import Path

    from contextledger.runtime import HasRuntime

__all__ = ["rotate_keys", "sealed_references"]


def sealed_references(ledger: HasRuntime) -> list[tuple[str, str, str, str]]:
    """``(kind, tenant, record id, blob key)`` of every row that names a restricted
    payload (artifacts with a blob, messages with a redacted original)."""
    out: list[tuple[str, str, str, str]] = []
    a, m = S.tool_artifacts, S.messages
    with ledger.runtime.store.reader() as conn:
        for tenant, rid, key in conn.execute(sa.select(a.c.tenant_id, a.c.id, a.c.blob_key).where(a.c.blob_key.is_not(None))):
            out.append(("artifact", tenant, rid, key))
        like = sa.cast(m.c.body, sa.Text).like('%"raw_blob_key"%')
        for tenant, rid, body in conn.execute(sa.select(m.c.tenant_id, m.c.id, sa.cast(m.c.body, sa.Text)).where(like)):
            msg = Message.model_validate_json(body)
            found = msg.metadata.get(SECRETS_KEY)
            if isinstance(found, dict) and isinstance(found.get("raw_blob_key"), str):
                out.append(("message", tenant, rid, found["raw_blob_key"]))
    return out


def _reseal(ledger: HasRuntime, blobs: SealingBlobStore, kind: str, tenant: str, rid: str, key: str) -> str:
    from contextledger.graph._writes import update_message

    scope = Scope(tenant_id=tenant)
    new_key = blobs.put_sealed(blobs.get(key))
    with ledger.runtime.store.writer(scope) as w:
        if kind == "artifact":
            body = w.conn.execute(sa.select(sa.cast(S.tool_artifacts.c.body, sa.Text)).where(S.tool_artifacts.c.id == rid, S.tool_artifacts.c.tenant_id == tenant)).scalar_one()
            w.update_artifact(ToolArtifact.model_validate_json(body).model_copy(update={"blob_key": new_key}))
            t = S.tool_artifacts
            w.conn.execute(t.update().where(t.c.id == rid, t.c.tenant_id == tenant).values(blob_key=new_key))
        else:
            body = w.conn.execute(sa.select(sa.cast(S.messages.c.body, sa.Text)).where(S.messages.c.id == rid, S.messages.c.tenant_id == tenant)).scalar_one()
            msg = Message.model_validate_json(body)
            meta = {**msg.metadata, SECRETS_KEY: {**msg.metadata[SECRETS_KEY], "raw_blob_key": new_key}}
            update_message(w, msg.model_copy(update={"metadata": meta}))
    blobs.delete(key)
    return new_key


def rotate_keys(ledger: HasRuntime, *, key_file: Path | None = None) -> dict[str, Any]:
    """Rotate to a fresh key and re-seal every sealed payload (see the module docstring).

    Returns:
        ``{"key_id", "written_to", "keys_value", "resealed", "sealed_by_key"}``;
        ``keys_value`` is the new ``CONTEXTLEDGER_KEYS`` value when the keys do not come
        from a key file (``None`` otherwise — it holds key material).

    Raises:
        BackendError: the ledger was not opened with :meth:`Ledger.open` (no sealing), or
            a key cannot be read; MissingKeyError: a payload's key is not configured.
    """
    blobs = ledger.runtime.store.blobs
    if not isinstance(blobs, SealingBlobStore):
        raise BackendError("this ledger does not seal payloads (open it with Ledger.open)")
    old = blobs.keyring(reload=True)
    ring = Keyring((Keyring.new_key(), *old.keys))
    env = os.environ.get("CONTEXTLEDGER_KEYS")
    written_to: str | None = None
    if key_file is not None and not env:
        tmp = key_file.with_suffix(".new")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("# contextledger encryption keys (id:base64); the first seals\n" + ring.render())
        os.replace(tmp, key_file)
        written_to = str(key_file)
    blobs.keys = lambda: ring
    blobs.keyring(reload=True)
    resealed = 0
    for kind, tenant, rid, key in sealed_references(ledger):
        if is_sealed(blobs.get_raw(key)) and sealed_key_id(blobs.get_raw(key)) != ring.current[0]:
            _reseal(ledger, blobs, kind, tenant, rid, key)
            resealed += 1
    by_key: Counter[str] = Counter()
    for _, _, _, key in sealed_references(ledger):
        raw = blobs.get_raw(key)
        if is_sealed(raw):
            by_key[sealed_key_id(raw)] += 1
    keys_value = None if written_to else ",".join(line.strip() for line in ring.render().splitlines())
    assert parse_keys(keys_value or ring.render(), source="rotation").current == ring.current
    return {"key_id": ring.current[0], "written_to": written_to, "keys_value": keys_value, "resealed": resealed, "sealed_by_key": dict(by_key)}
