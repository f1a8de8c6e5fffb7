"""A scripted upstream: a local stand-in for the OpenAI and Anthropic APIs.

It answers ``POST /v1/chat/completions``, ``/v1/responses`` and ``/v1/messages`` in each
provider's exact wire format (JSON bodies, or SSE streams with the documented event
sequence), records every request it receives, and checks each Chat Completions and
Messages body against the provider rules (:func:`~contextledger.providers.registry.validate_payload`).
What it answers is decided by a *script*; the default, :func:`tool_loop_script`, acts as an
agent's model: a new user message gets one tool call, a tool result gets a final text.

Used by the proxy tests and the proxy benchmark (``contextledger bench proxy``); run it
alone with ``uvicorn --factory contextledger.server.scripted:default_app``.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["Plan", "ReceivedRequest", "ScriptedUpstream", "default_app", "tool_loop_script"]


@dataclass(kw_only=True)
class Plan:
    """One answer: optional reasoning, text and tool calls ``(name, arguments object)``.

    ``thinking`` (Messages API) is ``(text, signature)``; ``redacted`` adds a
    ``redacted_thinking`` block with that data.  ``status``/``error`` answer an error
    instead; ``drop_after_events`` ends a stream early (a dropped connection).
    ``usage`` replaces the answer's usage object (in the provider's own shape; a stream
    carries it where the provider does: Messages ``message_start`` and
    ``message_delta``, Chat a last chunk with ``choices: []`` only when the request asked
    for it with ``stream_options.include_usage``, Responses ``response.completed``).
    """

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    thinking: tuple[str, str] | None = None
    redacted: str | None = None
    status: int = 200
    error: dict[str, Any] | None = None
    drop_after_events: int | None = None
    usage: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class ReceivedRequest:
    """What the upstream received: path, headers (lower-case names), JSON body, the
    provider-rule problems found in it (``[]`` when valid) and the body's bytes."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    problems: list[str]
    raw: bytes = b""


Script = Callable[[str, dict[str, Any]], Plan]


def _last_is_tool_result(kind: str, body: dict[str, Any]) -> bool:
    if kind == "responses":
        items = body.get("input")
        last = items[-1] if isinstance(items, list) and items else {}
        return isinstance(last, dict) and last.get("type") == "function_call_output"
    messages = body.get("messages") or [{}]
    last = messages[-1]
    if kind == "chat":
        return bool(last.get("role") == "tool")
    content = last.get("content")
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def tool_loop_script(kind: str, body: dict[str, Any]) -> Plan:
    """A user message gets a ``run`` tool call, a tool result gets a closing text."""
    if _last_is_tool_result(kind, body):
        return Plan(text="Done: the step finished.")
    return Plan(text="Running the step.", tool_calls=[("run", {"command": "make check", "step": 1})])


