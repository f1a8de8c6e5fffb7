"""The OpenAI Responses dialect (``POST /v1/responses``).

Request: ``instructions`` and the leading ``system`` / ``developer`` message items of
``input`` are the client's system prompt and go upstream verbatim (the ledger's own
blocks — rules, pinned constraints — are appended to ``instructions``); the rest of
``input`` is replaced by the assembled items, with

* the calls of the tools the body declares as ``custom``, ``local_shell`` or
  ``web_search`` in their own item shape
  (:func:`~contextledger.providers.openai_responses.native_tool_items`);
* the client's opaque compaction items (:data:`OPAQUE_ITEMS`: a provider-side summary of
  the history before it, encrypted) sent byte-exact right after the system items — the
  summary of what came before the assembled history;
* the items of the turn a tool loop continues (from the newest user message on:
  ``reasoning`` with its encrypted content, the calls and their outputs) sent exactly as
  the client sent them when the assembled turn holds the same calls.

``tools`` go upstream as sent, plus the minimal declaration of a tool called in the
history but no longer declared.  What the verbatim parts (system items,
``instructions``, compaction items, ``tools``) cost beyond the assembly's count of them
is reserved from the budget (:meth:`OpenAIResponsesDialect.reserved_tokens`), so the
upstream body stays within it.  Every other field passes unchanged.  A request that
continues server-side state (``previous_response_id`` or ``conversation``) holds no
history to replace and is forwarded untouched.

Conversation identity (:meth:`OpenAIResponsesDialect.session_key`): the client's session
id — the first of the headers :data:`SESSION_HEADERS` it sends (Codex CLI sends
``session-id`` / ``thread-id`` with the thread's id on every request of a session; older
releases ``session_id`` / ``conversation_id``), else the body's ``prompt_cache_key``
(Codex sets it to the same thread id).  Without one, the conversation is keyed by its
content, which two sessions started alike share (Codex's first user item is always its
``<environment_context>``).

Answer: the response object of a JSON body; for a stream, the ``response`` of
``response.completed`` (``response.failed`` / ``response.incomplete`` / ``error`` record
nothing).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from contextledger.assembly.assembler import AssemblyResult
from contextledger.errors import InputError
from contextledger.providers.counting import count_openai_responses_tokens
from contextledger.providers.openai_responses import native_tool_items
from contextledger.server.proxy.bodies import BodyDialect
from contextledger.server.proxy.dialect import (
    Answer,
    AnswerStream,
    history_problem,
    prompt_cache_key,
    session_from,
)
from contextledger.server.proxy.reconcile import ParsedRequest
from contextledger.server.proxy.sse import SseEvent

__all__ = ["OPAQUE_ITEMS", "SESSION_HEADERS", "OpenAIResponsesDialect"]

OPAQUE_ITEMS = frozenset({"compaction", "compaction_summary"})
"""Input item types the assembly cannot render and the provider needs byte-exact."""

SESSION_HEADERS = ("session-id", "session_id", "thread-id", "thread_id", "conversation-id", "conversation_id")
"""Headers that carry a client's session id, in order of preference (lower-case)."""

_ENDS = frozenset({"response.completed", "response.failed", "response.incomplete", "error"})


def _is_user(item: Any) -> bool:
    return isinstance(item, dict) and item.get("role") == "user" and item.get("type", "message") == "message"


def _head(items: list[Any]) -> int:
    n = 0
    while n < len(items) and isinstance(items[n], dict) and items[n].get("role") in ("system", "developer") and items[n].get("type", "message") == "message":
        n += 1
    return n


_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "shell_call", "apply_patch_call", "computer_call", "tool_search_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output", "shell_call_output", "apply_patch_call_output",
                      "computer_call_output", "tool_search_output"})


def _call_ids(items: list[Any]) -> list[str]:
    return sorted(str(i.get("call_id")) for i in items if isinstance(i, dict) and i.get("type") in _CALLS)


def _opaque(items: list[Any]) -> list[Any]:
    return [i for i in items if isinstance(i, dict) and i.get("type") in OPAQUE_ITEMS]


