"""The retrieval router (seed 001 §4.5, §9 "Retrieval Router"; roadmap v1.1: keyword /
vector / hybrid search with a freshness filter).

:func:`search` runs the first-stage routes (:mod:`contextledger.retrieval.routes`) in
one read transaction, fuses their ranked lists by weighted reciprocal rank (k = 60,
:data:`ROUTE_WEIGHTS`, the lexical routes weak for a paraphrased query —
:func:`~contextledger.retrieval.fusion.query_weights`,
:mod:`~contextledger.retrieval.fusion`), runs the graph route from the best fused
memories and fuses again, then admits hits through the boundary check
(:mod:`~contextledger.retrieval.boundary`: lineage, visibility, ownership, promotion,
privacy, supersession, freshness).  The result records, per hit, the routes that found
it with their ranks and own scores and the fused score, and per route whether it ran
(a missing ``retrieval`` extra makes the semantic route unavailable and says so: the
router then works with keyword, memory, artifact and graph recall).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from contextledger.retrieval.boundary import ROUTE_WEIGHTS, Boundary
from contextledger.retrieval.fusion import RRF_K, Fused, fuse, lead_with_tops, query_weights, tops
from contextledger.retrieval.model import RetrievalQuery, RetrievalResult, RouteHit, RouteReport
from contextledger.retrieval.routes import Route, RouteContext, RouteUnavailable
from contextledger.retrieval.routes.graph import GraphRoute
from contextledger.retrieval.routes.keyword import KeywordRoute
from contextledger.retrieval.routes.lookup import LookupRoute, named_paths
from contextledger.retrieval.routes.memory import MemoryRoute
from contextledger.retrieval.routes.recent import RecentRoute
from contextledger.retrieval.routes.rules import RulesRoute
from contextledger.retrieval.routes.semantic import SemanticRoute
from contextledger.store.base import Scope, require_scope

if TYPE_CHECKING:
    from contextledger.policy.model import Policy
    from contextledger.retrieval.embed import Encoder
    from contextledger.store.sql import SqlStore

__all__ = ["ALL_ROUTES", "ROUTE_WEIGHTS", "SEARCH_ROUTES", "route_and_fuse", "search"]

ALL_ROUTES: tuple[str, ...] = ("recent", "rules", "keyword", "semantic", "artifact", "memory", "graph")
"""Every route, in the order they run (``graph`` runs last, from the others' hits)."""

SEARCH_ROUTES: tuple[str, ...] = ("rules", "keyword", "semantic", "artifact", "memory", "graph")
"""The default routes of :func:`search`: ``recent`` ranks by recency alone, which a
search for something said long ago does not want (assembly keeps its own recent
window)."""


PER_ROUTE = 20
"""Most hits one route contributes to fusion (Elasticsearch's ``rank_window_size``)."""

_FIRST: dict[str, Route] = {r.name: r for r in (RecentRoute(), RulesRoute(), KeywordRoute(), SemanticRoute(), LookupRoute(), MemoryRoute())}
_GRAPH = GraphRoute()
_DEFAULT: Any = object()


def _store_of(source: Any) -> SqlStore:
    store = getattr(source, "store", source)
    if not hasattr(store, "reader"):
        raise TypeError(f"expected a Ledger, a runtime or a SqlStore, got {type(source).__name__}")
    return store  # type: ignore[no-any-return]


def _run(route: Route, ctx: RouteContext, query: RetrievalQuery, limit: int) -> tuple[list[RouteHit], RouteReport]:
    t0 = time.perf_counter()
    try:
        hits = route.run(ctx, query, limit)
    except RouteUnavailable as exc:
        return [], RouteReport(name=route.name, unavailable=str(exc), duration_ms=(time.perf_counter() - t0) * 1000)
    return hits, RouteReport(name=route.name, hits=len(hits), duration_ms=(time.perf_counter() - t0) * 1000)


def search(
    ledger: Any,
    scope: Scope | None,
    conversation_id: str,
    query: str | RetrievalQuery,
    *,
    branch_id: str | None = None,
    participant_id: str | None = None,
    provider: str | None = None,
    policy: Policy | None = None,
    now: datetime | None = None,
    limit: int = 10,
    routes: Sequence[str] = SEARCH_ROUTES,
    encoder: Encoder | None = _DEFAULT,
) -> RetrievalResult:
    """Recall the records of a conversation that answer ``query``.

    Args:
        ledger: a ``Ledger``, a runtime, or a ``SqlStore`` (anything with ``.store``).
        scope: the tenant scope (required: a missing scope is a denial).
        query: the request text (what reads as a secret is removed first:
            :func:`~contextledger.security.screen.strip_secrets`), or a
            :class:`RetrievalQuery` (text, keyword context, the id of a stored record
            whose vector is the query's, paths).
        branch_id: the lineage searched (default: the conversation's active branch).
        participant_id: the viewer (default: the main view — nobody's private state).
        provider: the provider the hits may be shown to (privacy routing).
        policy: default: the ledger's policy, else the bundled one.
        now: freshness reference time (default: now, UTC).
        limit: most hits returned.
        routes: route names (:data:`ALL_ROUTES`); unknown names are an error.
        encoder: the embedding model (default: the process-wide one when the
            ``retrieval`` extra is installed).

    Returns:
        A :class:`~contextledger.retrieval.model.RetrievalResult` (hits best first: by
        :attr:`Hit.score <contextledger.retrieval.model.Hit.score>`, highest first —
        a record the query names by id, handle or call id leads — then more routes,
        transcript order; the routes' reports, refusals by reason).

    Raises:
        ScopeError: no scope.  NotFoundError: unknown conversation, branch or
        participant in scope.  InputError: an unknown route name or ``limit`` < 1.
    """
    from contextledger.errors import InputError, NotFoundError
    from contextledger.store.reads import LineageReads

    scope = require_scope(scope)
    unknown = sorted(set(routes) - set(ALL_ROUTES))
    if unknown or limit < 1:
        raise InputError(f"unknown retrieval route(s) {', '.join(unknown)} (known: {', '.join(ALL_ROUTES)})" if unknown else "limit must be at least 1")
    store = _store_of(ledger)
    policy = policy or _policy_of(ledger)
    if encoder is _DEFAULT:
        from contextledger.retrieval.embed import get_encoder

        encoder = get_encoder()
    if not isinstance(query, RetrievalQuery):
        from contextledger.security.screen import strip_secrets

        text = strip_secrets(query)  # a typed secret is never matched (nor echoed)
        query = RetrievalQuery(text=text, paths=tuple(named_paths(text)))
    q = query
    with store.reader() as conn:
        reads = LineageReads(store, conn, scope, conversation_id)
        conv = reads.conversation()
        segments = reads.lineage(branch_id or conv.active_branch_id)
        viewer = None
        if participant_id is not None:
            viewer = next((p for p in reads.participants() if p.id == participant_id), None)
            if viewer is None:
                raise NotFoundError("participant", participant_id)
        ctx = RouteContext(store=store, conn=conn, reads=reads, scope=scope, conversation_id=conversation_id, segments=segments, encoder=encoder)
        result, fused = route_and_fuse(ctx, q, routes)
        boundary = Boundary(policy, now=now or datetime.now(UTC), viewer=viewer, provider=provider)
        result.hits = boundary.admit(ctx, fused, limit, result.exact, result.named, result.tops)
        result.withheld = dict(boundary.withheld)
    return result


def _policy_of(ledger: Any) -> Policy:
    policy = getattr(ledger, "policy", None)
    if policy is None:
        from contextledger.policy.loader import default_policy

        policy = default_policy()
    return policy


def route_and_fuse(ctx: RouteContext, q: RetrievalQuery, routes: Sequence[str | Route]) -> tuple[RetrievalResult, list[Fused]]:
    """Run the first-stage routes inside ``ctx``'s read transaction, fuse, run the graph
    route from the fused hits, fuse again; the query's own record is dropped.  No
    boundary check: the caller admits the hits (:func:`search` through
    :class:`~contextledger.retrieval.boundary.Boundary`, the assembler through its
    policy evaluation).

    Args:
        routes: built-in route names (run in :data:`ALL_ROUTES` order) and / or
            :class:`~contextledger.retrieval.routes.Route` objects (run after them,
            before ``graph``, at weight 1 unless :data:`ROUTE_WEIGHTS` names them).

    Returns:
        ``(result with one report per route and no hits yet, fused list best first)``.
    """
    names = {r for r in routes if isinstance(r, str)}
    first: list[Route] = [_FIRST[n] for n in ALL_ROUTES if n in names and n != "graph"]
    first += [r for r in routes if not isinstance(r, str)]
    result = RetrievalResult(query=q.text, rrf_k=RRF_K)
    lists: dict[str, list[RouteHit]] = {}
    for route in first:
        hits, report = _run(route, ctx, q, PER_ROUTE)
        lists[route.name] = hits
        result.routes.append(report)
    weights = query_weights(lists, ROUTE_WEIGHTS)
    fused = fuse(lists, weights=weights)
    if "graph" in names:
        ctx.seeds = [(f[0], f[1]) for f in fused]
        hits, report = _run(_GRAPH, ctx, q, PER_ROUTE)
        lists["graph"] = hits
        result.routes.append(report)
        weights = query_weights(lists, ROUTE_WEIGHTS)
        fused = fuse(lists, weights=weights)
    result.exact = frozenset((h.record_kind, h.record_id) for h in lists.get("keyword", []) if h.exact)
    result.named = frozenset((h.record_kind, h.record_id) for h in lists.get("artifact", []) if h.exact)
    result.weights, result.tops = weights, tops(lists, weights)
    fused = lead_with_tops(fused, weights, result.exact, result.named, result.tops)
    if q.vector_of:  # the query's own record (the current user message) is no answer
        fused = [f for f in fused if f[1] != q.vector_of]
    return result, fused