class ScriptedUpstream:
    """The upstream app and what it received (thread-safe).

    Args:
        script: decides each answer (default :func:`tool_loop_script`).
        validate: check Chat Completions and Messages bodies against the provider rules.
        keep_bodies: keep every received request (``False``: count only, for load runs).
    """

    def __init__(self, script: Script | None = None, *, validate: bool = True, keep_bodies: bool = True) -> None:
        self.script = script or tool_loop_script
        self.validate = validate
        self.keep_bodies = keep_bodies
        self.received: list[ReceivedRequest] = []
        self.count = 0
        self.invalid = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.app = Starlette(routes=[
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/responses", self._responses, methods=["POST"]),
            Route("/v1/messages", self._messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/stats", self._stats, methods=["GET"]),
            Route("/", self._root, methods=["GET", "HEAD"]),
        ])

    def _next(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}{next(self._ids):06d}"

    async def _take(self, request: Request, kind: str) -> tuple[dict[str, Any], Plan]:
        raw = await request.body()
        body = json.loads(raw)
        problems: list[str] = []
        if self.validate:
            problems = _problems(kind, body)
        with self._lock:
            self.count += 1
            self.invalid += bool(problems)
            if self.keep_bodies:
                self.received.append(ReceivedRequest(path=request.url.path, headers={k.lower(): v for k, v in request.headers.items()}, body=body, problems=problems, raw=raw))
        return body, self.script(kind, body)

    async def _count_tokens(self, request: Request) -> Response:
        raw = await request.body()
        body = json.loads(raw)
        with self._lock:
            if self.keep_bodies:
                self.received.append(ReceivedRequest(path=request.url.path, headers={k.lower(): v for k, v in request.headers.items()}, body=body, problems=[], raw=raw))
        return JSONResponse({"input_tokens": len(json.dumps(body.get("messages", []))) // 4})

    async def _root(self, request: Request) -> Response:
        """``GET`` / ``HEAD /``: what a provider's root answers (404 with a marker header)."""
        return JSONResponse({"type": "error", "error": {"type": "not_found_error", "message": "scripted root"}}, status_code=404,
                            headers={"x-scripted-root": request.method})

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "gpt-4o", "object": "model", "created": 0, "owned_by": "scripted"}]})

    async def _stats(self, request: Request) -> Response:
        return JSONResponse({"requests": self.count, "invalid": self.invalid})

    @staticmethod
    def _stream(events: Iterator[bytes], plan: Plan) -> StreamingResponse:
        if plan.drop_after_events is not None:
            events = itertools.islice(events, plan.drop_after_events)
        return StreamingResponse(events, media_type="text/event-stream", headers={"cache-control": "no-cache"})

    # -- Chat Completions ------------------------------------------------------------------
    async def _chat(self, request: Request) -> Response:
        body, plan = await self._take(request, "chat")
        if plan.error is not None:
            return JSONResponse(plan.error, status_code=plan.status)
        rid, model = self._next("chatcmpl-"), str(body.get("model", ""))
        calls = [{"id": self._next("call_"), "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for n, a in plan.tool_calls]
        finish = "tool_calls" if calls else "stop"
        usage = plan.usage or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if body.get("stream"):
            options = body.get("stream_options")
            asked = isinstance(options, dict) and options.get("include_usage") is True
            return self._stream(_chat_events(rid, model, plan.text, calls, finish, usage if asked else None), plan)
        message = {"role": "assistant", "content": plan.text or None, "refusal": None, **({"tool_calls": calls} if calls else {})}
        return JSONResponse({"id": rid, "object": "chat.completion", "created": int(time.time()), "model": model,
                             "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                             "usage": usage})

    # -- Messages ------------------------------------------------------------------------
    async def _messages(self, request: Request) -> Response:
        body, plan = await self._take(request, "messages")
        if plan.error is not None:
            return JSONResponse(plan.error, status_code=plan.status)
        blocks: list[dict[str, Any]] = []
        if plan.thinking is not None:
            blocks.append({"type": "thinking", "thinking": plan.thinking[0], "signature": plan.thinking[1]})
        if plan.redacted is not None:
            blocks.append({"type": "redacted_thinking", "data": plan.redacted})
        if plan.text:
            blocks.append({"type": "text", "text": plan.text})
        blocks.extend({"type": "tool_use", "id": self._next("toolu_"), "name": n, "input": a} for n, a in plan.tool_calls)
        stop = "tool_use" if plan.tool_calls else "end_turn"
        message = {"id": self._next("msg_"), "type": "message", "role": "assistant", "model": str(body.get("model", "")), "content": blocks,
                   "stop_reason": stop, "stop_sequence": None, "usage": plan.usage or {"input_tokens": 10, "output_tokens": 5}}
        if body.get("stream"):
            return self._stream(_messages_events(message), plan)
        return JSONResponse(message)

    # -- Responses -----------------------------------------------------------------------
    async def _responses(self, request: Request) -> Response:
        body, plan = await self._take(request, "responses")
        if plan.error is not None:
            return JSONResponse(plan.error, status_code=plan.status)
        output: list[dict[str, Any]] = []
        if plan.thinking is not None:
            output.append({"type": "reasoning", "id": self._next("rs_"), "summary": [{"type": "summary_text", "text": plan.thinking[0]}], "encrypted_content": plan.thinking[1]})
        if plan.text:
            output.append({"type": "message", "id": self._next("msg_"), "status": "completed", "role": "assistant",
                           "content": [{"type": "output_text", "text": plan.text, "annotations": []}]})
        output.extend({"type": "function_call", "id": self._next("fc_"), "call_id": self._next("call_"), "name": n, "arguments": json.dumps(a), "status": "completed"}
                      for n, a in plan.tool_calls)
        response = {"id": self._next("resp_"), "object": "response", "created_at": time.time(), "status": "completed", "model": str(body.get("model", "")),
                    "output": output, "parallel_tool_calls": True, "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools", []),
                    "error": None, "incomplete_details": None, **({"usage": plan.usage} if plan.usage else {})}
        if body.get("stream"):
            return self._stream(_responses_events(response), plan)
        return JSONResponse(response)


_FIELDS = {"chat": ("openai-chat", ("messages", "tools")), "messages": ("anthropic", ("system", "messages", "tools")),
           "responses": ("openai-responses", ("instructions", "input", "tools"))}


def _problems(kind: str, body: dict[str, Any]) -> list[str]:
    """The provider-rule problems of a request body's serializer-owned fields."""
    from contextledger.providers.registry import PROVIDERS, validate_payload

    provider, keys = _FIELDS[kind]
    if provider not in PROVIDERS:
        return []
    return validate_payload(provider, _without_cache_control({k: body[k] for k in keys if k in body}))


def _without_cache_control(value: Any) -> Any:
    """The validators know the serializers' output; ``cache_control`` markers are a
    request option the proxy adds, checked separately."""
    if isinstance(value, dict):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


def _sse(data: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def _pieces(text: str, n: int = 3) -> list[str]:
    step = max(1, len(text) // n)
    return [text[i:i + step] for i in range(0, len(text), step)] or [""]


def _chat_events(rid: str, model: str, text: str, calls: list[dict[str, Any]], finish: str, usage: dict[str, Any] | None = None) -> Iterator[bytes]:
    base = {"id": rid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return _sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]})

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(text) if text else []:
        yield chunk({"content": piece})
    for i, call in enumerate(calls):
        yield chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}]})
        for piece in _pieces(call["function"]["arguments"]):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield chunk({}, finish)
    if usage is not None:
        yield _sse({**base, "choices": [], "usage": usage})
    yield b"data: [DONE]\n\n"


