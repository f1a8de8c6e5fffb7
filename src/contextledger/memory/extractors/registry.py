"""Choosing the extractor for a tool result, and the invariants every extract keeps.

:meth:`ExtractorRegistry.extract` tries extractors by priority (higher first), then by
registration order; the generic fallback is always tried last.  Whatever extractor wins,
the result is normalised:

* the summary has at most three lines, no two the same, each at most
  :data:`SUMMARY_LINE_CHARS` characters, and at most ``max_summary_tokens`` o200k tokens in total;
* a failed call (``is_error``) keeps its error type and key error line in the summary
  (seed 000 §4.1, seed 001 §4.4: retry-critical error state must not vanish);
* an extractor that raises falls back to the generic extract (the failure is recorded in
  ``payload["extractor_error"]``), so one odd output never loses the memory.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from contextledger.memory.dialects import BUILTIN_TOOLS, ToolSpec, lookup_tool
from contextledger.memory.extractors.actions import resolve_action
from contextledger.memory.extractors.base import Extraction, Extractor, ToolInput
from contextledger.memory.extractors.command import CommandExtractor
from contextledger.memory.extractors.file_read import FileReadExtractor
from contextledger.memory.extractors.file_write import ChangeLimits, FileWriteExtractor
from contextledger.memory.extractors.generated_file import GeneratedFileExtractor
from contextledger.memory.extractors.generic import GenericExtractor
from contextledger.memory.extractors.http_json import HttpJsonExtractor
from contextledger.memory.extractors.plan import PlanExtractor
from contextledger.memory.extractors.search import SearchExtractor
from contextledger.memory.extractors.shell_writes import describe_writes, opened_writes
from contextledger.memory.extractors.subagent_report import SubagentReportExtractor
from contextledger.memory.extractors.test_run import TestRunExtractor
from contextledger.memory.extractors.textutil import cap, normalise_path
from contextledger.textcut import cut_prefix
from contextledger.tokens import get_tokenizer

if TYPE_CHECKING:
    from contextledger.policy.model import Policy

__all__ = [
    "DEFAULT_MAX_SUMMARY_TOKENS",
    "SUMMARY_LINE_CHARS",
    "ExtractorRegistry",
    "default_registry",
    "registry_for_policy",
]

COMPLETE_OUTPUT = frozenset({"file_read", "search", "test_run"})
"""Extractors that read a command's whole output (never a running command's)."""
_RUNNING = re.compile(r"^Process running with session ID \d+\s*$", re.M)

SUMMARY_LINE_CHARS = 240
DEFAULT_MAX_SUMMARY_TOKENS = 160


class ExtractorRegistry:
    """An ordered set of extractors with a generic fallback.

    Args:
        max_summary_tokens: cap on the summary's o200k token count.
        declared_tools: tool name → how to read its calls (policy ``[tools.<name>]``);
            a declaration wins over the built-in tool registry.
    """

    def __init__(self, *, max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS, declared_tools: Mapping[str, ToolSpec] | None = None) -> None:
        self._entries: list[tuple[int, int, Extractor]] = []
        self._fallback: Extractor = GenericExtractor()
        self.max_summary_tokens = max_summary_tokens
        self.declared_tools: Mapping[str, ToolSpec] = dict(declared_tools or {})

    def register(self, extractor: Extractor, *, priority: int = 0) -> None:
        """Add ``extractor``; higher ``priority`` is tried first, ties in registration order."""
        self._entries.append((priority, len(self._entries), extractor))
        self._entries.sort(key=lambda e: (-e[0], e[1]))

    @property
    def extractors(self) -> tuple[Extractor, ...]:
        """Registered extractors in the order they are tried (fallback excluded)."""
        return tuple(e[2] for e in self._entries)

    def select(self, item: ToolInput) -> Extractor:
        """The extractor that will handle ``item``.  A command still running (Codex's
        ``Process running with session ID``) has shown part of its output at most: no
        extractor that reads a whole output (:data:`COMPLETE_OUTPUT`: a file read, a
        search, a test report) takes it — it is a running command."""
        running = _RUNNING.search(item.result_text[:600]) is not None
        for _, _, extractor in self._entries:
            if running and extractor.name in COMPLETE_OUTPUT:
                continue
            if extractor.matches(item):
                return extractor
        return self._fallback

    def extract(self, item: ToolInput) -> Extraction:
        """The normalised extract of ``item`` (see the module docstring)."""
        if item.spec is None and self.declared_tools:
            spec = lookup_tool(item.tool_name, self.declared_tools)
            if spec is not None and spec is not BUILTIN_TOOLS.get(item.tool_name.strip().lower()):
                item = dataclasses.replace(item, spec=spec)
        extractor = self.select(item)
        try:
            extraction = extractor.extract(item)
        except Exception as exc:  # an extractor bug must not lose the evidence
            if extractor is self._fallback:
                raise
            extraction = self._fallback.extract(item)
            payload = dict(extraction.payload)
            payload["extractor_error"] = f"{extractor.name}: {type(exc).__name__}"
            extraction = dataclasses.replace(extraction, payload=payload)
        return self._normalise(item, _with_effects(item, extraction))

    def _normalise(self, item: ToolInput, extraction: Extraction) -> Extraction:
        lines = [
            cap(line.rstrip(), SUMMARY_LINE_CHARS)
            for line in extraction.summary.split("\n")
            if line.strip()
        ]
        lines = list(dict.fromkeys(lines))  # a line said twice is said once
        if not lines:
            lines = ["(empty result)"]
        if item.is_error:
            key = extraction.payload.get("error_line") or extraction.payload.get("error")
            if isinstance(key, str) and key and not any(key[:60] in line for line in lines):
                lines = [*lines[:2], cap(key, SUMMARY_LINE_CHARS)]
            error_type = extraction.error_type
            said = (error_type or "").replace("_", " ")  # "command_failed" is said by "(command failed)"
            if error_type and not any(error_type in line or said in line for line in lines):
                lines[0] = cap(f"{lines[0]} ({error_type})", SUMMARY_LINE_CHARS)
        lines = lines[:3]
        summary = "\n".join(lines)
        tokenizer = get_tokenizer()
        if tokenizer.count(summary) > self.max_summary_tokens:
            summary = cut_prefix(summary, len(tokenizer.truncate(summary, self.max_summary_tokens - 1))).rstrip() + "…"
        if summary == extraction.summary:
            return extraction
        return dataclasses.replace(extraction, summary=summary)


_WRITE_EXTRACTS = frozenset({"file_write", "generated_file"})


def _with_effects(item: ToolInput, extraction: Extraction) -> Extraction:
    """A shell run that also writes files (``rm -f x && cat > t.js <<EOF … && node t.js``)
    keeps its run's extract and gains ``payload["files_written"]`` (every path written
    or deleted, command order) and ``payload["effects"]`` (:func:`~contextledger.memory.
    extractors.shell_writes.describe_writes`), plus a ``files: …`` summary line in place
    of its third line; a later write of one of those files is then linked to it.  A file
    the output reports could not be opened is not written (``payload["not_written"]``,
    :func:`~contextledger.memory.extractors.shell_writes.opened_writes`)."""
    if extraction.kind in _WRITE_EXTRACTS:
        return extraction
    action = resolve_action(item)
    if action.verb != "shell" or not action.effects:
        return extraction
    written, unopened = opened_writes(action.effects, item.result_text)
    if not written:
        return dataclasses.replace(extraction, payload={**extraction.payload, "not_written": unopened}) if unopened else extraction
    effects = describe_writes(written)
    paths = list(dict.fromkeys(normalise_path(p) for w in written for p in w.paths))
    payload = {**extraction.payload, "files_written": paths, "effects": effects}
    if unopened:
        payload["not_written"] = unopened
    lines = [line for line in extraction.summary.split("\n") if line.strip()][:2]
    summary = "\n".join([*lines, "files: " + "; ".join(effects)])
    return dataclasses.replace(extraction, payload=payload, summary=summary)


def default_registry(
    *,
    schema_hints: Mapping[str, Sequence[str]] | None = None,
    max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS,
    declared_tools: Mapping[str, ToolSpec] | None = None,
    change_limits: ChangeLimits | None = None,
) -> ExtractorRegistry:
    """The built-in extractors, most specific first.

    Order: subagent report (50), test run (40), generated file (35), file write (30),
    file read (30), search (25), plan (20), command (10), HTTP/JSON (5), then the generic
    fallback.

    Args:
        schema_hints: tool name → fields the JSON extractor keeps verbatim
            (e.g. ``{"get_reservation_details": ["reservation_id", "cabin"]}``).
        max_summary_tokens: cap on every summary (o200k tokens).
        declared_tools: tools declared by a policy (see :class:`ExtractorRegistry`).
        change_limits: how much of an edit's change its memory carries (default
            20 lines / 1,500 bytes).
    """
    registry = ExtractorRegistry(max_summary_tokens=max_summary_tokens, declared_tools=declared_tools)
    registry.register(SubagentReportExtractor(), priority=50)
    registry.register(TestRunExtractor(), priority=40)
    registry.register(GeneratedFileExtractor(change_limits), priority=35)
    registry.register(FileWriteExtractor(change_limits), priority=30)
    registry.register(FileReadExtractor(), priority=30)
    registry.register(SearchExtractor(), priority=25)
    registry.register(PlanExtractor(), priority=20)
    registry.register(CommandExtractor(), priority=10)
    registry.register(HttpJsonExtractor(schema_hints), priority=5)
    return registry


_BY_POLICY: dict[str, ExtractorRegistry] = {}


def registry_for_policy(policy: Policy) -> ExtractorRegistry:
    """The built-in extractors with ``policy``'s declared tools (``[tools.<name>]``) and
    change limits (``[edits]``); one registry per policy version, reused."""
    found = _BY_POLICY.get(policy.version)
    if found is None:
        from contextledger.policy.tools import declared_specs

        edits = policy.edits
        found = default_registry(
            declared_tools=declared_specs(dict(policy.tools)),
            change_limits=ChangeLimits(max_lines=edits.change_max_lines, max_bytes=edits.change_max_bytes),
        )
        if len(_BY_POLICY) >= 32:
            _BY_POLICY.clear()
        _BY_POLICY[policy.version] = found
    return found
