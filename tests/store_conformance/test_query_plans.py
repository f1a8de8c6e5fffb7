"""The lineage and candidate queries stay index-bounded as a conversation grows: with
10^4 messages in the conversation (3·10^4 in the table) no query the assembler runs
scans a large table, and the recent window reads each lineage segment backwards
through the lineage index (docs/query-plans.md)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextledger.store.blobs import LocalBlobStore
from contextledger.store.sql import SqlStore

from .plan_data import assembler_queries, explain, populate

LARGE = "messages|tool_calls|tool_artifacts|tool_memories"


@pytest.fixture
def plans(backend_url: str, tmp_path: Path) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    store = SqlStore(backend_url, LocalBlobStore(tmp_path / "blobs"))
    try:
        populate(store, 10_000)
        out = [(re.sub(r"\s+", " ", stmt), "\n".join(explain(store, stmt, params))) for stmt, params in assembler_queries(store)]
        yield store.dialect, out
    finally:
        store.close()


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


def test_candidate_queries_use_their_indexes(plans: tuple[str, list[tuple[str, str]]]) -> None:
    dialect, out = plans
    # windows: one backward range per lineage segment (3 segments), in every window read
    windows = [plan for sql, plan in out if "UNION ALL" in sql and "FROM messages" in sql and "messages.kind IN" not in sql]
    assert windows and [w.count("ix_messages_lineage") for w in windows] == [3] * len(windows)
    # the newest compaction messages: one backward range of ix_messages_kind per segment
    compactions = [plan for sql, plan in out if "UNION ALL" in sql and "messages.kind IN" in sql]
    assert compactions and [w.count("ix_messages_kind") for w in compactions] == [3] * len(compactions)
    memory_windows = [plan for sql, plan in out if "UNION ALL" in sql and "FROM tool_memories" in sql]
    assert memory_windows and [w.count("ix_tool_memories_lineage") for w in memory_windows] == [3] * len(memory_windows)
    assert "ix_tool_calls_message" in _plan_of(out, "tool_calls.message_id IN")
    assert "ix_tool_calls_status" in _plan_of(out, "tool_calls.status IN")
    assert "ux_tool_artifacts_call_id" in _plan_of(out, "FROM tool_artifacts", "tool_artifacts.call_id IN")
    assert "ix_tool_memories_artifact" in _plan_of(out, "tool_memories.artifact_id IN")
    # recall: one backward range of the term index per term (bounded by LIMIT)
    assert "ix_memory_terms_term" in _plan_of(out, "FROM memory_terms")
    # reads by id go through the primary key, never a (tenant, conversation) range
    pk = ("sqlite_autoindex_tool_memories_1", "sqlite_autoindex_tool_artifacts_1") if dialect == "sqlite" else ("tool_memories_pkey", "tool_artifacts_pkey")
    assert pk[0] in _plan_of(out, "tool_memories.id IN")
    assert pk[1] in _plan_of(out, "tool_artifacts.id IN")
    # the working set: the newest memories of each segment, then the file subjects
    assert "ix_tool_memories_lineage" in _plan_of(out, "FROM tool_memories", "tool_memories.subject_key AS subject_key")
    assert "ix_tool_memories_subject" in _plan_of(out, "tool_memories.subject_key IN")
    assert "ix_messages_role" in _plan_of(out, "messages.role IN")
    assert "ix_messages_role" in _plan_of(out, "messages.role = ", "messages.kind || ")
    # every read filtered by role, kind or status uses that filter's index, also on a
    # one-segment lineage (where the lineage index matches as many leading columns)
    for needle, index in (("messages.role", "ix_messages_role"), ("messages.kind IN", "ix_messages_kind"), ("tool_calls.status", "ix_tool_calls_status")):
        plans_of = [plan for sql, plan in out if needle in sql]
        assert plans_of and all(index in plan for plan in plans_of), (needle, plans_of)
    # lineage totals and out-of-lineage counts read the counters, never the history
    assert not [sql for sql, _ in out if "count(" in sql.lower() and re.search(rf"FROM ({LARGE})\b", sql)]
    assert "branch_counters" in _plan_of(out, "FROM branch_counters")
    by_ids = _plan_of(out, "FROM messages", "messages.id IN")
    assert ("ix_messages_id" if dialect == "sqlite" else "messages_pkey") in by_ids
