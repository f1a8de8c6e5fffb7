"""Freshness: when a tool memory stops being current (seed 000 §4.7, §8 R5).

Default time-to-live per freshness class.  These are *defaults*, chosen for coding and
assistant agents, overridable per class (``overrides``) and per tool (``tool_overrides``,
which wins over both):

==============  ===========  ===========================================================
class           default TTL  typical evidence (seed 000 §4.7)
==============  ===========  ===========================================================
volatile        5 minutes    unread counts, availability, search ranking, web search
session         12 hours     working files, working directory, command and test output
time_bounded    24 hours     CRM records, thread summaries, API snapshots
durable         90 days      generated-file metadata, citations, provider entity ids
permanent       never        immutable document versions, stored artifact identities
==============  ===========  ===========================================================

Boundary rule: a memory is stale when ``now >= deadline`` (the deadline itself is already
stale); one microsecond before it, it is current.  The deadline is measured from the last
*verification* (``verified_at``) when there is one, else from ``observed_at`` — never from
the last time it was read or rendered.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from contextledger.errors import InputError
from contextledger.records.enums import FreshnessClass, ResolutionState
from contextledger.records.models import ToolMemory

__all__ = [
    "DEFAULT_STALE_AFTER",
    "age_text",
    "age_text_at",
    "epoch_us",
    "format_age",
    "format_seconds",
    "is_stale",
    "memory_times_us",
    "stale_after_for",
    "staleness_deadline",
    "ttl_for",
]

DEFAULT_STALE_AFTER: Mapping[FreshnessClass, timedelta | None] = {
    FreshnessClass.VOLATILE: timedelta(minutes=5),
    FreshnessClass.SESSION: timedelta(hours=12),
    FreshnessClass.TIME_BOUNDED: timedelta(hours=24),
    FreshnessClass.DURABLE: timedelta(days=90),
    FreshnessClass.PERMANENT: None,
}
"""Default time-to-live per class (``None`` = never stale)."""


def _require_aware(value: datetime, name: str) -> None:
    if value.tzinfo is None or value.utcoffset() is None:
        raise InputError(f"{name} must be a timezone-aware datetime, got {value!r}")


def ttl_for(
    freshness_class: FreshnessClass,
    overrides: Mapping[FreshnessClass, timedelta | None] | None = None,
    tool_name: str | None = None,
    tool_overrides: Mapping[str, timedelta | None] | None = None,
) -> timedelta | None:
    """The time-to-live that applies: tool override > class override > default."""
    if tool_name is not None and tool_overrides and tool_name in tool_overrides:
        return tool_overrides[tool_name]
    if overrides and freshness_class in overrides:
        return overrides[freshness_class]
    return DEFAULT_STALE_AFTER[freshness_class]


def stale_after_for(
    freshness_class: FreshnessClass,
    observed_at: datetime,
    overrides: Mapping[FreshnessClass, timedelta | None] | None = None,
    tool_name: str | None = None,
    tool_overrides: Mapping[str, timedelta | None] | None = None,
) -> datetime | None:
    """The instant an observation made at ``observed_at`` becomes stale, or ``None``.

    Raises:
        InputError: ``observed_at`` is naive (no timezone).
    """
    _require_aware(observed_at, "observed_at")
    ttl = ttl_for(freshness_class, overrides, tool_name, tool_overrides)
    return None if ttl is None else observed_at + ttl


def staleness_deadline(memory: ToolMemory) -> datetime | None:
    """When ``memory`` goes stale: its TTL (``stale_after - observed_at``) counted from
    ``verified_at`` when set, else ``stale_after`` itself; ``None`` = never."""
    if memory.stale_after is None:
        return None
    if memory.verified_at is None:
        return memory.stale_after
    return memory.verified_at + (memory.stale_after - memory.observed_at)


def is_stale(memory: ToolMemory, now: datetime) -> bool:
    """True when ``memory`` is no longer current at ``now``.

    A memory whose resolution state is ``stale`` (set by a file write or a failed
    provenance repair) is stale whatever its clock says; otherwise it is stale when
    ``now >= staleness_deadline(memory)``.

    Raises:
        InputError: ``now`` is naive.
    """
    _require_aware(now, "now")
    if memory.resolution_state == ResolutionState.STALE:
        return True
    deadline = staleness_deadline(memory)
    return deadline is not None and now >= deadline


def format_age(delta: timedelta) -> str:
    """``"45 s"``, ``"12 min"``, ``"3 h 12 min"``, ``"2 d 4 h"`` (whole units, rounded down)."""
    return format_seconds(int(delta.total_seconds()))


def format_seconds(seconds: int) -> str:
    """:func:`format_age` of a whole number of seconds (≥ 0)."""
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def epoch_us(at: datetime) -> int:
    """Microseconds since 1970-01-01T00:00Z of an aware datetime (exact integer)."""
    return (at - _EPOCH) // _MICROSECOND


def memory_times_us(memory: ToolMemory) -> tuple[int, int | None, int | None]:
    """``(observed, verified, stale deadline)`` of ``memory`` in :func:`epoch_us`
    microseconds (``None`` when unset / never stale): what its age texts are made of."""
    deadline = staleness_deadline(memory)
    return (
        epoch_us(memory.observed_at),
        epoch_us(memory.verified_at) if memory.verified_at is not None else None,
        epoch_us(deadline) if deadline is not None else None,
    )


def age_text_at(observed_us: int, verified_us: int | None, now_us: int) -> str:
    """:func:`age_text` from :func:`epoch_us` microseconds (whole seconds, rounded down)."""

    def part(label: str, at_us: int) -> str:
        d = now_us - at_us
        if d < 0:
            return f"{label} {format_seconds(-d // 1_000_000)} in the future"
        return f"{label} {format_seconds(d // 1_000_000)} ago"

    observed = part("observed", observed_us)
    if verified_us is None:
        return observed
    return f"{part('verified', verified_us)} ({observed})"


def age_text(memory: ToolMemory, now: datetime) -> str:
    """How old ``memory`` is at ``now``: ``"observed 3 h 12 min ago"``, or
    ``"verified 10 min ago (observed 3 h 12 min ago)"`` once re-verified.

    Raises:
        InputError: ``now`` is naive.
    """
    _require_aware(now, "now")
    observed_us, verified_us, _ = memory_times_us(memory)
    return age_text_at(observed_us, verified_us, epoch_us(now))
