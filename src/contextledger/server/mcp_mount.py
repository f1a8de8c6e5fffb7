"""The ledger's MCP server mounted at ``/mcp`` (streamable HTTP), when the MCP adapter
(:mod:`contextledger.adapters.mcp`, ``pip install 'contextledger[mcp]'``) is installed.

The host app enters the MCP session manager's lifespan (a mounted app's own lifespan
never runs).  Sessions are stateless (``stateless_http``) so any worker answers any
request, and answers are plain JSON.  The MCP server acts for the service's tenant: a
request must carry a key of that tenant (or come keyless on loopback while no key exists);
the MCP SDK's DNS-rebinding protection answers 421 for a non-localhost ``Host``.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from contextledger.server.deps import resolve_tenant

__all__ = ["MCP_PATH", "mounted_mcp"]

_log = logging.getLogger("contextledger.server")

MCP_PATH = "/mcp"


def _guard(inner: ASGIApp, tenant: str) -> ASGIApp:
    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            try:
                who = await run_in_threadpool(resolve_tenant, Request(scope), bearer=True)
            except HTTPException as exc:
                await JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)(scope, receive, send)
                return
            if who != tenant:
                await JSONResponse({"error": f"the MCP server serves tenant {tenant!r}"}, status_code=403)(scope, receive, send)
                return
        await inner(scope, receive, send)

    return guarded


@contextlib.asynccontextmanager
async def mounted_mcp(app: FastAPI, ledger: Any, tenant: str) -> AsyncIterator[bool]:
    """Mount the MCP server on ``app`` for the duration of the block (yields whether it
    was mounted: ``False`` without the adapter or the ``mcp`` package)."""
    try:
        adapter = importlib.import_module("contextledger.adapters.mcp")
    except ImportError:
        yield False
        return
    try:
        mcp_app, lifespan = adapter.streamable_http(ledger, scope=ledger.scope(tenant), path=MCP_PATH, stateless_http=True, json_response=True)
    except (AttributeError, TypeError) as exc:  # an adapter of another version: serve without it
        _log.error("MCP server not mounted: %s: %s", type(exc).__name__, exc)
        yield False
        return
    mount = Mount("/", app=_guard(mcp_app, tenant))
    app.router.routes.append(mount)
    try:
        async with lifespan():
            yield True
    finally:
        app.router.routes.remove(mount)
