"""Anthropic Messages content blocks → neutral parts (shared by two importers).

Both Claude Code session files (:mod:`.claude_code`) and Anthropic Messages request bodies
(:mod:`.anthropic_messages`) hold ``message.content`` as a string or a list of blocks:

* assistant side: ``text``, ``thinking`` (text + ``signature``), ``redacted_thinking``
  (``data``), ``tool_use`` / ``server_tool_use`` / ``mcp_tool_use`` (a call), ``image``,
  and the results of server-side tools (``web_search_tool_result``, ``mcp_tool_result`` …:
  any ``*_tool_result`` block with a ``tool_use_id``);
* user side: ``text``, ``image``, ``document``, ``tool_result``.

Thinking is kept exactly as received (``ThinkingPart.text`` / ``signature`` /
``redacted``) and is never sent back.  A block of another type is kept as its JSON text
with a note; nothing is dropped silently.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contextledger.ingest.importers.call_ids import CallIdRegistry
from contextledger.ingest.importers.common import (
    describe_json,
    fail,
    image_from_base64,
    image_from_url,
    type_of,
)
from contextledger.records.parts import (
    BinaryPart,
    ImagePart,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["CALL_BLOCKS", "AnthropicBlocks", "json_text"]

CALL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
"""Block types that request a tool call."""

OnCall = Callable[[str | None, str, str, Any], None]
"""``(raw_id, issued_id, tool_name, input)`` callback for every call block."""


def json_text(value: Any) -> str:
    """``value`` as JSON text (non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _is_server_result(block: dict[str, Any]) -> bool:
    kind = type_of(block)
    return (
        isinstance(kind, str)
        and kind != "tool_result"
        and kind.endswith("_tool_result")
        and isinstance(block.get("tool_use_id"), str)
    )


class AnthropicBlocks:
    """Converts content blocks of one transcript; errors name ``path`` and the block.

    Args:
        path: the file (or request-body label) for errors.
        registry: the transcript's call-id registry.
        notes: the transcript's notes (unknown block types are noted here).
        separator: between a location and ``content[j]`` (``": "`` for ``"line 12:
            content[3]"``, ``"."`` for ``"messages[4].content[3]"``).
        server_results: convert ``*_tool_result`` blocks of the assistant side into
            ``ToolResultPart`` (the caller splits the turn there); otherwise they are kept
            as JSON text.
    """

    def __init__(
        self,
        path: Path | str,
        registry: CallIdRegistry,
        notes: list[str],
        *,
        separator: str = ".",
        server_results: bool = False,
    ) -> None:
        self.path = path
        self.registry = registry
        self.notes = notes
        self.separator = separator
        self.server_results = server_results

    def where(self, location: str, j: int) -> str:
        """The location of block ``j`` of the content at ``location``."""
        return f"{location}{self.separator}content[{j}]"

    def blocks(self, content: Any, location: str, field: str = "message.content") -> list[dict[str, Any]]:
        """``content`` as a list of block objects (a string becomes one text block).

        Raises:
            ImportFormatError: content that is neither a string nor an array, or an item
                that is not an object.
        """
        if content is None:
            return []
        if isinstance(content, str):
            return [{"type": "text", "text": content}] if content else []
        if not isinstance(content, list):
            fail(self.path, f"{location}{self.separator}{field}", f"expected a string or an array of blocks, found {describe_json(content)}")
        for j, block in enumerate(content):
            if not isinstance(block, dict):
                fail(self.path, self.where(location, j), f"expected a content block object, found {describe_json(block)}")
        return content

    # ----------------------------------------------------------------- assistant side

    def assistant_parts(
        self,
        content: Any,
        location: str,
        attachments: dict[str, bytes],
        on_call: OnCall | None = None,
    ) -> list[Part]:
        """Parts of an assistant message's ``content``, in block order.

        Raises:
            ImportFormatError: malformed content, a call block without a name, an image
                block without a usable source.
        """
        parts: list[Part] = []
        for j, block in enumerate(self.blocks(content, location)):
            where = self.where(location, j)
            kind = type_of(block)
            if kind == "text":
                text = block.get("text")
                if isinstance(text, str) and text:
                    parts.append(TextPart(text=text))
            elif kind == "thinking":
                signature = block.get("signature")
                thought = block.get("thinking")
                parts.append(
                    ThinkingPart(
                        text=thought if isinstance(thought, str) else "",
                        signature=signature if isinstance(signature, str) and signature else None,
                    )
                )
            elif kind == "redacted_thinking":
                data = block.get("data")
                parts.append(ThinkingPart(text="", signature=data if isinstance(data, str) else None, redacted=True))
            elif kind in CALL_BLOCKS:
                parts.append(self._call(block, where, on_call))
            elif kind == "image":
                parts.append(self.image(block, where, attachments))
            elif self.server_results and _is_server_result(block):
                parts.append(self._server_result(block, where))
            else:
                parts.append(self.other(block, where, attachments))
        return parts

    def _call(self, block: dict[str, Any], where: str, on_call: OnCall | None) -> ToolCallPart:
        name = block.get("name")
        if not isinstance(name, str) or not name:
            fail(self.path, where, f"{block.get('type')} block has no name")
        raw_id = block.get("id") if isinstance(block.get("id"), str) else None
        call_id = self.registry.call(raw_id, where)
        arguments = block.get("input", {})
        if on_call is not None:
            on_call(raw_id, call_id, name, arguments)
        try:
            arguments_json = _compact(arguments)
        except (TypeError, ValueError, RecursionError):
            fail(self.path, f"{where}.input", "tool input cannot be encoded as JSON (nesting too deep)")
        return ToolCallPart(call_id=call_id, tool_name=name, arguments_json=arguments_json)

    def _server_result(self, block: dict[str, Any], where: str) -> ToolResultPart:
        raw_id = block["tool_use_id"]
        call_id = self.registry.result(raw_id, where) or raw_id
        body = block.get("content")
        text = body if isinstance(body, str) else json_text(body)
        is_error = isinstance(body, dict) and str(body.get("type", "")).endswith("_error")
        return ToolResultPart(call_id=call_id, text=text, is_error=is_error or block.get("is_error") is True)

    # ----------------------------------------------------------------- user side

    def user_part(self, block: dict[str, Any], where: str, attachments: dict[str, bytes]) -> Part | None:
        """The part of a non-``tool_result`` user block (``None`` for empty text)."""
        kind = type_of(block)
        if kind == "text":
            text = block.get("text")
            return TextPart(text=text) if isinstance(text, str) and text else None
        if kind == "image":
            return self.image(block, where, attachments)
        return self.other(block, where, attachments)

    def result(self, block: dict[str, Any], where: str) -> tuple[str | None, str, list[ImagePart], dict[str, bytes], bool]:
        """``(raw_id, text, images, attachments, is_error)`` of a ``tool_result`` block."""
        raw_id = block.get("tool_use_id") if isinstance(block.get("tool_use_id"), str) else None
        text, images, attachments = self.result_content(block.get("content"), where)
        return raw_id, text, images, attachments, block.get("is_error") is True

    def result_content(self, content: Any, where: str) -> tuple[str, list[ImagePart], dict[str, bytes]]:
        """Text (items joined by newlines), images and image bytes of a result's content."""
        if content is None:
            return "", [], {}
        if isinstance(content, str):
            return content, [], {}
        if not isinstance(content, list):
            fail(self.path, f"{where}.content", f"expected a string or an array of blocks, found {describe_json(content)}")
        texts: list[str] = []
        images: list[ImagePart] = []
        attachments: dict[str, bytes] = {}
        for k, item in enumerate(content):
            if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
                texts.append(item["text"])
            elif isinstance(item, dict) and item.get("type") == "image":
                images.append(self.image(item, f"{where}.content[{k}]", attachments))
            else:
                texts.append(item if isinstance(item, str) else json_text(item))
        return "\n".join(texts), images, attachments

    # ----------------------------------------------------------------- media and others

    def image(self, block: dict[str, Any], where: str, attachments: dict[str, bytes]) -> ImagePart:
        """An ``image`` block (base64 or URL source) as an :class:`ImagePart`.

        Raises:
            ImportFormatError: no ``source`` object, invalid base64, an unsupported source.
        """
        source = block.get("source")
        if not isinstance(source, dict):
            fail(self.path, where, "image block has no 'source'")
        if source.get("type") == "base64" and isinstance(source.get("data"), str):
            given = source.get("media_type")
            media_type = given if isinstance(given, str) else "application/octet-stream"
            image, raw = image_from_base64(source["data"], media_type, self.path, where)
            attachments[image.blob_key or ""] = raw
            return image
        if isinstance(source.get("url"), str):
            image, maybe_raw = image_from_url(source["url"], self.path, where)
            if maybe_raw is not None and image.blob_key:
                attachments[image.blob_key] = maybe_raw
            return image
        fail(self.path, where, f"image source of type {source.get('type')!r} is not supported")

    def other(self, block: dict[str, Any], where: str, attachments: dict[str, bytes]) -> Part:
        """A ``document`` with base64 data as a :class:`BinaryPart`; anything else as JSON text."""
        source = block.get("source")
        if block.get("type") == "document" and isinstance(source, dict) and source.get("type") == "base64" and isinstance(source.get("data"), str):
            given = source.get("media_type")
            media_type = given if isinstance(given, str) else "application/octet-stream"
            image, raw = image_from_base64(source["data"], media_type, self.path, where)
            attachments[image.blob_key or ""] = raw
            title = block.get("title")
            return BinaryPart(media_type=media_type, blob_key=image.blob_key, size_bytes=len(raw), name=title if isinstance(title, str) else None)
        if block.get("type") == "document" and isinstance(source, dict) and source.get("type") == "text" and isinstance(source.get("data"), str):
            return TextPart(text=source["data"])
        self.notes.append(f"{where}: content block of type {block.get('type')!r} kept as JSON text")
        return TextPart(text=json_text(block))
