"""Memory route: memories sharing content terms with the query through the memory term
index (:mod:`contextledger.memory.terms`, migration 0004): the newest 64 index rows per
term (at most 12 terms), each memory scored by the sum of its terms' rarity
(``1 / rows found``), so a rare id outweighs a common word.  The terms of the request
text come first, those of its context (task state, unresolved calls) fill the rest."""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextledger.memory.terms import query_terms
from contextledger.retrieval.model import RetrievalQuery, RouteHit

if TYPE_CHECKING:
    from contextledger.retrieval.routes import RouteContext

__all__ = ["MemoryRoute"]

_PER_TERM = 64
_MAX_TERMS = 12


class MemoryRoute:
    """See module docstring."""

    name = "memory"

    def run(self, ctx: RouteContext, query: RetrievalQuery, limit: int) -> list[RouteHit]:
        """Memories ranked by summed term rarity (ties: newest)."""
        own = sorted(query_terms(query.text))
        terms = (own + sorted(query_terms(query.context) - set(own)))[:_MAX_TERMS]
        if not terms or not ctx.wanted("memory", ""):
            return []
        rows = [r for r in ctx.reads.term_matches(terms, _PER_TERM) if r[0] not in ctx.exclude and ctx.in_lineage(r[2], r[3])]
        per_term: dict[str, int] = {}
        for _, term, _, _ in rows:
            per_term[term] = per_term.get(term, 0) + 1
        score: dict[str, float] = {}
        newest: dict[str, int] = {}
        for mem_id, term, _, seq in rows:
            score[mem_id] = score.get(mem_id, 0.0) + 1.0 / per_term[term]
            newest[mem_id] = max(seq, newest.get(mem_id, seq))
        best = sorted(score, key=lambda k: (-score[k], -newest[k], k))[:limit]
        return [RouteHit(record_kind="memory", record_id=m, score=score[m]) for m in best]
