"""Content-addressed blob storage for payloads above the inline threshold.

A blob's key is ``sha256:<hex>`` of its bytes.  :class:`LocalBlobStore` keeps each blob in
``<root>/<hex[:2]>/<hex[2:4]>/<hex>``, written to a temporary file and renamed into place,
so concurrent writers of the same content are safe and a reader never sees a partial file.
:class:`SqlBlobStore` keeps blobs in the ledger's database (the default of a PostgreSQL
ledger, so several service workers and hosts share them).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from contextledger.errors import InputError, IntegrityError

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = ["BlobStore", "LocalBlobStore", "SqlBlobStore", "sha256_key"]


def sha256_key(data: bytes) -> str:
    """The content address of ``data``: ``"sha256:" + hexdigest``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


@runtime_checkable
class BlobStore(Protocol):
    """Where large raw payloads live.  Keys are content addresses (``sha256:<hex>``)."""

    def put(self, data: bytes) -> str:
        """Store ``data`` (idempotent) and return its key."""
        ...

    def get(self, key: str) -> bytes:
        """The exact bytes stored under ``key``.

        Raises:
            IntegrityError: the blob is missing or its bytes no longer hash to ``key``.
        """
        ...

    def exists(self, key: str) -> bool:
        """Whether a blob is stored under ``key``."""
        ...


class LocalBlobStore:
    """A :class:`BlobStore` on the local file system under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        algo, _, digest = key.partition(":")
        if algo != "sha256" or len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
            raise InputError(f"not a blob key: {key!r} (expected 'sha256:<64 hex>')")
        return self.root / digest[:2] / digest[2:4] / digest

    def put(self, data: bytes) -> str:
        """Store ``data`` and return ``sha256:<hex>``; a second put of the same bytes is free."""
        key = sha256_key(data)
        path = self._path(key)
        if path.exists():
            return key
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return key

    def get(self, key: str) -> bytes:
        """Read and verify the blob ``key``.

        Raises:
            IntegrityError: missing file or hash mismatch.
        """
        path = self._path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise IntegrityError(key, key, None) from None
        actual = sha256_key(data)
        if actual != key:
            raise IntegrityError(key, key, actual)
        return data

    def exists(self, key: str) -> bool:
        """Whether the blob file exists (not verified)."""
        return self._path(key).exists()

    def delete(self, key: str) -> None:
        """Remove the blob (retention); missing blobs are ignored."""
        self._path(key).unlink(missing_ok=True)


class SqlBlobStore:
    """A :class:`BlobStore` in the ledger's own database (the ``blobs`` table).

    The default of a PostgreSQL ledger: every service worker and host that opens the
    database reads and writes the same payloads, with no shared folder.  ``fallback`` is
    read (never written) for a key the table does not hold — the local folder where
    earlier versions kept a PostgreSQL ledger's blobs.

    Args:
        engine: the ledger's SQLAlchemy engine.
        fallback: a store consulted by :meth:`get` / :meth:`exists` on a miss.
    """

    def __init__(self, engine: Engine, *, fallback: BlobStore | None = None) -> None:
        self.engine = engine
        self.fallback = fallback

    def put(self, data: bytes) -> str:
        """Store ``data`` (one ``INSERT … ON CONFLICT DO NOTHING``) and return its key;
        concurrent writers of the same bytes are safe."""
        from contextledger.store.schema import blobs

        key = sha256_key(data)
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]
        stmt = insert(blobs).values(key=key, size_bytes=len(data), data=data).on_conflict_do_nothing()
        with self.engine.begin() as conn:
            conn.execute(stmt)
        return key

    def get(self, key: str) -> bytes:
        """The verified bytes of ``key``.

        Raises:
            IntegrityError: missing in the table and the fallback, or a hash mismatch.
        """
        import sqlalchemy as sa

        from contextledger.store.schema import blobs

        _check_key(key)
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(blobs.c.data).where(blobs.c.key == key)).first()
        if row is None:
            if self.fallback is not None:
                return self.fallback.get(key)
            raise IntegrityError(key, key, None)
        data = bytes(row.data)
        actual = sha256_key(data)
        if actual != key:
            raise IntegrityError(key, key, actual)
        return data

    def exists(self, key: str) -> bool:
        """Whether ``key`` is stored (in the table or the fallback)."""
        import sqlalchemy as sa

        from contextledger.store.schema import blobs

        _check_key(key)
        with self.engine.connect() as conn:
            found = conn.execute(sa.select(blobs.c.key).where(blobs.c.key == key)).first() is not None
        return found or (self.fallback is not None and self.fallback.exists(key))

    def delete(self, key: str) -> None:
        """Remove the blob (retention) from the table and the fallback; missing keys are
        ignored."""
        from contextledger.store.schema import blobs

        _check_key(key)
        with self.engine.begin() as conn:
            conn.execute(blobs.delete().where(blobs.c.key == key))
        remove = getattr(self.fallback, "delete", None)
        if remove is not None:
            remove(key)


def _check_key(key: str) -> None:
    algo, _, digest = key.partition(":")
    if algo != "sha256" or len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
        raise InputError(f"not a blob key: {key!r} (expected 'sha256:<64 hex>')")
