"""The Anthropic Messages dialect (``POST /v1/messages``).

Request: ``system`` (a string or text blocks) is the client's system prompt and goes
upstream verbatim; the ledger's own blocks (rules, pinned constraints) follow as one more
text block.  ``messages`` is replaced by the assembled history, except that the assistant
message a tool loop continues — the one before the newest ``tool_result`` blocks — is sent
byte for byte as the client sent it, with its signed ``thinking`` / ``redacted_thinking``
blocks (the API refuses a modified one).  A ``cache_control`` breakpoint marks the end of
the stable prefix (tools and system) unless the client placed one there or already uses
the API's four.  ``tools`` go upstream as sent, plus the minimal declaration of a tool
called in the history but no longer declared; every other field passes unchanged.

Answer: the ``message`` object of a JSON body; for a stream, the object rebuilt from
``message_start``, the ``content_block_*`` events and ``message_delta`` up to
``message_stop`` (an ``error`` event, or a stream without ``message_stop``, records
nothing).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from contextledger.assembly.assembler import AssemblyResult
from contextledger.server.proxy.bodies import BodyDialect
from contextledger.server.proxy.dialect import Answer, AnswerStream
from contextledger.server.proxy.reconcile import ParsedRequest
from contextledger.server.proxy.sse import SseEvent

__all__ = ["MAX_CACHE_BREAKPOINTS", "AnthropicDialect"]

MAX_CACHE_BREAKPOINTS = 4
"""The Messages API accepts at most this many ``cache_control`` blocks per request."""

_THINKING = frozenset({"thinking", "redacted_thinking"})


def _count_breakpoints(value: Any) -> int:
    if isinstance(value, dict):
        return int("cache_control" in value) + sum(_count_breakpoints(v) for k, v in value.items() if k != "cache_control")
    if isinstance(value, list):
        return sum(_count_breakpoints(v) for v in value)
    return 0


def _system_blocks(system: Any, ledger_blocks: Sequence[str]) -> list[dict[str, Any]] | str | None:
    """The client's system prompt with the ledger's blocks appended."""
    if not ledger_blocks:
        return copy.deepcopy(system) if system is not None else None
    blocks: list[dict[str, Any]] = []
    if isinstance(system, str) and system:
        blocks.append({"type": "text", "text": system})
    elif isinstance(system, list):
        blocks.extend(copy.deepcopy(system))
    blocks.append({"type": "text", "text": "\n\n".join(ledger_blocks)})
    return blocks


def _continued_turn(messages: list[Any]) -> dict[str, Any] | None:
    """The client's assistant message that the request's newest tool results answer,
    when it holds thinking blocks (it must then be sent exactly as given)."""
    if len(messages) < 2 or not isinstance(messages[-1], dict) or messages[-1].get("role") != "user":
        return None
    content = messages[-1].get("content")
    if not isinstance(content, list) or not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        return None
    turn = messages[-2]
    if not isinstance(turn, dict) or turn.get("role") != "assistant" or not isinstance(turn.get("content"), list):
        return None
    return turn if any(isinstance(b, dict) and b.get("type") in _THINKING for b in turn["content"]) else None


def _tool_use_ids(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    return [str(b.get("id")) for b in content if isinstance(b, dict) and b.get("type") == "tool_use"] if isinstance(content, list) else []


class AnthropicDialect(BodyDialect):
    """See module docstring."""

    name = "anthropic"
    body_provider = "anthropic"
    provider = "anthropic"
    upstream_path = "/v1/messages"
    gen_ai_provider = "anthropic"

    def upstream_base(self, settings: Any) -> str:
        return str(settings.anthropic_upstream)

    def upstream_body(self, body: dict[str, Any], parsed: ParsedRequest, result: AssemblyResult, ledger_blocks: Sequence[str]) -> dict[str, Any]:
        messages = [dict(m) for m in result.payload.get("messages", [])]
        turn = _continued_turn(body.get("messages") or [])
        if turn is not None:
            ids = _tool_use_ids(turn)
            for i in range(len(messages) - 1, -1, -1):
                if messages[i].get("role") == "assistant":
                    if _tool_use_ids(messages[i]) == ids:
                        messages[i] = turn
                    break
        out = {**body, "messages": messages}
        system = _system_blocks(body.get("system"), ledger_blocks)
        if system is None:
            out.pop("system", None)
        else:
            out["system"] = system
        declared = {str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)}
        missing = [t for t in result.payload.get("tools", []) if t.get("name") not in declared]
        if missing:
            out["tools"] = [*(body.get("tools") or []), *missing]
        self._mark_stable_prefix(out)
        return out

    @staticmethod
    def _mark_stable_prefix(out: dict[str, Any]) -> None:
        """A ``cache_control`` breakpoint on the last system block (the end of the stable
        prefix: tools, then system), within the API's limit."""
        system = out.get("system")
        if isinstance(system, str) and system:
            system = out["system"] = [{"type": "text", "text": system}]
        if not isinstance(system, list) or not system or not isinstance(system[-1], dict):
            return
        if "cache_control" in system[-1] or _count_breakpoints([system, out.get("tools"), out.get("messages")]) >= MAX_CACHE_BREAKPOINTS:
            return
        system[-1] = {**system[-1], "cache_control": {"type": "ephemeral"}}

    def answer_stream(self, parsed: ParsedRequest) -> AnswerStream:
        return _MessagesStream(self, parsed)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                413: "request_too_large", 429: "rate_limit_error", 504: "timeout_error", 529: "overloaded_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def stream_error(self, message: str) -> bytes:
        return ("event: error\ndata: " + json.dumps(self.error_body(502, message)) + "\n\n").encode()


