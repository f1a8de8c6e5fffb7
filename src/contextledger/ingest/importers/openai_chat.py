"""Importer for OpenAI Chat Completions message lists (format ``"openai-chat"``).

Accepted shapes: a JSON array of messages; JSON Lines with one message per line; a JSON
object holding the list under ``messages``, ``traj`` (tau-bench), ``history`` or
``conversation``.  ``tools`` schemas beside the list (OpenHands CodeAct) are kept in
``ImportedTranscript.tools``; other top-level keys (task id, reward, test result) in
``ImportedTranscript.metadata``.  Transcripts without structured tool calls whose assistant
turns end in OpenHands ``<function=NAME>`` blocks (SWE-smith, SWE-Play) are text-action
transcripts: see :mod:`contextledger.ingest.importers.text_actions`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from contextledger.ingest.importers.build import (
    first_model,
    first_user_title,
    main_participant,
    normalize_tools,
    top_level_metadata,
)
from contextledger.ingest.importers.call_ids import CallIdRegistry
from contextledger.ingest.importers.common import (
    REQUEST_BODY,
    Source,
    describe_json,
    fail,
    iter_jsonl,
    json_content_key,
    source_key,
)
from contextledger.ingest.importers.openai_messages import OpenAIMessageConverter
from contextledger.ingest.importers.text_actions import (
    assistant_text,
    function_block_action,
    has_function_block,
    mark_text_actions,
)
from contextledger.ingest.transcript import ImportedMessage, ImportedTranscript
from contextledger.records.enums import Role
from contextledger.records.parts import ToolCallPart

__all__ = ["FORMAT", "LIST_KEYS", "find_message_list", "parse_chat_body", "parse_openai_chat"]

FORMAT = "openai-chat"
LIST_KEYS: tuple[str, ...] = ("messages", "traj", "history", "conversation")
"""Keys under which a JSON object may hold its message list, in lookup order."""


def find_message_list(path: Path | str, document: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """Return ``(key, list)`` of the first :data:`LIST_KEYS` entry of ``document``.

    Raises:
        ImportFormatError: no such key (reason names the keys found and those expected), or
            its value is not an array (location = the key).
    """
    for key in LIST_KEYS:
        if key in document:
            value = document[key]
            if not isinstance(value, list):
                fail(path, key, f"expected an array of messages, found {describe_json(value)}")
            return key, value
    found = ", ".join(repr(k) for k in list(document)[:12]) or "none"
    expected = ", ".join(repr(k) for k in LIST_KEYS)
    fail(path, None, f"JSON object has no message list: found keys {found}; expected one of {expected}")


class _Chat:
    """The state of one chat transcript being parsed."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        self.notes: list[str] = []
        self.metadata: dict[str, Any] = {}
        self.registry = CallIdRegistry(self.notes)
        self.converter = OpenAIMessageConverter(path, self.registry, self.notes)
        self.tools: list[dict[str, Any]] = []
        self.messages: list[ImportedMessage] = []
        self.model: str | None = None

    def document(self, document: Mapping[str, Any]) -> None:
        key, items = find_message_list(self.path, document)
        for i, item in enumerate(items):
            self.messages.append(self.converter.convert(item, f"msg:{i}", f"{key}[{i}]"))
        self.tools = normalize_tools(document.get("tools"))
        self.metadata.update(top_level_metadata(document, (key, "tools")))
        if isinstance(document.get("model"), str):
            self.model = document["model"]

    def response(self, response: Mapping[str, Any]) -> None:
        choices = response.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, dict) else None
        if not isinstance(message, dict):
            fail(self.path, "response", "expected a chat completion with choices[0].message")
        self.messages.append(self.converter.convert(message, "response", "response.choices[0].message"))
        if self.model is None and isinstance(response.get("model"), str):
            self.model = response["model"]
        self.metadata["response"] = {k: v for k, v in response.items() if k != "choices"}

    def finish(self, name: str, content_key: str) -> ImportedTranscript:
        self.registry.finish()
        messages = self.messages
        has_calls = any(isinstance(p, ToolCallPart) for m in messages for p in m.parts)
        if not has_calls and any(
            m.role is Role.ASSISTANT and has_function_block(assistant_text(m)) for m in messages
        ):
            mark_text_actions(messages, lambda m: function_block_action(assistant_text(m)))
            self.metadata["text_actions"] = True
        for message in messages:
            if message.role is Role.ASSISTANT and self.model and message.model is None:
                message.model = self.model
        return ImportedTranscript(
            format=FORMAT,
            path=name,
            title=first_user_title(messages),
            messages=messages,
            participants=[main_participant(self.model or first_model(messages))],
            tools=self.tools,
            notes=self.notes,
            content_key=content_key,
            metadata=self.metadata,
        )


def parse_chat_body(
    body: Mapping[str, Any],
    *,
    response: Mapping[str, Any] | None = None,
    path: str = REQUEST_BODY,
    content_key: str | None = None,
) -> ImportedTranscript:
    """Parse a Chat Completions request body (and optionally its response).

    Args:
        body: the decoded body; the messages are under ``messages`` (or another of
            :data:`LIST_KEYS`); ``tools`` and ``model`` are used, other keys kept in
            ``metadata``.
        response: the decoded chat completion; ``choices[0].message`` is appended.
        path: the file name or label used in errors and as ``ImportedTranscript.path``.
        content_key: idempotency key; by default ``sha256`` of the canonical JSON.

    Raises:
        ImportFormatError: no message list, an unknown role (location ``"messages[7]"``),
            malformed content or tool calls, a response without ``choices[0].message``.
    """
    if not isinstance(body, Mapping):
        fail(path, None, f"expected a request body object, found {describe_json(body)}")
    chat = _Chat(path)
    chat.document(body)
    if response is not None:
        if not isinstance(response, Mapping):
            fail(path, "response", f"expected a response object, found {describe_json(response)}")
        chat.response(response)
    return chat.finish(path, content_key or json_content_key(path, body, response))


def parse_openai_chat(source: Source, document: Any | None) -> ImportedTranscript:
    """Parse an OpenAI chat transcript file.

    Args:
        source: the file.
        document: the parsed JSON document, or ``None`` for a JSON Lines file.

    Raises:
        ImportFormatError: wrong top-level shape, unknown role (location ``"messages[7]"``,
            ``"[7]"`` for a top-level array, ``"line 12"`` for JSON Lines), bad lines.
    """
    content_key = source_key([source])
    if isinstance(document, dict):
        return parse_chat_body(document, path=source.name, content_key=content_key)
    chat = _Chat(source.path)
    if document is None:
        skipped: list[str] = []
        for line_no, item in iter_jsonl(source, chat.notes, skipped):
            chat.messages.append(chat.converter.convert(item, f"line:{line_no}", f"line {line_no}"))
        if skipped:
            chat.metadata["skipped_raw_lines"] = skipped
    elif isinstance(document, list):
        for i, item in enumerate(document):
            chat.messages.append(chat.converter.convert(item, f"msg:{i}", f"[{i}]"))
    else:
        fail(source.path, None, f"expected a JSON array or object of chat messages, found {describe_json(document)}")
    return chat.finish(source.name, content_key)
