"""Keyword route: records sharing code-aware tokens with the query
(:mod:`contextledger.retrieval.text`), ranked by BM25 over **every** matching document
of the conversation, found through the database's full-text index and scored here, so
that both backends rank alike.

* SQLite: the FTS5 table ``retrieval_fts``, ``scope`` token AND the query tokens;
* PostgreSQL: ``array_to_tsvector(tokens) @@ 'a' | 'b' …`` on the GIN index.

BM25 (``k1`` = 1.2, ``b`` = 0.75) uses the conversation's collection statistics: the
number of documents and their average length in tokens (:func:`collection_stats`, kept
per process and brought up to date from the documents above the highest ``doc_id``
counted — documents are append-only), and each query term's document frequency (one
count through the index per term).  The top hits are exact without reading every
matching document (the *max-score* rule, Turtle & Flood 1995): terms are taken rarest
first, the documents holding them are read and scored on every query term; once the
``limit``-th admitted score reaches the most a document holding only the remaining
(common) terms could score — ``Σ idf · (k1 + 1)`` — no unread document can enter the
list.  A common word (a speaker's name in every turn) therefore costs its count, not
its documents, and never hides an older record holding a rarer term.  A hit must score
terms carrying at least :data:`MIN_SHARE` of the query's information, ``Σ idf`` over
its distinct terms (a term no document holds at the highest idf), whatever the
document's length: a turn sharing only the speaker's
name with the question is noise, not a match, and is not returned to be fused.  Ties go to the
newer record (``seq``, then ``doc_id``).  The backends' own scores (FTS5 ``bm25``,
PostgreSQL ``ts_rank``) are not used: they order the same documents differently, and
the same transcript, policy and time must give the same assembly on either backend.
A hit holding a code identifier of the query whole (``permissionFlag``,
:func:`~contextledger.retrieval.text.identifier_tokens`) is marked ``exact``: fusion
never ranks it out (:func:`~contextledger.retrieval.fusion.lead`).  A hit whose matched
terms carry at least :data:`CONFIDENT_SHARE` of the query's ``Σ idf`` (or holding an
identifier) is marked ``confident``: only such a best hit leads in fusion, and a route
whose best hit is not confident is fused as a weak route
(:func:`~contextledger.retrieval.fusion.query_weights`).
Rows off the lineage, excluded or of an unwanted kind are dropped after scoring."""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING

from contextledger.retrieval.documents import scope_token
from contextledger.retrieval.model import RetrievalQuery, RouteHit
from contextledger.retrieval.statements import DocRow, doc_stats_after, keyword_df, keyword_docs
from contextledger.retrieval.text import identifier_tokens, query_tokens

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from contextledger.retrieval.routes import RouteContext

__all__ = ["CONFIDENT_SHARE", "K1", "MIN_SHARE", "B", "Collection", "KeywordRoute", "bm25_scores", "collection_stats"]

K1 = 1.2
"""BM25 term-frequency saturation."""

B = 0.75
"""BM25 document-length normalisation."""

MIN_SHARE = 0.1
"""Least share of the query's ``Σ idf`` a hit scores (see module docstring)."""

CONFIDENT_SHARE = 0.5
"""Least share of the query's ``Σ idf`` a hit's matched terms carry for the hit to be
:attr:`~contextledger.retrieval.model.RouteHit.confident` (a hit holding a query
identifier whole is confident whatever its share): the document holds most of what
the query says, not one of its words."""

Collection = tuple[int, float]
"""``(documents, average length in tokens)`` of a conversation's keyword documents."""

_LOCK = threading.Lock()
_STATS: dict[tuple[str, str, str], tuple[int, int, int]] = {}


def collection_stats(ctx: RouteContext) -> Collection:
    """The conversation's :data:`Collection` (see module docstring)."""
    key = (str(ctx.store.engine.url), ctx.scope.tenant_id, ctx.conversation_id)
    with _LOCK:
        n, total, top = _STATS.get(key, (0, 0, 0))
    dn, dt, dtop = doc_stats_after(ctx.conn, ctx.scope.tenant_id, ctx.conversation_id, top)
    if dn:
        n, total, top = n + dn, total + dt, dtop
        with _LOCK:
            _STATS[key] = (n, total, top)
    return n, (total / n if n else 1.0)


