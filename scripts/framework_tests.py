"""Run the frameworks' own tests that are generic against contextledger's adapters.

    python scripts/framework_tests.py agents      # OpenAI Agents SDK session tests vs LedgerSession
    python scripts/framework_tests.py langchain   # LangChain middleware core tests with LedgerMiddleware added

What it does (needs network: it downloads the source distribution of the installed
version with ``pip download``, so it is not part of the offline test suite):

1. downloads and unpacks ``openai-agents==<installed version>`` (sdist: it ships ``tests/``);
2. installs the test-only packages those tests import (``pytest-asyncio``,
   ``inline-snapshot``) into a temporary folder put on ``PYTHONPATH`` for that run only
   (the environment itself is not changed);
3. runs the selected test files with a pytest plugin that rebinds ``SQLiteSession`` in
   every collected test module to :class:`LedgerBackedSession` — a
   :class:`~contextledger.adapters.openai_agents.LedgerSession` on a fresh ledger per
   database path, one conversation per session id (sessions with the same path and id
   share their history, as SQLite sessions do);
4. prints pytest's summary.  ``docs/adapters.md`` records the last run and why each
   excluded test is not generic.

``langchain`` does the same with the ``langchain`` sdist: its middleware core tests
(``tests/unit_tests/agents/middleware/core``: composition, ``wrap_model_call``, sync and
async wrappers, the framework, overrides) run twice — as shipped, then with a plugin that
adds a :class:`~contextledger.adapters.langchain.LedgerMiddleware` (budget 10^6 tokens)
to every agent ``create_agent`` builds — so a failure caused by the adapter is told apart
from one the environment causes anyway.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

TEST_DEPS = ["pytest-asyncio", "inline-snapshot", "asttokens", "executing"]
LANGCHAIN_TEST_DEPS = [
    "pytest-asyncio", "langchain-tests==1.1.9", "blockbuster", "forbiddenfruit", "syrupy", "vcrpy", "wrapt", "pytest-mock",
    "pytest-recording", "pytest-socket",
]
LANGCHAIN_FILES = [
    f"tests/unit_tests/agents/middleware/core/{name}.py"
    for name in ("test_composition", "test_wrap_model_call", "test_sync_async_wrappers", "test_framework", "test_overrides")
]
AGENTS_FILES = ["tests/memory/test_session.py", "tests/memory/test_session_limit.py"]
# SQLite internals (worker-thread connections, corrupt rows, file locks, rollback, closing):
# not part of the Session protocol
AGENTS_EXCLUDE = [
    "await_mutation", "worker_thread", "reaps_connections", "retired_connections", "closed_rejects", "corrupt",
    "file_lock", "failed_add_items_releases", "failed_clear_session", "failed_pop_item", "rollback_failure", "quarantined",
    "post_commit_cancellation",
]

PLUGIN = '''
import tempfile
from pathlib import Path

import pytest

from contextledger.adapters.openai_agents import LedgerSession
from contextledger.ledger import Ledger

_ROOT = Path(tempfile.mkdtemp(prefix="ledger-sessions-"))
_LEDGERS = {}
_CONVERSATIONS = {}


class LedgerBackedSession(LedgerSession):
    """SQLiteSession(session_id, db_path=":memory:", ..., session_settings=None) on a ledger."""

    def __init__(self, session_id, db_path=":memory:", *args, session_settings=None, **kwargs):
        key = str(db_path)
        if key == ":memory:":
            key = f":memory:{len(_LEDGERS)}"  # each in-memory SQLite database is its own
        ledger = _LEDGERS.get(key)
        if ledger is None:
            ledger = _LEDGERS[key] = Ledger.open(home=_ROOT / str(len(_LEDGERS)))
        super().__init__(ledger, _CONVERSATIONS.get((key, session_id)), session_settings=session_settings)
        _CONVERSATIONS[(key, session_id)] = self.conversation_id
        self.session_id = session_id

    def close(self):
        pass


def pytest_collection_modifyitems(items):
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and hasattr(module, "SQLiteSession"):
            module.SQLiteSession = LedgerBackedSession
'''


LANGCHAIN_PLUGIN = '''
import tempfile
from pathlib import Path

import langchain.agents
import langchain.agents.factory as factory

from contextledger.adapters.langchain import LedgerMiddleware
from contextledger.ledger import Ledger

_LEDGER = Ledger.open(home=Path(tempfile.mkdtemp(prefix="ledger-mw-")))  # opened before any event loop runs
_original = factory.create_agent


def create_agent(*args, middleware=(), **kwargs):
    return _original(*args, middleware=[*middleware, LedgerMiddleware(_LEDGER, budget_tokens=1_000_000)], **kwargs)


factory.create_agent = create_agent
langchain.agents.create_agent = create_agent


def pytest_collection_modifyitems(items):
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and getattr(module, "create_agent", None) is _original:
            module.create_agent = create_agent
'''


def _sdist(name: str, workdir: Path) -> Path:
    version = importlib.metadata.version(name)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "-q", "-d", str(workdir), f"{name}=={version}"], check=True)
    archive = next(workdir.glob(f"{name.replace('-', '_')}-*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(workdir, filter="data")
    return next(p for p in workdir.iterdir() if p.is_dir() and p.name.startswith(name.replace("-", "_")))


def agents() -> int:
    """The Agents SDK's session tests against LedgerSession; returns pytest's exit code."""
    with tempfile.TemporaryDirectory() as tmp:
        deps = Path(tmp) / "deps"
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(deps), *TEST_DEPS], check=True)
        root = _sdist("openai-agents", Path(tmp))
        (root / "ledger_session_plugin.py").write_text(PLUGIN, encoding="utf-8")
        select = " and ".join(f"not {word}" for word in AGENTS_EXCLUDE)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "ledger_session_plugin", "-p", "no:cacheprovider", "-o", "addopts=", "-k", select, *AGENTS_FILES]
        return subprocess.run(cmd, cwd=root, check=False, env={**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{deps}"}).returncode


def langchain() -> int:
    """LangChain's middleware core tests, as shipped and with LedgerMiddleware added;
    returns the exit code of the second run."""
    with tempfile.TemporaryDirectory() as tmp:
        deps = Path(tmp) / "deps"
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(deps), *LANGCHAIN_TEST_DEPS], check=True)
        root = _sdist("langchain", Path(tmp))
        (root / "ledger_middleware_plugin.py").write_text(LANGCHAIN_PLUGIN, encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{deps}"}
        base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-rf"]
        print("== as shipped", flush=True)
        subprocess.run([*base, *LANGCHAIN_FILES], cwd=root, check=False, env=env)
        print("== with LedgerMiddleware in every agent", flush=True)
        return subprocess.run([*base, "-p", "ledger_middleware_plugin", *LANGCHAIN_FILES], cwd=root, check=False, env=env).returncode


if __name__ == "__main__":
    targets = {"agents": agents, "langchain": langchain}
    if len(sys.argv) != 2 or sys.argv[1] not in targets:
        print(f"usage: python scripts/framework_tests.py {{{'|'.join(targets)}}}", file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(targets[sys.argv[1]]())
