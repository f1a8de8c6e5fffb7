"""The proxy's path for one request (issue "Drop-in", steps 1–5).

1. identify the conversation (:func:`~.reconcile.conversation_for`); a client that names it
   may send only its new messages (``x-contextledger-history: delta``): they continue the
   conversation's newest message;
2. record what of the client's history is new (:func:`~.reconcile.record_chain`: once,
   forks for changed history, raw tool results as artifacts first);
3. assemble under the policy with the request's own tools and budget
   (``x-contextledger-budget``, else the default of the model, else the policy's);
4. forward the client's body with its history replaced, with the client's own credential
   headers (never stored or logged); stream the answer back chunk by chunk as it arrives
   and record the assistant turn (with its ModelRun: provider, model, assembly, usage) once
   the stream ended as the provider ends one; add
   ``x-contextledger-assembly-id`` (and ``x-contextledger-conversation``);
5. upstream errors pass unchanged; timeouts, unreachable upstreams and streams that break
   off or end before the provider's last event reach the client as errors in the
   provider's shape (an error event appended to a stream); no answer is recorded for
   them.

A body that is not a JSON object is rejected in the provider's error shape; a body the
parsers cannot read, or whose assembly fails, is forwarded untouched (the response says
so in ``x-contextledger-passthrough``, the service log says why).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from contextledger.errors import ContextLedgerError
from contextledger.ids import new_id
from contextledger.records.models import ModelRun
from contextledger.server.deps import resolve_tenant
from contextledger.server.proxy.chain import chain_keys
from contextledger.server.proxy.dialect import Answer, Dialect, ledger_system_blocks
from contextledger.server.proxy.reconcile import (
    ParsedRequest,
    conversation_for,
    delta_base,
    record_chain,
    root_key,
)
from contextledger.server.proxy.sse import SseParser
from contextledger.store.base import Scope

__all__ = ["ASSEMBLY_HEADER", "BUDGET_HEADER", "CONVERSATION_HEADER", "handle"]

_log = logging.getLogger("contextledger.server.proxy")

CONVERSATION_HEADER = "x-contextledger-conversation"
HISTORY_HEADER = "x-contextledger-history"
BUDGET_HEADER = "x-contextledger-budget"
ASSEMBLY_HEADER = "x-contextledger-assembly-id"
PASSTHROUGH_HEADER = "x-contextledger-passthrough"

_HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "trailers",
    "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding", "content-encoding",
})


def _upstream_headers(request: Request) -> dict[str, str]:
    """The client's headers to forward: credentials and provider headers as sent (never
    logged), minus hop-by-hop headers and the service's own."""
    out = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP and not k.lower().startswith("x-contextledger-")}
    out["accept-encoding"] = "identity"
    return out


def _client_headers(upstream: httpx.Headers, extra: dict[str, str]) -> dict[str, str]:
    out = {k: v for k, v in upstream.items() if k.lower() not in _HOP_BY_HOP}
    out.update(extra)
    return out


@dataclass(kw_only=True)
class _Prepared:
    """What step 1–3 produced for the forward and the answer's recording."""

    scope: Scope
    parsed: ParsedRequest
    conversation_id: str
    root: str
    base: tuple[str, str, int] | None
    keys: list[str]
    body: dict[str, Any]
    assembly_id: str
    timings_ms: dict[str, float]
    started_at: datetime


def _budget(request: Request, settings: Any, model: str | None) -> int | None:
    given = request.headers.get(BUDGET_HEADER)
    if given is not None:
        if not given.strip().isdigit() or int(given) <= 0:
            raise ValueError(f"{BUDGET_HEADER} must be a positive number of tokens, got {given!r}")
        return int(given)
    budget: int | None = settings.budget_for(model)
    return budget


