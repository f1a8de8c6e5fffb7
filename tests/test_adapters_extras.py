"""Adapters behind extras: the core imports no framework, and an adapter whose extra is
missing says which one to install."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

ADAPTERS = [
    ("contextledger.adapters.openai_agents", "agents", "agents"),
    ("contextledger.adapters.langchain", "langchain.agents", "langchain"),
    ("contextledger.adapters.mcp", "mcp", "mcp"),
]


@pytest.mark.parametrize(("module", "dependency", "extra"), ADAPTERS)
def test_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch, module: str, dependency: str, extra: str) -> None:
    monkeypatch.setitem(sys.modules, dependency, None)  # the dependency cannot be imported
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ImportError) as err:
        importlib.import_module(module)
    assert f"pip install 'contextledger[{extra}]'" in str(err.value)


def test_the_core_imports_no_framework() -> None:
    code = (
        "import sys, contextledger, contextledger.ledger, contextledger.providers.registry, contextledger.ingest.responses_log, "
        "contextledger.cli.main, contextledger.adapters\n"
        "loaded = sorted(m for m in ('agents', 'langchain', 'langchain_core', 'mcp', 'openai', 'anthropic') if m in sys.modules)\n"
        "print(loaded)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_mcp_command_without_the_extra_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from contextledger.cli.main import app

    monkeypatch.setitem(sys.modules, "mcp", None)
    monkeypatch.delitem(sys.modules, "contextledger.adapters.mcp", raising=False)
    result = CliRunner().invoke(app, ["mcp"])
    assert result.exit_code == 2
    assert "pip install 'contextledger[mcp]'" in result.output
