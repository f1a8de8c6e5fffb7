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


REAL_DATA_ENV = "CONTEXTLEDGER_REAL_DATA"
"""Environment variable naming the real-transcript folder (overrides ``../shared/data/real``)."""


def real_data_dir() -> Path:
    """The read-only folder of real transcripts: ``$CONTEXTLEDGER_REAL_DATA``, else
    ``../shared/data/real`` next to the checkout."""
    env = os.environ.get(REAL_DATA_ENV)
    return Path(env) if env else REAL_DATA


def real_data_problem() -> str | None:
    """``None`` when the real-transcript folder holds its ``manifest.json``, else the one
    line shown for the tests that need it (naming ``CONTEXTLEDGER_REAL_DATA``)."""
    root = real_data_dir()
    if (root / "manifest.json").is_file():
        return None
    return f"real transcripts not found at {root} (no manifest.json): set {REAL_DATA_ENV} to the folder"


def require_real_data() -> Path:
    """The real-transcript folder; when it is missing, skip the calling test or module
    (``allow_module_level``) with one line — or fail it when ``CI`` is set (CI must run
    every test)."""
    problem = real_data_problem()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{problem} (required in CI)", pytrace=False)
        pytest.skip(problem, allow_module_level=True)
    return real_data_dir()


@pytest.fixture(scope="session")
def real_data() -> Path:
    """The real-transcript folder (see :func:`require_real_data`)."""
    return require_real_data()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A test that fails because it reads a file of the missing real-transcript folder
    (its error names the folder) is reported as skipped with the one line of
    :func:`real_data_problem` — outside CI only; the other tests run as usual."""
    outcome = yield
    report = outcome.get_result()
    problem = real_data_problem()
    if problem is None or os.environ.get("CI") or call.excinfo is None or report.outcome != "failed":
        return
    if isinstance(call.excinfo.value, pytest.skip.Exception) or str(real_data_dir()) not in str(call.excinfo.value):
        return
    _, line, _ = item.location
    report.outcome = "skipped"
    report.longrepr = (str(item.path), (line or 0) + 1, f"Skipped: {problem}")


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
