"""Deterministic extraction of compact, structured memory from raw tool results.

One module per tool kind (command, test run, file read, file write, search, HTTP/JSON,
generated file, subagent report, generic fallback); :func:`default_registry` picks the
right one for a :class:`ToolInput`.  See seed 000 §4.3 (ToolMemory), seed 001 §4.4
(Shape) and §6 problems 2-3 (tool output budgets, freshness of file reads and test logs).
"""

from __future__ import annotations

from contextledger.memory.extractors.base import Extraction, Extractor, ToolInput
from contextledger.memory.extractors.budget import (
    DEFAULT_MAX_BYTES,
    ToolOutputBudget,
    needs_artifact_ref,
)
from contextledger.memory.extractors.command import CommandExtractor
from contextledger.memory.extractors.file_read import FileReadExtractor
from contextledger.memory.extractors.file_write import FileWriteExtractor
from contextledger.memory.extractors.generated_file import GeneratedFileExtractor
from contextledger.memory.extractors.generic import GenericExtractor
from contextledger.memory.extractors.http_json import HttpJsonExtractor
from contextledger.memory.extractors.registry import ExtractorRegistry, default_registry
from contextledger.memory.extractors.search import SearchExtractor
from contextledger.memory.extractors.subagent_report import SubagentReportExtractor
from contextledger.memory.extractors.summarizer import (
    AsyncSummarizer,
    ScriptedSummarizer,
    Summarizer,
    apply_summarizer,
)
from contextledger.memory.extractors.test_run import TestRunExtractor

__all__ = [
    "DEFAULT_MAX_BYTES",
    "AsyncSummarizer",
    "CommandExtractor",
    "Extraction",
    "Extractor",
    "ExtractorRegistry",
    "FileReadExtractor",
    "FileWriteExtractor",
    "GeneratedFileExtractor",
    "GenericExtractor",
    "HttpJsonExtractor",
    "ScriptedSummarizer",
    "SearchExtractor",
    "SubagentReportExtractor",
    "Summarizer",
    "TestRunExtractor",
    "ToolInput",
    "ToolOutputBudget",
    "apply_summarizer",
    "default_registry",
    "needs_artifact_ref",
]
