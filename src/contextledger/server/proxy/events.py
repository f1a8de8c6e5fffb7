"""What the proxy did besides assembling: counters and the newest requests it forwarded
untouched.

Kinds (one closed set):

* ``passthrough`` — a request the proxy could not assemble, forwarded as the client sent
  it (the service log has a warning line, the response an ``x-contextledger-passthrough``
  header);
* ``side_call`` — a client's utility request recognised by :mod:`.side_calls` (title,
  quota probe …), forwarded untouched and not recorded as a conversation;
* ``count_tokens`` — a token count answered for the assembled request (:mod:`.probes`);
* ``probe`` — a ``HEAD`` / ``GET`` of the service root answered for a provider client.

Beside them, per dialect: the requests forwarded in shadow mode (:mod:`.shadow`; never a
passthrough) and the upstream's reported tokens (:mod:`.usage`: input, cache read,
cache write, output).

The counts are per worker process (``/healthz``, ``/metrics``); the newest
:data:`RECENT_MAX` passthroughs and side calls of each tenant are kept for the inspector.
Nothing of a request's content is kept, only its dialect, path and reason.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import FastAPI, Request

__all__ = ["KINDS", "RECENT_MAX", "TOKEN_KINDS", "ProxyEvent", "ProxyEvents", "events_of", "note"]

Kind = Literal["passthrough", "side_call", "count_tokens", "probe"]
KINDS: tuple[Kind, ...] = ("passthrough", "side_call", "count_tokens", "probe")
RECENT_MAX = 100
"""Passthroughs and side calls kept per tenant for the inspector (newest first)."""

TOKEN_KINDS: tuple[str, ...] = ("input", "cache_read", "cache_write", "output")
"""The upstream token counters, each the sum of one :data:`~.usage.USAGE_FIELDS` count."""
_TOKEN_FIELDS = dict(zip(TOKEN_KINDS, ("input_tokens", "cached_read_tokens", "cache_write_tokens", "output_tokens"), strict=True))

_SHOWN = frozenset({"passthrough", "side_call"})


@dataclass(frozen=True, kw_only=True)
class ProxyEvent:
    """One request the proxy forwarded without recording it as a conversation turn.

    Attributes:
        kind: one of :data:`KINDS`.
        dialect: the wire format (``"anthropic"``, ``"openai-responses"`` …).
        path: the request path (``/v1/messages``).
        reason: why (at most 200 characters; never request content).
        at_utc: when it was forwarded.
    """

    kind: Kind
    dialect: str
    path: str
    reason: str
    at_utc: datetime


class ProxyEvents:
    """Thread-safe counters by ``(kind, dialect)`` and the recent passthroughs / side
    calls of each tenant."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()
        self._recent: dict[str, deque[ProxyEvent]] = {}
        self._shadow: Counter[str] = Counter()
        self._tokens: Counter[tuple[str, str]] = Counter()

    def add(self, tenant: str | None, event: ProxyEvent) -> None:
        """Count ``event``; keep it for ``tenant``'s inspector when it is a passthrough
        or a side call (``tenant`` ``None``: counted only)."""
        with self._lock:
            self._counts[(event.kind, event.dialect)] += 1
            if tenant is not None and event.kind in _SHOWN:
                self._recent.setdefault(tenant, deque(maxlen=RECENT_MAX)).appendleft(event)

    def counts(self) -> dict[str, int]:
        """Totals by kind (every kind present, 0 when none)."""
        with self._lock:
            totals: dict[str, int] = dict.fromkeys(KINDS, 0)
            for (kind, _dialect), n in self._counts.items():
                totals[kind] += n
            return totals

    def by_dialect(self) -> list[tuple[str, str, int]]:
        """``(kind, dialect, count)`` sorted by kind then dialect."""
        with self._lock:
            return sorted((k, d, n) for (k, d), n in self._counts.items())

    def add_shadow(self, dialect: str) -> None:
        """Count one request of ``dialect`` forwarded in shadow mode."""
        with self._lock:
            self._shadow[dialect] += 1

    def shadow_counts(self) -> dict[str, int]:
        """Shadow forwards by dialect."""
        with self._lock:
            return dict(sorted(self._shadow.items()))

    def add_usage(self, dialect: str, usage: dict[str, Any]) -> None:
        """Add an answer's normalised usage (:func:`~.usage.upstream_usage`) to the token
        counters of ``dialect``."""
        with self._lock:
            for kind, key in _TOKEN_FIELDS.items():
                n = usage.get(key)
                if isinstance(n, int) and n > 0:
                    self._tokens[(kind, dialect)] += n

    def token_counts(self) -> list[tuple[str, str, int]]:
        """``(token kind, dialect, tokens)`` sorted by kind then dialect."""
        with self._lock:
            return sorted((k, d, n) for (k, d), n in self._tokens.items())

    def recent(self, tenant: str) -> list[ProxyEvent]:
        """``tenant``'s newest passthroughs and side calls, newest first."""
        with self._lock:
            return list(self._recent.get(tenant, ()))


_CREATE = threading.Lock()


def events_of(app: FastAPI | Any) -> ProxyEvents:
    """The process's :class:`ProxyEvents` of ``app`` (created on first use)."""
    with _CREATE:
        found = getattr(app.state, "proxy_events", None)
        if not isinstance(found, ProxyEvents):
            found = app.state.proxy_events = ProxyEvents()
        return found


def note(request: Request, kind: Kind, dialect: str, reason: str, *, tenant: str | None = None) -> None:
    """Record one event of ``request`` (``tenant`` default: the tenant the proxy resolved
    for it, ``request.state.tenant``)."""
    owner = tenant if tenant is not None else getattr(request.state, "tenant", None)
    event = ProxyEvent(kind=kind, dialect=dialect, path=request.url.path, reason=reason[:200], at_utc=datetime.now(UTC))
    events_of(request.app).add(owner if isinstance(owner, str) else None, event)
