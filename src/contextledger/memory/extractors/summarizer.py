"""Optional model-written summaries, added beside the deterministic extract.

A model may phrase a better summary, but it must never replace the deterministic extract
(seed 000 §8 R4: compact memory must not gain false confidence).  :func:`apply_summarizer`
therefore only *adds* ``payload["model_summary"]`` with
``payload["model_summary_basis"] = "model_written"``; ``summary``, provenance ranges,
confidence and every other payload key stay exactly as extracted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from contextledger.errors import InputError
from contextledger.memory.extractors.base import Extraction, ToolInput
from contextledger.records.enums import ConfidenceBasis
from contextledger.textcut import cut_index

__all__ = ["AsyncSummarizer", "ScriptedSummarizer", "Summarizer", "apply_summarizer"]

MODEL_SUMMARY_CHARS = 2000
"""Longest model summary kept (characters)."""


@runtime_checkable
class Summarizer(Protocol):
    """Writes a natural-language summary of one tool result."""

    def summarize(self, item: ToolInput, extraction: Extraction) -> str:
        """A summary of ``item`` given its deterministic ``extraction``."""
        ...


@runtime_checkable
class AsyncSummarizer(Protocol):
    """Asynchronous :class:`Summarizer`."""

    async def asummarize(self, item: ToolInput, extraction: Extraction) -> str:
        """A summary of ``item`` given its deterministic ``extraction``."""
        ...


def apply_summarizer(extraction: Extraction, text: str) -> Extraction:
    """``extraction`` with a model-written summary added to its payload.

    Only ``payload["model_summary"]`` (stripped, ≤ 2,000 characters) and
    ``payload["model_summary_basis"]`` (``"model_written"``) are added; an empty ``text``
    returns ``extraction`` unchanged.
    """
    cleaned = text.strip()
    if not cleaned:
        return extraction
    payload = dict(extraction.payload)
    payload["model_summary"] = cleaned[: cut_index(cleaned, MODEL_SUMMARY_CHARS)]
    payload["model_summary_basis"] = ConfidenceBasis.MODEL_WRITTEN.value
    return dataclasses.replace(extraction, payload=payload)


class ScriptedSummarizer:
    """Deterministic test double: returns ``responses`` in order, sync or async.

    ``calls`` records ``(tool_name, extraction kind)`` per call.

    Raises:
        InputError: more calls than scripted responses.
    """

    def __init__(self, responses: Sequence[str]) -> None:
        self._responses = list(responses)
        self._next = 0
        self.calls: list[tuple[str, str]] = []

    def summarize(self, item: ToolInput, extraction: Extraction) -> str:
        """The next scripted response."""
        if self._next >= len(self._responses):
            raise InputError(f"ScriptedSummarizer has only {len(self._responses)} responses")
        self.calls.append((item.tool_name, extraction.kind))
        response = self._responses[self._next]
        self._next += 1
        return response

    async def asummarize(self, item: ToolInput, extraction: Extraction) -> str:
        """The next scripted response (async form)."""
        return self.summarize(item, extraction)
