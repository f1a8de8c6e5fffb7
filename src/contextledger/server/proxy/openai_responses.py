"""The OpenAI Responses dialect (``POST /v1/responses``).

Request: ``instructions`` and the leading ``system`` / ``developer`` message items of
``input`` are the client's system prompt and go upstream verbatim (the ledger's own
blocks — rules, pinned constraints — are appended to ``instructions``); the rest of
``input`` is replaced by the assembled items, except that the items of the turn a tool
loop continues (from the newest user message on: ``reasoning`` with its encrypted
content, the calls and their outputs) are sent exactly as the client sent them when the
assembled turn holds the same calls.  ``tools`` go upstream as sent, plus the minimal
declaration of a tool called in the history but no longer declared; every other field
passes unchanged.  A request that continues server-side state (``previous_response_id``
or ``conversation``) holds no history to replace and is forwarded untouched.

Answer: the response object of a JSON body; for a stream, the ``response`` of
``response.completed`` (``response.failed`` / ``response.incomplete`` / ``error`` record
nothing).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from contextledger.assembly.assembler import AssemblyResult
from contextledger.errors import InputError
from contextledger.server.proxy.bodies import BodyDialect
from contextledger.server.proxy.dialect import Answer, AnswerStream
from contextledger.server.proxy.reconcile import ParsedRequest
from contextledger.server.proxy.sse import SseEvent

__all__ = ["OpenAIResponsesDialect"]

_ENDS = frozenset({"response.completed", "response.failed", "response.incomplete", "error"})


def _is_user(item: Any) -> bool:
    return isinstance(item, dict) and item.get("role") == "user" and item.get("type", "message") == "message"


def _head(items: list[Any]) -> int:
    n = 0
    while n < len(items) and isinstance(items[n], dict) and items[n].get("role") in ("system", "developer") and items[n].get("type", "message") == "message":
        n += 1
    return n


def _call_ids(items: list[Any]) -> list[str]:
    return sorted(str(i.get("call_id")) for i in items if isinstance(i, dict) and i.get("type") == "function_call")


def _continued_turn(items: list[Any]) -> list[Any] | None:
    """The client's items after its newest user message, when they continue a tool loop
    with reasoning (they must then be sent exactly as given)."""
    last_user = max((i for i, item in enumerate(items) if _is_user(item)), default=-1)
    tail = items[last_user + 1:]
    if not tail or not isinstance(tail[-1], dict) or tail[-1].get("type") != "function_call_output":
        return None
    return tail if any(isinstance(i, dict) and i.get("type") == "reasoning" for i in tail) else None


class OpenAIResponsesDialect(BodyDialect):
    """See module docstring."""

    name = "openai-responses"
    body_provider = "openai-responses"
    provider = "openai-responses"
    upstream_path = "/responses"
    gen_ai_provider = "openai"

    def upstream_base(self, settings: Any) -> str:
        return str(settings.openai_upstream)

    def parse(self, body: dict[str, Any]) -> ParsedRequest:
        if body.get("previous_response_id") or body.get("conversation"):
            raise InputError("the request continues server-side state (previous_response_id / conversation): nothing to assemble")
        return super().parse(body)

    def upstream_body(self, body: dict[str, Any], parsed: ParsedRequest, result: AssemblyResult, ledger_blocks: Sequence[str]) -> dict[str, Any]:
        items = body.get("input")
        items = items if isinstance(items, list) else ([{"role": "user", "content": items}] if isinstance(items, str) else [])
        assembled = list(result.payload.get("input", []))
        turn = _continued_turn(items)
        if turn is not None:
            last_user = max((i for i, item in enumerate(assembled) if _is_user(item)), default=-1)
            if _call_ids(assembled[last_user + 1:]) == _call_ids(turn):
                assembled = [*assembled[:last_user + 1], *turn]
        out = {**body, "input": [*items[:_head(items)], *assembled]}
        instructions = body.get("instructions")
        if ledger_blocks:
            own = instructions if isinstance(instructions, str) and instructions.strip() else ""
            out["instructions"] = "\n\n".join([own, *ledger_blocks] if own else ledger_blocks)
        declared = {str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)}
        missing = [t for t in result.payload.get("tools", []) if t.get("name") not in declared]
        if missing:
            out["tools"] = [*(body.get("tools") or []), *missing]
        return out

    def answer_stream(self, parsed: ParsedRequest) -> AnswerStream:
        return _ResponsesStream(self, parsed)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error", 429: "rate_limit_error"}.get(status, "api_error")
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}

    def stream_error(self, message: str) -> bytes:
        return ("event: error\ndata: " + json.dumps({"type": "error", "code": "upstream_error", "message": message, "param": None, "sequence_number": 0}) + "\n\n").encode()


class _ResponsesStream(AnswerStream):
    def __init__(self, dialect: OpenAIResponsesDialect, parsed: ParsedRequest) -> None:
        self.dialect, self.parsed = dialect, parsed
        self.final: dict[str, Any] | None = None
        self.last: str | None = None

    def event(self, event: SseEvent) -> None:
        try:
            data = json.loads(event.data)
        except ValueError:
            self.last = "error"
            return
        kind = data.get("type") if isinstance(data, dict) else None
        if kind in _ENDS:
            self.last = str(kind)
            if kind == "response.completed" and isinstance(data.get("response"), dict):
                self.final = data["response"]

    def ended(self) -> bool:
        return self.last is not None

    def answer(self) -> Answer | None:
        if self.last != "response.completed" or self.final is None:
            return None
        answer: Answer = self.dialect.answer_from_json(self.parsed, self.final)
        return answer
