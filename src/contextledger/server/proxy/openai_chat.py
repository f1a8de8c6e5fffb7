"""The OpenAI Chat Completions dialect (``POST /v1/chat/completions``).

Request: the leading ``system`` / ``developer`` messages are the client's system prompt
and go upstream verbatim; the rest is the history, parsed by the ``openai-chat``
importer's message converter and replaced upstream by the assembled messages.  The
ledger's own system blocks (rules, pinned constraints) follow the client's as one more
``system`` message.  ``tools`` go upstream as the client sent them, plus the minimal
declaration the serializer gives a tool called in the history but no longer declared.

Answer: ``choices[0].message`` of a JSON body; for a stream, the ``chat.completion.chunk``
deltas of choice 0 (content, reasoning, tool calls by index) up to ``data: [DONE]``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from contextledger.assembly.assembler import AssemblyResult
from contextledger.errors import InputError
from contextledger.ingest.importers.call_ids import CallIdRegistry
from contextledger.ingest.importers.openai_messages import OpenAIMessageConverter
from contextledger.ingest.transcript import ImportedMessage
from contextledger.records.parts import TextPart
from contextledger.server.proxy.dialect import Answer, AnswerStream, Dialect
from contextledger.server.proxy.reconcile import ParsedRequest
from contextledger.server.proxy.sse import SseEvent

__all__ = ["OpenAIChatDialect"]

_SYSTEM_ROLES = ("system", "developer")


class _Parsed(ParsedRequest):
    """A parsed chat request, with the converter that continues its call-id registry."""

    converter: OpenAIMessageConverter
    head: list[dict[str, Any]]


def _head_count(messages: list[Any]) -> int:
    n = 0
    while n < len(messages) and isinstance(messages[n], dict) and messages[n].get("role") in _SYSTEM_ROLES:
        n += 1
    return n


def _function_tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        return []
    return [t for t in tools if isinstance(t, dict) and t.get("type", "function") == "function" and isinstance(t.get("function"), dict)]


class OpenAIChatDialect(Dialect):
    """See module docstring."""

    name = "openai-chat"
    provider = "openai-chat"
    upstream_path = "/chat/completions"
    gen_ai_provider = "openai"

    def upstream_base(self, settings: Any) -> str:
        return str(settings.openai_upstream)

    def parse(self, body: dict[str, Any]) -> ParsedRequest:
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise InputError("a Chat Completions request needs a 'messages' array")
        notes: list[str] = []
        converter = OpenAIMessageConverter("request", CallIdRegistry(notes), notes)
        n = _head_count(messages)
        head = [converter.convert(m, f"msg:{i}", f"messages[{i}]") for i, m in enumerate(messages[:n])]
        history = [converter.convert(m, f"msg:{i}", f"messages[{i}]") for i, m in enumerate(messages) if i >= n]
        system = "\n\n".join(t for t in ("\n".join(p.text for p in m.parts if isinstance(p, TextPart)) for m in head) if t.strip())
        parsed = _Parsed(system_text=system, messages=history, tools=_function_tools(body.get("tools")), model=body.get("model") if isinstance(body.get("model"), str) else None, stream=body.get("stream") is True)
        parsed.converter = converter
        parsed.head = list(messages[:n])
        return parsed

    def upstream_body(self, body: dict[str, Any], parsed: ParsedRequest, result: AssemblyResult, ledger_blocks: Sequence[str]) -> dict[str, Any]:
        assert isinstance(parsed, _Parsed)
        assembled = list(result.payload.get("messages", []))
        if assembled and assembled[0].get("role") == "system":
            assembled = assembled[1:]
        extra = [{"role": "system", "content": "\n\n".join(ledger_blocks)}] if ledger_blocks else []
        out = {**body, "messages": [*parsed.head, *extra, *assembled]}
        declared = {str(t["function"].get("name")) for t in _function_tools(body.get("tools"))}
        missing = [t for t in result.payload.get("tools", []) if t.get("function", {}).get("name") not in declared]
        if missing:
            out["tools"] = [*(body.get("tools") or []), *missing]
        return out

    def _answer(self, parsed: ParsedRequest, message: dict[str, Any]) -> list[ImportedMessage]:
        assert isinstance(parsed, _Parsed)
        converted = parsed.converter.convert({**message, "role": "assistant"}, "answer", "answer")
        return [converted] if converted.parts else []

    def answer_from_json(self, parsed: ParsedRequest, data: dict[str, Any]) -> Answer:
        choice = (data.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        return Answer(messages=self._answer(parsed, message), usage=data.get("usage") or {}, response_id=data.get("id"), model=data.get("model"), finish_reason=choice.get("finish_reason"))

    def answer_stream(self, parsed: ParsedRequest) -> AnswerStream:
        return _ChatStream(self, parsed)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error", 429: "rate_limit_error"}.get(status, "api_error")
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}

    def stream_error(self, message: str) -> bytes:
        return ("data: " + json.dumps(self.error_body(502, message)) + "\n\n").encode()


class _ChatStream(AnswerStream):
    def __init__(self, dialect: OpenAIChatDialect, parsed: ParsedRequest) -> None:
        self.dialect, self.parsed = dialect, parsed
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.done = False
        self.broken = False
        self.usage: dict[str, Any] = {}
        self.meta: dict[str, Any] = {}
        self.finish: str | None = None

    def event(self, event: SseEvent) -> None:
        if event.data.strip() == "[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(event.data)
        except ValueError:
            self.broken = True
            return
        if not isinstance(chunk, dict) or "error" in chunk:
            self.broken = True
            return
        self.meta.setdefault("id", chunk.get("id"))
        self.meta.setdefault("model", chunk.get("model"))
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            self.finish = choice.get("finish_reason") or self.finish
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                self.text.append(delta["content"])
            if isinstance(delta.get("reasoning_content"), str):
                self.reasoning.append(delta["reasoning_content"])
            for call in delta.get("tool_calls") or []:
                slot = self.calls.setdefault(int(call.get("index", 0)), {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                slot["id"] = call.get("id") or slot["id"]
                fn = call.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""

    def answer(self) -> Answer | None:
        if not self.done or self.broken:
            return None
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        return Answer(messages=self.dialect._answer(self.parsed, message), usage=self.usage, response_id=self.meta.get("id"), model=self.meta.get("model"), finish_reason=self.finish)
