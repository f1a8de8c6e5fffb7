"""A large branched conversation for query-plan checks, and the plans of the queries the
assembler runs on it (``docs/query-plans.md`` was written from this module's output:
``python -m tests.store_conformance.plan_data sqlite|postgresql URL``).

Shape (``n`` messages in ``conv_big``): root; ``b1`` forks root at n/2; ``b2`` forks b1
at 3n/4 (the active branch); every 20th message is a user turn — every other one a
system message instead (``kind`` progress, one in ten ``chat``) —, then alternating
assistant (one tool call each: every 97th seq failed, every 991st pending) and tool
result (artifact + memory).  Two more
conversations of ``n`` messages each (one in another tenant) make the conversation filter
selective.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa

from contextledger.assembly.candidates import collect_candidates
from contextledger.store import prepared
from contextledger.store import schema as S
from contextledger.store.base import Scope
from contextledger.store.reads import LineageReads
from contextledger.store.sql import SqlStore

NOW = "2025-01-01T00:00:00+00:00"
SCOPE = Scope(tenant_id="acme")
BIG = "conv_big"


def _branch_of(conv: str, seq: int, n: int, branched: bool) -> str:
    if not branched:
        return f"{conv}_root"
    if seq <= n // 2:
        return f"{conv}_root" if seq % 10 else f"{conv}_b1"
    if seq <= 3 * n // 4:
        return f"{conv}_b1" if seq % 5 else f"{conv}_root"
    return f"{conv}_b2" if seq % 3 else f"{conv}_root"


def _rows(tenant: str, conv: str, n: int, branched: bool) -> Iterator[tuple[sa.Table, dict[str, Any]]]:
    base = {"tenant_id": tenant, "conversation_id": conv}
    for seq in range(1, n + 1):
        b = _branch_of(conv, seq, n, branched)
        role = "user" if seq % 20 == 1 else ("assistant" if seq % 2 else "tool")
        kind = "chat"
        if seq % 40 == 21:  # a runtime record of role system; one in ten a system chat message
            role, kind = "system", ("chat" if seq % 400 == 21 else "progress")
        mid = f"{conv}_m{seq}"
        common = {**base, "branch_id": b, "seq": seq}
        yield S.messages, {**common, "id": mid, "role": role, "kind": kind, "visibility": "branch", "token_count": 10,
                           "body": {**common, "id": mid, "role": role, "kind": kind, "parts": [{"kind": "text", "text": "x"}], "created_at": NOW}}
        if role == "assistant":
            status = "failed" if seq % 97 == 0 else ("pending" if seq % 991 == 0 else "succeeded")
            call = {**common, "id": f"{conv}_c{seq}", "call_id": f"call_{seq}", "tool_name": "Bash", "status": status, "message_id": mid}
            yield S.tool_calls, {**call, "body": {**call, "created_at": NOW}}
        elif role == "tool":
            aid = f"{conv}_a{seq}"
            art = {**common, "id": aid, "call_id": f"call_{seq - 1}", "tool_name": "Bash", "status": "succeeded",
                   "sha256": "sha256:0", "size_bytes": 1, "inline_text": "x"}
            yield S.tool_artifacts, {**art, "result_tokens": 5, "visibility": "branch",
                                     "body": {**art, "message_id": mid, "observed_at": NOW, "created_at": NOW}}
            subject = f"file:/src/f{seq % 300}.py"
            yield S.tool_memories, {**common, "id": f"{conv}_mem{seq}", "artifact_id": aid, "subject_key": subject,
                                    "resolution_state": "current", "visibility": "branch", "token_count": 5,
                                    "body": {**common, "id": f"{conv}_mem{seq}", "source_artifact_ids": [aid], "source_tool": "Bash",
                                             "call_id": f"call_{seq - 1}", "summary": "s", "subject_key": subject,
                                             "observed_at": NOW, "created_at": NOW}}
            for term in ("bash", "succeed", "src", f"f{seq % 300}"):
                yield S.memory_terms, {**common, "memory_id": f"{conv}_mem{seq}", "term": term}


def populate(store: SqlStore, n: int) -> None:
    """Insert the three conversations (bulk inserts; bodies are placeholders)."""
    for tenant, conv, branched in (("acme", BIG, True), ("acme", "conv_noise", False), ("globex", "conv_other", True)):
        with store.writer(Scope(tenant_id=tenant)) as w:
            root = f"{conv}_root"
            w.conn.execute(S.conversations.insert().values(
                id=conv, tenant_id=tenant, title="t", next_seq=n, created_at=NOW,
                body={"id": conv, "tenant_id": tenant, "root_branch_id": root, "active_branch_id": f"{conv}_b2" if branched else root,
                      "created_at": NOW},
            ))
            branches: list[tuple[str, str | None, int | None]] = [(root, None, None)]
            if branched:
                branches += [(f"{conv}_b1", root, n // 2), (f"{conv}_b2", f"{conv}_b1", 3 * n // 4)]
            w.conn.execute(S.branches.insert(), [
                {"id": b, "tenant_id": tenant, "conversation_id": conv, "parent_branch_id": p, "fork_seq": f,
                 "body": {"id": b, "tenant_id": tenant, "conversation_id": conv, "parent_branch_id": p, "fork_seq": f, "created_at": NOW}}
                for b, p, f in branches
            ])
            batches: dict[str, list[dict[str, Any]]] = {}
            for table, row in _rows(tenant, conv, n, branched):
                batches.setdefault(table.name, []).append(row)
            for name, rows in batches.items():
                for i in range(0, len(rows), 2000):
                    w.conn.execute(S.TABLES[name].insert(), rows[i:i + 2000])
            w.rebuild_counters(conv)  # the rows were bulk-inserted around the Writer
    if store.dialect == "postgresql":
        with store.engine.connect() as c:
            c.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")


def assembler_queries(store: SqlStore) -> list[tuple[str, Any]]:
    """The SELECTs the assembler's candidate collection runs on ``conv_big`` (window 40;
    a three-segment lineage) and on ``conv_noise`` (one segment: the filter indexes must
    still win over the lineage range), the reads of recall and of recovery exchanges
    (run directly: the placeholder data does not trigger them), the working-set reads (bodies
    in one statement, and entries first, then the bodies),
    then the memory-by-subject read of memory linking (through SQLAlchemy), as
    (statement, DBAPI parameters)."""
    captured: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            captured.append((statement, parameters))

    sa.event.listen(store.engine, "before_cursor_execute", capture)
    try:
        with prepared.capture() as fast:
            collect_candidates(store, SCOPE, BIG, None, recent_window=40, max_candidates=200)
            collect_candidates(store, SCOPE, "conv_noise", None, recent_window=40, max_candidates=200)
            segs = store.lineage(SCOPE, f"{BIG}_b2")
            with store.reader() as conn:
                # the reads of recall (terms found in the data, ids), outside their conditions
                reads = LineageReads(store, conn, SCOPE, BIG)
                reads.term_matches(["src", "succeed"], 64)
                reads.memories_by_id([f"{BIG}_mem{n}" for n in (2, 4, 6)])
                reads.artifacts_by_id([f"{BIG}_a{n}" for n in (2, 4, 6)])
                reads.calls_by_call_id([f"call_{n}" for n in (1, 3, 5)])
                reads.messages_by_id(segs, [f"{BIG}_m{n}" for n in (1, 2, 3)])
                reads.memories_by_artifact(segs, [f"{BIG}_a{n}" for n in (2, 4, 6)])
            store.recent_subject_memories(SCOPE, BIG, segs, "file:", limit=40)
            store.recent_subject_memories(SCOPE, BIG, segs, "file:", limit=40, settled=lambda e: e.visibility == "branch")
            store.memories(SCOPE, BIG, segs, subject_keys=["file:/src/f7.py"])
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", capture)
    return fast + captured


def explain(store: SqlStore, statement: str, parameters: Any) -> list[str]:
    """Plan lines: ``EXPLAIN QUERY PLAN`` details on SQLite, ``EXPLAIN (COSTS OFF)`` on PostgreSQL."""
    prefix = "EXPLAIN (COSTS OFF) " if store.dialect == "postgresql" else "EXPLAIN QUERY PLAN "
    with store.engine.connect() as c:
        return [str(r[-1]) for r in c.exec_driver_sql(prefix + statement, parameters).all()]


def explain_generic(store: SqlStore, statement: str, parameters: dict[str, Any]) -> list[str]:
    """PostgreSQL: the plan of ``statement`` as a *generic* plan (``PREPARE`` with
    ``plan_cache_mode = force_generic_plan``), the plan a server-side prepared statement
    may settle on — psycopg prepares a statement executed five times on a connection."""
    import psycopg

    names: list[str] = []

    def number(m: re.Match[str]) -> str:
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    text = re.sub(r"%\((\w+)\)s", number, statement).replace("%%", "%")
    with store.engine.connect() as c:
        raw = c.connection.driver_connection
        assert isinstance(raw, psycopg.Connection)
        cur = psycopg.ClientCursor(raw)
        cur.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cur.execute(f"PREPARE generic_probe AS {text}")
        try:
            args = [parameters[n] for n in names]
            cur.execute("EXPLAIN (COSTS OFF) EXECUTE generic_probe(" + ", ".join(["%s"] * len(args)) + ")", args)
            return [str(r[0]) for r in cur.fetchall()]
        finally:
            cur.execute("DEALLOCATE generic_probe")
            c.rollback()


def main(url: str, n: int = 10_000) -> None:  # pragma: no cover - documentation helper
    import tempfile
    from pathlib import Path

    from contextledger.store.blobs import LocalBlobStore

    store = SqlStore(url, LocalBlobStore(Path(tempfile.mkdtemp())))
    populate(store, n)
    for statement, params in assembler_queries(store):
        print("\n-- " + re.sub(r"\s+", " ", statement))
        for line in explain(store, statement, params):
            print("   " + line)
    store.close()


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 10_000)
