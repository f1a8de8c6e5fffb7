"""The retrieval routes of seed 001 §4.5, each a small module behind one interface.

A route gets a :class:`RouteContext` (one read transaction on the store, the request's
scope, conversation and lineage) and a :class:`~contextledger.retrieval.model.RetrievalQuery`
and returns at most ``limit`` :class:`~contextledger.retrieval.model.RouteHit`, best
first, from the lineage only.  Each route's work is bounded by its own limits (index
ranges with a ``LIMIT``, a bounded vector scan), whatever the history length.  A route
that cannot run raises :class:`RouteUnavailable` with the reason; the router reports it
and goes on with the others.

=============  ===========================================================  =====================
route          finds                                                        module
=============  ===========================================================  =====================
``recent``     the newest user/assistant messages and memories              :mod:`.recent`
``rules``      project rules whose path scope or words match                :mod:`.rules`
``keyword``    records sharing code-aware tokens (full-text index, BM25)    :mod:`.keyword`
``semantic``   records whose embedding is nearest the query's (cosine)      :mod:`.semantic`
``artifact``   records named by id, ``sha256``, or file path                :mod:`.lookup`
``memory``     memories sharing rare content terms (the term index)         :mod:`.memory`
``graph``      neighbours of the best hits: provenance, supersession,       :mod:`.graph`
               conflicts, same file
=============  ===========================================================  =====================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from contextledger.store.counters import in_lineage

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from contextledger.retrieval.embed import Encoder
    from contextledger.retrieval.model import RetrievalQuery, RouteHit
    from contextledger.store.base import LineageSegment, Scope
    from contextledger.store.reads import LineageReads
    from contextledger.store.sql import SqlStore

__all__ = ["Route", "RouteContext", "RouteUnavailable"]


class RouteUnavailable(Exception):
    """The route cannot run for this request; ``str(exc)`` says why."""


@dataclass(kw_only=True)
class RouteContext:
    """What every route reads through: one read transaction and the request's scope."""

    store: SqlStore
    conn: Connection
    reads: LineageReads
    scope: Scope
    conversation_id: str
    segments: list[LineageSegment]
    encoder: Encoder | None = None
    seeds: list[tuple[str, str]] = field(default_factory=list)
    """``(record_kind, record_id)`` of the first-stage fused hits, best first (the graph
    route starts from them)."""
    exclude: frozenset[str] = frozenset()
    """Ids no route returns (the assembler's candidates already): dropped before a
    route cuts its list, so they never take a hit's place."""
    kinds: frozenset[str] | None = None
    """Record kinds wanted (``None``: every kind; the assembler asks for ``memory``)."""

    def in_lineage(self, branch_id: str, seq: int) -> bool:
        """Whether a row lies on the request's lineage."""
        return in_lineage(self.segments, branch_id, seq)

    def wanted(self, kind: str, record_id: str) -> bool:
        """Whether a hit of ``kind`` / ``record_id`` may be returned (kind wanted, not
        excluded)."""
        return record_id not in self.exclude and (self.kinds is None or kind in self.kinds)


class Route(Protocol):
    """One retrieval path."""

    name: str

    def run(self, ctx: RouteContext, query: RetrievalQuery, limit: int) -> list[RouteHit]:
        """At most ``limit`` hits from the lineage, best first.

        Raises:
            RouteUnavailable: the route cannot run (reason in the message).
        """
        ...
