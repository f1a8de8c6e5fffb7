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

from dataclasses import dataclass, field
from typing import Any, Literal

from contextledger.records.parts import Part

__all__ = ["NeutralRequest", "ToolSchema", "WireMessage"]


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
