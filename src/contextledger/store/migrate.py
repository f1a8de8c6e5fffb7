"""Alembic migrations, run programmatically (no ``alembic.ini`` needed at run time).

Migrations are named, append-only files under ``store/migrations/versions``; they are
never rewritten.  ``upgrade(engine)`` brings a database to head and is safe to call from
several processes at once (on PostgreSQL an advisory lock serialises it; on SQLite the
database lock does).
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

__all__ = ["MIGRATION_LOCK_KEY", "alembic_config", "current_revision", "head_revision", "upgrade"]

_MIGRATIONS = Path(__file__).with_name("migrations")

MIGRATION_LOCK_KEY = 7243001
"""PostgreSQL advisory lock key held (transaction-scoped) while migrating."""


def alembic_config() -> Config:
    """An Alembic ``Config`` pointing at the bundled migration scripts."""
    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    return cfg


def head_revision() -> str:
    """The newest migration revision id."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at (``None`` for an empty database)."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Upgrade the database behind ``engine`` to ``revision`` (default: head), in one
    transaction.  Safe to run from several processes at once: PostgreSQL serialises
    upgraders on the advisory lock :data:`MIGRATION_LOCK_KEY`, SQLite on its write lock;
    whoever comes second finds the database already at ``revision`` and does nothing."""
    if revision == "head" and current_revision(engine) == head_revision():
        return
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
