"""What start-up loads: ``import contextledger`` and the light CLI commands import nothing
heavy before a command needs it (the assembler, the store, SQLAlchemy's PostgreSQL
dialect, Alembic, FastAPI, the tokenizer, the agent frameworks).  Checked on
``sys.modules`` of a fresh interpreter — behaviour, not timing (the start-up times are
measured in docs/benchmark.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

NEVER_AT_START = (
    "contextledger.assembly",
    "contextledger.ingest",
    "contextledger.memory.derive",
    "contextledger.bench",
    "contextledger.server",
    "sqlalchemy.dialects.postgresql",
    "psycopg",
    "alembic",
    "fastapi",
    "uvicorn",
    "tiktoken",
    "bpe_openai",
    "agents",
    "langchain_core",
    "autogen_core",
    "matplotlib",
)
"""Module prefixes that neither ``import contextledger`` nor ``--help`` nor
``conversations`` may load."""

_PROBE = """
import json, sys
{body}
print(json.dumps(sorted(sys.modules)))
"""


def _loaded(body: str, *, env_home: Path | None = None) -> set[str]:
    env = None
    if env_home is not None:
        import os

        env = {**os.environ, "CONTEXTLEDGER_HOME": str(env_home)}
        env.pop("CONTEXTLEDGER_DB", None)
    out = subprocess.run([sys.executable, "-c", _PROBE.format(body=body)], capture_output=True, text=True, env=env, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in NEVER_AT_START))


def _cli(args: list[str]) -> str:
    return (
        "import contextlib, io\n"
        "from contextledger.cli.main import app\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    try:\n        app({args!r})\n    except SystemExit as exc:\n        assert exc.code in (0, None), exc.code\n"
    )


def test_import_contextledger_loads_nothing_heavy() -> None:
    loaded = _loaded("import contextledger")
    assert _heavy(loaded) == []
    assert "sqlalchemy" not in loaded
    assert "contextledger.store.sql" not in loaded
    assert "pydantic" not in loaded


def test_public_names_resolve_on_first_use() -> None:
    loaded = _loaded("import contextledger\nassert contextledger.Ledger.__name__ == 'Ledger'\nassert contextledger.AssemblyResult")
    assert "contextledger.ledger" in loaded
    assert "contextledger.assembly.assembler" in loaded


def test_help_loads_neither_store_nor_frameworks() -> None:
    loaded = _loaded(_cli(["--help"]))
    assert _heavy(loaded) == []
    assert "sqlalchemy" not in loaded


def test_conversations_loads_the_store_only(tmp_path: Path) -> None:
    from contextledger.ledger import Ledger

    Ledger.open(home=tmp_path).close()  # creates and migrates the ledger (conversations never creates one)
    loaded = _loaded(_cli(["conversations"]), env_home=tmp_path)
    assert "contextledger.store.sql" in loaded  # it did open the ledger
    assert _heavy(loaded) == []