def _prepare(request: Request, dialect: Dialect, body: dict[str, Any], tenant: str) -> _Prepared:
    """Steps 1–3 (a worker thread: database work)."""
    service = request.app.state.service
    ledger = service.ledger
    scope = Scope(tenant_id=tenant)
    started_at = datetime.now(UTC)
    t0 = time.perf_counter()
    parsed = dialect.parse(body)
    budget = _budget(request, service.settings, parsed.model)
    t1 = time.perf_counter()
    named = request.headers.get(CONVERSATION_HEADER)
    delta = request.headers.get(HISTORY_HEADER, "full").strip().lower()
    if delta not in ("full", "delta") or (delta == "delta" and not named):
        raise ValueError(f"{HISTORY_HEADER} is 'full' (default) or 'delta' (with {CONVERSATION_HEADER})")
    conv = conversation_for(ledger, scope, named, parsed, source=f"proxy:{dialect.name}")
    root, base = delta_base(ledger, scope, conv) if delta == "delta" else (root_key(conv.id), None)
    keys = chain_keys(root, parsed.messages)
    position = record_chain(ledger, scope, conv.id, parsed.messages, keys, tools=parsed.tools, base=base)
    t2 = time.perf_counter()
    # the replay size is estimated from stored counts (constant work on the request path)
    result = ledger.assemble(conv.id, branch_id=position.branch_id, provider=dialect.provider, budget_tokens=budget, scope=scope, replay="estimate")
    t3 = time.perf_counter()
    system_sha = (conv.metadata.get("proxy") or {}).get("system_sha256")
    upstream = dialect.upstream_body(body, parsed, result, ledger_system_blocks(result, system_sha, parsed.system_text))
    from contextledger.server.telemetry import assembly_span

    assembly_span(service.settings, result, dialect.gen_ai_provider, parsed.model)
    timings = {"parse": t1 - t0, "reconcile": t2 - t1, "assemble": t3 - t2, "prepare": time.perf_counter() - t0}
    return _Prepared(scope=scope, parsed=parsed, conversation_id=conv.id, root=root, base=base, keys=keys, body=upstream, assembly_id=result.record.id,
                     timings_ms={k: round(v * 1000, 2) for k, v in timings.items()}, started_at=started_at)


def _record_answer(request: Request, dialect: Dialect, prep: _Prepared, answer: Answer) -> None:
    """Record the assistant turn after the request's history (once, idempotent).  A
    failure is logged, never passed to the client: the answer still reaches it."""
    if not answer.messages:
        return
    try:
        _write_answer(request, dialect, prep, answer)
    except Exception as exc:
        _log.error("%s answer of %s not recorded: %s: %s", dialect.name, prep.conversation_id, type(exc).__name__, exc)


def _write_answer(request: Request, dialect: Dialect, prep: _Prepared, answer: Answer) -> None:
    ledger = request.app.state.service.ledger
    messages = [*prep.parsed.messages, *answer.messages]
    keys = [*prep.keys, *chain_keys(prep.keys[-1] if prep.keys else prep.root, answer.messages)]
    extra = {"assembly_id": prep.assembly_id, "provider": dialect.name, **({"usage": answer.usage} if answer.usage else {}),
             **({"response_id": answer.response_id} if answer.response_id else {}), **({"finish_reason": answer.finish_reason} if answer.finish_reason else {})}
    run = ModelRun(
        id=new_id("run"), tenant_id=prep.scope.tenant_id, conversation_id=prep.conversation_id, branch_id="", provider=dialect.name,
        model=answer.model or prep.parsed.model, assembly_id=prep.assembly_id, status="completed", started_at=prep.started_at,
        finished_at=datetime.now(UTC), usage=answer.usage,
    )
    record_chain(ledger, prep.scope, prep.conversation_id, messages, keys, extra_metadata=extra, base=prep.base, model_run=run)


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


async def _passthrough(request: Request, dialect: Dialect, raw: bytes, reason: str) -> Response:
    """Forward ``raw`` untouched (a body the proxy cannot work with)."""
    _log.warning("%s forwarded untouched: %s", dialect.name, reason)
    url = dialect.upstream_base(request.app.state.service.settings) + dialect.upstream_path
    upstream = await _send(request, dialect, "POST", url, raw)
    return upstream if isinstance(upstream, Response) else _untouched(upstream, {PASSTHROUGH_HEADER: reason[:200]})


