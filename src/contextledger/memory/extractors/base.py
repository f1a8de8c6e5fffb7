"""The input and output types of deterministic tool-result extraction (seed 000 §4.3).

An extractor turns one raw tool result (:class:`ToolInput`) into a compact, structured
:class:`Extraction`: the 1-3 summary lines a model sees, a JSON-serialisable payload, the
shape / context kind / freshness class it should carry, what it is about (``subject_key``)
and how it can be re-checked (``revalidation_tool`` / ``revalidation_args``).

Extraction is a pure function of its input: the same :class:`ToolInput` always yields an
equal :class:`Extraction` (no clock, no randomness, no dict-order dependence beyond the
input's own order).  Confidence is ``1.0`` with basis ``deterministic_parse`` where
structure was parsed from the output, lower with basis ``heuristic`` where it was guessed
(seed 000 §8 R4: compact memory must not look more certain than it is); ``limits`` states
what was left out.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from contextledger.limits import loads_json
from contextledger.records.enums import ConfidenceBasis, ContextKind, FreshnessClass, Shape

if TYPE_CHECKING:
    from contextledger.memory.dialects import ToolSpec

__all__ = ["Extraction", "Extractor", "ToolInput"]


@dataclass(frozen=True, kw_only=True)
class ToolInput:
    """One tool call and its raw result, as the extractors see it.

    Attributes:
        tool_name: the tool's name as the agent called it (``"Bash"``, ``"execute_bash"``,
            ``"get_reservation_details"`` …).
        arguments_json: the call arguments as sent (usually a JSON object; Codex
            ``apply_patch`` sends raw patch text, which is kept as is).
        result_text: the raw result text, untruncated.
        is_error: the runtime flagged the result as an error.
        size_bytes: UTF-8 size of the raw result in bytes.
        content_type: media type of the raw result.
        action_text: for text-action agents (SWE-agent, SWE-smith, nebius), the command the
            agent typed (``"find_file fields.py src"``); ``None`` for function-calling agents.
        spec: how to read this tool's calls when a policy declares it (``[tools.<name>]``);
            ``None`` to use the built-in registry and the fallback by argument shape.
    """

    tool_name: str
    arguments_json: str
    result_text: str
    is_error: bool
    size_bytes: int
    content_type: str = "text/plain"
    action_text: str | None = None
    spec: ToolSpec | None = None

    @functools.cached_property
    def arguments(self) -> dict[str, Any] | None:
        """The arguments parsed as a JSON object, or ``None`` when they are not one."""
        text = self.arguments_json.strip()
        if not text.startswith("{"):
            return None
        try:
            value = loads_json(text)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


@dataclass(frozen=True, kw_only=True)
class Extraction:
    """The deterministic extract of one tool result.

    Attributes:
        kind: the extractor that produced it: ``command``, ``test_run``, ``file_read``,
            ``file_write``, ``search``, ``http_json``, ``generated_file``,
            ``subagent_report`` or ``generic``.
        summary: one to three lines (no tool name or artifact reference; those are added
            by :func:`contextledger.memory.derive.derive_memory`).
        payload: the structured extract; JSON-serialisable; keys depend on ``kind``.
        shape: representation of the evidence (seed 001 §4.4).
        context_kind: what kind of context it is (seed 000 §4.6); failed calls are
            ``recovery``.
        freshness_class: how quickly it goes stale (seed 000 §4.7).
        subject_key: what it is about: ``"file:<path>"``, ``"test:<command>"``,
            ``"search:<pattern>"`` / ``"search:<pattern> in <folder>"`` (a search inside one
            file has the file's subject ``"file:<path>"``), ``"api:<tool>:<ids>"`` or ``None``.
        revalidation_tool / revalidation_args: the call that re-checks it (``None`` when
            re-running could have side effects).
        confidence: 0..1; ``confidence_basis`` says why.
        limits: what was left out (``"first 20 of 1,532 matches"``) or ``None``.
        error_type: ``"ModuleNotFoundError"``, ``"command not found"`` … or ``None``.
        line_range: 1-based inclusive line range of the evidence within the raw result.
        byte_range: 0-based half-open UTF-8 byte range of the evidence within the raw result.
    """

    kind: str
    summary: str
    payload: dict[str, Any] = field(default_factory=dict)
    shape: Shape = Shape.EXTRACT
    context_kind: ContextKind = ContextKind.OPERATIONAL
    freshness_class: FreshnessClass = FreshnessClass.SESSION
    subject_key: str | None = None
    revalidation_tool: str | None = None
    revalidation_args: dict[str, Any] = field(default_factory=dict)
    confidence: float = 1.0
    confidence_basis: ConfidenceBasis = ConfidenceBasis.DETERMINISTIC_PARSE
    limits: str | None = None
    error_type: str | None = None
    line_range: tuple[int, int] | None = None
    byte_range: tuple[int, int] | None = None


@runtime_checkable
class Extractor(Protocol):
    """A deterministic extractor for one kind of tool result.

    ``matches`` must be cheap (it runs for every candidate extractor); ``extract`` must be
    linear in the size of the result and never raise on malformed output (it degrades to
    a lower confidence instead).
    """

    name: str

    def matches(self, item: ToolInput) -> bool:
        """True when this extractor understands ``item``."""
        ...

    def extract(self, item: ToolInput) -> Extraction:
        """The extract of ``item``."""
        ...
