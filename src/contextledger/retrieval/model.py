"""The retrieval router's records: a query, a route's ranked list, a fused hit, and the
result of one search — the explanation format recorded in a ContextAssembly and shown
by ``contextledger search`` (per hit: its routes with their ranks, each route's own
score, and the fused reciprocal-rank score; seed 001 §4.5, §9 "Retrieval Router").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Hit", "RetrievalQuery", "RetrievalResult", "RouteHit", "RouteReport"]


def rank_score(lead_value: int, fused_score: float) -> float:
    """The score hits are ordered by: ``lead + fused_score``.  A fused score stays below
    1 (``Σ w / (k + 1)`` with the routes' weights summing to less than ``k + 1``), so the
    lead decides first and the fused score within a lead — the order and the score shown
    always agree."""
    return lead_value + fused_score


@dataclass(frozen=True, kw_only=True)
class RetrievalQuery:
    """What to recall.

    Attributes:
        text: the natural-language request (the current user input): embedded for the
            semantic route, tokenised for the keyword routes.
        context: further keyword material — task state, the tool names and arguments
            of unresolved calls — tokenised but not embedded.
        vector_of: id of a stored record whose vector *is* the query's (the current
            user message, embedded when it was recorded): no model call at query time.
        paths: file paths the request is about (artifact lookup, path-scoped rules).
    """

    text: str
    context: str = ""
    vector_of: str | None = None
    paths: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class RouteHit:
    """One record a route found: ``score`` is the route's own (BM25, cosine, rarity …;
    higher is better); the rank is the position in the route's list.  ``exact``: the
    record holds a code identifier of the query whole (keyword route,
    :func:`~contextledger.retrieval.text.identifier_tokens`), or the query names the
    record itself — by id, handle, tool call id or digest (artifact route).
    ``confident``: the route is sure of this hit — a keyword hit whose matched terms
    carry most of the query's information
    (:data:`~contextledger.retrieval.routes.keyword.CONFIDENT_SHARE`), a semantic best
    hit standing clear of the runner-up
    (:func:`~contextledger.retrieval.routes.semantic.lead_margin`); routes that do not
    grade their hits leave it ``True``."""

    record_kind: str
    record_id: str
    score: float
    exact: bool = False
    confident: bool = True


@dataclass(frozen=True, kw_only=True)
class Hit:
    """One recalled record after fusion and the boundary checks.

    Attributes:
        record_kind: ``"memory"``, ``"message"`` or ``"rule"``.
        record_id: its id.
        fused_score: ``Σ w / (k + rank)`` over the routes that found it (k = 60).
        lead: 3 named exactly by the query, 2 a full-weight route's confident best hit, 1 holding
            a query identifier whole, 0 the rest
            (:func:`~contextledger.retrieval.fusion.lead`).
        ranks: route name → 1-based rank in that route's list.
        scores: route name → the route's own score.
        text: the record's model-facing text (memory summary, message text, rule).
        stale: a memory past its freshness window (shown marked, never as current).
        branch_id, seq: where the record lies in the conversation.
        excerpt: for a memory, the head of its raw result (at most 400 characters) when
            the result is stored inline and may be shown raw (privacy, retention).
    """

    record_kind: str
    record_id: str
    fused_score: float
    ranks: dict[str, int]
    scores: dict[str, float]
    text: str = ""
    stale: bool = False
    branch_id: str | None = None
    seq: int | None = None
    excerpt: str = ""
    lead: int = 0

    @property
    def score(self) -> float:
        """What hits are ordered by, best first: ``lead + fused_score``
        (:func:`~contextledger.retrieval.fusion.rank_score`)."""
        return rank_score(self.lead, self.fused_score)

    @property
    def handle(self) -> str:
        """The name a payload gives the record: ``m12`` for a memory
        (:mod:`contextledger.handles`), ``message 12`` for a message (the cut marker's
        ``(message 12)``), ``""`` for a rule or when the position is unknown."""
        from contextledger.handles import record_handle

        return record_handle(self.record_kind, self.seq)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (routes sorted by name)."""
        return {
            "record_kind": self.record_kind,
            "record_id": self.record_id,
            "handle": self.handle,
            "score": round(self.score, 6),
            "lead": self.lead,
            "fused_score": round(self.fused_score, 6),
            "routes": sorted(self.ranks),
            "ranks": dict(sorted(self.ranks.items())),
            "scores": {k: round(v, 6) for k, v in sorted(self.scores.items())},
            "stale": self.stale,
            "branch_id": self.branch_id,
            "seq": self.seq,
            "text": self.text,
            "excerpt": self.excerpt,
        }


@dataclass(frozen=True, kw_only=True)
class RouteReport:
    """What one route did: hits returned, milliseconds, or why it did not run."""

    name: str
    hits: int = 0
    duration_ms: float = 0.0
    unavailable: str | None = None


@dataclass(kw_only=True)
class RetrievalResult:
    """The result of one search.

    Attributes:
        hits: fused, boundary-checked hits, best first.
        routes: one report per route of the router (ran or unavailable, and why).
        withheld: records found by a route but refused by a boundary, by reason
            (``out_of_lineage``, ``participant_private``, ``audit_only``,
            ``not_promoted``, ``privacy_restricted``, ``superseded``, ``missing``).
        rrf_k: the reciprocal-rank constant.
        exact: ``(record_kind, record_id)`` of the keyword hits holding a code
            identifier of the query whole (:func:`~contextledger.retrieval.fusion.lead`).
        named: ``(record_kind, record_id)`` of the records the query names exactly (by
            id, handle, tool call id or digest: the artifact route's exact hits).
        weights: the fusion weights of this query, route name → weight
            (:func:`~contextledger.retrieval.fusion.query_weights`).
        tops: ``(record_kind, record_id)`` of the confident best hits of the full-weight
            routes — the records of lead 2 (:func:`~contextledger.retrieval.fusion.tops`).
    """

    query: str
    hits: list[Hit] = field(default_factory=list)
    routes: list[RouteReport] = field(default_factory=list)
    withheld: dict[str, int] = field(default_factory=dict)
    rrf_k: int = 60
    exact: frozenset[tuple[str, str]] = frozenset()
    named: frozenset[tuple[str, str]] = frozenset()
    weights: dict[str, float] = field(default_factory=dict)
    tops: frozenset[tuple[str, str]] = frozenset()

    @property
    def routes_used(self) -> list[str]:
        """Names of the routes that ran."""
        return [r.name for r in self.routes if r.unavailable is None]

    @property
    def degraded(self) -> dict[str, str]:
        """Routes that could not run → why (e.g. ``semantic``: the extra is missing)."""
        return {r.name: r.unavailable for r in self.routes if r.unavailable is not None}

    def to_json(self) -> dict[str, Any]:
        """The explanation recorded in a ContextAssembly (``retrieval``) and printed by
        ``contextledger search --json``."""
        return {
            "query": self.query,
            "rrf_k": self.rrf_k,
            "routes_used": self.routes_used,
            "degraded": self.degraded,
            "routes": [
                {"name": r.name, "hits": r.hits, "duration_ms": round(r.duration_ms, 3), **({"unavailable": r.unavailable} if r.unavailable else {})}
                for r in self.routes
            ],
            "withheld": dict(sorted(self.withheld.items())),
            "hits": [h.to_json() for h in self.hits],
        }
