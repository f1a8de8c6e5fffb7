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


HELP_NEVER = ("sqlalchemy", "pydantic", "typer.rich_utils", "markdown_it", "rich.markdown", "rich.traceback", "rich._emoji_codes")
"""What ``--help`` (of the command line and of its commands) never imports: the store,
the models, typer's rich help formatter and the Markdown parser and emoji table it pulls in."""


def _any_of(loaded: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted({p for p in prefixes for m in loaded if m == p or m.startswith(p + ".")})


def test_help_loads_neither_store_nor_frameworks() -> None:
    loaded = _loaded(_cli(["--help"]))
    assert _heavy(loaded) == []
    assert _any_of(loaded, HELP_NEVER) == []


def test_a_command_help_loads_neither_store_nor_rich_help() -> None:
    """A command's own ``--help`` builds its parameters, which typer (0.29) does through
    its pydantic adapters: pydantic is the one module of :data:`HELP_NEVER` it loads."""
    for args in (["conversations", "--help"], ["import", "--help"], ["policy", "validate", "--help"]):
        loaded = _loaded(_cli(args))
        assert _heavy(loaded) == [], args
        assert _any_of(loaded, HELP_NEVER) == (["pydantic"] if "typer._adapters" in loaded else []), args


LISTING_NEVER = ("sqlalchemy", "pydantic", "markdown_it", "rich.markdown", "rich.traceback", "contextledger.store.sql", "contextledger.records")
"""What ``conversations`` of an SQLite ledger never imports: it reads the file through
``sqlite3`` (:mod:`contextledger.store.sqlite_direct`), not the store or its models."""

_RUN = """
import contextlib, io, json, sys
from contextledger.cli.main import app
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        app({args!r})
    except SystemExit as exc:
        assert exc.code in (0, None), exc.code
print(json.dumps({{"modules": sorted(sys.modules), "out": out.getvalue()}}))
"""


def _run_cli(args: list[str], home: Path) -> tuple[set[str], str]:
    """``contextledger ARGS`` in a fresh interpreter: (modules it loaded, its stdout)."""
    import os

    env = {**os.environ, "CONTEXTLEDGER_HOME": str(home)}
    env.pop("CONTEXTLEDGER_DB", None)
    done = subprocess.run([sys.executable, "-c", _RUN.format(args=args)], capture_output=True, text=True, env=env, check=True)
    data = json.loads(done.stdout.strip().splitlines()[-1])
    return set(data["modules"]), data["out"]


def _recorded_ledger(home: Path) -> list[dict[str, object]]:
    """A ledger with two conversations of the default tenant (one with a tool exchange,
    one titled across two lines) and one of tenant ``acme``; returns the default
    tenant's listing as the store gives it."""
    from contextledger.ledger import Ledger

    led = Ledger.open(home=home)
    rec = led.recorder()
    conv = rec.start_conversation(title="fix login", system_prompt="You are a coding agent.")
    rec.record_message(conv.id, "user", "Login fails; find the cause.")
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "c1", "tool_name": "Bash", "arguments": {"command": "pytest -q"}}])
    rec.record_tool_result(conv.id, "c1", "1 failed, 12 passed")
    rec.start_conversation(title="two\nlines")
    led.recorder(led.scope("acme")).start_conversation(title="another tenant")
    rows = [
        {"conversation_id": r.conversation.id, "title": r.conversation.title, "source": r.conversation.source, "source_path": r.conversation.source_path,
         "messages": r.message_count, "tool_calls": r.tool_call_count, "artifacts": r.artifact_count, "created_at": r.conversation.created_at.isoformat()}
        for r in led.store.list_conversations(led.scope())
    ]
    led.close()
    return rows


def test_conversations_lists_an_sqlite_ledger_without_store_or_models(tmp_path: Path) -> None:
    expected = _recorded_ledger(tmp_path)
    assert [(r["title"], r["messages"], r["tool_calls"], r["artifacts"]) for r in expected] == [("fix login", 4, 1, 1), ("two\nlines", 0, 0, 0)]
    loaded, out = _run_cli(["conversations", "--json"], tmp_path)
    assert json.loads(out) == expected
    assert _heavy(loaded) == []
    assert _any_of(loaded, LISTING_NEVER) == []
    loaded, out = _run_cli(["--tenant", "acme", "conversations", "--json"], tmp_path)
    assert [r["title"] for r in json.loads(out)] == ["another tenant"]
    assert _any_of(loaded, LISTING_NEVER) == []


def test_conversations_table_is_one_line_per_conversation(tmp_path: Path) -> None:
    expected = _recorded_ledger(tmp_path)
    loaded, out = _run_cli(["conversations"], tmp_path)
    assert _any_of(loaded, LISTING_NEVER) == []
    header, rule, *lines = out.splitlines()
    assert header.split() == ["conversation", "title", "messages", "tool", "calls", "artifacts", "source"]
    assert set(rule.replace(" ", "")) == {"-"}
    assert [line.split() for line in lines] == [
        [str(expected[0]["conversation_id"]), "fix", "login", "4", "1", "1", "recorder"],
        [str(expected[1]["conversation_id"]), "two", "lines", "0", "0", "0", "recorder"],
    ]


def test_the_direct_listing_steps_aside_where_it_cannot_read_what_the_store_would(tmp_path: Path) -> None:
    """``None`` (the caller opens the ledger) for another backend, a URL with options, a
    missing file, or a schema the store would first migrate."""
    import sqlite3

    from contextledger.store.revisions import script_head
    from contextledger.store.sqlite_direct import list_conversations

    expected = _recorded_ledger(tmp_path)
    db = tmp_path / "ledger.db"
    rows = list_conversations(f"sqlite:///{db}", "default")
    assert rows is not None and [r.as_dict() for r in rows] == expected
    assert list_conversations(f"sqlite:///{db}", "nobody") == []
    assert list_conversations("postgresql+psycopg://postgres@127.0.0.1:5432/test", "default") is None
    assert list_conversations(f"sqlite:///{db}?mode=ro", "default") is None
    assert list_conversations(f"sqlite:///{tmp_path / 'missing.db'}", "default") is None
    assert list_conversations(f"sqlite:///{db}", "") is None
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'an_older_revision'")
    assert list_conversations(f"sqlite:///{db}", "default") is None
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = ?", (script_head(),))
    assert list_conversations(f"sqlite:///{db}", "default") is not None



def test_python_dash_m_runs_the_same_command_line() -> None:
    """``python -m contextledger --help`` lists the same commands as the script."""
    import os

    done = subprocess.run(
        [sys.executable, "-m", "contextledger", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    assert "conversations" in done.stdout and "assemble" in done.stdout
