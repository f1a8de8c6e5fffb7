"""The head revision of the bundled migrations, read from the migration files alone
(neither Alembic nor SQLAlchemy imported): what :func:`contextledger.store.migrate.upgrade`
compares a database with before deciding to migrate, and what the direct SQLite listing
(:mod:`contextledger.store.sqlite_direct`) requires before it reads a ledger."""

from __future__ import annotations

import functools
import re
from pathlib import Path

__all__ = ["script_head"]

_MIGRATIONS = Path(__file__).with_name("migrations")

_REVISION_LINE = re.compile(r"^(revision|down_revision)\s*(?::[^=]*)?=\s*(None|\"([^\"]+)\"|'([^']+)')\s*$", re.MULTILINE)


@functools.cache
def script_head() -> str | None:
    """The head revision read from the migration files without importing Alembic: the
    one revision no other file names as its ``down_revision`` (``None`` when the files
    do not form one chain, so the caller falls back to Alembic)."""
    revisions: set[str] = set()
    downs: set[str] = set()
    for path in (_MIGRATIONS / "versions").glob("*.py"):
        found = {m.group(1): m.group(3) or m.group(4) for m in _REVISION_LINE.finditer(path.read_text(encoding="utf-8"))}
        if found.get("revision") is None:
            continue
        revisions.add(found["revision"])
        if found.get("down_revision"):
            downs.add(found["down_revision"])
    heads = revisions - downs
    return heads.pop() if len(heads) == 1 else None