class _MessagesStream(AnswerStream):
    def __init__(self, dialect: AnthropicDialect, parsed: ParsedRequest) -> None:
        self.dialect, self.parsed = dialect, parsed
        self.message: dict[str, Any] | None = None
        self.partial: dict[int, str] = {}
        self.done = False
        self.broken = False

    def event(self, event: SseEvent) -> None:
        try:
            data = json.loads(event.data)
        except ValueError:
            self.broken = True
            return
        kind = data.get("type") if isinstance(data, dict) else None
        if kind == "message_start":
            self.message = copy.deepcopy(data.get("message") or {})
            self.message["content"] = []
        elif kind == "error" or self.message is None:
            self.broken = self.broken or kind == "error"
        elif kind == "content_block_start":
            content = self.message["content"]
            index = int(data.get("index", len(content)))
            while len(content) <= index:
                content.append({})
            content[index] = copy.deepcopy(data.get("content_block") or {})
        elif kind == "content_block_delta":
            self._delta(int(data.get("index", 0)), data.get("delta") or {})
        elif kind == "content_block_stop":
            index = int(data.get("index", 0))
            if index in self.partial:
                text = self.partial.pop(index)
                try:
                    self.message["content"][index]["input"] = json.loads(text) if text.strip() else {}
                except (ValueError, IndexError):
                    self.broken = True
        elif kind == "message_delta":
            self.message.update({k: v for k, v in (data.get("delta") or {}).items()})
            self.message["usage"] = {**(self.message.get("usage") or {}), **(data.get("usage") or {})}
        elif kind == "message_stop":
            self.done = True

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        assert self.message is not None
        try:
            block = self.message["content"][index]
        except IndexError:
            self.broken = True
            return
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + str(delta.get("text", ""))
        elif kind == "input_json_delta":
            self.partial[index] = self.partial.get(index, "") + str(delta.get("partial_json", ""))
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + str(delta.get("signature", ""))
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))

    def ended(self) -> bool:
        return self.done or self.broken

    def answer(self) -> Answer | None:
        if not self.done or self.broken or self.message is None:
            return None
        return self.dialect.answer_from_json(self.parsed, self.message)