def _declared(body: dict[str, Any]) -> set[str]:
    """The names the body's tools declare (a built-in tool without a name: its type)."""
    tools = body.get("tools")
    return {str(t.get("name") or t.get("type")) for t in tools if isinstance(t, dict)} if isinstance(tools, list) else set()


def _continued_turn(items: list[Any]) -> list[Any] | None:
    """The client's items after its newest user message, when they continue a tool loop
    with reasoning (they must then be sent exactly as given)."""
    last_user = max((i for i, item in enumerate(items) if _is_user(item)), default=-1)
    tail = items[last_user + 1:]
    if not tail or not isinstance(tail[-1], dict) or tail[-1].get("type") not in _OUTPUTS:
        return None
    return tail if any(isinstance(i, dict) and i.get("type") == "reasoning" for i in tail) else None


def _with_turn(assembled: list[Any], turn: list[Any]) -> list[Any]:
    """``assembled`` with its rendering of the continued turn (from the user item before
    the turn's first call to its last call or output) replaced by the client's ``turn``,
    when it holds exactly the same calls; items the ledger placed after it (notes) stay."""
    ids = set(_call_ids(turn))
    at = [k for k, item in enumerate(assembled) if isinstance(item, dict) and item.get("call_id") in ids]
    if not at:
        return assembled
    start = max((k for k in range(at[0]) if _is_user(assembled[k])), default=-1) + 1
    end = at[-1] + 1
    if _call_ids(assembled[start:end]) != _call_ids(turn):
        return assembled
    return [*assembled[:start], *turn, *assembled[end:]]


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

    def body_problem(self, body: dict[str, Any]) -> str | None:
        """``input`` must be a string or an array of objects; it may be absent only when the
        request continues server-side state (``previous_response_id`` / ``conversation``)."""
        if "input" not in body and (body.get("previous_response_id") or body.get("conversation")):
            return None
        return history_problem("input", body.get("input"), missing="input" not in body, text_allowed=True)

    def session_key(self, headers: Mapping[str, str], body: dict[str, Any]) -> str | None:
        """The session id of the module docstring (``None`` when the client sends none)."""
        return session_from(headers, body, SESSION_HEADERS)

    def reserved_tokens(self, body: dict[str, Any], parsed: ParsedRequest) -> int:
        """Tokens of the leading system / developer items, compaction items,
        ``instructions`` and ``tools`` as the body sends them, less the assembly's count of the same (the system prompt
        as ``instructions``, the tools as function schemas); never negative."""
        items = body.get("input")
        head = [*items[:_head(items)], *_opaque(items)] if isinstance(items, list) else []
        tools = body.get("tools") if isinstance(body.get("tools"), list) else []
        verbatim = {"instructions": body.get("instructions"), "input": head, "tools": tools}
        counted = {"instructions": parsed.system_text, "input": [],
                   "tools": [{"type": "function", **t["function"]} if isinstance(t.get("function"), dict) else t for t in parsed.tools]}
        return max(0, count_openai_responses_tokens(verbatim) - count_openai_responses_tokens(counted))

    def upstream_body(self, body: dict[str, Any], parsed: ParsedRequest, result: AssemblyResult, ledger_blocks: Sequence[str]) -> dict[str, Any]:
        items = body.get("input")
        items = items if isinstance(items, list) else ([{"role": "user", "content": items}] if isinstance(items, str) else [])
        assembled = native_tool_items(list(result.payload.get("input", [])), body.get("tools"))
        turn = _continued_turn(items)
        if turn is not None:
            assembled = _with_turn(assembled, turn)
        out = {**body, "input": [*items[:_head(items)], *_opaque(items), *assembled]}
        instructions = body.get("instructions")
        if ledger_blocks:
            own = instructions if isinstance(instructions, str) and instructions.strip() else ""
            out["instructions"] = "\n\n".join([own, *ledger_blocks] if own else ledger_blocks)
        declared = _declared(body)
        missing = [t for t in result.payload.get("tools", []) if t.get("name") not in declared]
        if missing:
            out["tools"] = [*(body.get("tools") or []), *missing]
        if "prompt_cache_key" not in body:  # the conversation's, so its prefix is cached in one place
            out["prompt_cache_key"] = prompt_cache_key(result)
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
