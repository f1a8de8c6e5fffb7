"""The ``files_read`` and ``files_modified`` sections: file-read and applied file-write
memories by path."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from contextledger.compaction.handoff import NONE_RECORDED
from contextledger.compaction.sections.common import (
    MAX_LINE_CHARS,
    WRITE_KINDS,
    by_seq,
    first_artifact,
    first_line,
    memory_kind,
    shareable_memory,
    shareable_message,
)
from contextledger.compaction.text import cap_text, message_text
from contextledger.memory.freshness import staleness_deadline
from contextledger.memory.links import file_staleness
from contextledger.policy.constraints import split_sentences
from contextledger.records.enums import ResolutionState, ToolCallStatus
from contextledger.records.models import Message, ToolCall, ToolMemory

__all__ = ["MAX_FILES", "MAX_WRITES_CITED", "files_modified", "files_read", "reason_of"]

MAX_FILES = 40
"""Most recently touched paths kept in ``files_read`` and ``files_modified`` each."""
MAX_WRITES_CITED = 5
"""Newest writes of one path whose change and ids ``files_modified`` lists."""

_CHANGED_BY = re.compile(r"file changed later \(([^)]+)\)")


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _path_of(mem: ToolMemory) -> str | None:
    path = mem.payload.get("path")
    if isinstance(path, str) and path:
        return path
    if mem.subject_key and mem.subject_key.startswith("file:"):
        return mem.subject_key[len("file:") :]
    return None


def _staleness(mem: ToolMemory, changed: Mapping[str, str], now: datetime) -> str:
    if mem.id in changed:
        return f"stale: changed by {changed[mem.id]}"
    if mem.resolution_state is ResolutionState.STALE:
        found = _CHANGED_BY.search(mem.limits or "")
        return (
            f"stale: changed by {found.group(1)}" if found else "stale: marked stale in the ledger"
        )
    deadline = staleness_deadline(mem)
    if deadline is not None and now >= deadline:
        return f"stale: observed {_iso(mem.observed_at)}, expired {_iso(deadline)}"
    return "current"


def files_read(
    covered: Sequence[ToolMemory], lineage: Sequence[ToolMemory], now: datetime
) -> tuple[list[dict[str, Any]], int]:
    """The latest covered successful read of each path, with its staleness as of ``now``
    against the whole lineage (a write in the raw tail makes a covered read stale):
    ``"current"``, ``"stale: changed by <memory id>"`` or ``"stale: observed …, expired …"``.
    Newest :data:`MAX_FILES` paths (seq order of their latest read) and the number left out."""
    changed = file_staleness([m for m in lineage if shareable_memory(m)])
    latest: dict[str, ToolMemory] = {}
    for m in by_seq(covered):
        path = _path_of(m)
        if memory_kind(m) == "file_read" and m.status is ToolCallStatus.SUCCEEDED and path:
            latest[path] = m
    reads = sorted(latest.items(), key=lambda kv: (kv[1].seq, kv[1].id))
    kept = reads[-MAX_FILES:]
    return (
        [
            {
                "path": path,
                "staleness": _staleness(m, changed, now),
                "read": first_line(m),
                "memory_id": m.id,
                "artifact_id": first_artifact(m),
                "seq": m.seq,
            }
            for path, m in kept
        ],
        len(reads) - len(kept),
    )


def _applied_write(mem: ToolMemory) -> bool:
    return (
        memory_kind(mem) in WRITE_KINDS
        and mem.status is ToolCallStatus.SUCCEEDED
        and mem.payload.get("applied", True) is not False
    )


def _change(mem: ToolMemory) -> str:
    """``"edit +3 -1"`` when line counts were parsed, else the summary's first line
    without the tool prefix and artifact reference."""
    p = mem.payload
    if p.get("added_lines") is not None or p.get("removed_lines") is not None:
        op = str(p.get("operation") or mem.source_tool)
        return f"{op} +{p.get('added_lines') if p.get('added_lines') is not None else '?'} -{p.get('removed_lines') if p.get('removed_lines') is not None else '?'}"
    return cap_text(first_line(mem).split(": ", 1)[-1], 160)


def reason_of(
    call_id: str | None, calls_by_id: Mapping[str, ToolCall], messages_by_id: Mapping[str, Message]
) -> str | None:
    """The final sentence of the assistant text that requested ``call_id``, if any."""
    call = calls_by_id.get(call_id or "")
    msg = messages_by_id.get(call.message_id) if call else None
    if msg is None or not shareable_message(msg):
        return None
    sentences = split_sentences(message_text(msg))
    return cap_text(sentences[-1], MAX_LINE_CHARS) if sentences else None


def files_modified(
    covered: Sequence[ToolMemory],
    calls_by_id: Mapping[str, ToolCall],
    messages_by_id: Mapping[str, Message],
) -> tuple[list[dict[str, Any]], int]:
    """Each path changed by an applied covered write (``file_write``/``generated_file``):
    the changes and memory/artifact ids of the newest :data:`MAX_WRITES_CITED` writes, the
    number of writes, and the reason (final sentence of the requesting assistant text,
    else :data:`NONE_RECORDED`)."""
    by_path: dict[str, list[ToolMemory]] = {}
    for m in by_seq(covered):
        if not _applied_write(m):
            continue
        paths = [p for p in m.payload.get("paths") or [] if isinstance(p, str) and p] or [
            p for p in [_path_of(m)] if p
        ]
        for path in dict.fromkeys(paths):
            by_path.setdefault(path, []).append(m)
    items = sorted(by_path.items(), key=lambda kv: (kv[1][-1].seq, kv[1][-1].id, kv[0]))
    kept = items[-MAX_FILES:]
    out: list[dict[str, Any]] = []
    for path, mems in kept:
        last = mems[-1]
        cited = mems[-MAX_WRITES_CITED:]
        out.append(
            {
                "path": path,
                "change": "; ".join(_change(m) for m in cited),
                "writes": len(mems),
                "reason": reason_of(last.call_id, calls_by_id, messages_by_id) or NONE_RECORDED,
                "memory_ids": [m.id for m in cited],
                "artifact_ids": [a for m in cited for a in m.source_artifact_ids],
            }
        )
    return out, len(items) - len(kept)
