"""Requests around the proxied calls: root probes, ``HEAD``, and token counting.

* ``HEAD`` of any path is answered as ``GET`` of that path without its content (RFC 9110
  §9.3.2), so a client's connection probe (Claude Code sends ``HEAD`` to its base URL at
  start) gets what a ``GET`` gets instead of 405.
* ``GET`` / ``HEAD /`` from a provider client — a request with the Messages API's own
  headers (``anthropic-version`` or ``x-api-key``) — is forwarded to that upstream's root
  and answered as the upstream answers; a browser's ``GET /`` stays the inspector.
* ``POST /v1/messages/count_tokens`` counts the request *as it will be sent*: the body's
  history is assembled under the service's policy and budget (``x-contextledger-budget``,
  the model's default …) exactly as :mod:`.pipeline` assembles a ``/v1/messages`` body
  with the same history, and the assembled body goes to the upstream's count endpoint.
  The assembly is made in a scratch ledger of the worker process (a fresh tenant per
  count, deleted afterwards): a count is not a conversation turn and records nothing in
  the service's ledger.  A body that cannot be assembled — or that holds only the new
  messages of a named conversation (``x-contextledger-history: delta``) — is counted as
  sent (a ``passthrough`` event with the reason, as for ``/v1/messages``).  In shadow
  mode (:mod:`.shadow`) the request will be sent as the client sent it, so it is counted
  as sent (``x-contextledger-mode: shadow`` on the answer; not a passthrough).
"""

from __future__ import annotations

import atexit
import json
import logging
import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers

from contextledger.errors import ContextLedgerError, InputError
from contextledger.ids import new_id
from contextledger.ledger import Ledger
from contextledger.security.secrets import screen_text
from contextledger.server.proxy.anthropic import AnthropicDialect
from contextledger.server.proxy.chain import chain_keys
from contextledger.server.proxy.dialect import Dialect, ledger_system_blocks
from contextledger.server.proxy.events import note
from contextledger.server.proxy.reconcile import conversation_for, record_chain, root_key
from contextledger.server.proxy.screening import body_bytes, screen_body
from contextledger.store.base import Scope

__all__ = ["PROVIDER_HEADERS", "assembled_body", "count_tokens", "install_probes", "is_provider_client"]

_log = logging.getLogger("contextledger.server.proxy")

PROVIDER_HEADERS = ("anthropic-version", "x-api-key")
"""Headers only a Messages API client sends: a root request carrying one is a probe of
the upstream, not a visit of the inspector."""

AsgiScope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def is_provider_client(headers: Headers) -> bool:
    """Whether ``headers`` carry one of :data:`PROVIDER_HEADERS`."""
    return any(h in headers for h in PROVIDER_HEADERS)


