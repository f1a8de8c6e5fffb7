"""Atomic units of history and their renderings.

A *unit* is the smallest piece the budget may keep, shape or drop (issue: a tool exchange
is atomic): a user message, an assistant message without tool calls, or a tool exchange
= one assistant turn with all its parallel calls plus every result for them (results in
call order, linked by call id).  A text-action turn plus its observation is an exchange
too.  Each unit can be rendered raw or shaped (results replaced by their ToolMemory).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TypeVar

from contextledger.records.enums import MessageKind, Role, ToolCallStatus
from contextledger.records.models import Message, ToolArtifact, ToolCall, ToolMemory
from contextledger.tokens import get_tokenizer

__all__ = ["DERIVED_CACHE_SIZE", "Unit", "build_units", "derived", "wire_cost"]

MESSAGE_OVERHEAD_TOKENS = 3
"""Per-message overhead used while selecting (the final count uses the serializer's)."""


@dataclass(kw_only=True)
class Unit:
    """One atomic piece of history.

    Attributes:
        kind: ``"system"``, ``"user"``, ``"assistant"``, ``"exchange"``, ``"observation"``
            (a text action and its observation), ``"runtime"`` (progress, meta and
            session-summary lines: kept in the ledger, never sent) or ``"cut"`` (a result
            whose requesting turn lies before the candidate window).
        messages: the nodes, in order (assistant turn first, then results).
        calls: the turn's tool calls in call order.
        artifacts: call id → artifact.
        memories: artifact id → memory.
    """

    kind: str
    messages: list[Message]
    calls: list[ToolCall] = field(default_factory=list)
    artifacts: dict[str, ToolArtifact] = field(default_factory=dict)
    memories: dict[str, ToolMemory] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The first message's id (stable identity of the unit)."""
        return self.messages[0].id

    @property
    def seq(self) -> int:
        """The first message's sequence number (stable sort key)."""
        return self.messages[0].seq

    @property
    def participant_id(self) -> str | None:
        """Owner of the turn."""
        return self.messages[0].participant_id

    @property
    def unresolved_calls(self) -> list[ToolCall]:
        """Calls still awaiting a result (pending / awaiting approval)."""
        return [c for c in self.calls if c.status.unresolved]

    @property
    def failed_calls(self) -> list[ToolCall]:
        """Calls that failed or were abandoned."""
        return [c for c in self.calls if c.status in (ToolCallStatus.FAILED, ToolCallStatus.ABANDONED)]

    @property
    def is_turn_start(self) -> bool:
        """A user chat message starts a turn."""
        m = self.messages[0]
        return m.role is Role.USER and m.kind == MessageKind.CHAT


def build_units(messages: list[Message], calls_by_message: dict[str, list[ToolCall]], artifacts: dict[str, ToolArtifact], memories: list[ToolMemory]) -> list[Unit]:
    """Group ``messages`` (``seq`` order) into units.

    Result messages are attached to the turn that requested them whatever their position
    (results that arrived in completion order are re-ordered by call order).  System
    messages become ``system`` units; progress/meta/summary lines ``runtime`` units.
    """
    mem_by_art: dict[str, ToolMemory] = {}
    for m in memories:
        for a in m.source_artifact_ids:
            mem_by_art.setdefault(a, m)
    result_owner: dict[str, str] = {}
    for mid, cs in calls_by_message.items():
        for c in cs:
            if c.result_message_id:
                result_owner[c.result_message_id] = mid
    units: list[Unit] = []
    by_key: dict[str, Unit] = {}
    for msg in messages:
        owner = result_owner.get(msg.id)
        if owner is not None and owner in by_key and owner != msg.id:
            by_key[owner].messages.append(msg)
            continue
        if owner is not None and owner != msg.id and owner not in by_key:
            kind = "cut"  # a result whose requesting turn lies before the candidate window
        elif msg.role in (Role.SYSTEM, Role.DEVELOPER):
            kind = "system"
        elif msg.kind in (MessageKind.PROGRESS, MessageKind.META, MessageKind.SUMMARY):
            kind = "runtime"
        elif msg.kind == MessageKind.OBSERVATION:
            kind = "observation"
        elif msg.role is Role.ASSISTANT and calls_by_message.get(msg.id):
            kind = "observation" if all(c.call_id.startswith("obs_") for c in calls_by_message[msg.id]) else "exchange"
        elif msg.role is Role.ASSISTANT:
            kind = "assistant"
        elif msg.role is Role.TOOL:
            kind = "cut"  # a result whose call is not among the candidates
        else:
            kind = "user"
        unit = Unit(kind=kind, messages=[msg])
        cs = calls_by_message.get(msg.id, [])
        if cs:
            unit.calls = sorted(cs, key=lambda c: c.call_index)
        units.append(unit)
        by_key[msg.id] = unit
    for u in units:
        for c in u.calls:
            art = artifacts.get(c.call_id)
            if art is not None:
                u.artifacts[c.call_id] = art
                mem = mem_by_art.get(art.id)
                if mem is not None:
                    u.memories[art.id] = mem
        if len(u.messages) > 1:
            order = {c.result_message_id: c.call_index for c in u.calls if c.result_message_id}
            head, rest = u.messages[0], u.messages[1:]
            u.messages = [head, *sorted(rest, key=lambda m: (order.get(m.id, 10**9), m.seq))]
    return units


def wire_cost(texts: list[str], messages: int) -> int:
    """Selection-time token estimate: o200k tokens of ``texts`` plus per-message overhead."""
    tok = get_tokenizer()
    return sum(tok.count(t) for t in texts) + MESSAGE_OVERHEAD_TOKENS * messages


DERIVED_CACHE_SIZE = 16384
"""Entries kept by :func:`derived` before its table is cleared."""

_T = TypeVar("_T")
_DERIVED: dict[tuple[int, Hashable], tuple[object, object]] = {}


def derived(record: object, what: Hashable, compute: Callable[[], _T]) -> _T:
    """A value derived from one immutable ``record`` (e.g. the eviction key of a memory's
    evidence line), computed once per record object and ``what`` and reused by later
    assemblies: the store hands out the same record object for the same stored bytes
    (``store.codec.decode_body``), and an updated record is a new object, so a reused value is
    never out of date.  ``compute`` must depend only on ``record`` and ``what``.  The
    table holds at most :data:`DERIVED_CACHE_SIZE` entries (then it starts afresh) and
    keeps each record alive while its entry lives, so object ids are not reused."""
    key = (id(record), what)
    hit = _DERIVED.get(key)
    if hit is not None and hit[0] is record:
        return hit[1]  # type: ignore[return-value]
    value = compute()
    if len(_DERIVED) >= DERIVED_CACHE_SIZE:
        _DERIVED.clear()
    _DERIVED[key] = (record, value)
    return value
