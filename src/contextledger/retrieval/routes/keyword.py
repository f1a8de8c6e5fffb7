"""Keyword route: records sharing code-aware tokens with the query
(:mod:`contextledger.retrieval.text`), through the database's full-text index.

* SQLite: the FTS5 table ``retrieval_fts``, ``scope`` token AND any query token, ranked
  by ``bm25`` (the scope column weighted 0);
* PostgreSQL: ``array_to_tsvector(tokens) @@ 'a' | 'b' …`` on the GIN index, ranked by
  ``ts_rank`` (term frequency; PostgreSQL keeps no collection statistics for BM25).

One query, ``LIMIT`` ``4 × limit`` rows plus the excluded ids (the rows off the lineage,
excluded or of an unwanted kind are dropped after; a memories-only request filters the
kind in SQL)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from contextledger.retrieval.documents import scope_token
from contextledger.retrieval.model import RetrievalQuery, RouteHit
from contextledger.retrieval.text import query_tokens

if TYPE_CHECKING:
    from contextledger.retrieval.routes import RouteContext

__all__ = ["KeywordRoute"]

_SQLITE_SQL = (
    "SELECT d.record_kind, d.record_id, d.branch_id, d.seq, bm25(retrieval_fts, 0.0, 1.0) AS score "
    "FROM retrieval_fts JOIN retrieval_docs d ON d.doc_id = retrieval_fts.rowid "
    "WHERE retrieval_fts MATCH :q AND d.tenant_id = :t AND d.conversation_id = :c{kind} "
    "ORDER BY score, d.doc_id DESC LIMIT :n"
)
_POSTGRES_SQL = (
    "SELECT record_kind, record_id, branch_id, seq, "
    "ts_rank(array_to_tsvector(string_to_array(tokens, ' ')), CAST(:q AS tsquery)) AS score "
    "FROM retrieval_docs WHERE tenant_id = :t AND conversation_id = :c "
    "AND array_to_tsvector(string_to_array(tokens, ' ')) @@ CAST(:q AS tsquery){kind} "
    "ORDER BY score DESC, doc_id DESC LIMIT :n"
)
_STATEMENTS = {
    ("sqlite", False): sa.text(_SQLITE_SQL.format(kind="")),
    ("sqlite", True): sa.text(_SQLITE_SQL.format(kind=" AND d.record_kind = 'memory'")),
    ("postgresql", False): sa.text(_POSTGRES_SQL.format(kind="")),
    ("postgresql", True): sa.text(_POSTGRES_SQL.format(kind=" AND record_kind = 'memory'")),
}


class KeywordRoute:
    """See module docstring."""

    name = "keyword"

    def run(self, ctx: RouteContext, query: RetrievalQuery, limit: int) -> list[RouteHit]:
        """Hits ranked by the backend's full-text score (see module docstring)."""
        toks = query_tokens(f"{query.text}\n{query.context}")
        if not toks:
            return []
        memories_only = ctx.kinds == frozenset({"memory"})
        n = 4 * limit + len(ctx.exclude)
        if ctx.store.dialect == "sqlite":
            match = f'scope : "{scope_token(ctx.scope.tenant_id, ctx.conversation_id)}" AND tokens : (' + " OR ".join(f'"{t}"' for t in toks) + ")"
            rows = ctx.conn.execute(_STATEMENTS["sqlite", memories_only], {"q": match, "t": ctx.scope.tenant_id, "c": ctx.conversation_id, "n": n})
            sign = -1.0  # bm25(): lower is better
        else:
            q = " | ".join(f"'{t}'" for t in toks)
            rows = ctx.conn.execute(_STATEMENTS["postgresql", memories_only], {"q": q, "t": ctx.scope.tenant_id, "c": ctx.conversation_id, "n": n})
            sign = 1.0
        hits = [
            RouteHit(record_kind=r.record_kind, record_id=r.record_id, score=sign * float(r.score))
            for r in rows
            if ctx.in_lineage(r.branch_id, int(r.seq)) and ctx.wanted(r.record_kind, r.record_id)
        ]
        return hits[:limit]
