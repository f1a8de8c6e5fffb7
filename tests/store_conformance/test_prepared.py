"""Prepared statements (``store/prepared.py``): compiled once per dialect and shape, run
on the DBAPI connection inside the caller's transaction, lists bound as one parameter."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from contextledger.store import prepared as P
from contextledger.store import schema as S
from contextledger.store.base import LineageSegment, Scope
from contextledger.store.sql import SqlStore

from .builders import add_text, fork, make_conversation


def _by_ids(dialect: str) -> sa.Select[Any]:
    t = S.messages
    return sa.select(t.c.id, t.c.seq).where(t.c.tenant_id == sa.bindparam("p_tenant", type_=t.c.tenant_id.type), P.in_values(t.c.id, "p_ids", dialect))


def test_a_list_of_any_length_is_one_parameter(store: SqlStore, scope_a: Scope) -> None:
    conv = make_conversation(store, scope_a)
    ids = [add_text(store, scope_a, conv, conv.root_branch_id, f"m{i}").id for i in range(3)]
    stmt = P.prepared(store.engine.dialect, ("test_by_ids",), lambda: _by_ids(store.dialect))
    assert P.prepared(store.engine.dialect, ("test_by_ids",), lambda: _by_ids("never built")) is stmt
    many = [f"msg_missing_{i}" for i in range(2500)] + [ids[1]]  # above SQLite's old 999-variable limit
    with store.reader() as conn, P.capture() as seen:
        assert sorted(stmt.rows(conn, {"p_tenant": "acme", "p_ids": P.list_value(store.dialect, many)})) == [(ids[1], 2)]
        assert sorted(stmt.rows(conn, {"p_tenant": "acme", "p_ids": P.list_value(store.dialect, ids)})) == [(ids[0], 1), (ids[1], 2), (ids[2], 3)]
        assert stmt.rows(conn, {"p_tenant": "acme", "p_ids": P.list_value(store.dialect, [])}) == []
        assert stmt.rows(conn, {"p_tenant": "globex", "p_ids": P.list_value(store.dialect, ids)}) == []
    assert [sql for sql, _ in seen] == [stmt.sql] * 4
    assert seen[1][1] == (("acme", '["' + '", "'.join(ids) + '"]') if store.dialect == "sqlite" else {"p_tenant": "acme", "p_ids": ids})
    with pytest.raises(KeyError, match="p_ids"):
        stmt.args({"p_tenant": "acme"})


def test_reads_run_in_the_callers_transaction(store: SqlStore, scope_a: Scope) -> None:
    conv = make_conversation(store, scope_a)
    t = S.messages
    stmt = P.prepared(store.engine.dialect, ("test_count",), lambda: sa.select(sa.func.count()).select_from(t).where(t.c.conversation_id == sa.bindparam("p_conv", type_=t.c.conversation_id.type)))
    with store.reader() as conn:
        assert stmt.rows(conn, {"p_conv": conv.id}) == [(0,)]
        add_text(store, scope_a, conv, conv.root_branch_id, "written while the reader is open")
        assert stmt.rows(conn, {"p_conv": conv.id}) == [(0,)]  # the reader's snapshot
    with store.reader() as conn:
        assert stmt.rows(conn, {"p_conv": conv.id}) == [(1,)]


def test_lineage_clause_and_params(store: SqlStore, scope_a: Scope) -> None:
    conv = make_conversation(store, scope_a)
    root = conv.root_branch_id
    seqs = [add_text(store, scope_a, conv, root, f"m{i}").seq for i in range(4)]
    child = fork(store, scope_a, conv, root, seqs[1], "child").id
    seqs.append(add_text(store, scope_a, conv, child, "on child").seq)
    segs = [LineageSegment(branch_id=child), LineageSegment(branch_id=root, max_seq=seqs[1])]
    assert P.lineage_shape(segs) == (False, True)
    assert P.lineage_params(segs) == {"p_b0": child, "p_b1": root, "p_s1": seqs[1]}
    t = S.messages
    stmt = P.prepared(
        store.engine.dialect, ("test_lineage", P.lineage_shape(segs)),
        lambda: sa.select(t.c.seq).where(P.lineage_clause(t, P.lineage_shape(segs))).order_by(t.c.seq),
    )
    with store.reader() as conn:
        assert [r[0] for r in stmt.rows(conn, P.lineage_params(segs))] == [seqs[0], seqs[1], seqs[4]]


def test_statements_needing_sqlalchemy_at_execution_are_refused(store: SqlStore) -> None:
    t = S.messages
    with pytest.raises(ValueError, match="expanding IN"):
        P.Prepared(sa.select(t.c.id).where(t.c.id.in_(["a", "b"])), store.engine.dialect)
    with pytest.raises(ValueError, match="bind processor"):
        P.Prepared(sa.select(t.c.id).where(t.c.body == sa.bindparam("p_body", type_=sa.JSON())), store.engine.dialect)


def test_driver_errors_are_raised_as_sqlalchemy_errors(store: SqlStore) -> None:
    t = S.messages
    # a function neither database has: the driver raises when the statement runs
    bad = sa.select(sa.func.no_such_function(t.c.id)).where(t.c.id == sa.bindparam("p_id", type_=t.c.id.type))
    stmt = P.Prepared(bad, store.engine.dialect)
    with store.reader() as conn, pytest.raises(sa.exc.DBAPIError) as caught:
        stmt.rows(conn, {"p_id": "x"})
    assert "no_such_function" in str(caught.value.orig)
    assert caught.value.statement == stmt.sql
