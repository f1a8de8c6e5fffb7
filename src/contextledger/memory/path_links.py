"""Staleness across path spellings: a write makes stale the reads of its files filed
under other subject keys (see :mod:`contextledger.memory.paths`)."""

from __future__ import annotations

from collections.abc import Sequence

from contextledger.memory.links import LinkPlan, plan_links
from contextledger.memory.paths import memory_paths, same_file, written_paths
from contextledger.records.models import ToolMemory

__all__ = ["plan_path_staleness"]

_READ_KINDS = frozenset({"file_read", "file_search"})


def plan_path_staleness(new: ToolMemory, earlier: Sequence[ToolMemory]) -> LinkPlan:
    """Make stale the earlier reads of every file ``new`` writes
    (:func:`~contextledger.memory.paths.written_paths`) that are filed under another
    subject key than ``new``'s: the same file spelled the other way
    (:func:`~contextledger.memory.paths.same_file`: ``/repo/auth.py`` read through ``cat -n
    auth.py`` with ``workdir`` ``/repo``, then ``*** Update File: auth.py``), the second
    file of a multi-file patch, a file a shell run rewrote.  ``earlier`` may hold any
    memories; only reads (``file_read`` / ``file_search``) of a written file with
    ``seq < new.seq`` are linked, by the rules and storage of
    :func:`~contextledger.memory.links.plan_links` (audience, lineage)."""
    written = written_paths(new)
    if not written:
        return LinkPlan(new=new, updated=())
    reads = {
        m.id: m for m in earlier
        if m.id != new.id and m.seq < new.seq and m.subject_key != new.subject_key
        and str(m.payload.get("kind") or m.payload.get("extractor") or "") in _READ_KINDS
        and any(same_file(p, q) for p in memory_paths(m) for q in written)
    }
    if not reads:
        return LinkPlan(new=new, updated=())
    return plan_links(new, list(reads.values()))
