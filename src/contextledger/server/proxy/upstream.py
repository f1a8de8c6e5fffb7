"""The proxy's upstream leg: forwarding a request to the provider and relaying its
answer (used by the pipeline, side calls and probes).  Credentials and provider headers
pass as sent (never logged), minus hop-by-hop headers and the service's own; the query
string is kept; an upstream that cannot be reached in time is an error in the provider's
shape."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from contextledger.server.proxy.dialect import Dialect

__all__: list[str] = []  # the pipeline, side calls and probes import its helpers by name

_log = logging.getLogger("contextledger.server.proxy")


_HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "trailers",
    "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding", "content-encoding",
})
_SERVICE_OWN = frozenset({"server", "date"})
"""Response headers the serving HTTP server writes itself: the upstream's are not relayed
(a client gets one of each)."""


def _upstream_headers(request: Request) -> dict[str, str]:
    """The client's headers to forward: credentials and provider headers as sent (never
    logged), minus hop-by-hop headers and the service's own."""
    out = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP and not k.lower().startswith("x-contextledger-")}
    out["accept-encoding"] = "identity"
    return out


def _client_headers(upstream: httpx.Headers, extra: dict[str, str]) -> dict[str, str]:
    """The upstream's response headers to relay with ``extra`` (ours): without hop-by-hop
    headers and those the serving HTTP server writes itself (``server``, ``date``)."""
    out = {k: v for k, v in upstream.items() if k.lower() not in _HOP_BY_HOP and k.lower() not in _SERVICE_OWN}
    out.update(extra)
    return out


def _with_query(request: Request, url: str) -> str:
    """``url`` with the client's query string (``?beta=true`` …) as sent."""
    return f"{url}?{request.url.query}" if request.url.query else url


def _error(dialect: Dialect, status: int, message: str) -> JSONResponse:
    return JSONResponse(dialect.error_body(status, message), status_code=status)


async def _send(request: Request, dialect: Dialect, method: str, url: str, content: bytes) -> httpx.Response | JSONResponse:
    """The upstream's streamed response, or the provider-shaped error a client gets when
    the upstream cannot be reached in time."""
    http = request.app.state.service.http
    try:
        response: httpx.Response = await http.send(http.build_request(method, url, content=content, headers=_upstream_headers(request)), stream=True)
    except httpx.TimeoutException:
        return _error(dialect, 504, "the upstream did not answer in time")
    except httpx.HTTPError as exc:
        return _error(dialect, 502, f"the upstream could not be reached ({type(exc).__name__})")
    return response


def _untouched(upstream: httpx.Response, headers: dict[str, str]) -> StreamingResponse:
    """Relay an upstream response as it arrives, unchanged."""

    async def chunks() -> AsyncIterator[bytes]:
        try:
            async for chunk in upstream.aiter_bytes():
                yield chunk
        finally:
            await upstream.aclose()

    return StreamingResponse(chunks(), status_code=upstream.status_code, headers=_client_headers(upstream.headers, headers))


async def read_request(request: Request, dialect: Dialect) -> tuple[bytes, dict[str, Any], str] | JSONResponse:
    """``(raw body, JSON object, tenant)`` of a proxied request (the tenant is also kept on
    ``request.state``), or the provider-shaped error for a body that is not a JSON object or
    a caller the service does not admit."""
    from fastapi import HTTPException
    from starlette.concurrency import run_in_threadpool

    from contextledger.server.deps import resolve_tenant

    raw = await request.body()
    try:
        body = json.loads(raw)
    except ValueError:
        return _error(dialect, 400, "the request body is not valid JSON")
    if not isinstance(body, dict):
        return _error(dialect, 400, "the request body must be a JSON object")
    problem = dialect.body_problem(body)
    if problem is not None:  # never forwarded, never recorded
        _log.warning("%s request refused (400): %s", dialect.name, problem)
        return _error(dialect, 400, problem)
    try:
        tenant = request.state.tenant = await run_in_threadpool(resolve_tenant, request, bearer=False)
    except HTTPException as exc:
        return _error(dialect, exc.status_code, str(exc.detail))
    return raw, body, tenant
