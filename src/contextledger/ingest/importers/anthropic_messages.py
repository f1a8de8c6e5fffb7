"""Importer for Anthropic Messages request bodies (format ``"anthropic-messages"``).

The body is ``{"model", "system", "messages", "tools", ...}`` as sent to ``POST
/v1/messages``: ``system`` is a string or a list of text blocks; each message has ``role``
``user``, ``assistant`` or ``system`` and ``content`` as a string or a list of blocks (see
:mod:`.anthropic_blocks`).  A ``system`` entry inside ``messages`` (client context a
client places mid-conversation: Claude Code's agent and skill listing, its standing
reminders) becomes a ``Role.SYSTEM`` message at its place, marked
``metadata["in_messages"] = True``.  The model's reply (a ``{"type": "message", "role":
"assistant", "content": [...]}`` response object) may be given too and is appended.

Conversion (one neutral message per source message, except):

* every ``tool_result`` block of a user message becomes its own ``Role.TOOL`` message, in
  block order; the user message's other blocks follow as one user message;
* a server-side tool's result inside an assistant message (``web_search_tool_result`` …)
  ends the assistant message there: a ``Role.TOOL`` message carries the result and the
  assistant's later blocks continue in a new assistant message;
* ``thinking`` / ``redacted_thinking`` blocks are kept as exact data (never sent back);
* custom tool schemas (``input_schema``) become function schemas; server tools
  (``web_search_20250305`` …) are listed in ``metadata["server_tools"]``.

:func:`parse_anthropic_messages` works on an already-decoded body, independent of files.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextledger.ingest.importers.anthropic_blocks import AnthropicBlocks
from contextledger.ingest.importers.build import first_model, first_user_title, main_participant
from contextledger.ingest.importers.call_ids import CallIdRegistry
from contextledger.ingest.importers.common import (
    REQUEST_BODY,
    Source,
    describe_json,
    fail,
    json_content_key,
    source_key,
    split_exchange,
)
from contextledger.ingest.transcript import ImportedMessage, ImportedTranscript
from contextledger.records.enums import MessageKind, Role
from contextledger.records.parts import Part, TextPart, ToolResultPart

__all__ = ["FORMAT", "anthropic_tools", "parse_anthropic_file", "parse_anthropic_messages"]

FORMAT = "anthropic-messages"

_BODY_KEYS = ("messages", "system", "tools")


def anthropic_tools(tools: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(function schemas, server tools)`` of a Messages ``tools`` array.

    A custom tool ``{"name", "description", "input_schema"}`` becomes ``{"type":
    "function", "function": {"name", "description", "parameters"}}``; a tool without an
    ``input_schema`` but with a versioned ``type`` (``web_search_20250305``,
    ``bash_20250124`` …) is a server/built-in tool and is returned as given.
    """
    functions: list[dict[str, Any]] = []
    server: list[dict[str, Any]] = []
    if not isinstance(tools, list):
        return functions, server
    for tool in tools:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            continue
        schema = tool.get("input_schema")
        if isinstance(schema, dict):
            function: dict[str, Any] = {"name": tool["name"], "parameters": schema}
            if isinstance(tool.get("description"), str):
                function["description"] = tool["description"]
            functions.append({"type": "function", "function": function})
        else:
            server.append(dict(tool))
    return functions, server


