"""Link a newly written memory to earlier memories about the same subject, inside the
write transaction (seed 000 §4.7–4.8; seed 001 §6 problem 3).

* A file write/edit makes every earlier read of that path *stale* (their content is not
  current code) — a search inside that one file counts as a read; a later read of the
  same line range (same search pattern) with a different content hash does the same
  (reads of different ranges hash different text and are not compared).
* A newer observation of the same subject (same file read again with the same hash, the
  same test command, search pattern or API object) *supersedes* the older one:
  ``new.supersedes += old.id`` and ``old.superseded_by = new.id`` — never the reverse.
* Provenance rank decides: a lower-ranked memory never supersedes a higher-ranked one; the
  two are linked as a conflict instead (:func:`contextledger.memory.links.resolve_write`).

Only the subject index is queried (``tool_memories.subject_key``), so linking costs one
indexed read per recorded result.
"""

from __future__ import annotations

from contextledger.memory.links import (
    add_conflict,
    annotate_test_file_versions,
    resolve_write,
    supersede,
)
from contextledger.records.enums import ResolutionState
from contextledger.records.models import ToolMemory
from contextledger.store.base import LineageSegment, Scope
from contextledger.store.sql import SqlStore, Writer

__all__ = ["link_on_write"]

_WRITE_KINDS = {"file_write"}
_READ_KINDS = {"file_read", "file_search"}


def _kind(m: ToolMemory) -> str:
    return str(m.payload.get("kind") or m.payload.get("extractor") or "")


def _hash(m: ToolMemory) -> str | None:
    h = m.payload.get("content_sha256") or m.payload.get("content_hash") or m.payload.get("new_content_hash")
    return str(h) if h else None


def link_on_write(store: SqlStore, w: Writer, scope: Scope, new: ToolMemory) -> None:
    """Update links between ``new`` (already inserted) and earlier memories of its subject
    on the same lineage, and tie a test run to the file versions it ran against.  Writes
    through ``w`` (same transaction)."""
    if not new.subject_key:
        return
    segments = store.lineage(scope, new.branch_id, conn=w.conn)
    if _kind(new) == "test_run":
        new = _tie_file_versions(store, w, scope, new, segments)
    subject = new.subject_key
    if subject is None:
        return
    earlier = [m for m in store.memories(scope, new.conversation_id, segments, subject_keys=[subject], conn=w.conn) if m.seq < new.seq and m.id != new.id]
    if not earlier:
        return
    current = new
    new_kind = _kind(new)
    for old in sorted(earlier, key=lambda m: (m.seq, m.id)):
        if old.superseded_by is not None or old.resolution_state is ResolutionState.SUPERSEDED:
            continue
        old_kind = _kind(old)
        # the same view of the file: same line range, and for a search inside the file
        # the same pattern (reads have none)
        same_range = new.payload.get("line_range") == old.payload.get("line_range") and new.payload.get("pattern") == old.payload.get("pattern")
        if old_kind in _READ_KINDS and (new_kind in _WRITE_KINDS or (new_kind in _READ_KINDS and same_range and _hash(new) != _hash(old))):
            if old.resolution_state is not ResolutionState.STALE:
                w.update_memory(old.model_copy(update={"resolution_state": ResolutionState.STALE, "limits": _append(old.limits, f"file changed later ({new.id})")}))
            continue
        if old_kind != new_kind or (new_kind in _READ_KINDS and not same_range):
            continue
        if resolve_write(current, old) == "supersede":
            current, updated_old = supersede(current, old)
        else:
            current, updated_old = add_conflict(current, old)
        w.update_memory(updated_old)
    if current is not new:
        w.update_memory(current)


def _tie_file_versions(store: SqlStore, w: Writer, scope: Scope, new: ToolMemory, segments: list[LineageSegment]) -> ToolMemory:
    """Record on a test-run memory the file versions known when it ran (seed 001 §6
    problem 3): one indexed read of the lineage's file memories (newest 200)."""
    files = store.memories(scope, new.conversation_id, segments, subject_prefix="file:", last=200, conn=w.conn)
    tied = annotate_test_file_versions([*[m for m in files if m.seq < new.seq], new])[-1]
    if tied.payload != new.payload:
        w.update_memory(tied)
    return tied


def _append(limits: str | None, note: str) -> str:
    return f"{limits}; {note}" if limits else note
