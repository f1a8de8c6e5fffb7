"""Docs that can drift are tested: README's Python example runs, the public API is frozen."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

import contextledger

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    monkeypatch.setenv("CONTEXTLEDGER_HOME", str(tmp_path))
    script = tmp_path / "example.py"
    script.write_text(blocks[0])
    ns = runpy.run_path(str(script))
    result = ns["result"]
    assert result.record.assembled_tokens <= 4000
    assert set(ns["payload"]) == {"system", "messages", "tools"}
    # sent whole, the request is its replay: the user's constraint is read once, in their message
    assert result.record.assembled_tokens == result.record.replay_tokens and result.record.omitted == {}
    assert "do not change the public API" not in ns["payload"]["system"]
    assert "do not change the public API" in ns["payload"]["messages"][0]["content"][0]["text"]
    out = capsys.readouterr().out.split()
    assert int(out[0]) == result.record.replay_tokens and int(out[1]) == result.record.assembled_tokens


def test_readme_gives_two_setup_commands() -> None:
    text = README.read_text()
    assert "make demo" in text and "make test" in text
    ci = (README.parent / ".ci" / "run").read_text()
    assert "make test" in ci


def test_public_api_is_frozen() -> None:
    assert sorted(contextledger.__all__) == sorted(
        [
            "ASSEMBLER_VERSION", "DEFAULT_TENANT", "AssemblyResult", "BackendError", "ContextLedgerError", "ImportFormatError",
            "ImportResult", "InputError", "IntegrityError", "Ledger", "NeutralRequest", "NotFoundError", "Policy", "PolicyError",
            "ProviderSerializationError", "Recorder", "Scope", "ScopeError", "StoredDataError", "ToolCallSpec", "ToolSchema",
            "WireMessage", "__version__", "count_payload_tokens", "default_policy", "load_policy", "serialize", "validate_payload",
        ]
    )
    for name in contextledger.__all__:
        assert hasattr(contextledger, name), name