def _messages_events(message: dict[str, Any]) -> Iterator[bytes]:
    """The stream of ``message``: its usage as the API streams it, everything but
    ``output_tokens`` (1) in ``message_start``, the final ``output_tokens`` in ``message_delta``."""
    usage = message["usage"]
    yield _sse({"type": "message_start", "message": {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}}, "message_start")
    yield _sse({"type": "ping"}, "ping")
    for i, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "text":
            yield _sse({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}, "content_block_start")
            for piece in _pieces(block["text"]):
                yield _sse({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": piece}}, "content_block_delta")
        elif kind == "thinking":
            yield _sse({"type": "content_block_start", "index": i, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}, "content_block_start")
            for piece in _pieces(block["thinking"]):
                yield _sse({"type": "content_block_delta", "index": i, "delta": {"type": "thinking_delta", "thinking": piece}}, "content_block_delta")
            yield _sse({"type": "content_block_delta", "index": i, "delta": {"type": "signature_delta", "signature": block["signature"]}}, "content_block_delta")
        elif kind == "redacted_thinking":
            yield _sse({"type": "content_block_start", "index": i, "content_block": block}, "content_block_start")
        else:
            yield _sse({"type": "content_block_start", "index": i, "content_block": {**block, "input": {}}}, "content_block_start")
            for piece in _pieces(json.dumps(block["input"])):
                yield _sse({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": piece}}, "content_block_delta")
        yield _sse({"type": "content_block_stop", "index": i}, "content_block_stop")
    yield _sse({"type": "message_delta", "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None}, "usage": {"output_tokens": usage.get("output_tokens", 0)}}, "message_delta")
    yield _sse({"type": "message_stop"}, "message_stop")


def _responses_events(response: dict[str, Any]) -> Iterator[bytes]:
    seq = itertools.count()
    yield _sse({"type": "response.created", "sequence_number": next(seq), "response": {**response, "status": "in_progress", "output": []}}, "response.created")
    for i, item in enumerate(response["output"]):
        if item["type"] == "reasoning":
            yield _sse({"type": "response.output_item.added", "sequence_number": next(seq), "output_index": i, "item": {**item, "summary": []}}, "response.output_item.added")
        elif item["type"] == "message":
            yield _sse({"type": "response.output_item.added", "sequence_number": next(seq), "output_index": i, "item": {**item, "status": "in_progress", "content": []}}, "response.output_item.added")
            for piece in _pieces(item["content"][0]["text"]):
                yield _sse({"type": "response.output_text.delta", "sequence_number": next(seq), "item_id": item["id"], "output_index": i, "content_index": 0, "delta": piece, "logprobs": []}, "response.output_text.delta")
        else:
            yield _sse({"type": "response.output_item.added", "sequence_number": next(seq), "output_index": i, "item": {**item, "status": "in_progress", "arguments": ""}}, "response.output_item.added")
            for piece in _pieces(item["arguments"]):
                yield _sse({"type": "response.function_call_arguments.delta", "sequence_number": next(seq), "item_id": item["id"], "output_index": i, "delta": piece}, "response.function_call_arguments.delta")
        yield _sse({"type": "response.output_item.done", "sequence_number": next(seq), "output_index": i, "item": item}, "response.output_item.done")
    yield _sse({"type": "response.completed", "sequence_number": next(seq), "response": response}, "response.completed")


def default_app() -> Starlette:
    """A :class:`ScriptedUpstream` app with the default script (counts, keeps no bodies)."""
    return ScriptedUpstream(keep_bodies=False).app
