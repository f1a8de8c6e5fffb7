"""The FastAPI application: routers composed over one :class:`~contextledger.Ledger`.

``create_app(settings)`` builds the app; every worker of ``contextledger serve`` calls
:func:`app_from_env` (uvicorn factory).  The app holds no state that breaks with several
workers: the ledger (a connection pool), the upstream HTTP client and the settings are
per process; everything recorded lives in the database.

Routers:

* ``GET /healthz`` — 200 once the ledger is open (a database round trip), with the
  proxy's counters of this process (``proxy``: passthroughs, side calls …);
* ``GET /metrics`` — the same counters in the Prometheus text format
  (:mod:`contextledger.server.api.health`);
* ``HEAD`` of any page and ``GET``/``HEAD /`` of a provider client
  (:mod:`contextledger.server.proxy.probes`);
* ``/api/…`` — the REST API (:mod:`contextledger.server.api`);
* ``/v1/chat/completions``, ``/v1/responses``, ``/v1/messages`` — the provider-compatible
  proxy (:mod:`contextledger.server.proxy`);
* every module of :mod:`contextledger.server.pages` that defines ``router`` (pages such as
  an inspector are added there without changing this module);
* ``/mcp`` — the ledger's MCP server (streamable HTTP) when the MCP adapter is installed
  (:mod:`contextledger.server.mcp_mount`).
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from contextledger.ledger import Ledger
from contextledger.server.drain_worker import drain_worker
from contextledger.server.keys import any_active_key
from contextledger.server.mcp_mount import mounted_mcp
from contextledger.server.problems import install_problem_handlers
from contextledger.server.settings import ServerSettings

__all__ = ["ServiceState", "app_from_env", "create_app", "page_routers"]

_log = logging.getLogger("contextledger.server")
VERSION = "0.1.0"


class ServiceState:
    """Per-process state of one worker (``app.state.service``)."""

    def __init__(self, settings: ServerSettings, ledger: Ledger, http: httpx.AsyncClient) -> None:
        self.settings = settings
        self.ledger = ledger
        self.http = http


def page_routers() -> list[APIRouter]:
    """The ``router`` of every module in :mod:`contextledger.server.pages`, by module name."""
    from contextledger.server import pages

    routers: list[APIRouter] = []
    for info in sorted(pkgutil.iter_modules(pages.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{pages.__name__}.{info.name}")
        router = getattr(module, "router", None)
        if isinstance(router, APIRouter):
            routers.append(router)
    return routers


def _open_ledger(settings: ServerSettings) -> Ledger:
    ledger = Ledger.open(settings.db, home=settings.home)
    if not settings.loopback and not any_active_key(ledger):
        ledger.close()
        raise RuntimeError(
            f"refusing to serve on {settings.host}: no API key exists; create one with "
            "`contextledger keys create --tenant T` (keyless service is for loopback only)"
        )
    return ledger


def create_app(settings: ServerSettings | None = None, *, ledger: Ledger | None = None, http: httpx.AsyncClient | None = None) -> FastAPI:
    """The service app.

    Args:
        settings: default :meth:`ServerSettings.from_env`.
        ledger: an opened ledger to serve (tests); default: opened from ``settings`` at
            start-up and closed at shutdown.
        http: the client used to reach the upstreams (tests); default: one per process.

    Raises:
        RuntimeError (at start-up): bound to a non-loopback address with no API key.
    """
    cfg = settings or ServerSettings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own_ledger = ledger is None
        led = ledger if ledger is not None else await run_in_threadpool(_open_ledger, cfg)
        timeout = httpx.Timeout(cfg.upstream_timeout_s, connect=min(30.0, cfg.upstream_timeout_s))
        client = http or httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_connections=512, max_keepalive_connections=128))
        app.state.service = ServiceState(cfg, led, client)
        try:
            async with mounted_mcp(app, led, cfg.tenant), drain_worker(led):
                yield
        finally:
            if http is None:
                await client.aclose()
            if own_ledger:
                led.close()

    app = FastAPI(
        title="contextledger",
        version=VERSION,
        summary="A durable runtime graph for tool-using agents, with policy-assembled, explainable model context.",
        lifespan=lifespan,
    )
    install_problem_handlers(app)

    @app.get("/healthz", tags=["service"], summary="Ready when the ledger answers")
    async def healthz(request: Request) -> JSONResponse:
        service: ServiceState = request.app.state.service

        def ping() -> Any:
            import sqlalchemy as sa

            with service.ledger.store.engine.connect() as conn:
                return conn.execute(sa.text("SELECT 1")).scalar_one()

        await run_in_threadpool(ping)
        return JSONResponse({"status": "ok", "version": VERSION, "proxy": events_of(request.app).counts()})

    from contextledger.server.api import router as api_router
    from contextledger.server.api.health import router as metrics_router
    from contextledger.server.proxy import router as proxy_router
    from contextledger.server.proxy.events import events_of
    from contextledger.server.proxy.probes import install_probes

    install_probes(app)
    app.include_router(metrics_router)
    app.include_router(api_router)
    app.include_router(proxy_router)
    for router in page_routers():
        app.include_router(router)
    return app


def app_from_env() -> FastAPI:
    """The app of one ``contextledger serve`` worker (settings from the environment)."""
    return create_app(ServerSettings.from_env())
