"""The proxy's path for one request (issue "Drop-in", steps 1–5).

1. identify the conversation (:func:`~.reconcile.conversation_for`: named by the client,
   else by its session, else by the history's first answer); a client that names it
   may send only its new messages (``x-contextledger-history: delta``): they continue the
   conversation's newest message;
2. record what of the client's history is new (:func:`~.reconcile.record_chain`: once,
   forks for changed history, raw tool results as artifacts first);
3. assemble under the policy with the request's own tools and budget
   (``x-contextledger-budget``, else the default of the model, else the policy's), less
   what the client's body sends as given (:meth:`~.dialect.Dialect.reserved_tokens`): the
   budget covers the whole upstream body the model reads (measured by the dialect on the
   body; an assembly that does not fit beside it is made once more with the excess cut);
4. forward the client's body with its history replaced and every secret in what it
   sends as given replaced by its marker (:func:`~.screening.screen_body`: the same
   screen as recorded texts, so no secret reaches the provider), with the client's own credential
   headers (never stored or logged) and query string (``?beta=true``); stream the answer back chunk by chunk as it arrives
   and record the assistant turn (with its ModelRun: provider, model, assembly, usage) once
   the stream ended as the provider ends one; add
   ``x-contextledger-assembly-id`` (and ``x-contextledger-conversation``); the assembly's
   full record (decision list, comparison with the previous assembly, its write) is made
   after the response is sent, ordered per conversation (:mod:`contextledger.store.deferred`:
   the next request of the conversation, explain and ``/api`` wait for it);
5. upstream errors pass unchanged; timeouts, unreachable upstreams and streams that break
   off or end before the provider's last event reach the client as errors in the
   provider's shape (an error event appended to a stream); no answer is recorded for
   them.

In shadow mode (:mod:`.shadow`: ``--proxy-mode shadow`` or ``x-contextledger-mode:
shadow``) steps 1–3 and the answer's recording are the same, but step 4 forwards the
client's body byte for byte (as every passthrough and side call, with any secret in it
replaced by its marker); the assembly is marked with the tokens of both requests.
Every answer's reported usage (:mod:`.usage`) is added to its assembly record and the
``/metrics`` token counters.

A body that is not a JSON object, or whose history (``messages``, Responses ``input``) is
missing, not an array or holds an item that is not an object
(:meth:`~.dialect.Dialect.body_problem`), is rejected with 400 in the provider's error
shape (one log line; never forwarded, nothing recorded); a body the
parsers cannot read, or whose assembly fails, is forwarded untouched (the response says
so in ``x-contextledger-passthrough``, the service log says why).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import httpx
from fastapi import Request
from fastapi.responses import Response, StreamingResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from contextledger.assembly.assembler import AssemblyResult
from contextledger.errors import ContextLedgerError
from contextledger.ids import new_id
from contextledger.records.models import ModelRun
from contextledger.security.secrets import screen_text
from contextledger.server.proxy.chain import chain_keys
from contextledger.server.proxy.dialect import Answer, Dialect, ledger_system_blocks
from contextledger.server.proxy.events import events_of, note
from contextledger.server.proxy.reconcile import (
    NEW_PREFIX,
    ParsedRequest,
    anchor_conversation,
    conversation_for,
    delta_base,
    record_chain,
    root_key,
)
from contextledger.server.proxy.screening import body_bytes, screen_body, screen_raw
from contextledger.server.proxy.shadow import request_mode, shadow_headers, shadow_mark
from contextledger.server.proxy.side_calls import forward_side_call, side_call
from contextledger.server.proxy.sse import SseParser
from contextledger.server.proxy.upstream import (
    _client_headers,
    _error,
    _send,
    _untouched,
    _with_query,
    read_request,
)
from contextledger.server.proxy.usage import upstream_usage, with_stream_usage
from contextledger.store.base import Scope

__all__ = ["ASSEMBLY_HEADER", "BUDGET_HEADER", "CONVERSATION_HEADER", "handle"]

_log = logging.getLogger("contextledger.server.proxy")

CONVERSATION_HEADER = "x-contextledger-conversation"
HISTORY_HEADER = "x-contextledger-history"
BUDGET_HEADER = "x-contextledger-budget"
ASSEMBLY_HEADER = "x-contextledger-assembly-id"
PASSTHROUGH_HEADER = "x-contextledger-passthrough"

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
    unnamed: bool = False
    shadow: dict[str, Any] | None = None
    """The assembly's shadow mark (:func:`~.shadow.shadow_mark`) when the client's body is sent."""
    raw: bytes = b""
    result: AssemblyResult | None = None
    """The assembly as the request path has it (its record provisional until written)."""
    provider_name: str = ""


def _budget(request: Request, settings: Any, model: str | None) -> int | None:
    given = request.headers.get(BUDGET_HEADER)
    if given is not None:
        if not given.strip().isdigit() or int(given) <= 0:
            raise ValueError(f"{BUDGET_HEADER} must be a positive number of tokens, got {given!r}")
        return int(given)
    budget: int | None = settings.budget_for(model)
    return budget


def _prepare(request: Request, dialect: Dialect, body: dict[str, Any], tenant: str, shadow_raw: bytes | None = None, clean: dict[str, Any] | None = None) -> _Prepared:
    """Steps 1–3 (a worker thread: database work); with ``shadow_raw`` (the client's
    bytes, screened, to be sent as they are) the assembly is marked as a shadow one.
    ``clean`` is ``body`` screened (:func:`~.screening.screen_body`; screened here when not given)."""
    service = request.app.state.service
    ledger = service.ledger
    scope = Scope(tenant_id=tenant)
    started_at = datetime.now(UTC)
    t0 = time.perf_counter()
    parsed = dialect.parse(body)
    clean = screen_body(body) if clean is None else clean  # what of the body goes upstream as given: screened as recorded texts are
    budget = _budget(request, service.settings, parsed.model)
    reserved = dialect.reserved_tokens(clean, parsed) + parsed.reserved_tokens
    if reserved and budget is None:  # what the client's body sends verbatim is part of the budget
        budget = ledger.runtime.resolve_policy(None).budget.default_budget_tokens
    t1 = time.perf_counter()
    named = request.headers.get(CONVERSATION_HEADER)
    delta = request.headers.get(HISTORY_HEADER, "full").strip().lower()
    if delta not in ("full", "delta") or (delta == "delta" and not named):
        raise ValueError(f"{HISTORY_HEADER} is 'full' (default) or 'delta' (with {CONVERSATION_HEADER})")
    session = None if named else dialect.session_key(request.headers, body)
    conv = conversation_for(ledger, scope, named, parsed, source=f"proxy:{dialect.name}", session=session)
    root, base = delta_base(ledger, scope, conv) if delta == "delta" else (root_key(conv.id), None)
    keys = chain_keys(root, parsed.messages)
    position = record_chain(ledger, scope, conv.id, parsed.messages, keys, tools=parsed.tools, base=base)
    t2 = time.perf_counter()
    # the replay size is estimated from stored counts (constant work on the request path)
    system_sha = (conv.metadata.get("proxy") or {}).get("system_sha256")
    own_system = screen_text(parsed.system_text).text

    def assemble(limit: int | None, replaces: str | None = None) -> tuple[AssemblyResult, dict[str, Any]]:
        result = ledger.assemble(conv.id, branch_id=position.branch_id, provider=dialect.provider, budget_tokens=limit, scope=scope, replay="estimate", replaces=replaces, defer=True)
        return result, dialect.upstream_body(clean, parsed, result, ledger_system_blocks(result, system_sha, own_system))

    result, upstream = assemble(max(1, budget - reserved) if budget is not None else None)
    # what the client sends as given (its tools, system, context) is measured on the body
    # itself; an assembly that does not fit beside it is made again with the excess cut
    measured = dialect.upstream_tokens(upstream) if budget is not None else None
    if budget is not None and measured is not None and measured > budget:
        # the first attempt is not sent: it never becomes the epoch state
        result, upstream = assemble(max(1, budget - (measured - result.record.assembled_tokens)), replaces=result.record.id)
    t3 = time.perf_counter()
    timings = {"parse": t1 - t0, "reconcile": t2 - t1, "assemble": t3 - t2}
    shadow, t4 = None, time.perf_counter()
    if shadow_raw is not None:  # the assembly is kept, marked; the client's bytes are sent
        shadow = shadow_mark(dialect.provider, body, shadow_raw, upstream)
        _annotate(request, scope, result.record.id, {"proxy": shadow})
        timings["shadow"] = time.perf_counter() - t4
    timings["prepare"] = time.perf_counter() - t0
    unnamed = (conv.content_key or "").startswith(NEW_PREFIX)
    return _Prepared(scope=scope, parsed=parsed, conversation_id=conv.id, root=root, base=base, keys=keys, body=upstream, assembly_id=result.record.id, unnamed=unnamed,
                     timings_ms={k: round(v * 1000, 2) for k, v in timings.items()}, started_at=started_at, shadow=shadow, raw=shadow_raw or b"",
                     result=result, provider_name=dialect.gen_ai_provider)


def _annotate(request: Request, scope: Scope, assembly_id: str, fields: dict[str, Any]) -> None:
    """Set ``fields`` on the request's assembly: merged into its record when that is still
    to be written (:mod:`contextledger.store.deferred`), else on the stored record."""
    store = request.app.state.service.ledger.store
    if not store.deferred.annotate(assembly_id, fields):
        with store.writer(scope) as w:
            w.annotate_assembly(assembly_id, fields)


def _after_response(request: Request, prep: _Prepared) -> None:
    """Once the response is sent (a background task): write the request's assembly record
    (and first the conversation's earlier ones: :mod:`contextledger.store.deferred`; a
    failure is logged there) and emit its telemetry span."""
    service = request.app.state.service
    store = service.ledger.store
    store.deferred.start(prep.assembly_id)
    if prep.result is None or not service.settings.telemetry:
        return
    from contextledger.server.telemetry import assembly_span

    try:
        record = store.get_assembly(prep.scope, prep.assembly_id)[0]
        assembly_span(service.settings, replace(prep.result, record=record), prep.provider_name, prep.parsed.model)
    except ContextLedgerError as exc:
        _log.error("telemetry of %s not emitted: %s: %s", prep.assembly_id, type(exc).__name__, exc)


def _record_answer(request: Request, dialect: Dialect, prep: _Prepared, answer: Answer) -> None:
    """Record the answer's usage on the request's assembly and the assistant turn after
    the request's history (once, idempotent).  A failure is logged, never passed to the
    client: the answer still reaches it."""
    usage = upstream_usage(dialect.name, answer.usage)
    if usage is not None:
        events_of(request.app).add_usage(dialect.name, usage)
        try:
            _annotate(request, prep.scope, prep.assembly_id, {"upstream_usage": usage})
        except Exception as exc:
            _log.error("%s usage of %s not recorded: %s: %s", dialect.name, prep.assembly_id, type(exc).__name__, exc)
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
    if prep.unnamed:
        anchor_conversation(ledger, prep.scope, prep.conversation_id, prep.parsed, answer.messages)


async def _passthrough(request: Request, dialect: Dialect, raw: bytes, reason: str) -> Response:
    """Forward ``raw`` (a body the proxy cannot work with: the client's bytes, screened)."""
    _log.warning("%s forwarded untouched: %s", dialect.name, reason)
    note(request, "passthrough", dialect.name, reason)  # /metrics, /healthz and the inspector
    url = _with_query(request, dialect.upstream_base(request.app.state.service.settings) + dialect.upstream_path)
    upstream = await _send(request, dialect, "POST", url, raw)
    return upstream if isinstance(upstream, Response) else _untouched(upstream, {PASSTHROUGH_HEADER: reason[:200]})


async def forward_other(request: Request, path: str, dialect: Dialect) -> Response:
    """Forward any other ``/v1`` request (``/v1/models``, ``/v1/messages/count_tokens`` …)
    to ``dialect``'s upstream (errors in its shape): untouched, except that the secrets of a
    JSON body are replaced by their markers (:func:`~.screening.screen_raw`)."""
    settings = request.app.state.service.settings
    base = dialect.upstream_base(settings) + ("/v1" if dialect.upstream_path.startswith("/v1/") else "")
    url = _with_query(request, f"{base}/{path}")
    upstream = await _send(request, dialect, request.method, url, await run_in_threadpool(screen_raw, await request.body()))
    return upstream if isinstance(upstream, Response) else _untouched(upstream, {})


async def handle(request: Request, dialect: Dialect) -> Response:
    """Serve one proxied request (see module docstring)."""
    read = await read_request(request, dialect)
    if isinstance(read, Response):
        return read
    raw, body, tenant = read
    # a side call, a passthrough and a shadow request send the client's bytes: screened too
    clean = await run_in_threadpool(screen_body, body)
    raw = raw if clean is body else body_bytes(clean)
    side = side_call(request.headers, body, named=CONVERSATION_HEADER in request.headers)
    if side is not None:  # a title / quota probe …: never a conversation (.side_calls)
        return await forward_side_call(request, dialect, raw, side)
    try:
        shadow = request_mode(request.headers, request.app.state.service.settings.proxy_mode) == "shadow"
        prep = await run_in_threadpool(_prepare, request, dialect, body, tenant, raw if shadow else None, clean)
    except ValueError as exc:  # a bad contextledger header
        return _error(dialect, 400, str(exc))
    except ContextLedgerError as exc:
        return await _passthrough(request, dialect, raw, f"{type(exc).__name__}: {exc}")
    except Exception as exc:
        _log.error("%s request not assembled: %s", dialect.name, type(exc).__name__, exc_info=exc)
        return await _passthrough(request, dialect, raw, f"not assembled ({type(exc).__name__})")
    response = await _forward(request, dialect, prep)
    response.background = BackgroundTask(_after_response, request, prep)
    return response


async def _forward(request: Request, dialect: Dialect, prep: _Prepared) -> Response:
    service = request.app.state.service
    url = _with_query(request, dialect.upstream_base(service.settings) + dialect.upstream_path)
    ours = {ASSEMBLY_HEADER: prep.assembly_id, CONVERSATION_HEADER: prep.conversation_id,
            "server-timing": ", ".join(f"{k};dur={v}" for k, v in prep.timings_ms.items())}
    if prep.shadow is not None:  # the client's own bytes (shadow mode); not a passthrough
        content = prep.raw
        ours.update(shadow_headers(prep.shadow))
        events_of(request.app).add_shadow(dialect.name)
    else:
        sent = with_stream_usage(dialect.name, prep.body) if service.settings.stream_usage else prep.body
        content = json.dumps(sent, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    upstream = await _send(request, dialect, "POST", url, content)
    if isinstance(upstream, Response):  # unreachable / timed out: the client can still find the request's record
        upstream.headers.update(ours)
        _log.warning("%s upstream failed (%s) for assembly %s", dialect.name, upstream.status_code, prep.assembly_id)
        await run_in_threadpool(_note_upstream_failure, request, prep, upstream.status_code)
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


def _note_upstream_failure(request: Request, prep: _Prepared, status: int) -> None:
    """Mark the request's assembly (``proxy.upstream_error``): the upstream could not be
    reached or did not answer in time, so nothing this request carried reached the provider."""
    mark = {**(prep.shadow or {"mode": "assemble"}), "upstream_error": f"the upstream could not be reached or timed out (the client got {status})"}
    try:
        _annotate(request, prep.scope, prep.assembly_id, {"proxy": mark})
    except Exception as exc:  # logged, never passed to the client: it already has its error
        _log.error("%s upstream failure of %s not recorded: %s: %s", "proxy", prep.assembly_id, type(exc).__name__, exc)


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
