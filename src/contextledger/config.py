"""Where data lives: ``CONTEXTLEDGER_HOME``, ``CONTEXTLEDGER_DB`` and defaults.

Defaults (embedded): an SQLite file ``<home>/ledger.db`` and a content-addressed blob
store ``<home>/blobs``, with ``home`` = ``$CONTEXTLEDGER_HOME`` or ``~/.contextledger``.
``CONTEXTLEDGER_DB`` (or ``--db``) selects another database URL, e.g.
``postgresql+psycopg://user@host:5432/db``; blobs then stay under ``<home>/blobs``
unless ``CONTEXTLEDGER_BLOBS`` names another folder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LedgerConfig", "resolve_config"]


@dataclass(frozen=True, kw_only=True)
class LedgerConfig:
    """Resolved storage locations.

    Attributes:
        db_url: SQLAlchemy URL of the relational store.
        blob_root: folder of the local blob store.
        inline_threshold_bytes: payloads above this go to the blob store (default 4096).
    """

    db_url: str
    blob_root: Path
    inline_threshold_bytes: int = 4096


def resolve_config(db: str | None = None, home: str | Path | None = None, blobs: str | Path | None = None) -> LedgerConfig:
    """Resolve storage locations from arguments, then environment, then defaults.

    ``db`` may be a URL or a plain file path (taken as an SQLite file).
    """
    home_path = Path(home or os.environ.get("CONTEXTLEDGER_HOME") or Path.home() / ".contextledger").expanduser()
    url = db or os.environ.get("CONTEXTLEDGER_DB") or f"sqlite:///{home_path / 'ledger.db'}"
    if "://" not in url:
        url = f"sqlite:///{Path(url).expanduser().resolve()}"
    blob_root = Path(blobs or os.environ.get("CONTEXTLEDGER_BLOBS") or home_path / "blobs").expanduser()
    return LedgerConfig(db_url=url, blob_root=blob_root)