class _Converter:
    """Converts the messages of one body into ImportedMessages."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.notes: list[str] = []
        self.registry = CallIdRegistry(self.notes)
        self.blocks = AnthropicBlocks(path, self.registry, self.notes, server_results=True)
        self.messages: list[ImportedMessage] = []

    def system(self, value: Any) -> None:
        if value is None or value == "" or value == []:
            return
        if isinstance(value, str):
            parts: list[Part] = [TextPart(text=value)]
        elif isinstance(value, list):
            parts = []
            for j, block in enumerate(value):
                if not isinstance(block, dict) or not isinstance(block.get("text"), str):
                    fail(self.path, f"system[{j}]", f"expected a text block, found {describe_json(block)}")
                if block["text"]:
                    parts.append(TextPart(text=block["text"]))
        else:
            fail(self.path, "system", f"expected a string or an array of text blocks, found {describe_json(value)}")
        self.messages.append(ImportedMessage(key="system", role=Role.SYSTEM, parts=parts, source_ref="system"))

    def message(self, item: Any, key: str, location: str, model: str | None) -> None:
        if not isinstance(item, dict):
            fail(self.path, location, f"expected a message object, found {describe_json(item)}")
        role = item.get("role")
        if role == "assistant":
            self._assistant(item.get("content"), key, location, item.get("model") if isinstance(item.get("model"), str) else model)
        elif role == "user":
            self._user(item.get("content"), key, location)
        elif role == "system":
            self._system_entry(item.get("content"), key, location)
        elif role is None:
            fail(self.path, location, "message has no 'role'")
        else:
            fail(self.path, location, f"unknown role {role!r}: expected 'user', 'assistant' or 'system'")

    def _system_entry(self, content: Any, key: str, location: str) -> None:
        parts: list[Part] = []
        for j, block in enumerate(self.blocks.blocks(content, location, "content")):
            text = block.get("text")
            if block.get("type") != "text" or not isinstance(text, str):
                fail(self.path, self.blocks.where(location, j), f"a system entry holds text blocks only, found {describe_json(block)}")
            if text:
                parts.append(TextPart(text=text))
        self.messages.append(ImportedMessage(key=key, role=Role.SYSTEM, parts=parts, source_ref=location, metadata={"in_messages": True}))

    def _assistant(self, content: Any, key: str, location: str, model: str | None) -> None:
        attachments: dict[str, bytes] = {}
        parts = self.blocks.assistant_parts(content, location, attachments)
        segment: list[Part] = []
        n = 0

        def flush() -> None:
            nonlocal n
            if segment or n == 0:
                self.messages.append(
                    ImportedMessage(
                        key=key if n == 0 else f"{key}#{n}", role=Role.ASSISTANT, parts=list(segment),
                        attachments=attachments if n == 0 else {}, source_ref=location, model=model,
                    )
                )
                n += 1
            segment.clear()

        for part in parts:
            if isinstance(part, ToolResultPart):
                flush()
                self.messages.append(
                    ImportedMessage(key=f"{key}#{n}", role=Role.TOOL, parts=[part], source_ref=location, metadata={"server_tool": True})
                )
                n += 1
            else:
                segment.append(part)
        if segment:
            flush()

    def _user(self, content: Any, key: str, location: str) -> None:
        texts: list[Part] = []
        attachments: dict[str, bytes] = {}
        out: list[ImportedMessage] = []
        for j, block in enumerate(self.blocks.blocks(content, location, "content")):
            where = self.blocks.where(location, j)
            if block.get("type") == "tool_result":
                out.append(self._result(block, where, location))
                continue
            part = self.blocks.user_part(block, where, attachments)
            if part is not None:
                texts.append(part)
        if texts or not out:
            out.append(ImportedMessage(key=key, role=Role.USER, parts=texts, attachments=attachments, source_ref=location))
        for i, message in enumerate(out):
            message.key = key if i == 0 else f"{key}#{i}"
        self.messages.extend(out)

    def _result(self, block: dict[str, Any], where: str, location: str) -> ImportedMessage:
        raw_id, text, images, attachments, is_error = self.blocks.result(block, where)
        call_id = self.registry.result(raw_id, where)
        if call_id is None:
            self.notes.append(f"{where}: tool result for call {raw_id!r} answers no earlier call; kept as an observation")
            parts: list[Part] = [TextPart(text=text), *images]
            metadata: dict[str, Any] = {"orphan_call_id": raw_id}
            if is_error:
                metadata["is_error"] = True
            return ImportedMessage(
                key="", role=Role.USER, kind=MessageKind.OBSERVATION, parts=parts,
                attachments=attachments, source_ref=location, metadata=metadata,
            )
        result = ToolResultPart(call_id=call_id, text=text, is_error=is_error, images=tuple(images))
        return ImportedMessage(key="", role=Role.TOOL, parts=[result], attachments=attachments, source_ref=location)


def parse_anthropic_messages(
    body: Mapping[str, Any],
    *,
    response: Mapping[str, Any] | None = None,
    path: str = REQUEST_BODY,
    content_key: str | None = None,
) -> ImportedTranscript:
    """Parse an Anthropic Messages request body (and optionally its response).

    Args:
        body: the decoded request body; ``messages`` is required.
        response: the decoded response (``{"role": "assistant", "content": [...]}``),
            appended as the last assistant turn.
        path: the file name or label used in errors and as ``ImportedTranscript.path``.
        content_key: idempotency key; by default ``sha256`` of the canonical JSON of
            ``body`` and ``response``.

    Returns:
        a linear transcript of format ``"anthropic-messages"``; keys ``"system"``,
        ``"msg:<i>"`` (``"msg:<i>#<k>"`` for the extra messages one source message yields)
        and ``"response"``; ``source_ref`` ``"messages[<i>]"``.

    Raises:
        ImportFormatError: ``messages`` missing or not an array, a message that is not an
            object or has a role other than user/assistant/system (location ``"messages[3]"``),
            a system entry holding a block other than text,
            malformed content blocks (``"messages[3].content[1]"``), a bad ``system``.
    """
    if not isinstance(body, Mapping):
        fail(path, None, f"expected a request body object, found {describe_json(body)}")
    items = body.get("messages")
    if not isinstance(items, list):
        fail(path, "messages", f"expected an array of messages, found {describe_json(items)}")
    model = body.get("model") if isinstance(body.get("model"), str) else None
    converter = _Converter(path)
    converter.system(body.get("system"))
    for i, item in enumerate(items):
        converter.message(item, f"msg:{i}", f"messages[{i}]", model)
    if response is not None:
        if not isinstance(response, Mapping):
            fail(path, "response", f"expected a response object, found {describe_json(response)}")
        reply = {"role": "assistant", **dict(response)}
        converter.message(reply, "response", "response", response.get("model") if isinstance(response.get("model"), str) else model)
    converter.registry.finish()
    functions, server = anthropic_tools(body.get("tools"))
    metadata: dict[str, Any] = {k: v for k, v in body.items() if k not in _BODY_KEYS}
    if server:
        metadata["server_tools"] = server
    if response is not None:
        metadata["response"] = {k: v for k, v in response.items() if k not in ("content", "role")}
    messages = converter.messages
    return ImportedTranscript(
        format=FORMAT,
        path=path,
        title=first_user_title(messages),
        messages=messages,
        participants=[main_participant(model or first_model(messages), "anthropic")],
        tools=functions,
        notes=converter.notes,
        content_key=content_key or json_content_key(path, body, response),
        metadata=metadata,
    )


def parse_anthropic_file(source: Source, document: Any) -> ImportedTranscript:
    """Parse a file holding an Anthropic Messages request body, a logged ``{"request",
    "response"}`` exchange, or a bare JSON array of Messages-API messages.

    Raises:
        ImportFormatError: see :func:`parse_anthropic_messages`.
    """
    content_key = source_key([source])
    if isinstance(document, list):
        return parse_anthropic_messages({"messages": document}, path=source.name, content_key=content_key)
    if not isinstance(document, Mapping):
        fail(source.path, None, f"expected a request body object or an array of messages, found {describe_json(document)}")
    body, response = split_exchange(document)
    return parse_anthropic_messages(body, response=response, path=source.name, content_key=content_key)
