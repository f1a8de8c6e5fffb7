"""The ``verified_facts`` section: current memories other than file reads and writes.

A passing test run is a verified fact whatever the clock says (what it verified is
invalidated by a newer run or a change, never by its age): the section never says
``none recorded`` beside a latest verification that passed."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from contextledger.compaction.sections.common import FILE_KINDS, by_seq, first_line, memory_kind
from contextledger.compaction.sections.failures import failed_payload
from contextledger.memory.freshness import is_stale
from contextledger.records.enums import ResolutionState, ToolCallStatus
from contextledger.records.models import ToolMemory

__all__ = ["MAX_FACTS", "verified_facts"]

MAX_FACTS = 25
"""Newest verified facts kept; older ones are counted in ``omitted``."""


def _structurally_current(mem: ToolMemory) -> bool:
    return (
        mem.superseded_by is None
        and mem.resolution_state in (ResolutionState.CURRENT, ResolutionState.REPAIRED)
        and mem.status is ToolCallStatus.SUCCEEDED
    )


def _passing_test(mem: ToolMemory) -> bool:
    """A test run whose output says it passed, neither superseded nor marked stale."""
    return (
        memory_kind(mem) == "test_run"
        and str(mem.payload.get("status") or "") == "passed"
        and mem.superseded_by is None
        and mem.resolution_state in (ResolutionState.CURRENT, ResolutionState.REPAIRED)
    )


def verified_facts(
    covered: Sequence[ToolMemory], now: datetime
) -> tuple[list[dict[str, Any]], int]:
    """Current facts with their sources, newest :data:`MAX_FACTS` in seq order, and how
    many current facts were left out.  Passing test runs count whatever their age (see
    the module docstring)."""
    facts = [
        m
        for m in by_seq(covered)
        if memory_kind(m) not in FILE_KINDS
        and (_passing_test(m) or (_structurally_current(m) and not failed_payload(m) and not is_stale(m, now)))
    ]
    kept = facts[-MAX_FACTS:]
    return (
        [
            {
                "fact": first_line(m),
                "tool": m.source_tool,
                "memory_id": m.id,
                "seq": m.seq,
                "source_refs": [m.id, *m.source_artifact_ids],
            }
            for m in kept
        ],
        len(facts) - len(kept),
    )
