"""Conversion of OpenAI Chat Completions messages into neutral ImportedMessages.

Shared by the ``openai-chat`` importer (tau-bench, OpenHands, SWE-smith, SWE-Play) and the
``swe-agent`` importer (SWE-agent ``history``, mini-swe-agent ``messages``), which all hold
``{"role", "content", "tool_calls", "tool_call_id"}`` messages.

Rules (issue "transcript importers"):

* a tool call is a ``ToolCallPart`` inside the assistant message; its result is a separate
  ``Role.TOOL`` message holding one ``ToolResultPart`` with the full raw text;
* a result that answers no earlier call is kept as a ``MessageKind.OBSERVATION`` user
  message with ``metadata["orphan_call_id"]`` and a note;
* content may be a string, ``null`` or a list of parts (``text``, ``image_url`` …); images
  become ``ImagePart`` with their bytes in ``attachments`` (never base64 text).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextledger.ingest.importers.call_ids import CallIdRegistry
from contextledger.ingest.importers.common import describe_json, fail, image_from_url, type_of
from contextledger.ingest.transcript import ImportedMessage
from contextledger.records.enums import MessageKind, Role
from contextledger.records.parts import (
    BinaryPart,
    ImagePart,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["OpenAIMessageConverter", "content_to_parts", "convert_list"]

_ROLES: dict[str, Role] = {
    "system": Role.SYSTEM,
    "developer": Role.DEVELOPER,
    "user": Role.USER,
    "assistant": Role.ASSISTANT,
    "tool": Role.TOOL,
    "function": Role.TOOL,
}
_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})


@dataclass
class _Content:
    parts: list[Part] = field(default_factory=list)
    images: list[ImagePart] = field(default_factory=list)
    attachments: dict[str, bytes] = field(default_factory=dict)

    def text(self) -> str:
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))


def content_to_parts(
    content: Any, path: Path | str, location: str, notes: list[str]
) -> tuple[list[Part], dict[str, bytes]]:
    """Convert OpenAI message ``content`` (string, ``null``, part or list of parts).

    Returns the parts (empty strings give no part) and the image bytes by ``blob_key``.

    Raises:
        ImportFormatError: content of another JSON type, or an invalid base64 data URL.
    """
    converted = _convert_content(content, path, location, notes)
    return converted.parts + list(converted.images), converted.attachments


def _convert_content(content: Any, path: Path | str, location: str, notes: list[str]) -> _Content:
    out = _Content()
    if content is None:
        return out
    if isinstance(content, str):
        if content:
            out.parts.append(TextPart(text=content))
        return out
    items: list[Any]
    if isinstance(content, dict):
        items = [content]
    elif isinstance(content, list):
        items = content
    else:
        fail(path, f"{location}.content", f"content must be a string or a list of parts, found {describe_json(content)}")
    for j, item in enumerate(items):
        where = f"{location}.content[{j}]"
        if isinstance(item, str):
            if item:
                out.parts.append(TextPart(text=item))
            continue
        if not isinstance(item, dict):
            fail(path, where, f"content part must be an object or a string, found {describe_json(item)}")
        kind = type_of(item)
        if kind in _TEXT_PART_TYPES or (kind is None and isinstance(item.get("text"), str)):
            text = item.get("text")
            if isinstance(text, str) and text:
                out.parts.append(TextPart(text=text))
            continue
        if kind == "image_url":
            ref = item.get("image_url")
            url = ref.get("url") if isinstance(ref, dict) else ref
            if not isinstance(url, str) or not url:
                fail(path, where, "image_url part has no url")
            image, raw = image_from_url(url, path, where)
            out.images.append(image)
            if raw is not None and image.blob_key is not None:
                out.attachments[image.blob_key] = raw
            continue
        if kind == "input_image" and isinstance(item.get("image_url"), str) and item["image_url"]:
            image, raw = image_from_url(item["image_url"], path, where)
            out.images.append(image)
            if raw is not None and image.blob_key is not None:
                out.attachments[image.blob_key] = raw
            continue
        if kind == "input_file" and isinstance(item.get("file_data"), str):
            out.parts.append(_file_part(item, path, where, out.attachments))
            continue
        if kind == "refusal" and isinstance(item.get("refusal"), str):
            out.parts.append(TextPart(text=item["refusal"]))
            continue
        notes.append(f"{where}: content part of type {kind!r} kept as JSON text")
        out.parts.append(TextPart(text=json.dumps(item, ensure_ascii=False)))
    return out


def _file_part(item: Mapping[str, Any], path: Path | str, where: str, attachments: dict[str, bytes]) -> BinaryPart:
    """A Responses ``input_file`` part with inline ``file_data`` (a data URL or base64)."""
    data = str(item["file_data"])
    name = item.get("filename") if isinstance(item.get("filename"), str) else None
    url = data if data.startswith("data:") else f"data:application/octet-stream;base64,{data}"
    image, raw = image_from_url(url, path, where)
    if raw is not None and image.blob_key is not None:
        attachments[image.blob_key] = raw
    return BinaryPart(media_type=image.media_type, blob_key=image.blob_key, size_bytes=image.size_bytes, name=name)


class OpenAIMessageConverter:
    """Converts one list of Chat Completions messages, item by item (one message each).

    Args:
        path: the file (for errors).
        registry: the transcript's call-id registry.
        notes: the transcript's notes.
        extra_roles: source roles beyond the OpenAI ones and how to keep them
            (mini-swe-agent's ``"exit"`` → ``(Role.SYSTEM, MessageKind.META)``).
    """

    def __init__(
        self,
        path: Path | str,
        registry: CallIdRegistry,
        notes: list[str],
        extra_roles: Mapping[str, tuple[Role, MessageKind]] | None = None,
    ) -> None:
        self._path = path
        self._registry = registry
        self._notes = notes
        self._extra_roles = dict(extra_roles or {})

    def convert(self, item: Any, key: str, location: str) -> ImportedMessage:
        """Convert one source message.

        Args:
            item: the decoded JSON message.
            key: the ImportedMessage key (``"msg:3"``, ``"line:12"``).
            location: where it is, for errors and notes (``"messages[3]"``, ``"line 12"``).

        Raises:
            ImportFormatError: not an object, no/unknown ``role`` (reason
                ``"unknown role 'foo'"``), malformed content or tool calls.
        """
        path = self._path
        if not isinstance(item, dict):
            fail(path, location, f"expected a message object, found {describe_json(item)}")
        role_value = item.get("role")
        if not isinstance(role_value, str):
            fail(path, location, "message has no 'role'" if role_value is None else f"role must be a string, found {describe_json(role_value)}")
        if role_value in self._extra_roles:
            extra_role, extra_kind = self._extra_roles[role_value]
            extra_parts, attachments = content_to_parts(item.get("content"), path, location, self._notes)
            return ImportedMessage(
                key=key, role=extra_role, kind=extra_kind, parts=extra_parts, attachments=attachments,
                source_ref=location, metadata={"source_role": role_value},
            )
        role = _ROLES.get(role_value)
        if role is None:
            fail(path, location, f"unknown role {role_value!r}")
        if role is Role.TOOL:
            return self._tool_result(item, role_value, key, location)
        content = _convert_content(item.get("content"), path, location, self._notes)
        parts: list[Part] = []
        if role is Role.ASSISTANT:
            reasoning = item.get("reasoning_content")
            if isinstance(reasoning, str) and reasoning:
                parts.append(ThinkingPart(text=reasoning))
        parts.extend(content.parts)
        parts.extend(content.images)
        if role is Role.ASSISTANT:
            parts.extend(self._tool_calls(item, location))
        elif isinstance(item.get("tool_calls"), list) and item["tool_calls"]:
            # tau2-bench: the simulated user calls its own tools; kept as data, not as calls
            self._notes.append(f"{location}: {role_value} message's tool calls kept as JSON text")
            parts.append(TextPart(text=json.dumps(item["tool_calls"], ensure_ascii=False)))
        message = ImportedMessage(
            key=key, role=role, parts=parts, attachments=content.attachments, source_ref=location
        )
        name = item.get("name")
        if isinstance(name, str) and name:
            message.speaker_label = name
        return message

    def _tool_calls(self, item: Mapping[str, Any], location: str) -> list[ToolCallPart]:
        path = self._path
        calls: list[ToolCallPart] = []
        raw_calls = item.get("tool_calls")
        if raw_calls is not None and not isinstance(raw_calls, list):
            fail(path, f"{location}.tool_calls", f"expected an array, found {describe_json(raw_calls)}")
        for j, call in enumerate(raw_calls or []):
            where = f"{location}.tool_calls[{j}]"
            if not isinstance(call, dict):
                fail(path, where, f"expected a tool call object, found {describe_json(call)}")
            function = call.get("function")
            if function is None and isinstance(call.get("name"), str):
                function = call  # tau2-bench: name and arguments (an object) on the call itself
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                fail(path, where, "tool call has no function name")
            raw_id = call.get("id")
            call_id = self._registry.call(raw_id if isinstance(raw_id, str) else None, where)
            calls.append(
                ToolCallPart(call_id=call_id, tool_name=function["name"], arguments_json=_arguments(function.get("arguments")))
            )
        legacy = item.get("function_call")
        if isinstance(legacy, dict) and isinstance(legacy.get("name"), str):
            where = f"{location}.function_call"
            call_id = self._registry.call(f"function_{legacy['name']}", where)
            calls.append(ToolCallPart(call_id=call_id, tool_name=legacy["name"], arguments_json=_arguments(legacy.get("arguments"))))
        return calls

    def _tool_result(self, item: Mapping[str, Any], role_value: str, key: str, location: str) -> ImportedMessage:
        content = _convert_content(item.get("content"), self._path, location, self._notes)
        text = content.text()
        raw_id: str | None
        if role_value == "function":
            name = item.get("name")
            raw_id = f"function_{name}" if isinstance(name, str) else None
        else:
            raw_id = item.get("tool_call_id") if isinstance(item.get("tool_call_id"), str) else None
            ids = item.get("tool_call_ids")
            if raw_id is None and isinstance(ids, list) and ids and isinstance(ids[0], str):
                raw_id = ids[0]
                if len(ids) > 1:
                    self._notes.append(f"{location}: result lists {len(ids)} call ids; linked to the first")
            elif raw_id is None and isinstance(item.get("id"), str):
                raw_id = item["id"]  # tau2-bench tool messages carry the call id as "id"
        call_id = self._registry.result(raw_id, location)
        metadata: dict[str, Any] = {}
        name = item.get("name")
        if isinstance(name, str) and name:
            metadata["tool_name"] = name
        if call_id is None:
            self._notes.append(
                f"{location}: tool result for call {raw_id!r} answers no earlier call; kept as an observation"
            )
            metadata["orphan_call_id"] = raw_id
            parts: list[Part] = [TextPart(text=text), *content.images]
            return ImportedMessage(
                key=key, role=Role.USER, kind=MessageKind.OBSERVATION, parts=parts,
                attachments=content.attachments, source_ref=location, metadata=metadata,
            )
        is_error = item.get("error") is True  # tau2-bench marks failed calls
        result = ToolResultPart(call_id=call_id, text=text, is_error=is_error, images=tuple(content.images))
        return ImportedMessage(
            key=key, role=Role.TOOL, parts=[result], attachments=content.attachments,
            source_ref=location, metadata=metadata,
        )


def _arguments(value: Any) -> str:
    """The exact argument text; non-string arguments are serialised as compact JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return "{}"
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def convert_list(
    converter: OpenAIMessageConverter,
    items: Sequence[Any],
    key_of: Callable[[int], str],
    location_of: Callable[[int], str],
) -> list[ImportedMessage]:
    """Convert ``items`` in order (one message per item)."""
    return [converter.convert(item, key_of(i), location_of(i)) for i, item in enumerate(items)]
