"""Which optional extra provides a third-party module: one line for an example (or any
entry point) that runs without it, instead of a bare ``ModuleNotFoundError``."""

from __future__ import annotations

__all__ = ["EXTRA_OF_MODULE", "missing_extra"]

EXTRA_OF_MODULE: dict[str, str] = {
    "openai": "pip install openai",
    "anthropic": "pip install anthropic",
    "agents": "pip install 'contextledger[agents]'",
    "langchain": "pip install 'contextledger[langchain]'",
    "langchain_core": "pip install 'contextledger[langchain]'",
    "mcp": "pip install 'contextledger[mcp]'",
    "anyio": "pip install 'contextledger[mcp]'",
    "fastapi": "pip install 'contextledger[server]'",
    "uvicorn": "pip install 'contextledger[server]'",
    "httpx": "pip install 'contextledger[server]'",
    "starlette": "pip install 'contextledger[server]'",
    "jinja2": "pip install 'contextledger[server]'",
    "psycopg": "pip install 'contextledger[postgres]'",
    "numpy": "pip install 'contextledger[retrieval]'",
    "autogen_core": "pip install 'contextledger[bench]'",
    "langgraph": "pip install 'contextledger[bench]'",
    "matplotlib": "pip install 'contextledger[bench]'",
}
"""Top-level module name -> the command that installs it."""


def missing_extra(exc: ModuleNotFoundError, what: str) -> str:
    """The one line for ``what`` (e.g. ``"examples/proxy_openai.py"``) failing on the
    missing module of ``exc``: ``"examples/proxy_openai.py needs the module 'openai':
    pip install openai"`` (the extra's install command when known)."""
    name = (exc.name or "").split(".")[0]
    hint = EXTRA_OF_MODULE.get(name)
    return f"{what} needs the module {name!r}" + (f": {hint}" if hint else f" ({exc})")
