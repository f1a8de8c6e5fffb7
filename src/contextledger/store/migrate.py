"""Alembic migrations, run programmatically (no ``alembic.ini`` needed at run time).

Migrations are named, append-only files under ``store/migrations/versions``; they are
never rewritten.  ``upgrade(engine)`` brings a database to head and is safe to call from
several processes at once (on PostgreSQL an advisory lock serialises it; on SQLite the
database lock does).

Opening a ledger that is already at head costs one ``SELECT`` of ``alembic_version``:
the head revision is read from the migration files' ``revision`` / ``down_revision``
lines (:func:`script_head`), and Alembic itself is imported only when a database needs
upgrading.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from contextledger.store.revisions import script_head

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = ["MIGRATION_LOCK_KEY", "alembic_config", "current_revision", "head_revision", "script_head", "upgrade"]

_MIGRATIONS = Path(__file__).with_name("migrations")

MIGRATION_LOCK_KEY = 7243001
"""PostgreSQL advisory lock key held (transaction-scoped) while migrating."""

def alembic_config() -> Config:
    """An Alembic ``Config`` pointing at the bundled migration scripts."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    return cfg


def head_revision() -> str:
    """The newest migration revision id, as Alembic's script directory computes it."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at (``None`` for an empty database)."""
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table("alembic_version"):
            return None
        rows = conn.execute(sa.text("SELECT version_num FROM alembic_version")).all()
    if len(rows) != 1:
        from alembic.runtime.migration import MigrationContext

        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    return str(rows[0][0])


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Upgrade the database behind ``engine`` to ``revision`` (default: head), in one
    transaction.  Safe to run from several processes at once: PostgreSQL serialises
    upgraders on the advisory lock :data:`MIGRATION_LOCK_KEY`, SQLite on its write lock;
    whoever comes second finds the database already at ``revision`` and does nothing."""
    if revision == "head":
        head = script_head() or head_revision()
        if current_revision(engine) == head:
            return
    from alembic import command

    cfg = alembic_config()
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})")
        elif engine.dialect.name == "sqlite":
            # the store's SQLite connections run without implicit transactions; take the
            # write lock now so the whole upgrade is one transaction and a concurrent
            # upgrader waits (busy timeout), then finds the database at head
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
