"""Compaction: old history folded into a handoff document, raw recent tail kept beside it.

DESIGN.md "Compaction"; seed 001 §4.6 (Compression), §6 problem 5 and §10.

* :mod:`.handoff` — the template (:data:`HANDOFF_SECTIONS`), :func:`validate_handoff`,
  :func:`render_handoff`;
* :mod:`.boundary` — where the raw recent tail starts;
* :mod:`.sections` — deterministic section builders over graph records;
* :mod:`.build` — :func:`build_handoff` (read-only) and :func:`latest_compaction`;
* :mod:`.api` — :func:`compact`, which writes one compaction message.
"""

from contextledger.compaction.api import (
    DEFAULT_KEEP_RECENT_UNITS,
    Compaction,
    HandoffSummarizer,
    add_prose,
    compact,
    document_of,
)
from contextledger.compaction.boundary import Boundary, find_boundary
from contextledger.compaction.build import HandoffPlan, build_handoff, latest_compaction
from contextledger.compaction.handoff import (
    HANDOFF_FORMAT,
    HANDOFF_SECTIONS,
    NONE_RECORDED,
    HandoffError,
    render_handoff,
    validate_handoff,
)

__all__ = [
    "DEFAULT_KEEP_RECENT_UNITS",
    "HANDOFF_FORMAT",
    "HANDOFF_SECTIONS",
    "NONE_RECORDED",
    "Boundary",
    "Compaction",
    "HandoffError",
    "HandoffPlan",
    "HandoffSummarizer",
    "add_prose",
    "build_handoff",
    "compact",
    "document_of",
    "find_boundary",
    "latest_compaction",
    "render_handoff",
    "validate_handoff",
]
