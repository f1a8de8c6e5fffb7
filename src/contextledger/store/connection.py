"""Engine set-up and transactions of the SQL store (SQLite and PostgreSQL).

Backend differences are confined to connection set-up (SQLite: WAL, busy timeout, a
16 MiB page cache, ``BEGIN IMMEDIATE`` for writes; PostgreSQL: psycopg 3,
``REPEATABLE READ`` snapshots for reads).  :class:`SqlStoreBase` holds the engine, the
blob store, the write and read transactions and the row decoding every read module
(``read_graph``, ``read_transcript``, ``read_records``, ``read_audit``) builds on.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.engine import Connection, Engine

from contextledger.errors import BackendError, InputError, NotFoundError
from contextledger.store import textguard
from contextledger.store.base import (
    CAPABILITIES,
    Scope,
    require_scope,
)
from contextledger.store.blobs import BlobStore
from contextledger.store.codec import decode_body
from contextledger.store.deferred import DeferredAssemblies
from contextledger.store.sqlite_direct import sqlite_read_only_query
from contextledger.store.writer import WRITER_FLAG, Writer

__all__ = ["DEFAULT_INLINE_THRESHOLD_BYTES", "SQLITE_CACHE_KIB", "SqlStoreBase", "is_read_only", "make_engine", "sqlite_read_only_query"]

R = TypeVar("R", bound=BaseModel)

DEFAULT_INLINE_THRESHOLD_BYTES = 4096
"""Payloads above this many bytes go to the blob store (seed 001 §6 problem 2)."""

SQLITE_CACHE_KIB = 16384
"""Page cache of each SQLite connection, in KiB (SQLite's default is 2,000).  One
assembly reads ≈ 1,000–2,000 pages (the working set alone scans 600 memory rows of about
one page each); with the default cache those pages were read again from the file at
every assembly.  The cache grows only as pages are read."""


class SqlStoreBase:
    """The engine, the blob store and the transactions of the SQL store (the read
    modules add the queries; :class:`~contextledger.store.sql.SqlStore` is their union
    and documents the arguments).
    """

    capabilities = CAPABILITIES

    def __init__(
        self,
        url: str,
        blobs: BlobStore,
        *,
        inline_threshold_bytes: int = DEFAULT_INLINE_THRESHOLD_BYTES,
        migrate: bool = True,
    ) -> None:
        self.url = url
        self.blobs = blobs
        self.inline_threshold_bytes = inline_threshold_bytes
        self.engine = make_engine(url)
        self.dialect = self.engine.dialect.name
        self.deferred = DeferredAssemblies()
        """Assemblies of this process whose records are written after the response (:mod:`.deferred`)."""
        if migrate:
            from contextledger.store.migrate import upgrade

            upgrade(self.engine)

    def close(self) -> None:
        """Write the assemblies still pending (:mod:`.deferred`), then dispose of pooled connections."""
        self.deferred.settle()
        self.engine.dispose()

    # -- transactions ------------------------------------------------------------------
    @contextmanager
    def writer(self, scope: Scope | None, *, retries: int = 8) -> Iterator[Writer]:
        """Open one write transaction for ``scope``.

        On SQLite the transaction starts with ``BEGIN IMMEDIATE`` (writers queue on the
        database lock, waiting up to the 60 s busy timeout); a busy error is retried
        (up to ``retries`` times, backing off 0.1 s doubling to 1 s) only when raised
        before the body ran, never after.  On PostgreSQL writers of one conversation
        queue on its row lock (taken by :meth:`Writer.allocate_seq`, or earlier by a
        :meth:`lineage` read made inside the transaction).  Everything written through the yielded
        :class:`Writer` commits together or not at all.

        Raises:
            ScopeError: no scope.
            BackendError: the database stayed locked or unreachable.
        """
        scope = require_scope(scope)
        attempt = 0
        while True:
            try:
                conn = self.engine.connect()
            except sa.exc.OperationalError as exc:
                raise BackendError(f"cannot connect to {self.engine.url!r}: {exc}") from exc
            try:
                if self.dialect == "sqlite":
                    conn.exec_driver_sql("BEGIN IMMEDIATE")
                else:
                    conn.begin()
            except sa.exc.OperationalError as exc:
                conn.close()
                attempt += 1
                if attempt > retries:
                    raise BackendError(f"database busy after {retries} retries: {exc}") from exc
                time.sleep(min(0.05 * 2**attempt, 1.0))
                continue
            break
        writer = Writer(self, conn, scope)
        conn.info[WRITER_FLAG] = writer
        try:
            yield writer
            writer.flush_counters()
            if self.dialect == "sqlite":
                conn.exec_driver_sql("COMMIT")
            else:
                conn.commit()
        except BaseException:
            try:
                if self.dialect == "sqlite":
                    conn.exec_driver_sql("ROLLBACK")
                else:
                    conn.rollback()
            except sa.exc.SQLAlchemyError:
                # SQLite has already rolled back after a full disk or an I/O error
                # ("cannot rollback - no transaction is active"): the cause is the
                # error being raised, never this one
                pass
            finally:
                conn.info.pop(WRITER_FLAG, None)
                conn.close()
            raise
        conn.info.pop(WRITER_FLAG, None)
        conn.close()

    @contextmanager
    def reader(self) -> Iterator[Connection]:
        """A read transaction over one consistent snapshot: ``REPEATABLE READ`` on
        PostgreSQL (a read-only snapshot never fails to serialise), a deferred
        transaction on SQLite WAL.  Several queries made through it (e.g. the assembler's
        candidate collection) never see a writer's commit half-way."""
        with self.engine.connect() as conn:
            if self.dialect == "postgresql":
                conn.execution_options(isolation_level="REPEATABLE READ")
            if self.dialect == "sqlite":
                conn.exec_driver_sql("BEGIN")
                try:
                    yield conn
                finally:
                    conn.exec_driver_sql("COMMIT")
            else:
                with conn.begin():
                    yield conn

    def _rows(self, stmt: sa.Select[Any], model: type[R], conn: Connection | None = None) -> list[R]:
        """Run ``stmt`` (its first column is a ``body``) and decode every row into
        ``model``.  The body is fetched as JSON text (SQLite: the stored text as is;
        PostgreSQL: ``body::text``) and decoded by :func:`decode_body`, without an
        intermediate ``json.loads``."""
        stmt = self._body_as_text(stmt)
        if conn is None:
            with self.reader() as c:
                rows = c.execute(stmt).all()
        else:
            rows = conn.execute(stmt).all()
        return [decode_body(model, r[0]) for r in rows]

    def _body_as_text(self, stmt: sa.Select[Any]) -> sa.Select[Any]:
        """``stmt`` with its first column (``body``) read as text: a type coercion on
        SQLite (the SQL is unchanged), a cast to ``text`` on PostgreSQL (JSONB)."""
        cols = list(stmt.selected_columns)
        body = cols[0]
        text = sa.cast(body, sa.Text()) if self.dialect == "postgresql" else sa.type_coerce(body, sa.Text())
        return stmt.with_only_columns(text, *cols[1:])

    def _one(self, stmt: sa.Select[Any], model: type[R], kind: str, record_id: str, conn: Connection | None = None) -> R:
        rows = self._rows(stmt, model, conn)
        if not rows:
            raise NotFoundError(kind, record_id)
        return rows[0]


def is_read_only(engine: Engine) -> bool:
    """Whether ``engine`` opened its SQLite file read-only (see :func:`sqlite_read_only_query`)."""
    return engine.dialect.name == "sqlite" and engine.url.query.get("mode") == "ro"


def make_engine(url: str) -> Engine:
    """An SQLAlchemy engine for ``url``: PostgreSQL through psycopg 3 (pre-ping, a pool of 5
    + 10), or an SQLite file (its folder created) whose connections run in WAL mode with
    a 60 s busy timeout, ``synchronous=NORMAL``, foreign keys and a
    :data:`SQLITE_CACHE_KIB` page cache, handed out last-used first.

    Raises:
        BackendError: PostgreSQL without psycopg.  InputError: another URL scheme.
    """
    if url.startswith("postgresql"):
        try:
            import psycopg  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on install
            raise BackendError("PostgreSQL needs psycopg: pip install 'contextledger[postgres]'") from exc
        pg = sa.create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10, **textguard.engine_options())
        textguard.install(pg)
        return pg
    if not url.startswith("sqlite"):
        raise InputError(f"unsupported database URL {url!r}: use sqlite:///PATH or postgresql+psycopg://…")
    path = url.split("///", 1)[1] if "///" in url else ""
    read_only = sqlite_read_only_query(path)
    if read_only is not None:
        url = f"sqlite:///file:{quote(path)}?{read_only}&uri=true"
    elif path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    # LIFO: the connection used last (its page cache warm) is handed out next
    engine = sa.create_engine(url, connect_args={"timeout": 60, "check_same_thread": False}, pool_use_lifo=True, **textguard.engine_options())
    textguard.install(engine)

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        import sqlite3

        dbapi_conn.isolation_level = None  # we issue BEGIN/COMMIT ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA busy_timeout=60000")
        if read_only is not None:  # nothing to set on a file that cannot be written
            cur.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
            cur.close()
            return
        # switching to WAL needs a moment with no other writer and is not retried by the
        # busy handler: skip it when the file is already in WAL mode, retry otherwise
        for attempt in range(50):
            try:
                if str(cur.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                    cur.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError:
                if attempt == 49:
                    raise
                time.sleep(0.05 * (1 + attempt % 5))
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
        cur.close()

    return engine