def bm25_scores(rows: Sequence[DocRow], query: Sequence[str], df: Mapping[str, int] | None = None, collection: Collection | None = None) -> list[float]:
    """BM25 of each row (space-separated ``tokens``) for the ``query`` tokens; one float
    per row, in row order.

    Args:
        df: document frequency per term (default: counted over ``rows``).
        collection: ``(N, average length)`` (default: over ``rows``).
    """
    docs = [r.tokens.split(" ") for r in rows]
    if not docs:
        return []
    wanted = set(query)
    counts = [{t: d.count(t) for t in wanted.intersection(d)} for d in docs]
    if df is None:
        df = {}
        for c in counts:
            for t in c:
                df[t] = df.get(t, 0) + 1
    n, avgdl = collection or (len(docs), sum(len(d) for d in docs) / len(docs))
    idf = {t: _idf(n, f) for t, f in df.items()}
    out = []
    for d, c in zip(docs, counts, strict=True):
        norm = K1 * (1.0 - B + B * len(d) / max(avgdl, 1e-9))
        out.append(sum(idf.get(t, 0.0) * tf * (K1 + 1.0) / (tf + norm) for t, tf in sorted(c.items())))
    return out


def _idf(n: int, f: int) -> float:
    return math.log(1.0 + (max(n, f) - f + 0.5) / (f + 0.5))


class KeywordRoute:
    """See module docstring."""

    name = "keyword"

    def _match(self, ctx: RouteContext, terms: Sequence[str]) -> str:
        if ctx.store.dialect == "sqlite":
            return f'scope : "{scope_token(ctx.scope.tenant_id, ctx.conversation_id)}" AND tokens : (' + " OR ".join(f'"{t}"' for t in terms) + ")"
        return " | ".join(f"'{t}'" for t in terms)

    def run(self, ctx: RouteContext, query: RetrievalQuery, limit: int) -> list[RouteHit]:
        """Hits ranked by BM25 over every matching document (see module docstring)."""
        toks = query_tokens(f"{query.text}\n{query.context}")
        if not toks:
            return []
        tenant, conv = ctx.scope.tenant_id, ctx.conversation_id
        df = {t: keyword_df(ctx.conn, tenant, conv, self._match(ctx, [t])) for t in sorted(set(toks))}
        terms = sorted((t for t in df if df[t] > 0), key=lambda t: (df[t], t))
        if not terms:
            return []
        collection = collection_stats(ctx)
        n = collection[0]
        bound = [_idf(n, df[t]) * (K1 + 1.0) for t in terms]
        weight = {t: _idf(n, f) for t, f in df.items()}
        info = sum(weight.values())
        floor = MIN_SHARE * info
        memories_only = ctx.kinds == frozenset({"memory"})
        idents = frozenset(identifier_tokens(query.text)).intersection(terms)
        seen: dict[int, tuple[DocRow, float, float]] = {}
        for j, term in enumerate(terms):
            rows = [r for r in keyword_docs(ctx.conn, tenant, conv, self._match(ctx, [term]), df[term], memories_only=memories_only) if r.doc_id not in seen]
            for r, s in zip(rows, bm25_scores(rows, toks, df, collection), strict=True):
                have = set(r.tokens.split(" "))
                covered = sum(w for t, w in weight.items() if t in have)
                seen[r.doc_id] = (r, s if covered >= floor else -1.0, covered / info if info > 0 else 0.0)
            admitted = sorted(
                ((s, r, share) for r, s, share in seen.values() if s >= 0.0 and ctx.in_lineage(r.branch_id, r.seq) and ctx.wanted(r.record_kind, r.record_id)),
                key=lambda x: (-x[0], -x[1].seq, -x[1].doc_id),
            )
            rest = sum(bound[j + 1 :])
            unread_cover = sum(weight.get(t, 0.0) for t in terms[j + 1 :])  # the most an unread document can cover
            if j + 1 == len(terms) or unread_cover < floor or (len(admitted) >= limit and admitted[limit - 1][0] >= rest):
                out = []
                for s, r, share in admitted[:limit]:
                    exact = bool(idents) and not idents.isdisjoint(r.tokens.split(" "))
                    out.append(RouteHit(record_kind=r.record_kind, record_id=r.record_id, score=round(s, 6), exact=exact, confident=exact or share >= CONFIDENT_SHARE))
                return out
        return []  # unreachable: the last term returns
