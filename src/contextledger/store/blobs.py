"""Content-addressed blob storage for payloads above the inline threshold.

A blob's key is ``sha256:<hex>`` of its bytes.  :class:`LocalBlobStore` keeps each blob in
``<root>/<hex[:2]>/<hex[2:4]>/<hex>``, written to a temporary file and renamed into place,
so concurrent writers of the same content are safe and a reader never sees a partial file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Protocol, runtime_checkable

from contextledger.errors import InputError, IntegrityError

__all__ = ["BlobStore", "LocalBlobStore", "sha256_key"]


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
