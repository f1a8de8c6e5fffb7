"""Provider-neutral, typed message parts (a tagged union on ``kind``).

A Message node holds a list of parts.  Provider serializers turn parts into wire format and
raise :class:`~contextledger.errors.ProviderSerializationError` on a part they cannot
express; nothing is dropped silently.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "BinaryPart",
    "ImagePart",
    "Part",
    "TextPart",
    "ThinkingPart",
    "ToolCallPart",
    "ToolResultPart",
]


class _PartBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_PartBase):
    """Plain text."""

    kind: Literal["text"] = "text"
    text: str


class ThinkingPart(_PartBase):
    """Model reasoning.  Kept in the ledger exactly as received; never sent to a provider.

    Attributes:
        text: the reasoning text (Anthropic ``thinking``; the joined summary and reasoning
            text of an OpenAI ``reasoning`` item); empty when the provider withheld it.
        signature: the provider's opaque proof, byte for byte: an Anthropic ``signature``,
            a ``redacted_thinking`` block's ``data`` or an OpenAI ``encrypted_content``.
        redacted: ``True`` for an Anthropic ``redacted_thinking`` block (``signature``
            then holds its ``data``).
    """

    kind: Literal["thinking"] = "thinking"
    text: str
    signature: str | None = None
    redacted: bool = False


class ImagePart(_PartBase):
    """An image kept typed, never as base64 text in a prompt.

    Attributes:
        media_type: e.g. ``"image/png"``.
        blob_key: content address (``sha256:<hex>``) of the bytes in the blob store, if stored.
        size_bytes: byte size of the image.
        url: a remote URL when the source gave one instead of bytes.
        artifact_id: the ToolArtifact holding the image when it came from a tool.
    """

    kind: Literal["image"] = "image"
    media_type: str
    blob_key: str | None = None
    size_bytes: int | None = None
    url: str | None = None
    artifact_id: str | None = None


class BinaryPart(_PartBase):
    """A non-image binary payload (document, audio …) kept by reference."""

    kind: Literal["binary"] = "binary"
    media_type: str
    blob_key: str | None = None
    size_bytes: int | None = None
    name: str | None = None
    artifact_id: str | None = None


class ToolCallPart(_PartBase):
    """A function call requested by a model.

    Attributes:
        call_id: the provider's call id (``toolu_…``, ``call_…``); unique per conversation
            after import (duplicates from sources are renamed and the rename recorded).
        tool_name: the function name.
        arguments_json: the exact argument text as the model produced it (usually JSON).
    """

    kind: Literal["tool_call"] = "tool_call"
    call_id: str
    tool_name: str
    arguments_json: str = "{}"


class ToolResultPart(_PartBase):
    """The result of one tool call, linked by ``call_id`` (never by position).

    The raw result lives in the ToolArtifact ``artifact_id``; ``text`` holds it inline only
    when it is at most the store's inline threshold.  ``is_error`` marks failed calls.
    """

    kind: Literal["tool_result"] = "tool_result"
    call_id: str
    artifact_id: str | None = None
    text: str | None = None
    is_error: bool = False
    images: tuple[ImagePart, ...] = ()


Part = Annotated[
    TextPart | ThinkingPart | ImagePart | BinaryPart | ToolCallPart | ToolResultPart,
    Field(discriminator="kind"),
]
"""Any message part; discriminated by ``kind``."""


def parts_text(parts: list[Any] | tuple[Any, ...]) -> str:
    """Concatenate the text of the ``TextPart`` items in ``parts`` with newlines."""
    return "\n".join(p.text for p in parts if isinstance(p, TextPart))
