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
    Source,
    content_key_of,
    describe_json,
    fail,
    iter_jsonl,
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

__all__ = ["FORMAT", "LIST_KEYS", "find_message_list", "parse_openai_chat"]

FORMAT = "openai-chat"
LIST_KEYS: tuple[str, ...] = ("messages", "traj", "history", "conversation")
"""Keys under which a JSON object may hold its message list, in lookup order."""


def find_message_list(source: Source, document: dict[str, Any]) -> tuple[str, list[Any]]:
    """Return ``(key, list)`` of the first :data:`LIST_KEYS` entry of ``document``.

    Raises:
        ImportFormatError: no such key (reason names the keys found and those expected), or
            its value is not an array (location = the key).
    """
    for key in LIST_KEYS:
        if key in document:
            value = document[key]
            if not isinstance(value, list):
                fail(source.path, key, f"expected an array of messages, found {describe_json(value)}")
            return key, value
    found = ", ".join(repr(k) for k in list(document)[:12]) or "none"
    expected = ", ".join(repr(k) for k in LIST_KEYS)
    fail(source.path, None, f"JSON object has no message list: found keys {found}; expected one of {expected}")


def parse_openai_chat(source: Source, document: Any | None) -> ImportedTranscript:
    """Parse an OpenAI chat transcript.

    Args:
        source: the file.
        document: the parsed JSON document, or ``None`` for a JSON Lines file.

    Raises:
        ImportFormatError: wrong top-level shape, unknown role (location ``"messages[7]"``,
            ``"[7]"`` for a top-level array, ``"line 12"`` for JSON Lines), bad lines.
    """
    notes: list[str] = []
    metadata: dict[str, Any] = {}
    registry = CallIdRegistry(notes)
    converter = OpenAIMessageConverter(source.path, registry, notes)
    tools: list[dict[str, Any]] = []
    messages: list[ImportedMessage] = []
    model: str | None = None
    if document is None:
        skipped: list[str] = []
        for line_no, item in iter_jsonl(source, notes, skipped):
            messages.append(converter.convert(item, f"line:{line_no}", f"line {line_no}"))
        if skipped:
            metadata["skipped_raw_lines"] = skipped
    elif isinstance(document, list):
        for i, item in enumerate(document):
            messages.append(converter.convert(item, f"msg:{i}", f"[{i}]"))
    elif isinstance(document, dict):
        key, items = find_message_list(source, document)
        for i, item in enumerate(items):
            messages.append(converter.convert(item, f"msg:{i}", f"{key}[{i}]"))
        tools = normalize_tools(document.get("tools"))
        metadata.update(top_level_metadata(document, (key, "tools")))
        if isinstance(document.get("model"), str):
            model = document["model"]
    else:
        fail(source.path, None, f"expected a JSON array or object of chat messages, found {describe_json(document)}")
    registry.finish()
    has_calls = any(isinstance(p, ToolCallPart) for m in messages for p in m.parts)
    if not has_calls and any(
        m.role is Role.ASSISTANT and has_function_block(assistant_text(m)) for m in messages
    ):
        mark_text_actions(messages, lambda m: function_block_action(assistant_text(m)))
        metadata["text_actions"] = True
    for message in messages:
        if message.role is Role.ASSISTANT and model and message.model is None:
            message.model = model
    return ImportedTranscript(
        format=FORMAT,
        path=source.name,
        title=first_user_title(messages),
        messages=messages,
        participants=[main_participant(model or first_model(messages))],
        tools=tools,
        notes=notes,
        content_key=content_key_of([source.data]),
        metadata=metadata,
    )
