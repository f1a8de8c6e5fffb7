"""SQL building blocks shared by the store's reads and writes: lineage conditions and
statements built once per table (SQLAlchemy then reuses their compiled form).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import sqlalchemy as sa

from contextledger.errors import InputError
from contextledger.store import schema as S
from contextledger.store.base import (
    LineageSegment,
)

__all__ = ["allocate_statement", "conversation_exists_statement", "insert_ignore_statement", "insert_statement", "newest_per_segment", "segments_clause", "update_statement"]

def segments_clause(table: sa.Table, segments: Sequence[LineageSegment]) -> sa.ColumnElement[bool]:
    clauses = []
    for seg in segments:
        if seg.max_seq is None:
            clauses.append(table.c.branch_id == seg.branch_id)
        else:
            clauses.append(sa.and_(table.c.branch_id == seg.branch_id, table.c.seq <= seg.max_seq))
    if not clauses:
        return sa.false()
    return sa.or_(*clauses)


def newest_per_segment(
    stmt: sa.Select[Any], table: sa.Table, segments: Sequence[LineageSegment], last: int, order: tuple[sa.Column[Any], ...]
) -> sa.Select[Any]:
    """The newest ``last`` rows of a multi-segment lineage, as one query that reads at
    most ``last`` rows per segment: a ``UNION ALL`` of per-branch windows, each an
    ordered backward range scan of the ``(tenant_id, conversation_id, branch_id, seq)``
    index, then the newest ``last`` of their union.  ``stmt`` selects ``body`` with the
    scope and filters applied, but no lineage condition yet."""
    cols = [table.c.body, *order]
    windows = []
    for seg in segments:
        sub = (
            stmt.with_only_columns(*cols)
            .where(segments_clause(table, [seg]))
            .order_by(*(c.desc() for c in order))
            .limit(last)
            .subquery()
        )
        windows.append(sa.select(*sub.c))
    union = sa.union_all(*windows).subquery()
    return sa.select(union.c.body).order_by(*(union.c[c.name].desc() for c in order)).limit(last)


@cache
def bounded_columns(table: sa.Table) -> tuple[tuple[str, int], ...]:
    """``(column, max characters)`` of ``table``'s length-bounded text columns."""
    return tuple((c.name, c.type.length) for c in table.columns if isinstance(c.type, sa.String) and c.type.length)


def check_lengths(table: sa.Table, values: dict[str, Any]) -> None:
    """Refuse a row whose text exceeds a bounded column (PostgreSQL would fail with a
    database error quoting nothing useful; SQLite would silently store it).

    Raises:
        InputError: naming the table, the column, the length and the limit.
    """
    for name, limit in bounded_columns(table):
        value = values.get(name)
        if isinstance(value, str) and len(value) > limit:
            raise InputError(f"{table.name}.{name} is {len(value):,} characters, above its {limit}-character limit")


@cache
def insert_statement(table: sa.Table) -> sa.Insert:
    return table.insert()


@cache
def insert_ignore_statement(dialect: str, table: sa.Table) -> Any:
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table).on_conflict_do_nothing().returning(table.c.id)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table).on_conflict_do_nothing().returning(table.c.id)


@cache
def update_statement(table: sa.Table) -> sa.Update:
    """``UPDATE table SET <the parameters' columns> WHERE id = :p_id AND tenant_id = :p_tenant RETURNING id``."""
    return (
        table.update()
        .where(table.c.id == sa.bindparam("p_id"), table.c.tenant_id == sa.bindparam("p_tenant"))
        .returning(table.c.id)
    )


@cache
def allocate_statement() -> sa.Update:
    t = S.conversations
    return (
        t.update()
        .where(t.c.id == sa.bindparam("p_id"), t.c.tenant_id == sa.bindparam("p_tenant"))
        .values(next_seq=t.c.next_seq + sa.bindparam("p_count", type_=sa.BigInteger))
        .returning(t.c.next_seq)
    )


@cache
def conversation_exists_statement() -> sa.Select[Any]:
    t = S.conversations
    return sa.select(t.c.id).where(t.c.id == sa.bindparam("p_id"), t.c.tenant_id == sa.bindparam("p_tenant"))
