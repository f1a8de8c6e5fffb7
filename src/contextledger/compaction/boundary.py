"""Where a compaction ends: the raw recent tail it leaves beside the summary.

Seed 001 §6 problem 5: after a compaction the last few rounds stay raw ("要約は本筋を、
直近の末尾は現場感覚を保持する").  History is grouped into the assembler's atomic units
(:func:`contextledger.assembly.units.build_units`: a user message, an assistant reply, or
a tool exchange with all its results); the last ``keep_recent_units`` *conversational*
units (kinds ``user``, ``assistant``, ``exchange``, ``observation``) stay raw and every
unit before them is covered.  System units are never covered (the assembler always
emits trusted system text separately); runtime lines and earlier compaction messages
are covered when they lie before the tail, but never counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contextledger.assembly.units import Unit, build_units
from contextledger.errors import InputError
from contextledger.records.enums import MessageKind
from contextledger.records.models import Message, ToolCall

__all__ = ["CONVERSATIONAL_UNIT_KINDS", "Boundary", "find_boundary"]

CONVERSATIONAL_UNIT_KINDS = frozenset({"user", "assistant", "exchange", "observation"})
"""Unit kinds counted by ``keep_recent_units``."""


@dataclass(frozen=True, kw_only=True)
class Boundary:
    """The split between the covered history and the raw tail.

    Attributes:
        from_seq / to_seq: inclusive sequence range the compaction covers; a unit is
            covered when its first message's ``seq`` (``Unit.seq``) is ≤ ``to_seq``.
        covered: the covered non-system units, in order.
        kept: the conversational units left raw (``len(kept) <= keep_recent_units``).
    """

    from_seq: int
    to_seq: int
    covered: tuple[Unit, ...]
    kept: tuple[Unit, ...]

    @property
    def covered_message_ids(self) -> frozenset[str]:
        """Ids of every message of the covered units (results included)."""
        return frozenset(m.id for u in self.covered for m in u.messages)

    @property
    def covered_call_ids(self) -> frozenset[str]:
        """Provider call ids of the covered units' tool calls."""
        return frozenset(c.call_id for u in self.covered for c in u.calls)


def find_boundary(messages: Sequence[Message], calls: Sequence[ToolCall], keep_recent_units: int) -> Boundary:
    """Split a lineage's history (``seq`` order) into covered units and a raw tail.

    Compaction messages (kind ``compaction``) are not grouped into units.

    Raises:
        InputError: ``keep_recent_units`` is negative, or no conversational unit would be
            covered (nothing to compact).
    """
    if keep_recent_units < 0:
        raise InputError(f"keep_recent_units must be >= 0, got {keep_recent_units}")
    history = [m for m in messages if m.kind != MessageKind.COMPACTION]
    by_message: dict[str, list[ToolCall]] = {}
    for c in calls:
        by_message.setdefault(c.message_id, []).append(c)
    units = build_units(history, by_message, {}, [])
    talk = [u for u in units if u.kind in CONVERSATIONAL_UNIT_KINDS]
    if len(talk) <= keep_recent_units:
        raise InputError(
            f"nothing to compact: the lineage has {len(talk)} conversational units and "
            f"keep_recent_units={keep_recent_units} keeps them all raw"
        )
    kept = talk[len(talk) - keep_recent_units :] if keep_recent_units else []
    to_seq = kept[0].seq - 1 if kept else max(m.seq for m in history)
    covered = tuple(u for u in units if u.kind != "system" and u.seq <= to_seq)
    from_seq = min(m.seq for m in history)
    return Boundary(from_seq=from_seq, to_seq=to_seq, covered=covered, kept=tuple(kept))
