"""Shared fixtures: a fresh store per test on every backend.

``backend_url`` is parametrised over ``sqlite`` (a file in ``tmp_path``) and
``postgresql`` (a fresh ``CREATE DATABASE test_<uuid>`` on the server named by
``CONTEXTLEDGER_TEST_PG``, default ``postgresql+psycopg://postgres@127.0.0.1:5432/postgres``).
PostgreSQL tests never skip in CI (``CI=true``): an unreachable server is a failure there;
on a laptop without PostgreSQL they skip with a clear message.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextledger.ledger import Ledger

# Recording computes embeddings when the retrieval extra is installed; the suite records
# far more than it searches, so it records without them unless a test asks
# (tests/test_retrieval*.py set CONTEXTLEDGER_EMBEDDINGS=auto where they need vectors).
os.environ.setdefault("CONTEXTLEDGER_EMBEDDINGS", "off")

REAL_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "real"
PG_ADMIN_URL = os.environ.get("CONTEXTLEDGER_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


def real_data_dir() -> Path:
    """The read-only folder of real transcripts (``../shared/data/real``)."""
    env = os.environ.get("CONTEXTLEDGER_REAL_DATA")
    return Path(env) if env else REAL_DATA


def _pg_available() -> str | None:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL.replace("postgresql+psycopg://", "postgresql://"), connect_timeout=3):
            return None
    except Exception as exc:  # the reason is shown in the skip/fail message
        return f"{type(exc).__name__}: {exc}"


@pytest.fixture(scope="session")
def pg_admin() -> str:
    """The admin URL of a reachable PostgreSQL server (fails in CI when unreachable)."""
    problem = _pg_available()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required in CI but unreachable at {PG_ADMIN_URL}: {problem}")
        pytest.skip(f"PostgreSQL not reachable at {PG_ADMIN_URL} ({problem}); set CONTEXTLEDGER_TEST_PG")
    return PG_ADMIN_URL


def _admin_exec(admin_url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(admin_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute(sql)  # type: ignore[arg-type,unused-ignore]


@pytest.fixture
def pg_url(pg_admin: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test (dropped afterwards)."""
    name = f"test_{uuid.uuid4().hex[:16]}"
    _admin_exec(pg_admin, f'CREATE DATABASE "{name}"')
    base = pg_admin.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        _admin_exec(pg_admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database URL for each backend (SQLite file, PostgreSQL database)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def ledger(backend_url: str, tmp_path: Path) -> Iterator[Ledger]:
    """A fresh :class:`Ledger` on each backend, blobs under ``tmp_path``."""
    led = Ledger.open(backend_url, blobs=tmp_path / "blobs")
    try:
        yield led
    finally:
        led.close()


@pytest.fixture
def sqlite_ledger(tmp_path: Path) -> Iterator[Ledger]:
    """A fresh embedded-default ledger (SQLite + local blobs) under ``tmp_path``."""
    led = Ledger.open(home=tmp_path / "home")
    try:
        yield led
    finally:
        led.close()
