"""Statements built with SQLAlchemy Core once, compiled once, run on the DBAPI cursor.

Building a SQLAlchemy statement, generating its cache key and setting up its execution
context costs ten times more than the small index reads of an assembly themselves.  The
hot reads (``store/reads.py``) are therefore built from the schema's tables
(``store/schema.py`` stays the only description of the schema) once per dialect and
*shape* — e.g. how many lineage segments a statement covers and which of them are
bounded by a fork point — compiled to the dialect's SQL text once, and executed directly
on the DBAPI connection of the caller's SQLAlchemy connection (same transaction), with
bound parameters only.

A list of ids is bound as ONE parameter (:func:`in_values`), so the SQL text does not
depend on the list's length: SQLite ``col IN (SELECT value FROM json_each(?))`` (the
list as JSON text), PostgreSQL ``col = ANY(%(p)s::VARCHAR[])`` (the list as an array).
Both are index searches of the same index as an ``IN (…)`` list (docs/query-plans.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql.compiler import SQLCompiler

__all__ = ["Prepared", "capture", "in_values", "lineage_clause", "lineage_params", "lineage_shape", "list_value", "prepared"]

_CAPTURE: list[list[tuple[str, Any]]] = []


class Prepared:
    """One SQL statement compiled for one dialect.

    Args:
        stmt: a SQLAlchemy Core statement whose parameters are named ``bindparam``s
            (literal values in it, e.g. ``LIMIT``'s ``OFFSET 0`` on SQLite, keep their
            value).
        dialect: the engine's dialect.

    Raises:
        ValueError: the statement needs SQLAlchemy at execution time (an expanding
            ``IN`` list, or a parameter type with a bind processor other than an array).
    """

    __slots__ = ("_defaults", "_names", "_required", "sql")

    def __init__(self, stmt: sa.ClauseElement, dialect: Dialect) -> None:
        compiled = stmt.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)
        if "POSTCOMPILE" in compiled.string:
            raise ValueError("prepared statements cannot hold expanding IN lists; bind one list parameter (in_values)")
        for name in compiled._bind_processors:
            if not isinstance(compiled.binds[name].type, sa.ARRAY):
                raise ValueError(f"parameter {name!r} needs a bind processor")
        self.sql: str = compiled.string
        """The statement's SQL text in the dialect's parameter style."""
        self._defaults = {name: bp.effective_value for name, bp in compiled.binds.items() if not bp.required}
        self._names: tuple[str, ...] | None = tuple(compiled.positiontup or ()) if compiled.positional else None
        self._required = frozenset(name for name, bp in compiled.binds.items() if bp.required)

    def args(self, params: Mapping[str, Any]) -> Any:
        """The DBAPI parameters for ``params`` (a tuple for positional styles, a dict
        otherwise), defaults of literal values filled in.

        Raises:
            KeyError: a required parameter is missing.
        """
        if self._names is None:
            if not self._required <= params.keys():
                raise KeyError(", ".join(sorted(self._required - params.keys())))
            return {**self._defaults, **params} if self._defaults else params
        d = self._defaults
        return tuple(params[n] if n in params else d[n] for n in self._names)

    def rows(self, conn: Connection, params: Mapping[str, Any]) -> list[Any]:
        """Execute on ``conn``'s DBAPI connection (inside its current transaction) and
        return every row as a DBAPI tuple (no type processing: JSON columns must be read
        as text).

        Raises:
            KeyError: a required parameter is missing.
            sqlalchemy.exc.DBAPIError: the driver's error, wrapped as SQLAlchemy wraps it
                (``OperationalError``, ``ProgrammingError``, …), as for any statement.
        """
        args = self.args(params)
        for sink in _CAPTURE:
            sink.append((self.sql, args))
        dbapi = conn.connection.driver_connection
        assert dbapi is not None
        cur = dbapi.cursor()
        try:
            cur.execute(self.sql, args)
            return list(cur.fetchall())
        except conn.dialect.loaded_dbapi.Error as exc:
            raise sa.exc.DBAPIError.instance(self.sql, args, exc, conn.dialect.loaded_dbapi.Error, dialect=conn.dialect) from exc
        finally:
            cur.close()


_CACHE: dict[tuple[Any, ...], Prepared] = {}


def _dialect_key(dialect: Dialect) -> tuple[Any, ...]:
    return (dialect.name, dialect.driver, dialect.paramstyle, dialect.server_version_info)


def prepared(dialect: Dialect, key: tuple[Any, ...], build: Callable[[], sa.ClauseElement]) -> Prepared:
    """The statement ``build()`` compiled for ``dialect``, built and compiled on the
    first request for ``(dialect, key)`` and kept for the process (``key`` names the
    statement and its shape; the set of shapes is small: lineage depth, term count)."""
    full = (_dialect_key(dialect), *key)
    p = _CACHE.get(full)
    if p is None:
        p = _CACHE[full] = Prepared(build(), dialect)
    return p


@contextmanager
def capture() -> Iterator[list[tuple[str, Any]]]:
    """Record ``(sql, DBAPI parameters)`` of every prepared statement executed inside
    the block (the query-plan tests explain them)."""
    sink: list[tuple[str, Any]] = []
    _CAPTURE.append(sink)
    try:
        yield sink
    finally:
        _CAPTURE.remove(sink)


def in_values(column: sa.ColumnElement[Any], name: str, dialect: str) -> sa.ColumnElement[bool]:
    """``column`` is one of the list bound as parameter ``name`` (value from
    :func:`list_value`): ``IN (SELECT value FROM json_each(:name))`` on SQLite,
    ``= ANY(:name)`` (an array of the column's type) on PostgreSQL."""
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return column == sa.any_(sa.bindparam(name, type_=postgresql.ARRAY(column.type)))
    each = sa.func.json_each(sa.bindparam(name, type_=sa.String())).table_valued("value")
    return column.in_(sa.select(each.c.value))


def list_value(dialect: str, values: Iterable[str] | Iterable[int]) -> Any:
    """The parameter value of an :func:`in_values` list: JSON text on SQLite, a list on
    PostgreSQL."""
    if dialect == "postgresql":
        return list(values)
    return json.dumps(list(values))


def lineage_shape(segments: Sequence[Any]) -> tuple[bool, ...]:
    """The shape of a lineage: for each segment whether it is bounded by a fork point
    (``max_seq`` set)."""
    return tuple(s.max_seq is not None for s in segments)


def lineage_clause(table: sa.Table, shape: Sequence[bool], first: int = 0) -> sa.ColumnElement[bool]:
    """``branch_id = :p_b0 [AND seq <= :p_s0] OR …`` for the segments ``first …`` of a
    lineage of ``shape`` (``false`` for none), parameters from :func:`lineage_params`."""
    clauses: list[sa.ColumnElement[bool]] = []
    for i, bounded in enumerate(shape, start=first):
        on_branch = table.c.branch_id == sa.bindparam(f"p_b{i}", type_=table.c.branch_id.type)
        clauses.append(sa.and_(on_branch, table.c.seq <= sa.bindparam(f"p_s{i}", type_=table.c.seq.type)) if bounded else on_branch)
    if not clauses:
        return sa.false()
    return sa.or_(*clauses)


def lineage_params(segments: Sequence[Any]) -> dict[str, Any]:
    """The parameters of :func:`lineage_clause` for ``segments``
    (:class:`~contextledger.store.base.LineageSegment` list)."""
    out: dict[str, Any] = {}
    for i, s in enumerate(segments):
        out[f"p_b{i}"] = s.branch_id
        if s.max_seq is not None:
            out[f"p_s{i}"] = s.max_seq
    return out
