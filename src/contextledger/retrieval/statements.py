"""The retrieval routes' reads, as prepared statements (:mod:`contextledger.store.prepared`).

The routes run inside candidate collection's read transaction, where every statement is
built once per dialect and shape from the schema's tables, compiled once and executed
on the DBAPI cursor with bound parameters only (``tests/store_conformance/test_reads.py``
checks that an assembly runs nothing else).  Rows come back as DBAPI tuples; the
functions here name their columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import sqlalchemy as sa

from contextledger.records.models import ToolMemory
from contextledger.store import counters as K
from contextledger.store import schema as S
from contextledger.store.codec import decode_body
from contextledger.store.prepared import in_values, list_value, prepared

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from contextledger.store.base import LineageSegment

__all__ = ["DocRow", "VectorRow", "artifacts_by_digest", "doc_stats_after", "keyword_df", "keyword_docs", "memories_by_subject", "newer_vectors", "stored_vector"]


class DocRow(NamedTuple):
    """One ``retrieval_docs`` row a keyword query matched."""

    doc_id: int
    record_kind: str
    record_id: str
    branch_id: str
    seq: int
    tokens: str


class VectorRow(NamedTuple):
    """One ``retrieval_vectors`` row (``vector``: little-endian float32 bytes)."""

    doc_id: int
    record_kind: str
    record_id: str
    branch_id: str
    seq: int
    vector: bytes


def _p(name: str, column: sa.ColumnElement[Any]) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=column.type)


def _keyword_sql(dialect: str, memories_only: bool) -> sa.Select[Any]:
    """The newest ``p_n`` documents of the conversation holding any query token:
    SQLite through the FTS5 table (``p_q``: ``scope : "…" AND tokens : ("a" OR …)``),
    PostgreSQL through the GIN index (``p_q``: ``'a' | 'b' …`` as ``tsquery``).  No
    backend score: the route ranks the rows itself."""
    d = S.retrieval_docs
    cols = (d.c.doc_id, d.c.record_kind, d.c.record_id, d.c.branch_id, d.c.seq, d.c.tokens)
    where: list[sa.ColumnElement[bool]] = [d.c.tenant_id == _p("p_t", d.c.tenant_id), d.c.conversation_id == _p("p_c", d.c.conversation_id)]
    if memories_only:
        where.append(d.c.record_kind == _p("p_kind", d.c.record_kind))
    n = sa.bindparam("p_n", type_=sa.Integer())
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import TSQUERY

        # the GIN index's expression, spelled exactly (the separator inline, not bound)
        tsv = sa.func.array_to_tsvector(sa.func.string_to_array(d.c.tokens, sa.literal_column("' '")))
        match = tsv.op("@@")(sa.cast(sa.bindparam("p_q", type_=sa.String()), TSQUERY()))
        return sa.select(*cols).where(match, *where).order_by(d.c.doc_id.desc()).limit(n)
    fts = sa.table("retrieval_fts", sa.column("rowid", sa.Integer()))
    match = sa.literal_column("retrieval_fts").op("MATCH")(sa.bindparam("p_q", type_=sa.String()))
    return (
        sa.select(*cols)
        .select_from(fts.join(d, d.c.doc_id == fts.c.rowid))
        .where(match, *where)
        .order_by(fts.c.rowid.desc())
        .limit(n)
    )


def _df_sql(dialect: str) -> sa.Select[Any]:
    """How many documents of the conversation match ``p_q`` (one term), through the
    full-text index."""
    d = S.retrieval_docs
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import TSQUERY

        tsv = sa.func.array_to_tsvector(sa.func.string_to_array(d.c.tokens, sa.literal_column("' '")))
        match = tsv.op("@@")(sa.cast(sa.bindparam("p_q", type_=sa.String()), TSQUERY()))
        return sa.select(sa.func.count()).select_from(d).where(match, d.c.tenant_id == _p("p_t", d.c.tenant_id), d.c.conversation_id == _p("p_c", d.c.conversation_id))
    fts = sa.table("retrieval_fts")
    match = sa.literal_column("retrieval_fts").op("MATCH")(sa.bindparam("p_q", type_=sa.String()))
    return sa.select(sa.func.count()).select_from(fts).where(match)


def keyword_df(conn: Connection, tenant_id: str, conversation_id: str, query: str) -> int:
    """The number of the conversation's documents matching ``query`` (the dialect's
    match text for one term: SQLite's includes the scope token)."""
    dialect = conn.dialect.name
    stmt = prepared(conn.dialect, ("retrieval_keyword_df",), lambda: _df_sql(dialect))
    return int(stmt.rows(conn, {"p_q": query, "p_t": tenant_id, "p_c": conversation_id})[0][0])


def _stats_sql() -> sa.Select[Any]:
    d = S.retrieval_docs
    length = sa.func.length(d.c.tokens) - sa.func.length(sa.func.replace(d.c.tokens, " ", "")) + 1
    return sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(length), 0), sa.func.coalesce(sa.func.max(d.c.doc_id), 0)).where(
        d.c.tenant_id == _p("p_t", d.c.tenant_id), d.c.conversation_id == _p("p_c", d.c.conversation_id), d.c.doc_id > sa.bindparam("p_after", type_=sa.BigInteger())
    )


def doc_stats_after(conn: Connection, tenant_id: str, conversation_id: str, after: int) -> tuple[int, int, int]:
    """``(documents, tokens, highest doc_id)`` of the conversation's documents above
    ``doc_id`` ``after`` (tokens: space-separated tokens summed; ``(0, 0, 0)`` when none)."""
    stmt = prepared(conn.dialect, ("retrieval_doc_stats",), _stats_sql)
    r = stmt.rows(conn, {"p_t": tenant_id, "p_c": conversation_id, "p_after": after})[0]
    return int(r[0]), int(r[1]), int(r[2])


