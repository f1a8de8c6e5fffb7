"""Writing the retrieval index: keyword documents and embeddings (seed 001 §4.5).

:func:`index_records` is the one call the write paths make, inside their transaction,
with the records they just wrote: it inserts a ``retrieval_docs`` row per indexable
record (the SQLite FTS5 table follows by trigger, the PostgreSQL GIN index by itself)
and, when an encoder is available (:func:`contextledger.retrieval.embed.get_encoder`),
embeds the memories and chat messages among them in one batch and inserts their
``retrieval_vectors`` rows.  Indexing is idempotent per record.

:func:`batched_vectors` defers the embeddings of every :func:`index_records` call of one
write transaction to its end, where they are computed in batches of
:data:`BACKFILL_BATCH` (an import embeds its records this way, not one forward pass per
record).  :func:`backfill` completes the index of a conversation recorded before
(migrated ledgers, a ledger recorded with embeddings off, vectors of another model or
passage recipe — :func:`~contextledger.retrieval.documents.vector_model`): documents,
then vectors, in batches.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from contextledger.errors import ScopeError
from contextledger.records.models import Message, ToolArtifact, ToolMemory
from contextledger.retrieval.documents import (
    is_query_side,
    keyword_tokens,
    scope_token,
    semantic_text,
    vector_model,
)
from contextledger.store import schema as S

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from contextledger.retrieval.embed import Encoder
    from contextledger.store.base import Scope
    from contextledger.store.sql import SqlStore, Writer

__all__ = ["BACKFILL_BATCH", "backfill", "batched_vectors", "doc_row", "embed_indexed", "index_records", "pack_vector"]

BACKFILL_BATCH = 128
"""Records per transaction (and per encoder batch) in :func:`backfill`."""

_DEFAULT: Any = object()

_Item = tuple[int, Message | ToolMemory, str]
_DEFERRED: contextvars.ContextVar[tuple[int, Encoder, list[_Item]] | None] = contextvars.ContextVar("contextledger_deferred_vectors", default=None)


@contextlib.contextmanager
def batched_vectors(w: Writer, encoder: Encoder | None = _DEFAULT) -> Iterator[None]:
    """Inside the body, :func:`index_records` calls on ``w`` insert their keyword
    documents at once but queue their embeddings; at the end of the body (still inside
    ``w``'s transaction) the queue is embedded in batches of :data:`BACKFILL_BATCH` texts
    and inserted.  Without an encoder (``retrieval`` extra missing, embeddings off) the
    body runs as is.  An exception in the body drops the queue (the transaction rolls
    back anyway)."""
    if encoder is _DEFAULT:
        from contextledger.retrieval.embed import get_encoder

        encoder = get_encoder()
    if encoder is None or _DEFERRED.get() is not None:
        yield
        return
    queue: list[_Item] = []
    token = _DEFERRED.set((id(w), encoder, queue))
    try:
        yield
    finally:
        _DEFERRED.reset(token)
    for start in range(0, len(queue), BACKFILL_BATCH):
        _insert_vectors(w.conn, encoder, queue[start : start + BACKFILL_BATCH])


def doc_row(record: Message | ToolMemory, artifact: ToolArtifact | None = None) -> dict[str, Any] | None:
    """The ``retrieval_docs`` row of ``record`` (``None``: nothing to index)."""
    toks = keyword_tokens(record, artifact)
    if not toks:
        return None
    return {
        "tenant_id": record.tenant_id,
        "conversation_id": record.conversation_id,
        "branch_id": record.branch_id,
        "seq": record.seq,
        "record_kind": "message" if isinstance(record, Message) else "memory",
        "record_id": record.id,
        "scope": scope_token(record.tenant_id, record.conversation_id),
        "tokens": " ".join(toks),
    }


def pack_vector(vec: Any) -> bytes:
    """A vector as stored: little-endian float32 bytes."""
    import numpy as np

    return np.asarray(vec, dtype="<f4").tobytes()


def _insert_docs(conn: Connection, dialect: str, rows: list[dict[str, Any]]) -> dict[str, int]:
    """Insert document rows (a record already indexed is skipped); ``record_id → doc_id``
    of the rows inserted."""
    if not rows:
        return {}
    t = S.retrieval_docs
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        stmt: Any = pg_insert(t).on_conflict_do_nothing(index_elements=["tenant_id", "record_id"])
    else:
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        stmt = sqlite_insert(t).on_conflict_do_nothing(index_elements=["tenant_id", "record_id"])
    out: dict[str, int] = {}
    for row in rows:  # one statement per row: RETURNING of a skipped row is empty
        got = conn.execute(stmt.returning(t.c.doc_id), row).first()
        if got is not None:
            out[row["record_id"]] = int(got.doc_id)
    return out


def _insert_vectors(conn: Connection, encoder: Encoder, items: Sequence[_Item]) -> int:
    if not items:
        return 0
    from contextledger.retrieval.embed import encode_queries

    asks = [i for i, (_, rec, _) in enumerate(items) if is_query_side(rec)]
    docs = [i for i, (_, rec, _) in enumerate(items) if not is_query_side(rec)]
    vecs: list[Any] = [None] * len(items)
    if asks:
        for i, v in zip(asks, encode_queries(encoder, [items[i][2] for i in asks]), strict=True):
            vecs[i] = v
    if docs:
        for i, v in zip(docs, encoder.encode([items[i][2] for i in docs]), strict=True):
            vecs[i] = v
    conn.execute(
        S.retrieval_vectors.insert(),
        [
            {
                "doc_id": doc_id, "tenant_id": rec.tenant_id, "conversation_id": rec.conversation_id,
                "branch_id": rec.branch_id, "seq": rec.seq, "record_kind": "message" if isinstance(rec, Message) else "memory",
                "record_id": rec.id, "model": vector_model(encoder.name), "vector": pack_vector(v),
            }
            for (doc_id, rec, _), v in zip(items, vecs, strict=True)
        ],
    )
    return len(items)


def index_records(
    w: Writer,
    records: Sequence[Message | ToolMemory],
    *,
    artifacts: Mapping[str, ToolArtifact] | None = None,
    encoder: Encoder | None = _DEFAULT,
) -> int:
    """Index ``records`` inside ``w``'s transaction (see module docstring); returns the
    number of documents inserted.

    Args:
        artifacts: source artifacts by id (a memory's raw head is indexed with it).
        encoder: the embedding model (default: the process-wide one, or none when the
            ``retrieval`` extra is missing or ``CONTEXTLEDGER_EMBEDDINGS=off``).

    Raises:
        ScopeError: a record of another tenant than the writer's.
    """
    if encoder is _DEFAULT:
        from contextledger.retrieval.embed import get_encoder

        encoder = get_encoder()
    arts = artifacts or {}
    rows: list[dict[str, Any]] = []
    by_id: dict[str, Message | ToolMemory] = {}
    art_of: dict[str, ToolArtifact | None] = {}
    for rec in records:
        if rec.tenant_id != w.scope.tenant_id:
            raise ScopeError(f"record {rec.id} belongs to tenant {rec.tenant_id!r}, outside the writer's scope {w.scope.tenant_id!r}")
        art = arts.get(rec.source_artifact_ids[0]) if isinstance(rec, ToolMemory) and rec.source_artifact_ids else None
        row = doc_row(rec, art)
        if row is not None:
            rows.append(row)
            by_id[rec.id] = rec
            art_of[rec.id] = art
    inserted = _insert_docs(w.conn, w.store.dialect, rows)
    deferred = _DEFERRED.get()
    if deferred is not None and deferred[0] == id(w) and encoder is not None and inserted:
        deferred[2].extend((doc_id, by_id[rid], text) for rid, doc_id in inserted.items() if (text := semantic_text(by_id[rid], art_of[rid])) is not None)
    elif encoder is not None and inserted:
        items = [(doc_id, by_id[rid], text) for rid, doc_id in inserted.items() if (text := semantic_text(by_id[rid], art_of[rid])) is not None]
        _insert_vectors(w.conn, encoder, items)
    return len(inserted)


def embed_indexed(store: SqlStore, scope: Scope, records: Sequence[Message], *, encoder: Encoder | None = _DEFAULT) -> int:
    """Insert the vectors of ``records`` whose keyword documents were written (by
    :func:`index_records` with ``encoder=None``, in a recording transaction) and have no
    vector yet, in a transaction of its own; returns the vectors inserted (0 without an
    encoder).  A vector lost to a crash before this runs is added by :func:`backfill`."""
    if encoder is _DEFAULT:
        from contextledger.retrieval.embed import get_encoder

        encoder = get_encoder()
    if encoder is None or not records:
        return 0
    d, v = S.retrieval_docs, S.retrieval_vectors
    by_id = {r.id: r for r in records}
    with store.writer(scope) as w:
        rows = w.conn.execute(
            sa.select(d.c.doc_id, d.c.record_id)
            .outerjoin(v, v.c.doc_id == d.c.doc_id)
            .where(d.c.tenant_id == scope.tenant_id, d.c.record_id.in_(list(by_id)), v.c.doc_id.is_(None))
        ).all()
        items = [(int(r.doc_id), by_id[r.record_id], text) for r in rows if (text := semantic_text(by_id[r.record_id], None)) is not None]
        return _insert_vectors(w.conn, encoder, items)


def backfill(
    store: SqlStore,
    scope: Scope,
    conversation_id: str,
    *,
    encoder: Encoder | None = _DEFAULT,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, int]:
    """Complete the retrieval index of one conversation: documents for the messages and
    memories that have none (memories with their artifacts' raw heads), then vectors
    for the documents that have none (when an encoder is available), in transactions
    of :data:`BACKFILL_BATCH` records.  ``progress(done, total)`` is called per batch.

    Returns:
        ``{"documents": inserted, "vectors": inserted}``.

    Raises:
        NotFoundError: unknown conversation in scope.
    """
    if encoder is _DEFAULT:
        from contextledger.retrieval.embed import get_encoder

        encoder = get_encoder()
    store.get_conversation(scope, conversation_id)
    d = S.retrieval_docs
    with store.reader() as c:
        have = {r.record_id for r in c.execute(sa.select(d.c.record_id).where(d.c.tenant_id == scope.tenant_id, d.c.conversation_id == conversation_id))}
    messages = [m for m in store.messages(scope, conversation_id) if m.id not in have]
    memories = [m for m in store.memories(scope, conversation_id, segments=None) if m.id not in have]
    todo: list[Message | ToolMemory] = [*messages, *memories]
    docs = 0
    for start in range(0, len(todo), BACKFILL_BATCH):
        batch = todo[start : start + BACKFILL_BATCH]
        art_ids = sorted({m.source_artifact_ids[0] for m in batch if isinstance(m, ToolMemory) and m.source_artifact_ids})
        arts = {a.id: a for a in store.artifacts(scope, conversation_id, ids=art_ids)} if art_ids else {}
        with store.writer(scope) as w:
            docs += index_records(w, batch, artifacts=arts, encoder=None)
        if progress is not None:
            progress(start + len(batch), len(todo))
    vectors = _backfill_vectors(store, scope, conversation_id, encoder, progress) if encoder is not None else 0
    return {"documents": docs, "vectors": vectors}


def _backfill_vectors(store: SqlStore, scope: Scope, conversation_id: str, encoder: Encoder, progress: Callable[[int, int], None] | None) -> int:
    d, v = S.retrieval_docs, S.retrieval_vectors
    model = vector_model(encoder.name)
    with store.writer(scope) as w:  # one vector per document: another model's or recipe's are replaced
        w.conn.execute(v.delete().where(v.c.tenant_id == scope.tenant_id, v.c.conversation_id == conversation_id, v.c.model != model))
    with store.reader() as c:
        done = {r.doc_id for r in c.execute(sa.select(v.c.doc_id).where(v.c.tenant_id == scope.tenant_id, v.c.conversation_id == conversation_id, v.c.model == model))}
        docs = [(int(r.doc_id), r.record_kind, r.record_id) for r in c.execute(
            sa.select(d.c.doc_id, d.c.record_kind, d.c.record_id).where(d.c.tenant_id == scope.tenant_id, d.c.conversation_id == conversation_id).order_by(d.c.doc_id)
        ) if int(r.doc_id) not in done]
    msg_ids = [rid for _, kind, rid in docs if kind == "message"]
    mem_ids = {rid for _, kind, rid in docs if kind == "memory"}
    records: dict[str, Message | ToolMemory] = {m.id: m for m in store.messages(scope, conversation_id, ids=msg_ids)} if msg_ids else {}
    if mem_ids:
        records.update({m.id: m for m in store.memories(scope, conversation_id, ids=sorted(mem_ids))})
    art_ids = sorted({r.source_artifact_ids[0] for r in records.values() if isinstance(r, ToolMemory) and r.source_artifact_ids})
    arts = {a.id: a for a in store.artifacts(scope, conversation_id, ids=art_ids)} if art_ids else {}

    def art(r: Message | ToolMemory) -> ToolArtifact | None:
        return arts.get(r.source_artifact_ids[0]) if isinstance(r, ToolMemory) and r.source_artifact_ids else None

    items = [(doc_id, records[rid], text) for doc_id, _, rid in docs if rid in records and (text := semantic_text(records[rid], art(records[rid]))) is not None]
    total = 0
    for start in range(0, len(items), BACKFILL_BATCH):
        with store.writer(scope) as w:
            total += _insert_vectors(w.conn, encoder, items[start : start + BACKFILL_BATCH])
        if progress is not None:
            progress(start + BACKFILL_BATCH, len(items))
    return total
