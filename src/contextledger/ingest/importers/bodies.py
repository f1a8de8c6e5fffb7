"""One entry point for provider request bodies: ``parse_request_body(provider, body)``.

A request body is what an agent sends to a model API; it holds the whole transcript the
agent replays.  The three wire formats share one function shape, independent of files,
so that a proxy can reconcile live requests with the ledger and an importer can read the
logs people keep of their own API calls:

* ``"openai-chat"`` — Chat Completions ``{"model", "messages", "tools"}``
  (:func:`~contextledger.ingest.importers.openai_chat.parse_chat_body`);
* ``"openai-responses"`` — Responses ``{"model", "instructions", "input", "tools"}``, a
  response object or a bare item list
  (:func:`~contextledger.ingest.importers.openai_responses.parse_openai_responses`);
* ``"anthropic"`` — Messages ``{"model", "system", "messages", "tools"}``
  (:func:`~contextledger.ingest.importers.anthropic_messages.parse_anthropic_messages`).

:func:`detect_body_provider` names the format of a body whose route is unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from contextledger.errors import InputError
from contextledger.ingest.importers.anthropic_messages import parse_anthropic_messages
from contextledger.ingest.importers.common import REQUEST_BODY, describe_json, fail, type_of
from contextledger.ingest.importers.openai_chat import parse_chat_body
from contextledger.ingest.importers.openai_responses import parse_openai_responses
from contextledger.ingest.importers.responses_items import CALL_ITEMS, OUTPUT_ITEMS, SERVER_ITEMS
from contextledger.ingest.transcript import ImportedTranscript
from contextledger.limits import MAX_JSON_DEPTH, json_depth_exceeds

__all__ = [
    "BODY_PROVIDERS",
    "RESPONSES_ITEM_TYPES",
    "detect_body_provider",
    "message_list_dialect",
    "parse_request_body",
]

BODY_PROVIDERS: tuple[str, ...] = ("openai-chat", "openai-responses", "anthropic")
"""Provider wire formats :func:`parse_request_body` reads."""

RESPONSES_ITEM_TYPES = frozenset(
    {"message", "reasoning", "item_reference", *CALL_ITEMS, *OUTPUT_ITEMS, *SERVER_ITEMS}
)
"""Item ``type`` values that mark a Responses item list."""

_ANTHROPIC_BLOCKS = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use", "document"}
)
_OPENAI_PART_TYPES = frozenset({"image_url", "input_audio", "input_text", "output_text", "refusal"})
_OPENAI_ROLES = frozenset({"system", "developer", "tool", "function"})
_SCAN = 200

Parser = Callable[..., ImportedTranscript]
_PARSERS: dict[str, Parser] = {
    "openai-chat": parse_chat_body,
    "openai-responses": parse_openai_responses,
    "anthropic": parse_anthropic_messages,
}


def parse_request_body(
    provider: str,
    body: Mapping[str, Any] | Sequence[Any],
    *,
    response: Mapping[str, Any] | None = None,
    label: str = REQUEST_BODY,
    content_key: str | None = None,
) -> ImportedTranscript:
    """Parse one decoded request body of ``provider`` into an :class:`ImportedTranscript`.

    Args:
        provider: one of :data:`BODY_PROVIDERS`.
        body: the decoded JSON body (for ``"openai-responses"`` also a bare item list or a
            response object).
        response: the decoded response to that request; its assistant turn is appended.
        label: names the body in errors and becomes ``ImportedTranscript.path``.
        content_key: idempotency key; default ``sha256`` of the canonical JSON.

    Returns:
        a linear transcript (no tree) whose ``format`` is ``"openai-chat"``,
        ``"openai-responses"`` or ``"anthropic-messages"``; reasoning and thinking are
        kept as ``ThinkingPart`` (exact signature / encrypted content), never sent.

    Raises:
        InputError: an unknown ``provider`` (the message names the known ones).
        ImportFormatError: the body does not match the format (location names the
            message or item, e.g. ``"messages[3].content[1]"``), or nests deeper than
            :data:`~contextledger.limits.MAX_JSON_DEPTH` levels.
    """
    parser = _PARSERS.get(str(provider))
    if parser is None:
        raise InputError(f"unknown provider {provider!r}; expected one of {list(BODY_PROVIDERS)}")
    for part, value in (("body", body), ("response", response)):
        if value is not None and json_depth_exceeds(value, MAX_JSON_DEPTH):
            fail(label, part if part == "response" else None, f"invalid JSON: nesting deeper than {MAX_JSON_DEPTH} levels")
    return parser(body, response=response, path=label, content_key=content_key)


def _content_blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def message_list_dialect(messages: Sequence[Any], *, has_system_field: bool = False) -> str:
    """``"anthropic"`` or ``"openai-chat"`` for a list of ``{"role", "content"}`` messages.

    OpenAI markers (roles system/developer/tool/function, ``tool_calls``,
    ``tool_call_id``, ``image_url`` parts) win; Anthropic markers are ``tool_use`` /
    ``tool_result`` / ``thinking`` blocks, images with a ``source`` and a top-level
    ``system`` field beside the list.  Only the first 200 messages are looked at.
    """
    anthropic = has_system_field
    for message in messages[:_SCAN]:
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if (isinstance(role, str) and role in _OPENAI_ROLES) or "tool_calls" in message or "tool_call_id" in message:
            return "openai-chat"
        for block in _content_blocks(message):
            if not isinstance(block, Mapping):
                continue
            kind = type_of(block)
            if kind in _OPENAI_PART_TYPES:
                return "openai-chat"
            if kind in _ANTHROPIC_BLOCKS or (kind == "image" and isinstance(block.get("source"), Mapping)):
                anthropic = True
    return "anthropic" if anthropic else "openai-chat"


def _is_responses_list(items: Sequence[Any]) -> bool:
    for item in items[:_SCAN]:
        if not isinstance(item, Mapping):
            return False
        kind = type_of(item)
        if kind in RESPONSES_ITEM_TYPES and kind != "message":
            return True
        if kind == "message" and "role" in item:
            return True
    return False


def detect_body_provider(body: Any, label: str = REQUEST_BODY) -> str:
    """The provider format of a decoded request body (one of :data:`BODY_PROVIDERS`).

    Rules: an ``input`` field, or a response object's ``output`` array, or a list of typed
    Responses items → ``"openai-responses"``; a message list (``messages``) →
    :func:`message_list_dialect`.

    Raises:
        ImportFormatError: none of these shapes (the reason names the keys found).
    """
    if isinstance(body, Mapping):
        if "input" in body or (isinstance(body.get("output"), list) and "messages" not in body):
            return "openai-responses"
        messages = body.get("messages")
        if isinstance(messages, list):
            return message_list_dialect(messages, has_system_field=isinstance(body.get("system"), str | list))
        found = ", ".join(repr(k) for k in list(body)[:12]) or "none"
        fail(label, None, f"not a request body: found keys {found}; expected 'messages' or 'input'")
    if isinstance(body, list):
        if _is_responses_list(body):
            return "openai-responses"
        return message_list_dialect(body)
    fail(label, None, f"expected a request body object, found {describe_json(body)}")
