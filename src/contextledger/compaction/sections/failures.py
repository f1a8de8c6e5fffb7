"""The ``failed_attempts`` section: failed or abandoned calls, rejected writes and
commands that failed, each with its error line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextledger.compaction.handoff import NONE_RECORDED
from contextledger.compaction.sections.common import (
    ARTIFACT_REF,
    MAX_LINE_CHARS,
    WRITE_KINDS,
    args_text,
    by_seq,
    first_artifact,
    memory_kind,
)
from contextledger.compaction.text import cap_text, one_line
from contextledger.records.enums import ToolCallStatus
from contextledger.records.models import ToolCall, ToolMemory

__all__ = ["MAX_FAILED_ATTEMPTS", "error_line", "failed_attempts", "failed_payload"]

MAX_FAILED_ATTEMPTS = 20
"""Newest failed attempts kept."""


def failed_payload(mem: ToolMemory) -> bool:
    p = mem.payload
    if memory_kind(mem) in WRITE_KINDS and p.get("applied") is False:
        return True
    return memory_kind(mem) == "command" and p.get("status") == "failed"


def error_line(mem: ToolMemory) -> str:
    p = mem.payload
    for key in ("error_line", "error"):
        v = p.get(key)
        if isinstance(v, str) and v.strip():
            return cap_text(v, MAX_LINE_CHARS)
    lines = [ln for ln in mem.summary.split("\n") if ln.strip()]
    line = lines[1] if len(lines) > 1 else lines[0] if lines else "no error text recorded"
    return cap_text(ARTIFACT_REF.sub("", line), MAX_LINE_CHARS)


def _attempt(mem: ToolMemory, calls_by_id: Mapping[str, ToolCall]) -> str:
    p = mem.payload
    for key in ("command", "path"):
        v = p.get(key)
        if isinstance(v, str) and v.strip():
            return one_line(v, 200)
    call = calls_by_id.get(mem.call_id or "")
    return args_text(call) if call else NONE_RECORDED


def failed_attempts(
    covered: Sequence[ToolMemory], calls_by_id: Mapping[str, ToolCall]
) -> tuple[list[dict[str, Any]], int]:
    """Covered failures, newest :data:`MAX_FAILED_ATTEMPTS` in seq order: failed or
    abandoned calls, rejected writes and commands whose output says they failed, each
    with its error line (superseded or not: a failure stays a failure)."""
    failed = [
        m
        for m in by_seq(covered)
        if m.status in (ToolCallStatus.FAILED, ToolCallStatus.ABANDONED) or failed_payload(m)
    ]
    kept = failed[-MAX_FAILED_ATTEMPTS:]
    return (
        [
            {
                "tool": m.source_tool,
                "attempt": _attempt(m, calls_by_id),
                "error": error_line(m),
                "status": m.status.value if m.status is not ToolCallStatus.SUCCEEDED else "failed",
                "memory_id": m.id,
                "artifact_id": first_artifact(m),
                "seq": m.seq,
            }
            for m in kept
        ],
        len(failed) - len(kept),
    )
