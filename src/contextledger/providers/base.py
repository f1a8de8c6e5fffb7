"""The provider-neutral request the assembler produces and serializers consume.

A :class:`NeutralRequest` is what one model call will see, before wire formatting:

* ``system`` — the stable prefix blocks in order (system prompt, rules, pinned
  constraints).  Only trusted text may be placed here; tool output never is.
* ``messages`` — the conversation in order.  Roles are ``user``, ``assistant`` and
  ``tool``.  An assistant message may hold text parts and any number of
  :class:`~contextledger.records.parts.ToolCallPart`; each result is its own ``tool``
  message holding exactly one :class:`~contextledger.records.parts.ToolResultPart` whose
  ``text`` is filled in.  Results follow their assistant message, in call order.
* ``tools`` — the tool schemas offered to the model, sorted by name.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Literal

from contextledger.records.parts import Part

__all__ = ["NeutralRequest", "ToolSchema", "WireMessage", "clean_schema", "label_first_text", "schema_null_problems", "speaker_labelled"]


@dataclass(frozen=True, kw_only=True)
class WireMessage:
    """One message of a neutral request.

    Attributes:
        role: ``"user"``, ``"assistant"`` or ``"tool"``.
        parts: typed content (see module docstring for the tool-message rule).
        name: speaker label (debates, multi-model) or ``None``.
        ref: the graph record this message was rendered from (message/memory id), used by
            explanations; never serialized.
    """

    role: Literal["user", "assistant", "tool"]
    parts: tuple[Part, ...]
    name: str | None = None
    ref: str | None = None


@dataclass(frozen=True, kw_only=True)
class ToolSchema:
    """A function tool offered to the model (JSON-schema ``parameters``)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True, kw_only=True)
class NeutralRequest:
    """A whole request before wire formatting; see the module docstring."""

    system: tuple[str, ...] = ()
    messages: tuple[WireMessage, ...] = ()
    tools: tuple[ToolSchema, ...] = ()


def speaker_labelled(text: str, name: str | None) -> str:
    """The text of a message from speaker ``name`` as every wire format carries it:
    ``"[<name>] <text>"``, or ``"[<name>]"`` when ``text`` is empty; ``text`` unchanged
    when there is no label (``None`` or ``""``).  The serializers put it on a message's
    first text (or send it as the text of a message that has none), so a debate's
    speaker attribution reads the same in Chat Completions, Anthropic Messages and
    OpenAI Responses; the budget stage counts it where a piece is costed
    (:func:`~contextledger.assembly.pieces.message_cost`)."""
    if not name:
        return text
    return f"[{name}] {text}" if text else f"[{name}]"


def label_first_text(parts: list[dict[str, Any]], name: str | None, *, text_type: str = "text") -> None:
    """Put speaker ``name``'s label (:func:`speaker_labelled`) on the first part of
    ``parts`` whose ``"type"`` is ``text_type`` (``"text"`` for Chat and Messages,
    ``"input_text"`` for Responses), in place; when no part is text a labelled text part
    is inserted first.  Nothing changes when ``name`` is ``None`` or ``""``.  ``parts`` is
    a list of wire-format content parts (dicts with a ``"type"`` key)."""
    if not name:
        return
    first = next((p for p in parts if p["type"] == text_type), None)
    if first is not None:
        first["text"] = speaker_labelled(first["text"], name)
    else:
        parts.insert(0, {"type": text_type, "text": speaker_labelled("", name)})


_DATA_KEYWORDS = frozenset({"default", "const", "enum", "examples", "example"})
"""Keywords whose value is data, not a schema (never cleaned inside)."""
_NULLABLE_DATA = frozenset({"default", "const"})
"""Data keywords for which ``null`` is a meaningful value."""
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
"""Keywords whose value maps names to schemas."""


def clean_schema(schema: Any) -> Any:
    """A deep copy of a JSON Schema fit to send to a provider: a keyword whose value is
    ``null`` is dropped (``"enum": null``, ``"description": null``; ``default`` and
    ``const`` keep a ``null`` value), and a ``null`` entry of a name → schema map
    (``properties``, ``$defs`` …) becomes ``{}`` (any value).  Transcripts exported
    through tabular formats carry such nulls (every optional column of a unified schema);
    Anthropic and OpenAI reject them.  Non-dict input is returned copied as it is."""
    if isinstance(schema, list):
        return [clean_schema(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if value is None and key not in _NULLABLE_DATA:
            continue
        if key in _DATA_KEYWORDS:
            out[key] = copy.deepcopy(value)
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: {} if sub is None else clean_schema(sub) for name, sub in value.items()}
        else:
            out[key] = clean_schema(value)
    return out


def schema_null_problems(schema: Any, path: str = "") -> list[str]:
    """Where a JSON Schema holds a ``null`` the providers reject: ``"<path>.<keyword>:
    null is not a valid value of 'enum'"`` or ``"<path>.properties.<name>: null is not a
    JSON schema"`` (``default`` / ``const`` may be ``null``).  ``[]`` when clean."""
    out: list[str] = []
    if isinstance(schema, list):
        for i, x in enumerate(schema):
            out.extend(schema_null_problems(x, f"{path}[{i}]"))
        return out
    if not isinstance(schema, dict):
        return out
    for key, value in schema.items():
        if value is None and key not in _NULLABLE_DATA:
            out.append(f"{path}.{key}: null is not a valid value of {key!r}")
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                if sub is None:
                    out.append(f"{path}.{key}.{name}: null is not a JSON schema")
                else:
                    out.extend(schema_null_problems(sub, f"{path}.{key}.{name}"))
        elif key not in _DATA_KEYWORDS:
            out.extend(schema_null_problems(value, f"{path}.{key}"))
    return out
