"""The OpenAI Chat Completions dialect (``POST /v1/chat/completions``).

Request: the leading ``system`` / ``developer`` messages are the client's system prompt
and go upstream verbatim; the rest is the history (read by the request-body importer) and
is replaced upstream by the assembled messages.  The
ledger's own system blocks (rules, pinned constraints) follow the client's as one more
``system`` message.  ``tools`` go upstream as the client sent them, plus the minimal
declaration the serializer gives a tool called in the history but no longer declared.
The client's session (a session header such as opencode's ``x-session-id``, else
``prompt_cache_key``) keys the conversation.

Answer: ``choices[0].message`` of a JSON body; for a stream, the ``chat.completion.chunk``
deltas of choice 0 (content, reasoning, tool calls by index) up to ``data: [DONE]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from contextledger.assembly.assembler import AssemblyResult
from contextledger.server.proxy.bodies import BodyDialect, BodyRequest
from contextledger.server.proxy.dialect import Answer, AnswerStream, prompt_cache_key, session_from
from contextledger.server.proxy.reconcile import ParsedRequest
from contextledger.server.proxy.sse import SseEvent

__all__ = ["SESSION_HEADERS", "OpenAIChatDialect"]

SESSION_HEADERS = ("x-session-id", "session-id", "session_id", "x-conversation-id", "conversation-id", "conversation_id")
"""Headers that carry a Chat client's session id, in order of preference (lower-case)."""


def _function_tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        return []
    return [t for t in tools if isinstance(t, dict) and t.get("type", "function") == "function" and isinstance(t.get("function"), dict)]


class OpenAIChatDialect(BodyDialect):
    """See module docstring."""

    name = "openai-chat"
    body_provider = "openai-chat"
    provider = "openai-chat"
    upstream_path = "/chat/completions"
    gen_ai_provider = "openai"

    def upstream_base(self, settings: Any) -> str:
        return str(settings.openai_upstream)

    def session_key(self, headers: Mapping[str, str], body: dict[str, Any]) -> str | None:
        """The client's session id: the first of :data:`SESSION_HEADERS` it sends, else
        the body's ``prompt_cache_key``; ``None`` when it sends neither."""
        return session_from(headers, body, SESSION_HEADERS)

    def upstream_body(self, body: dict[str, Any], parsed: ParsedRequest, result: AssemblyResult, ledger_blocks: Sequence[str]) -> dict[str, Any]:
        assembled = list(result.payload.get("messages", []))
        if assembled and assembled[0].get("role") == "system":
            assembled = assembled[1:]
        extra = [{"role": "system", "content": "\n\n".join(ledger_blocks)}] if ledger_blocks else []
        head = body["messages"][:parsed.head] if isinstance(parsed, BodyRequest) else []
        out = {**body, "messages": [*head, *extra, *assembled]}
        declared = {str(t["function"].get("name")) for t in _function_tools(body.get("tools"))}
        missing = [t for t in result.payload.get("tools", []) if t.get("function", {}).get("name") not in declared]
        if missing:
            out["tools"] = [*(body.get("tools") or []), *missing]
        if "prompt_cache_key" not in body:  # the conversation's, so its prefix is cached in one place
            out["prompt_cache_key"] = prompt_cache_key(result)
        return out

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

    def ended(self) -> bool:
        return self.done or self.broken

    def answer(self) -> Answer | None:
        if not self.done or self.broken:
            return None
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        response = {"id": self.meta.get("id"), "object": "chat.completion", "model": self.meta.get("model"),
                    "choices": [{"index": 0, "message": message, "finish_reason": self.finish}], "usage": self.usage}
        answer: Answer = self.dialect.answer_from_json(self.parsed, response)
        return answer
