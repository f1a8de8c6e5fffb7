"""Link a newly written memory to earlier memories about the same subject, inside the
write transaction (seed 000 §4.7–4.8; seed 001 §6 problem 3).

What is linked (:func:`contextledger.memory.links.plan_links`):

* A file write/edit makes every earlier read of that path *stale* (their content is not
  current code; a failed attempt changes nothing, unless it reports that the file
  changed meanwhile) — a search inside that one file counts as a read, a shell run that wrote
  the file (``files_written``) counts as a write, and the path may be spelled either way
  (``/repo/auth.py`` read, ``auth.py`` patched: :func:`~contextledger.memory.paths.same_file`);
  a later read of the same
  line range (same search pattern) with a different content hash does the same (reads of
  different ranges hash different text and are not compared).
* A newer observation of the same subject (same file read again with the same hash, the
  same test command, search pattern or API object) *supersedes* the older one:
  ``new.supersedes += old.id`` and ``old.superseded_by = new.id`` — never the reverse.
* Provenance rank decides: a lower-ranked memory never supersedes a higher-ranked one; the
  two are linked as a conflict instead (:func:`contextledger.memory.links.resolve_write`).

Who may be linked — audience (seed 000 §4.9; DESIGN.md visibility scopes).  A new
memory links an earlier one only when every viewer of the earlier memory also sees the
new one (:func:`~contextledger.memory.links.reaches`: the visibility scope, owner,
``shared_with_participants`` and promotion of both decide,
:func:`~contextledger.memory.links.audience`).  So a participant-private, audit-only or
unpromoted memory never supersedes or stales a memory others see — they would lose
evidence, or see it marked, because of state they must not know exists — while a shared
memory may supersede a private one (its owner sees both).  A conflict marks both records,
so it needs the same audience on both sides.  A test run is tied only to file versions
its whole audience may see.

Where a link holds — lineage (seed 000 §4.10).  Only memories of the new memory's
branch lineage are considered, and a stored memory is shared by every branch that
inherits it, so a link is written on the earlier record only when both memories lie on
the same branch.  A link to history inherited from an ancestor branch holds on the new
memory's lineage alone; it is kept on the new memory only — its ``supersedes`` /
``conflicts_with`` and, for staleness, its ``payload["makes_stale"]``
(:data:`~contextledger.memory.links.LINEAGE_STALE_KEY`) — and the assembly applies it to
requests whose lineage holds the new memory
(:class:`~contextledger.assembly.families.LineageLinks`).  An edit on a fork therefore
never makes the parent branch's read stale, and a read on a fork never supersedes it.

Only the subject index is queried (``tool_memories.subject_key``), so linking costs one
indexed read per recorded result (plus the lineage's newest 200 file memories for a
test run).  On a branch without inherited history, superseded memories are not read:
:func:`~contextledger.memory.links.plan_links` skips a memory whose successor is on the
lineage, and with one segment every successor is (a link is stored on the earlier
record only when both lie on the same branch) — so the read holds the subject's current,
stale and conflicting memories, not its whole history.
"""

from __future__ import annotations

from contextledger.memory.links import annotate_test_file_versions, plan_links, reaches
from contextledger.memory.path_links import plan_path_staleness
from contextledger.memory.paths import path_alias_keys, written_paths
from contextledger.records.models import ToolMemory
from contextledger.store.base import LineageSegment, Scope
from contextledger.store.sql import SqlStore, Writer

__all__ = ["link_on_write"]


def _kind(m: ToolMemory) -> str:
    return str(m.payload.get("kind") or m.payload.get("extractor") or "")


def link_on_write(store: SqlStore, w: Writer, scope: Scope, new: ToolMemory) -> None:
    """Update links between ``new`` (already inserted) and earlier memories of its subject
    on the same lineage (rules in the module docstring), tie a test run to the file
    versions it ran against, and make stale the reads of every file ``new`` writes under
    another spelling (:func:`_link_written_files`).  Writes through ``w`` (same
    transaction)."""
    if not new.subject_key and not written_paths(new):
        return
    segments = store.lineage(scope, new.branch_id, conn=w.conn)
    if _kind(new) == "test_run":
        new = _tie_file_versions(store, w, scope, new, segments)
    subject = new.subject_key
    if subject is not None:
        # one segment (no inherited history): a superseded memory's successor is on this
        # branch, so the planner skips it whatever it holds — it is not read (a test
        # command run a thousand times reads its newest run, not a thousand)
        found = store.memories(scope, new.conversation_id, segments, subject_keys=[subject], unsuperseded=len(segments) == 1, conn=w.conn)
        earlier = [m for m in found if m.seq < new.seq and m.id != new.id]
        if earlier:
            plan = plan_links(new, earlier)
            for old in plan.updated:
                w.update_memory(old)
            if plan.new is not new:
                w.update_memory(plan.new)
            new = plan.new
    _link_written_files(store, w, scope, new, segments)


FILE_SCAN = 200
"""Newest file memories of the lineage scanned for absolute spellings of a relative
written path (:func:`_link_written_files`)."""


def _link_written_files(store: SqlStore, w: Writer, scope: Scope, new: ToolMemory, segments: list[LineageSegment]) -> None:
    """Reads of the files ``new`` writes filed under other subject keys
    (:func:`~contextledger.memory.path_links.plan_path_staleness`): found by the indexed
    subject keys of every listable spelling (:func:`~contextledger.memory.paths.
    path_alias_keys`) plus the lineage's newest :data:`FILE_SCAN` file memories (where a
    relative path's absolute spellings are)."""
    written = written_paths(new)
    if not written:
        return
    keys = [k for k in path_alias_keys(written) if k != new.subject_key]
    found = store.memories(scope, new.conversation_id, segments, subject_keys=keys, conn=w.conn) if keys else []
    if any(not p.startswith("/") for p in written):
        found += store.memories(scope, new.conversation_id, segments, subject_prefix="file:", last=FILE_SCAN, conn=w.conn)
    plan = plan_path_staleness(new, found)
    for old in plan.updated:
        w.update_memory(old)
    if plan.new is not new:
        w.update_memory(plan.new)


def _tie_file_versions(store: SqlStore, w: Writer, scope: Scope, new: ToolMemory, segments: list[LineageSegment]) -> ToolMemory:
    """Record on a test-run memory the file versions known when it ran (seed 001 §6
    problem 3): one indexed read of the lineage's file memories (newest 200), of which
    only those every viewer of the run may see count (a private read's hash or id never
    reaches a shared run's payload)."""
    files = store.memories(scope, new.conversation_id, segments, subject_prefix="file:", last=200, conn=w.conn)
    tied = annotate_test_file_versions([*[m for m in files if m.seq < new.seq and reaches(m, new)], new])[-1]
    if tied.payload != new.payload:
        w.update_memory(tied)
    return tied
