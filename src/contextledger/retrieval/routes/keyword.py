"""Keyword route: records sharing code-aware tokens with the query
(:mod:`contextledger.retrieval.text`), found through the database's full-text index and
ranked here, so that both backends rank alike.

* SQLite: the FTS5 table ``retrieval_fts``, ``scope`` token AND any query token;
* PostgreSQL: ``array_to_tsvector(tokens) @@ 'a' | 'b' …`` on the GIN index.

Both return the same rows — the newest :func:`window` documents of the conversation
holding any query token (a memories-only request filters the kind in SQL), in
``doc_id`` order — and the route scores them in Python with BM25 (``k1`` = 1.2, ``b`` =
0.75) over that window's term statistics (document frequency, document length in
tokens), ties going to the newer record (``seq``, then ``doc_id``).  The backends' own
scores (FTS5 ``bm25`` over the whole table, PostgreSQL ``ts_rank`` without collection
statistics) are not used: they order the same documents differently, and the same
transcript, policy and time must give the same assembly on either backend.  The rows off
the lineage, excluded or of an unwanted kind are dropped after scoring."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from contextledger.retrieval.documents import scope_token
from contextledger.retrieval.model import RetrievalQuery, RouteHit
from contextledger.retrieval.statements import DocRow, keyword_docs
from contextledger.retrieval.text import query_tokens

if TYPE_CHECKING:
    from collections.abc import Sequence

    from contextledger.retrieval.routes import RouteContext

__all__ = ["K1", "B", "KeywordRoute", "bm25_scores", "window"]

K1 = 1.2
"""BM25 term-frequency saturation."""

B = 0.75
"""BM25 document-length normalisation."""

WINDOW_PER_HIT = 8
"""Matching documents read per hit wanted (plus one per excluded id)."""


def window(limit: int, excluded: int) -> int:
    """Matching documents read for ``limit`` hits when ``excluded`` ids are excluded."""
    return WINDOW_PER_HIT * limit + excluded


def bm25_scores(rows: Sequence[DocRow], query: Sequence[str]) -> list[float]:
    """BM25 of each row (space-separated ``tokens``) for the ``query`` tokens, with the
    rows as the collection (``N`` = ``len(rows)``, document frequency and average length
    over them); one float per row, in row order."""
    docs = [r.tokens.split(" ") for r in rows]
    if not docs:
        return []
    wanted = set(query)
    counts = [{t: d.count(t) for t in wanted.intersection(d)} for d in docs]
    df: dict[str, int] = {}
    for c in counts:
        for t in c:
            df[t] = df.get(t, 0) + 1
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    idf = {t: math.log(1.0 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
    out = []
    for d, c in zip(docs, counts, strict=True):
        norm = K1 * (1.0 - B + B * len(d) / avgdl)
        out.append(sum(idf[t] * tf * (K1 + 1.0) / (tf + norm) for t, tf in sorted(c.items())))
    return out


class KeywordRoute:
    """See module docstring."""

    name = "keyword"

    def run(self, ctx: RouteContext, query: RetrievalQuery, limit: int) -> list[RouteHit]:
        """Hits ranked by BM25 over the matching window (see module docstring)."""
        toks = query_tokens(f"{query.text}\n{query.context}")
        if not toks:
            return []
        memories_only = ctx.kinds == frozenset({"memory"})
        if ctx.store.dialect == "sqlite":
            match = f'scope : "{scope_token(ctx.scope.tenant_id, ctx.conversation_id)}" AND tokens : (' + " OR ".join(f'"{t}"' for t in toks) + ")"
        else:
            match = " | ".join(f"'{t}'" for t in toks)
        rows = keyword_docs(ctx.conn, ctx.scope.tenant_id, ctx.conversation_id, match, window(limit, len(ctx.exclude)), memories_only=memories_only)
        scores = bm25_scores(rows, toks)
        ranked = sorted(range(len(rows)), key=lambda i: (-scores[i], -rows[i].seq, -rows[i].doc_id))
        hits = [
            RouteHit(record_kind=rows[i].record_kind, record_id=rows[i].record_id, score=round(scores[i], 6))
            for i in ranked
            if ctx.in_lineage(rows[i].branch_id, rows[i].seq) and ctx.wanted(rows[i].record_kind, rows[i].record_id)
        ]
        return hits[:limit]
