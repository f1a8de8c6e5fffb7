"""The lineage and candidate queries stay index-bounded as a conversation grows: with
10^4 messages in the conversation (3·10^4 in the table) no query the assembler runs
scans a large table, and the recent window reads each lineage segment backwards
through the lineage index (docs/query-plans.md).  The statements are the ones executed:
the prepared statements of candidate collection and the working set
(``store/prepared.py``, ids bound as one list parameter) and the SQLAlchemy ones."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextledger.store.blobs import LocalBlobStore
from contextledger.store.sql import SqlStore

from .plan_data import assembler_queries, explain, explain_generic, populate

LARGE = "messages|tool_calls|tool_artifacts|tool_memories"


@pytest.fixture
def planned(backend_url: str, tmp_path: Path) -> Iterator[tuple[str, list[tuple[str, str]], list[tuple[str, str]]]]:
    """``(dialect, [(sql, plan)], [(sql, generic plan)])`` of the assembler's queries
    (generic plans: PostgreSQL only)."""
    store = SqlStore(backend_url, LocalBlobStore(tmp_path / "blobs"))
    try:
        populate(store, 10_000)
        queries = assembler_queries(store)
        out = [(re.sub(r"\s+", " ", stmt), "\n".join(explain(store, stmt, params))) for stmt, params in queries]
        generic = (
            [(re.sub(r"\s+", " ", stmt), "\n".join(explain_generic(store, stmt, params))) for stmt, params in queries]
            if store.dialect == "postgresql"
            else []
        )
        yield store.dialect, out, generic
    finally:
        store.close()


@pytest.fixture
def plans(planned: tuple[str, list[tuple[str, str]], list[tuple[str, str]]]) -> tuple[str, list[tuple[str, str]]]:
    return planned[0], planned[1]


@pytest.fixture
def generic(planned: tuple[str, list[tuple[str, str]], list[tuple[str, str]]]) -> list[tuple[str, str]]:
    return planned[2]


def _plan_of(plans: list[tuple[str, str]], *needles: str) -> str:
    found = [plan for sql, plan in plans if all(n in sql for n in needles)]
    assert found, needles
    return "\n".join(found)


def test_no_full_scan_of_large_tables(plans: tuple[str, list[tuple[str, str]]]) -> None:
    dialect, out = plans
    assert len(out) >= 20
    full_scan = re.compile(rf"^\s*SCAN ({LARGE})\b" if dialect == "sqlite" else rf"Seq Scan on ({LARGE})\b", re.M)
    offenders = [(sql[:160], plan) for sql, plan in out if full_scan.search(plan)]
    assert offenders == []

def test_generic_plans_stay_on_indexes(plans: tuple[str, list[tuple[str, str]]], generic: list[tuple[str, str]]) -> None:
    """Prepared statements run with a fixed SQL text: once psycopg prepares one
    (PostgreSQL), the server may switch to a generic plan, made without the parameter
    values — those are index searches too.  (SQLite plans a statement when it is
    prepared, without the values: its plans above are already those.)"""
    dialect, out = plans
    if dialect == "sqlite":
        assert generic == []
        return
    assert len(generic) == len([sql for sql, _ in out if "%(" in sql]) >= 20
    full_scan = re.compile(rf"Seq Scan on ({LARGE}|memory_terms)\b")
    assert [(sql[:160], plan) for sql, plan in generic if full_scan.search(plan)] == []
    for column, index in (("tool_calls.message_id", "ix_tool_calls_message"), ("tool_memories.id", "tool_memories_pkey")):
        found = [plan for sql, plan in generic if f"{column} = ANY (" in sql]
        assert found and all(index in plan for plan in found), (column, found)


def _in(dialect: str, column: str) -> str:
    """How a list of ids bound as one parameter reads in the SQL (store/prepared.py)."""
    return f"{column} IN (SELECT" if dialect == "sqlite" else f"{column} = ANY ("


_ROLE = re.compile(r"\bix_messages_role\b")
"""ix_messages_role, not ix_messages_role_kind."""


def _each_plan(plans: list[tuple[str, str]], *needles: str) -> list[str]:
    found = [plan for sql, plan in plans if all(n in sql for n in needles)]
    assert found, needles
    return found


def test_candidate_queries_use_their_indexes(plans: tuple[str, list[tuple[str, str]]]) -> None:
    dialect, out = plans
    # windows: one backward range per lineage segment (3 segments), in every window read
    windows = [plan for sql, plan in out if "UNION ALL" in sql and "FROM messages" in sql and "messages.kind" not in sql]
    assert windows and [w.count("ix_messages_lineage") for w in windows] == [3] * len(windows)
    # the newest compaction / moderator messages: one backward range of ix_messages_kind per segment
    compactions = [plan for sql, plan in out if "UNION ALL" in sql and "messages.kind IN" in sql]
    assert compactions and [w.count("ix_messages_kind") for w in compactions] == [3] * len(compactions)
    # the first user message: one LIMIT 1 probe of ix_messages_role per segment
    first_user = [plan for sql, plan in out if "UNION ALL" in sql and "messages.kind || " in sql]
    assert first_user and [len(_ROLE.findall(w)) for w in first_user] == [3] * len(first_user)
    # the system head: per role (system, developer) and segment, a backward range (the
    # newest) and a forward LIMIT 1 probe (the first) of ix_messages_role_kind — 12 on
    # the three-segment lineage, 4 on the one-segment one; never ix_messages_role or kind
    head = [(sql, plan) for sql, plan in out if "messages.role = " in sql and "messages.kind = " in sql]
    assert sorted(plan.count("ix_messages_role_kind") for _, plan in head) == [4, 12]
    assert [p for _, p in head if _ROLE.search(p) or "ix_messages_kind" in p or "ix_messages_lineage" in p] == []
    assert all(sql.count("messages.role = ") == plan.count("ix_messages_role_kind") for sql, plan in head)
    memory_windows = [plan for sql, plan in out if "UNION ALL" in sql and "FROM tool_memories" in sql]
    assert memory_windows and [w.count("ix_tool_memories_lineage") for w in memory_windows] == [3] * len(memory_windows)
    # reads by a list of ids (one parameter): every one on its own index, on the
    # three-segment and on the one-segment lineage alike
    pk = ("sqlite_autoindex_tool_memories_1", "sqlite_autoindex_tool_artifacts_1") if dialect == "sqlite" else ("tool_memories_pkey", "tool_artifacts_pkey")
    by_list = {
        "tool_calls.message_id": "ix_tool_calls_message",
        "tool_calls.call_id": "ux_tool_calls_call_id",
        "tool_artifacts.call_id": "ux_tool_artifacts_call_id",
        "tool_memories.artifact_id": "ix_tool_memories_artifact",
        "messages.id": "ix_messages_id" if dialect == "sqlite" else "messages_pkey",
        # by id the primary key decides, never a (tenant, conversation) range
        "tool_memories.id": pk[0],
        "tool_artifacts.id": pk[1],
    }
    for column, index in by_list.items():
        found = _each_plan(out, _in(dialect, column))
        assert all(index in plan for plan in found), (column, found)
    # recovery: the newest calls of each status (pending, awaiting approval, failed), one
    # backward range of ix_tool_calls_status per status and segment — 9 and 3
    recovery = [plan for sql, plan in out if "tool_calls.status = " in sql]
    assert sorted(plan.count("ix_tool_calls_status") for plan in recovery) == [3, 9]
    assert [p for p in recovery if "ix_tool_calls_lineage" in p] == []
    # recall: one backward range of the term index per term (bounded by LIMIT), in one statement
    terms = [(sql, plan) for sql, plan in out if "FROM memory_terms" in sql]
    assert terms and all(plan.count("ix_memory_terms_term") == sql.count("memory_terms.term = ") for sql, plan in terms)
    assert max(sql.count("memory_terms.term = ") for sql, _ in terms) == 2
    # the working set: the newest memories of each segment, then their bodies by primary key
    working_set = [plan for sql, plan in out if "FROM tool_memories" in sql and "tool_memories.subject_key AS subject_key" in sql and "tool_memories.visibility AS visibility" not in sql]
    assert working_set and [p.count("ix_tool_memories_lineage") for p in working_set] == [3] * len(working_set)
    assert all(pk[0] in p for p in working_set)
    # the working set's entries (subject, visibility, owner, id): from the index alone
    # (SQLite: a covering index; PostgreSQL decides index-only scans by its visibility
    # map, so only the index is asserted there), no table row read by primary key
    entries = _each_plan(out, "FROM tool_memories", "tool_memories.visibility AS visibility", "tool_memories.owner_participant_id AS owner_participant_id")
    assert [p.count("ix_tool_memories_lineage") for p in entries] == [3]
    assert not any(pk[0] in p for p in entries)
    if dialect == "sqlite":
        assert entries[0].count("USING COVERING INDEX ix_tool_memories_lineage") == 3
    assert all("ix_tool_memories_subject" in p for p in _each_plan(out, "tool_memories.subject_key IN"))
    # every read filtered by role, kind or status uses that filter's index, also on a
    # one-segment lineage (where the lineage index matches as many leading columns)
    for needle, index in (("messages.role", r"ix_messages_role(_kind)?\b"), ("messages.kind IN", r"ix_messages_kind\b"), ("tool_calls.status", r"ix_tool_calls_status\b")):
        plans_of = [plan for sql, plan in out if needle in sql]
        assert plans_of and all(re.search(index, plan) for plan in plans_of), (needle, plans_of)
    # lineage totals and out-of-lineage counts read the counters, never the history
    assert not [sql for sql, _ in out if "count(" in sql.lower() and re.search(rf"FROM ({LARGE})\b", sql)]
    assert "branch_counters" in _plan_of(out, "FROM branch_counters")
