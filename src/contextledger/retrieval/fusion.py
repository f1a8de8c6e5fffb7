"""Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009): a record's fused
score is ``Σ_routes w / (k + rank)`` with ranks from 1, ``k`` = 60 and ``w`` = 1 (the
common defaults: Elasticsearch ``rank_constant``, LanceDB ``RRFReranker``).  Ties are
broken by the number of routes, then the record id, so fusion is deterministic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set

from contextledger.retrieval.model import RouteHit, rank_score

__all__ = ["LEADS", "LEXICAL_ROUTES", "RRF_K", "WEAK_WEIGHT", "Fused", "fuse", "lead", "lead_with_tops", "query_weights", "rank_score", "tops"]

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

LEXICAL_ROUTES = ("keyword", "memory")
"""The routes that match the query's words (the memory route repeats the keyword
route's signal on fewer fields): they are weak together (:func:`query_weights`)."""

WEAK_WEIGHT = 0.0
"""The weight of a weak lexical route (:func:`query_weights`): its hits add nothing to
a fused score, so they only break exact ties (more routes first) and a record found by
them alone follows every record another route scored.  (At 0.01 — one hit worth the gap
between ranks 5 and 6 of a full-weight route — a keyword+memory hit still overturned the
semantic route's near-ties at rank 1.)"""


def query_weights(lists: Mapping[str, Sequence[RouteHit]], base: Mapping[str, float] | None = None) -> dict[str, float]:
    """The fusion weights of one query: ``base`` (route → weight, default 1 each) with
    the :data:`LEXICAL_ROUTES` at :data:`WEAK_WEIGHT` when the semantic route found
    something and the keyword route's best hit is not
    :attr:`~contextledger.retrieval.model.RouteHit.confident` (its matched terms carry
    less than half of the query's information: the query is asked in other words than
    the records hold, and words the two share by chance — "page", "check" — would
    otherwise outvote the route that understood it, every such hit found by two
    lexical lists).  Without semantic hits, or with a confident keyword hit, ``base``
    is returned unchanged.  Returns every route of ``lists`` and of ``base``."""
    w = {r: (1.0 if base is None else base.get(r, 1.0)) for r in lists}
    if base is not None:
        w.update({r: x for r, x in base.items() if r not in w})
    kw = lists.get("keyword") or []
    if lists.get("semantic") and kw and not kw[0].confident:
        for r in LEXICAL_ROUTES:
            if r in w:
                w[r] = min(w[r], WEAK_WEIGHT)
    return w


def tops(lists: Mapping[str, Sequence[RouteHit]], weights: Mapping[str, float] | None = None) -> frozenset[tuple[str, str]]:
    """``(record_kind, record_id)`` of the records that lead at 2 (:func:`lead`): the
    best hit of each route of weight ≥ 1 in ``weights`` when that hit is
    :attr:`~contextledger.retrieval.model.RouteHit.confident`."""
    out = set()
    for route, hits in lists.items():
        if hits and hits[0].confident and (1.0 if weights is None else weights.get(route, 1.0)) >= 1.0:
            out.add((hits[0].record_kind, hits[0].record_id))
    return frozenset(out)


def lead(
    f: Fused,
    weights: Mapping[str, float] | None = None,
    exact: Set[tuple[str, str]] = frozenset(),
    named: Set[tuple[str, str]] = frozenset(),
    leaders: Set[tuple[str, str]] | None = None,
) -> int:
    """How far a fused record stands ahead before fused score decides, higher first:

    * 3 — the query names it exactly (``named``: its id, its handle ``m12`` / ``a12``,
      its tool call id or its digest; the artifact route's
      :attr:`RouteHit.exact <contextledger.retrieval.model.RouteHit>` hits);
    * 2 — a route's confident best hit: in ``leaders`` (:func:`tops`: the rank-1 hit of a
      route of weight ≥ 1 for this query, when the route is sure of it — a keyword hit
      whose matched terms carry at least half of the query's idf, a semantic hit ahead
      of the runner-up by the route's margin); without ``leaders``, the rank-1 hit of
      every route of weight ≥ 1 in ``weights``;
    * 1 — a keyword hit holding a code identifier of the query whole (``exact``);
    * 0 — the rest.

    ``named`` / ``exact`` / ``leaders``: ``(record_kind, record_id)`` pairs.  Plain RRF
    lets records that two routes rank mediocre (a turn sharing a common word that the
    embedding also finds vaguely near) outrank the one record a route is sure of, the
    edits naming ``permissionFlag`` that the keyword route ranks #2–#4 behind them, and
    the memory whose call id the query is; with the leads, a named record comes first
    and an exact identifier match ranks no lower than the named records, the leaders
    and the exact matches before it.  A best hit the route is not sure of does not lead:
    a keyword hit sharing one word of a paraphrased question would otherwise stand
    beside the semantic route's answer and win on fused score.

    The rule, with the weights of :func:`query_weights`: when the lexical routes are
    weak they add no score and lead nothing, so hybrid's order is the semantic route's
    but for what the rules, artifact and graph routes add (and a lower keyword hit
    holding a query identifier whole, lead 1), and the records the lexical routes alone
    found come last — hybrid recall at a depth is the semantic route's unless those
    other routes fill it; with a confident keyword hit, weighted RRF with the leads
    decides, as before."""
    key = (f[0], f[1])
    if key in named:
        return LEADS
    if leaders is not None:
        if key in leaders:
            return 2
    elif any(rank == 1 and (1.0 if weights is None else weights.get(route, 1.0)) >= 1.0 for route, rank in f[3].items()):
        return 2
    return 1 if key in exact else 0


def lead_with_tops(
    fused: Sequence[Fused],
    weights: Mapping[str, float] | None = None,
    exact: Set[tuple[str, str]] = frozenset(),
    named: Set[tuple[str, str]] = frozenset(),
    leaders: Set[tuple[str, str]] | None = None,
) -> list[Fused]:
    """``fused`` ordered by :func:`lead` (highest first), fused order within a lead (a
    stable sort)."""
    return sorted(fused, key=lambda f: -lead(f, weights, exact, named, leaders))