class _ProbeMiddleware:
    """See module docstring (``HEAD`` as ``GET``; a provider client's root probe)."""

    def __init__(self, app: Callable[[AsgiScope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        if scope["path"] == "/" and is_provider_client(Headers(scope=scope)):
            response = await _forward_root(Request(scope, receive))
            await response(scope, receive, send)
            return
        if scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        started = False

        async def without_body(message: MutableMapping[str, Any]) -> None:
            # the head ends the answer: a streamed GET (SSE) is not waited for
            nonlocal started
            if message["type"] == "http.response.start" and not started:
                started = True
                await send(message)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            elif message["type"] not in ("http.response.start", "http.response.body"):
                await send(message)

        await self.app({**scope, "method": "GET"}, receive, without_body)


def install_probes(app: FastAPI) -> None:
    """Add the probe handling of the module docstring to ``app`` (once, at creation)."""
    app.add_middleware(_ProbeMiddleware)


_MESSAGES = AnthropicDialect()
"""The Messages dialect a provider root probe is forwarded with."""


async def _forward_root(request: Request) -> Response:
    from contextledger.server.proxy.upstream import _send, _untouched

    note(request, "probe", _MESSAGES.name, f"{request.method} /")
    url = _MESSAGES.upstream_base(request.app.state.service.settings).rstrip("/") + "/"
    upstream = await _send(request, _MESSAGES, request.method, url, b"")
    return upstream if isinstance(upstream, Response) else _untouched(upstream, {})


# -- token counting ------------------------------------------------------------------------
class _Scratch:
    """A ledger of this process for assemblies that record nothing (a temporary folder,
    removed at exit)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ledger: Ledger | None = None

    def ledger(self, service: Any) -> Ledger:
        with self._lock:
            if self._ledger is None:
                folder = tempfile.mkdtemp(prefix="contextledger-count-")
                atexit.register(shutil.rmtree, folder, True)
                # named in full: the service's CONTEXTLEDGER_DB / _BLOBS never apply here
                self._ledger = Ledger.open(f"sqlite:///{folder}/count.db", home=folder, blobs=f"{folder}/blobs", policy=service.ledger.policy)
            return self._ledger


_SCRATCH = _Scratch()


def assembled_body(request: Request, dialect: Dialect, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with its history replaced by the assembly the proxy makes of it (runs in
    a worker thread).

    Raises:
        ValueError: a bad ``x-contextledger-budget`` header.
        InputError: ``x-contextledger-history: delta`` (the body is not the whole history).
        ContextLedgerError: a body the dialect cannot read, or an assembly failure.
    """
    from contextledger.server.proxy.pipeline import HISTORY_HEADER, _budget

    if request.headers.get(HISTORY_HEADER, "full").strip().lower() == "delta":
        raise InputError("a delta history is counted as sent: the count sees only the body, not the recorded history")
    service = request.app.state.service
    ledger = _SCRATCH.ledger(service)
    scope = Scope(tenant_id=new_id("count"))
    parsed = dialect.parse(body)
    budget = _budget(request, service.settings, parsed.model)
    conv = conversation_for(ledger, scope, None, parsed, source=f"count:{dialect.name}")
    try:
        position = record_chain(ledger, scope, conv.id, parsed.messages, chain_keys(root_key(conv.id), parsed.messages), tools=parsed.tools)
        result = ledger.assemble(conv.id, branch_id=position.branch_id, provider=dialect.provider, budget_tokens=budget, scope=scope,
                                 replay="estimate", persist=False)
        system_sha = (conv.metadata.get("proxy") or {}).get("system_sha256")
        # the same screen as the proxied request (:func:`~.pipeline._prepare`): no secret is counted upstream
        return dialect.upstream_body(screen_body(body), parsed, result, ledger_system_blocks(result, system_sha, screen_text(parsed.system_text).text))
    finally:
        ledger.store.delete_conversation(scope, conv.id)


async def count_tokens(request: Request, dialect: Dialect, path: str) -> Response:
    """Serve ``POST /v1/<path>`` (a token count) for the assembled request (see module
    docstring); errors in the provider's shape."""
    from contextledger.server.proxy.pipeline import PASSTHROUGH_HEADER
    from contextledger.server.proxy.shadow import MODE_HEADER, request_mode
    from contextledger.server.proxy.upstream import _error, _send, _untouched, read_request

    read = await read_request(request, dialect)
    if isinstance(read, Response):
        return read
    raw, body, _tenant = read
    clean = await run_in_threadpool(screen_body, body)
    raw = raw if clean is body else body_bytes(clean)  # sent as given in shadow mode and as a passthrough: screened
    extra: dict[str, str] = {}
    try:
        if request_mode(request.headers, request.app.state.service.settings.proxy_mode) == "shadow":
            content, extra = raw, {MODE_HEADER: "shadow"}
        else:
            content = json.dumps(await run_in_threadpool(assembled_body, request, dialect, body), ensure_ascii=False).encode("utf-8")
            note(request, "count_tokens", dialect.name, "assembled")
    except ValueError as exc:
        return _error(dialect, 400, str(exc))
    except ContextLedgerError as exc:
        reason = f"{type(exc).__name__}: {exc}"
        _log.warning("%s token count of the request as sent (not assembled): %s", dialect.name, reason)
        note(request, "passthrough", dialect.name, reason)
        content, extra = raw, {PASSTHROUGH_HEADER: reason[:200]}
    base = dialect.upstream_base(request.app.state.service.settings)
    url = f"{base}/v1/{path}" + (f"?{request.url.query}" if request.url.query else "")
    upstream = await _send(request, dialect, "POST", url, content)
    return upstream if isinstance(upstream, Response) else _untouched(upstream, extra)
