"""Shared fixtures: a fresh store per test on every backend.

``backend_url`` is parametrised over ``sqlite`` (a file in ``tmp_path``) and
``postgresql`` (a fresh ``CREATE DATABASE test_<uuid>`` on the server named by
``CONTEXTLEDGER_TEST_PG``, default ``postgresql+psycopg://postgres@127.0.0.1:5432/postgres``).
PostgreSQL tests never skip in CI (``CI=true``): an unreachable server is a failure there;
on a laptop without PostgreSQL they skip with a clear message.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextledger.ledger import Ledger

# Recording computes embeddings when the retrieval extra is installed; the suite records
# far more than it searches, so it records without them unless a test asks
# (tests/test_retrieval*.py set CONTEXTLEDGER_EMBEDDINGS=auto where they need vectors).
os.environ.setdefault("CONTEXTLEDGER_EMBEDDINGS", "off")

REAL_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "real"
PG_ADMIN_URL = os.environ.get("CONTEXTLEDGER_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


REAL_DATA_ENV = "CONTEXTLEDGER_REAL_DATA"
"""Environment variable naming the real-transcript folder (overrides ``../shared/data/real``);
the value ``none`` runs the suite as a clone without the folder (its tests skip, even in CI)."""

REAL_DATA_OFF = "none"
_ABSENT = Path("/nonexistent/contextledger-real-data")  # where nothing is, whatever the machine


def real_data_off() -> bool:
    """Whether ``$CONTEXTLEDGER_REAL_DATA`` is ``none`` (run as a clone without the data)."""
    return os.environ.get(REAL_DATA_ENV, "").strip().lower() == REAL_DATA_OFF


def real_data_dir() -> Path:
    """The read-only folder of real transcripts: ``$CONTEXTLEDGER_REAL_DATA``, else
    ``../shared/data/real`` next to the checkout (an absent path when switched ``none``)."""
    if real_data_off():
        return _ABSENT
    env = os.environ.get(REAL_DATA_ENV)
    return Path(env) if env else REAL_DATA


def real_data_problem() -> str | None:
    """``None`` when the real-transcript folder holds its ``manifest.json``, else the one
    line shown for the tests that need it (naming ``CONTEXTLEDGER_REAL_DATA``)."""
    if real_data_off():
        return f"real transcripts switched off ({REAL_DATA_ENV}={REAL_DATA_OFF})"
    root = real_data_dir()
    if (root / "manifest.json").is_file():
        return None
    return f"real transcripts not found at {root} (no manifest.json): set {REAL_DATA_ENV} to the folder"


def require_real_data() -> Path:
    """The real-transcript folder; when it is missing, skip the calling test or module
    (``allow_module_level``) with one line — or fail it when ``CI`` is set (CI must run
    every test) unless the folder is switched off (``CONTEXTLEDGER_REAL_DATA=none``)."""
    problem = real_data_problem()
    if problem is not None:
        if os.environ.get("CI") and not real_data_off():
            pytest.fail(f"{problem} (required in CI)", pytrace=False)
        pytest.skip(problem, allow_module_level=True)
    return real_data_dir()


@pytest.fixture(scope="session")
def real_data() -> Path:
    """The real-transcript folder (see :func:`require_real_data`)."""
    return require_real_data()


def real_params(*paths: str) -> list[Any]:
    """``pytest.mark.parametrize`` values for files of the real folder: the sorted matches of
    each glob ``paths`` (relative to the folder) when it is there, else one parameter that
    skips (or fails in CI) with the line of :func:`require_real_data` — never an empty set."""
    problem = real_data_problem()
    if problem is None:
        root = real_data_dir()
        return sorted(p for pattern in paths for p in root.glob(pattern))
    if os.environ.get("CI") and not real_data_off():
        pytest.fail(f"{problem} (required in CI)", pytrace=False)
    return [pytest.param(None, marks=pytest.mark.skip(reason=problem), id="real-data")]


# --------------------------------------------------------------- the guard's own check
# Without the folder, every read of it must have gone through the guard (which skips the
# test first).  An audit hook sees each open / directory listing / subprocess naming a path
# under the folder; a test (or a test module at import) that made one fails, naming it.

_WATCHED = frozenset({"open", "os.scandir", "os.listdir", "glob.glob", "subprocess.Popen", "shutil.copyfile", "sqlite3.connect"})
_TESTS = Path(__file__).resolve().parent
_touches: dict[str, list[str]] = {}  # nodeid or test-module path -> what it touched
_current: list[str] = []  # the nodeid of the running test
_FLAGGED = pytest.StashKey[bool]()


def _mentions(arg: object, root: str) -> str | None:
    if isinstance(arg, (list, tuple)):
        return next((m for a in arg if (m := _mentions(a, root)) is not None), None)
    if isinstance(arg, bytes):
        arg = arg.decode("utf-8", "replace")
    if isinstance(arg, os.PathLike):
        arg = os.fspath(arg)
    return arg if isinstance(arg, str) and root in arg else None


def _caller_module() -> str:
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(str(_TESTS)) and not name.endswith("conftest.py"):
            return name
        frame = frame.f_back  # type: ignore[assignment]
    return "?"


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event not in _WATCHED:
        return
    root = str(real_data_dir())
    hit = _mentions(args[:2], root)
    if hit is not None:
        key = _current[-1] if _current else _caller_module()
        _touches.setdefault(key, []).append(f"{event} {hit[:200]}")


def pytest_configure(config: pytest.Config) -> None:
    """Install the audit hook when the real folder is missing (no cost when it is there)."""
    if real_data_problem() is not None:
        sys.addaudithook(_audit)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Attribute the audit hook's findings to the running test."""
    _current.append(item.nodeid)
    try:
        yield
    finally:
        _current.pop()


def _unguarded(item: pytest.Item) -> list[str]:
    return _touches.get(item.nodeid, []) + _touches.get(str(item.path), [])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A test that read the missing real-transcript folder without the guard (or whose
    module did at import) fails once, with one line naming what was read."""
    outcome = yield
    report = outcome.get_result()
    touched = _unguarded(item)
    if report.outcome == "failed" and call.excinfo is not None and real_data_problem() is not None:
        error = str(call.excinfo.value)
        if str(real_data_dir()) in error:  # e.g. an importer's "no such file" naming it
            touched = [*touched, f"an error naming it: {error.splitlines()[0][:200] if error else ''}"]
    if call.when == "teardown" or not touched or item.stash.get(_FLAGGED, False):
        return
    item.stash[_FLAGGED] = True
    report.outcome = "failed"
    report.longrepr = (
        f"{item.nodeid} reads the real-transcript folder without the guard ({touched[0]}); "
        "use the real_data fixture, require_real_data() or real_params(), or a fixture of the project's own"
    )


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
