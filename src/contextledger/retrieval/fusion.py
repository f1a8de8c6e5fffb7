"""Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009): a record's fused
score is ``Σ_routes w / (k + rank)`` with ranks from 1, ``k`` = 60 and ``w`` = 1 (the
common defaults: Elasticsearch ``rank_constant``, LanceDB ``RRFReranker``).  Ties are
broken by the number of routes, then the record id, so fusion is deterministic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set

from contextledger.retrieval.model import RouteHit, rank_score

__all__ = ["LEADS", "RRF_K", "Fused", "fuse", "lead", "lead_with_tops", "rank_score"]

RRF_K = 60
"""The rank constant ``k``."""

Fused = tuple[str, str, float, dict[str, int], dict[str, float]]
"""``(record_kind, record_id, fused_score, ranks by route, scores by route)``."""


def fuse(lists: Mapping[str, Sequence[RouteHit]], *, k: int = RRF_K, weights: Mapping[str, float] | None = None) -> list[Fused]:
    """Fuse the ranked lists of several routes (route name → hits, best first; a record
    listed twice by one route counts at its best rank).  Returns every record found,
    best first."""
    acc: dict[tuple[str, str], tuple[float, dict[str, int], dict[str, float]]] = {}
    for route, hits in sorted(lists.items()):
        w = 1.0 if weights is None else weights.get(route, 1.0)
        for rank, h in enumerate(hits, start=1):
            key = (h.record_kind, h.record_id)
            score, ranks, scores = acc.get(key, (0.0, {}, {}))
            if route in ranks:
                continue
            ranks[route] = rank
            scores[route] = h.score
            acc[key] = (score + w / (k + rank), ranks, scores)
    out = [(kind, rid, s, ranks, scores) for (kind, rid), (s, ranks, scores) in acc.items()]
    out.sort(key=lambda f: (-f[2], -len(f[3]), f[0], f[1]))
    return out


LEADS = 3
"""The highest lead (:func:`lead`): a record the query names exactly."""


def lead(
    f: Fused,
    weights: Mapping[str, float] | None = None,
    exact: Set[tuple[str, str]] = frozenset(),
    named: Set[tuple[str, str]] = frozenset(),
) -> int:
    """How far a fused record stands ahead before fused score decides, higher first:

    * 3 — the query names it exactly (``named``: its id, its handle ``m12`` / ``a12``,
      its tool call id or its digest; the artifact route's
      :attr:`RouteHit.exact <contextledger.retrieval.model.RouteHit>` hits);
    * 2 — the rank-1 hit of a full-weight route (weight ≥ 1);
    * 1 — a keyword hit holding a code identifier of the query whole (``exact``);
    * 0 — the rest.

    ``named`` / ``exact``: ``(record_kind, record_id)`` pairs.  Plain RRF lets records
    that two routes rank mediocre (a turn sharing a common word that the embedding also
    finds vaguely near) outrank the one record a route is sure of, the edits naming
    ``permissionFlag`` that the keyword route ranks #2–#4 behind them, and the memory
    whose call id the query is; with the leads, a named record comes first, fusion is at
    least as good as any single route at rank ``len(routes)`` + the named records, and
    an exact identifier match ranks no lower than that + the exact matches before it."""
    key = (f[0], f[1])
    if key in named:
        return LEADS
    if any(rank == 1 and (1.0 if weights is None else weights.get(route, 1.0)) >= 1.0 for route, rank in f[3].items()):
        return 2
    return 1 if key in exact else 0


def lead_with_tops(
    fused: Sequence[Fused],
    weights: Mapping[str, float] | None = None,
    exact: Set[tuple[str, str]] = frozenset(),
    named: Set[tuple[str, str]] = frozenset(),
) -> list[Fused]:
    """``fused`` ordered by :func:`lead` (highest first), fused order within a lead (a
    stable sort)."""
    return sorted(fused, key=lambda f: -lead(f, weights, exact, named))