async def forward_other(request: Request, path: str, dialect: Dialect) -> Response:
    """Forward any other ``/v1`` request (``/v1/models``, ``/v1/messages/count_tokens`` …)
    untouched to ``dialect``'s upstream (errors in its shape)."""
    settings = request.app.state.service.settings
    base = dialect.upstream_base(settings) + ("/v1" if dialect.upstream_path.startswith("/v1/") else "")
    url = f"{base}/{path}" + (f"?{request.url.query}" if request.url.query else "")
    upstream = await _send(request, dialect, request.method, url, await request.body())
    return upstream if isinstance(upstream, Response) else _untouched(upstream, {})


async def handle(request: Request, dialect: Dialect) -> Response:
    """Serve one proxied request (see module docstring)."""
    raw = await request.body()
    try:
        body = json.loads(raw)
    except ValueError:
        return _error(dialect, 400, "the request body is not valid JSON")
    if not isinstance(body, dict):
        return _error(dialect, 400, "the request body must be a JSON object")
    try:
        tenant = await run_in_threadpool(resolve_tenant, request, bearer=False)
    except HTTPException as exc:
        return _error(dialect, exc.status_code, str(exc.detail))
    try:
        prep = await run_in_threadpool(_prepare, request, dialect, body, tenant)
    except ValueError as exc:  # a bad contextledger header
        return _error(dialect, 400, str(exc))
    except ContextLedgerError as exc:
        return await _passthrough(request, dialect, raw, f"{type(exc).__name__}: {exc}")
    except Exception as exc:
        _log.error("%s request not assembled: %s", dialect.name, type(exc).__name__, exc_info=exc)
        return await _passthrough(request, dialect, raw, f"not assembled ({type(exc).__name__})")
    return await _forward(request, dialect, prep)


async def _forward(request: Request, dialect: Dialect, prep: _Prepared) -> Response:
    service = request.app.state.service
    url = dialect.upstream_base(service.settings) + dialect.upstream_path
    content = json.dumps(prep.body, ensure_ascii=False).encode("utf-8")
    ours = {ASSEMBLY_HEADER: prep.assembly_id, CONVERSATION_HEADER: prep.conversation_id,
            "server-timing": ", ".join(f"{k};dur={v}" for k, v in prep.timings_ms.items())}
    upstream = await _send(request, dialect, "POST", url, content)
    if isinstance(upstream, Response):
        return upstream
    headers = _client_headers(upstream.headers, ours)
    streamed = upstream.headers.get("content-type", "").startswith("text/event-stream")
    if not streamed or not 200 <= upstream.status_code < 300:
        try:
            data = await upstream.aread()
        except httpx.HTTPError:
            await upstream.aclose()
            return _error(dialect, 502, "the upstream connection broke off")
        await upstream.aclose()
        if 200 <= upstream.status_code < 300:
            await _record_json(request, dialect, prep, data)
        return Response(data, status_code=upstream.status_code, headers=headers)
    return StreamingResponse(_relay(request, dialect, prep, upstream), status_code=upstream.status_code, headers=headers)


async def _record_json(request: Request, dialect: Dialect, prep: _Prepared, data: bytes) -> None:
    try:
        answer = dialect.answer_from_json(prep.parsed, json.loads(data))
    except (ValueError, ContextLedgerError, KeyError, TypeError) as exc:
        _log.warning("%s answer not recorded: %s", dialect.name, type(exc).__name__)
        return
    await run_in_threadpool(_record_answer, request, dialect, prep, answer)


async def _relay(request: Request, dialect: Dialect, prep: _Prepared, upstream: httpx.Response) -> AsyncIterator[bytes]:
    """Pass each chunk on as it arrives.  The chunk that completes the answer is held
    until the answer is recorded: a client that stops reading at the provider's last
    event (SDKs do) finds it recorded, and a stream that breaks off records nothing."""
    parser = SseParser()
    stream = dialect.answer_stream(prep.parsed)
    recorded = False
    try:
        async for chunk in upstream.aiter_bytes():
            for event in parser.feed(chunk):
                stream.event(event)
            if not recorded:
                answer = stream.answer()
                if answer is not None:
                    recorded = True
                    await run_in_threadpool(_record_answer, request, dialect, prep, answer)
            yield chunk
    except httpx.HTTPError:
        yield dialect.stream_error("the upstream stream broke off")
    else:
        if not stream.ended():
            yield dialect.stream_error("the upstream stream ended before its last event")
    finally:
        await upstream.aclose()
