"""The ``store`` fixture: a fresh :class:`SqlStore` on each backend (``backend_url``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contextledger.store.base import Scope
from contextledger.store.blobs import LocalBlobStore
from contextledger.store.sql import SqlStore


@pytest.fixture
def store(backend_url: str, tmp_path: Path) -> Iterator[SqlStore]:
    """A migrated store on the parametrised backend, blobs under ``tmp_path/blobs``."""
    s = SqlStore(backend_url, LocalBlobStore(tmp_path / "blobs"))
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def scope_a() -> Scope:
    """Tenant ``acme``."""
    return Scope(tenant_id="acme")


@pytest.fixture
def scope_b() -> Scope:
    """Tenant ``globex`` (holds content overlapping ``acme``'s in isolation tests)."""
    return Scope(tenant_id="globex")