def keyword_docs(conn: Connection, tenant_id: str, conversation_id: str, query: str, n: int, *, memories_only: bool) -> list[DocRow]:
    """The newest ``n`` documents matching ``query`` (the dialect's match text, see
    :func:`_keyword_sql`), newest first."""
    dialect = conn.dialect.name
    stmt = prepared(conn.dialect, ("retrieval_keyword", memories_only), lambda: _keyword_sql(dialect, memories_only))
    params: dict[str, Any] = {"p_q": query, "p_t": tenant_id, "p_c": conversation_id, "p_n": n}
    if memories_only:
        params["p_kind"] = "memory"
    return [DocRow(int(r[0]), r[1], r[2], r[3], int(r[4]), r[5]) for r in stmt.rows(conn, params)]


def stored_vector(conn: Connection, tenant_id: str, record_id: str, model: str) -> bytes | None:
    """The stored vector of one record (``None``: not embedded)."""
    d, v = S.retrieval_docs, S.retrieval_vectors

    def build() -> sa.Select[Any]:
        return (
            sa.select(v.c.vector)
            .join(d, d.c.doc_id == v.c.doc_id)
            .where(d.c.tenant_id == _p("p_t", d.c.tenant_id), d.c.record_id == _p("p_r", d.c.record_id),
                   v.c.model == _p("p_m", v.c.model), v.c.tenant_id == _p("p_t", v.c.tenant_id))
        )

    rows = prepared(conn.dialect, ("retrieval_stored_vector",), build).rows(conn, {"p_t": tenant_id, "p_r": record_id, "p_m": model})
    return None if not rows else bytes(rows[0][0])


def newer_vectors(conn: Connection, tenant_id: str, conversation_id: str, model: str, after: int) -> list[VectorRow]:
    """The conversation's vectors of ``model`` above ``doc_id`` ``after``, in ``doc_id``
    order (one range of ``ix_retrieval_vectors_conv``)."""
    v = S.retrieval_vectors

    def build() -> sa.Select[Any]:
        return (
            sa.select(v.c.doc_id, v.c.record_kind, v.c.record_id, v.c.branch_id, v.c.seq, v.c.vector)
            .where(v.c.tenant_id == _p("p_t", v.c.tenant_id), v.c.conversation_id == _p("p_c", v.c.conversation_id),
                   v.c.model == _p("p_m", v.c.model), v.c.doc_id > _p("p_after", v.c.doc_id))
            .order_by(v.c.doc_id)
        )

    rows = prepared(conn.dialect, ("retrieval_newer_vectors",), build).rows(conn, {"p_t": tenant_id, "p_c": conversation_id, "p_m": model, "p_after": after})
    return [VectorRow(int(r[0]), r[1], r[2], r[3], int(r[4]), bytes(r[5])) for r in rows]


def artifacts_by_digest(conn: Connection, tenant_id: str, conversation_id: str, key: str, limit: int) -> list[tuple[str, str, int]]:
    """``(id, branch_id, seq)`` of at most ``limit`` artifacts of the conversation whose
    ``sha256`` starts with ``key`` (``ix_tool_artifacts_sha256``)."""
    t = S.tool_artifacts

    def build() -> sa.Select[Any]:
        return (
            sa.select(t.c.id, t.c.branch_id, t.c.seq)
            .where(t.c.tenant_id == _p("p_t", t.c.tenant_id), t.c.conversation_id == _p("p_c", t.c.conversation_id),
                   t.c.sha256 >= _p("p_lo", t.c.sha256), t.c.sha256 < _p("p_hi", t.c.sha256))
            .limit(sa.bindparam("p_n", type_=sa.Integer()))
        )

    params = {"p_t": tenant_id, "p_c": conversation_id, "p_lo": key, "p_hi": key + "g", "p_n": limit}
    return [(r[0], r[1], int(r[2])) for r in prepared(conn.dialect, ("retrieval_artifacts_by_digest",), build).rows(conn, params)]


def memories_by_subject(conn: Connection, tenant_id: str, conversation_id: str, segments: Sequence[LineageSegment], subject_keys: Sequence[str]) -> list[ToolMemory]:
    """The lineage memories whose ``subject_key`` is one of ``subject_keys``, in
    ``(seq, id)`` order (SqlStore.memories with ``subject_keys``, lineage checked on the
    rows)."""
    t = S.tool_memories
    dialect = conn.dialect.name

    def build() -> sa.Select[Any]:
        body = sa.cast(t.c.body, sa.Text()) if dialect == "postgresql" else sa.type_coerce(t.c.body, sa.Text())
        return sa.select(body, t.c.branch_id, t.c.seq).where(
            t.c.tenant_id == _p("p_t", t.c.tenant_id), t.c.conversation_id == _p("p_c", t.c.conversation_id),
            in_values(t.c.subject_key, "p_keys", dialect),
        )

    params = {"p_t": tenant_id, "p_c": conversation_id, "p_keys": list_value(dialect, subject_keys)}
    rows = prepared(conn.dialect, ("retrieval_memories_by_subject",), build).rows(conn, params)
    return sorted((decode_body(ToolMemory, r[0]) for r in rows if K.in_lineage(segments, r[1], int(r[2]))), key=lambda m: (m.seq, m.id))
