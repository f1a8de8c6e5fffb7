"""Every integration example in ``examples/`` runs offline, as documented, and prints what
its docstring promises (one subprocess each)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _run(name: str) -> list[str]:
    done = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    return done.stdout.splitlines()


def test_examples_folder_has_one_file_per_integration() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == [
        "anthropic_sdk_loop.py", "langchain_agent.py", "mcp_server.py", "openai_agents_sdk.py", "openai_sdk_loop.py", "proxy_openai.py",
    ]


def test_openai_agents_sdk_example() -> None:
    pytest.importorskip("agents")
    first, second = _run("openai_agents_sdk.py")
    assert first == "tests/test_csv.py::test_quoted fails: quoted commas are split."
    assert second.startswith("4 items in the session; last request ")


def test_langchain_example() -> None:
    pytest.importorskip("langchain.agents")
    first, second = _run("langchain_agent.py")
    assert first == "parse() splits on every comma; use the csv module."
    assert second.startswith("4 messages in the state; last request ")


def test_mcp_example() -> None:
    pytest.importorskip("mcp")
    assert _run("mcp_server.py") == ["raw log sent: False", "found: True", "exact tail: ERROR pool exhausted: 64/64 connections in use"]


def test_openai_sdk_loop_example() -> None:
    pytest.importorskip("openai")
    first, second = _run("openai_sdk_loop.py")
    assert first == "Done: the step finished."
    assert second.startswith("5 items recorded; 2 requests, 0 invalid; last request ")


def test_anthropic_sdk_loop_example() -> None:
    pytest.importorskip("anthropic")
    first, second = _run("anthropic_sdk_loop.py")
    assert first == "Done: the step finished."
    assert second.startswith("2 requests, 0 invalid; last request ")


BLOCKED = {  # each example's first third-party module
    "anthropic_sdk_loop.py": ("anthropic", "pip install anthropic"),
    "langchain_agent.py": ("langchain", "pip install 'contextledger[langchain]'"),
    "mcp_server.py": ("anyio", "pip install 'contextledger[mcp]'"),
    "openai_agents_sdk.py": ("agents", "pip install 'contextledger[agents]'"),
    "openai_sdk_loop.py": ("openai", "pip install openai"),
    "proxy_openai.py": ("openai", "pip install openai"),
}


@pytest.mark.parametrize("name", sorted(BLOCKED))
def test_an_example_without_its_extra_says_which_to_install(name: str) -> None:
    """With its module unimportable (``sys.modules[name] = None`` makes Python's import
    raise ``ModuleNotFoundError``), an example exits 1 with one line naming the install."""
    module, hint = BLOCKED[name]
    code = f"import runpy, sys; sys.modules[{module!r}] = None; runpy.run_path({str(EXAMPLES / name)!r}, run_name='__main__')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"examples/{name} needs the module {module!r}: {hint}\n"


@pytest.mark.parametrize(("name", "module"), [
    ("proxy_openai.py", "fastapi"), ("proxy_openai.py", "uvicorn"), ("proxy_openai.py", "httpx"),
    ("openai_sdk_loop.py", "uvicorn"), ("openai_sdk_loop.py", "starlette"), ("anthropic_sdk_loop.py", "uvicorn"),
])
def test_an_example_without_the_server_extra_names_it(name: str, module: str) -> None:
    """A module of the ``server`` extra missing (imported by the service or the loopback
    server, not by the example itself): the same one line, exit 1, no traceback."""
    code = f"import runpy, sys; sys.modules[{module!r}] = None; runpy.run_path({str(EXAMPLES / name)!r}, run_name='__main__')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"examples/{name} needs the module {module!r}: pip install 'contextledger[server]'\n"


def test_the_proxy_example_prints_only_its_result() -> None:
    pytest.importorskip("openai")
    pytest.importorskip("fastapi")
    first, second = _run("proxy_openai.py")  # stderr empty: no HTTP client or service log lines
    assert first == "Done: the step finished."
    assert second.startswith("assembly asm_") and second.endswith(" on replay")
