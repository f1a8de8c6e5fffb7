"""The statement builders of the prepared lineage reads (:mod:`.reads`) and the base
they share: one conversation's reads on one connection, each statement compiled once
(``store/prepared.py``) and run with the scope's parameters."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa

from contextledger.store.base import Scope, StoreReads, require_scope
from contextledger.store.prepared import in_values, lineage_clause, list_value, prepared

__all__ = [
    "LAST",
    "Build",
    "PreparedReads",
    "filtered_rows",
    "newest_rows",
    "param",
    "scoped",
    "scoped_by_id",
    "text_body",
    "union_of",
]

Build = Callable[[], sa.Select[Any] | sa.CompoundSelect[Any]]


def param(name: str, column: sa.ColumnElement[Any]) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=column.type)


def scoped(t: sa.Table) -> tuple[sa.ColumnElement[bool], sa.ColumnElement[bool]]:
    return t.c.tenant_id == param("p_tenant", t.c.tenant_id), t.c.conversation_id == param(
        "p_conv", t.c.conversation_id
    )


def scoped_by_id(t: sa.Table, dialect: str) -> tuple[sa.ColumnElement[bool], ...]:
    # by id the primary key decides; the scope is checked in a form no (tenant,
    # conversation, …) index can serve (SqlStore.memories)
    return (
        in_values(t.c.id, "p_ids", dialect),
        t.c.tenant_id.concat("") == param("p_tenant", t.c.tenant_id),
        t.c.conversation_id.concat("") == param("p_conv", t.c.conversation_id),
    )


LAST = sa.bindparam("p_last", type_=sa.Integer())


def text_body(stmt: sa.Select[Any], dialect: str) -> sa.Select[Any]:
    """``stmt`` with its first column (``body``) read as JSON text (SqlStore._body_as_text)."""
    cols = list(stmt.selected_columns)
    body = (
        sa.cast(cols[0], sa.Text())
        if dialect == "postgresql"
        else sa.type_coerce(cols[0], sa.Text())
    )
    return stmt.with_only_columns(body, *cols[1:])


def newest_rows(
    t: sa.Table,
    shape: tuple[bool, ...],
    order: tuple[str, ...],
    filters: Sequence[sa.ColumnElement[bool]],
    dialect: str,
    *,
    last: sa.BindParameter[Any] = LAST,
    oldest: bool = False,
) -> sa.Select[Any]:
    """The newest ``last`` rows of a lineage (SqlStore.messages / memories with
    ``last``): one ordered backward range, or per segment one window of at most
    ``last`` rows, then the newest ``last`` of their ``UNION ALL``.  ``oldest``: the
    oldest ``last`` rows instead (forward ranges)."""
    cols = [t.c[c] for c in order]

    def direction(c: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
        return c.asc() if oldest else c.desc()

    if len(shape) <= 1:
        stmt = sa.select(t.c.body).where(*scoped(t), lineage_clause(t, shape), *filters)
        return text_body(stmt.order_by(*(direction(c) for c in cols)).limit(last), dialect)
    windows = []
    for i, bounded in enumerate(shape):
        sub = (
            sa.select(t.c.body, *cols)
            .where(*scoped(t), *filters, lineage_clause(t, (bounded,), i))
            .order_by(*(direction(c) for c in cols))
            .limit(last)
            .subquery()
        )
        windows.append(sa.select(*sub.c))
    union = sa.union_all(*windows).subquery()
    stmt = sa.select(union.c.body).order_by(*(direction(union.c[c]) for c in order)).limit(last)
    return text_body(stmt, dialect)


def union_of(arms: Sequence[sa.Select[Any]]) -> sa.Select[Any] | sa.CompoundSelect[Any]:
    """One statement of ``arms`` (each ordered and limited on its own): the arm itself,
    or the ``UNION ALL`` of the arms as subqueries."""
    if len(arms) == 1:
        return arms[0]
    return sa.union_all(*(sa.select(*a.subquery().c) for a in arms))


def filtered_rows(
    t: sa.Table,
    shape: tuple[bool, ...] | None,
    filters: Sequence[sa.ColumnElement[bool]],
    dialect: str,
) -> sa.Select[Any]:
    """Bodies of the scope's rows matching ``filters`` (on the lineage of ``shape``
    unless ``None``), no ``ORDER BY`` (sorted by the caller, as the store does)."""
    lineage = () if shape is None else (lineage_clause(t, shape),)
    return text_body(sa.select(t.c.body).where(*scoped(t), *lineage, *filters), dialect)


class PreparedReads:
    """One conversation's prepared reads on one connection (the base of
    :class:`~contextledger.store.reads.LineageReads`; its arguments are described there).

    Raises:
        ScopeError: no scope.
    """

    def __init__(
        self, store: StoreReads, conn: sa.Connection, scope: Scope | None, conversation_id: str
    ) -> None:
        self.store = store
        self.conn = conn
        self.scope = require_scope(scope)
        self.conversation_id = conversation_id
        self._dialect = store.engine.dialect
        self._name = store.dialect
        self._base: dict[str, Any] = {"p_tenant": self.scope.tenant_id, "p_conv": conversation_id}

    def _rows(
        self, key: tuple[Any, ...], build: Build, params: dict[str, Any] | None = None
    ) -> list[Any]:
        stmt = prepared(self._dialect, key, build)
        return stmt.rows(self.conn, self._base if params is None else {**self._base, **params})

    def _ids(self, values: Sequence[str]) -> Any:
        return list_value(self._name, values)
