"""Per-branch counters (``store/counters.py``): after mixed writes, forks (nested, at older
points, before the parent's history exists), late rows below a fork point, and
concurrent writers from several processes, the counters read by ``lineage_totals`` and
``outside_lineage_counts`` equal a full recount over the rows, on SQLite and PostgreSQL;
the migration that adds them backfills the same values."""

from __future__ import annotations

import multiprocessing as mp
import traceback
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command

from contextledger.errors import InputError
from contextledger.ids import new_id
from contextledger.ledger import Ledger
from contextledger.records.enums import Role
from contextledger.records.models import Branch, Message
from contextledger.records.parts import TextPart
from contextledger.store import counters as K
from contextledger.store import schema as S
from contextledger.store.base import Scope
from contextledger.store.clauses import segments_clause
from contextledger.store.migrate import alembic_config, current_revision, upgrade
from contextledger.store.sql import SqlStore
from store_conformance.builders import add_call_and_result, add_text, at, fork, make_conversation

SCOPE = Scope(tenant_id="acme")


def recount(store: SqlStore, scope: Scope, conv_id: str) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
    """Per branch: (lineage totals, outside counts) counted over the rows themselves."""
    out = {}
    for b in store.branches(scope, conv_id):
        segs = store.lineage(scope, b.id)
        with store.reader() as c:
            inside = K.aggregate(c, scope.tenant_id, conv_id, lambda t, s=segs: segments_clause(t, s))  # type: ignore[misc]
            outside = K.aggregate(c, scope.tenant_id, conv_id, lambda t, s=segs: sa.not_(segments_clause(t, s)))  # type: ignore[misc]
        out[b.id] = (
            {k: int(v or 0) for k, v in inside.items()},
            {"message": int(outside["messages"] or 0), "artifact": int(outside["artifacts"] or 0), "memory": int(outside["memories"] or 0)},
        )
    return out


def from_counters(store: SqlStore, scope: Scope, conv_id: str) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
    out = {}
    for b in store.branches(scope, conv_id):
        segs = store.lineage(scope, b.id)
        out[b.id] = (store.lineage_totals(scope, conv_id, segs), store.outside_lineage_counts(scope, conv_id, segs))
    return out


def counter_rows(store: SqlStore, conv_id: str) -> list[tuple[Any, ...]]:
    t = S.branch_counters
    with store.engine.connect() as c:
        return [tuple(r) for r in c.execute(sa.select(t).where(t.c.conversation_id == conv_id).order_by(t.c.branch_id)).all()]


def test_counters_equal_recount_after_mixed_writes_and_forks(backend_url: str, tmp_path: Path) -> None:
    from contextledger.store.blobs import LocalBlobStore

    store = SqlStore(backend_url, LocalBlobStore(tmp_path / "blobs"))
    try:
        conv = make_conversation(store, SCOPE)
        root = conv.root_branch_id
        add_text(store, SCOPE, conv, root, "task one two")  # 1
        add_call_and_result(store, SCOPE, conv, root, "r1", "alpha beta")  # 2, 3
        a = fork(store, SCOPE, conv, root, 3, "A").id
        add_call_and_result(store, SCOPE, conv, a, "a1", "gamma")  # 4, 5
        add_text(store, SCOPE, conv, root, "root moves on")  # 6 (after A's fork point)
        b = fork(store, SCOPE, conv, a, 4, "B").id  # nested, between a1's call and result
        add_text(store, SCOPE, conv, b, "on b")  # 7
        c = fork(store, SCOPE, conv, root, 1, "C").id  # an older point of root, after A and B exist
        add_call_and_result(store, SCOPE, conv, c, "c1", "delta epsilon zeta")  # 8, 9
        d = fork(store, SCOPE, conv, b, 7, "D").id  # grandchild above B's fork: root limit stays 3
        add_call_and_result(store, SCOPE, conv, root, "r2", "eta")  # 10, 11
        add_text(store, SCOPE, conv, d, "on d")  # 12
        counted = recount(store, SCOPE, conv.id)
        assert from_counters(store, SCOPE, conv.id) == counted
        # spot-check exact values: D's lineage = D (12) + B (7) + A up to 4 + root up to 3
        assert counted[d][0] == {
            "messages": 6, "message_tokens": 2 + 2 + 3, "min_seq": 1, "max_seq": 12,
            "artifacts": 1, "artifact_tokens": 2, "memories": 1,
        }
        assert counted[d][1] == {"message": 6, "artifact": 3, "memory": 3}
        before = counter_rows(store, conv.id)
        with store.writer(SCOPE) as w:
            w.rebuild_counters(conv.id)
        assert counter_rows(store, conv.id) == before
    finally:
        store.close()


def test_rows_written_below_a_fork_point_after_the_fork_reach_the_descendants(backend_url: str, tmp_path: Path) -> None:
    """An importer writes branches first (fork points name seqs not written yet), then the
    history: each row at or below a fork point is added to every descendant that
    inherits it, also within the same transaction and across nested forks."""
    from contextledger.store.blobs import LocalBlobStore

    store = SqlStore(backend_url, LocalBlobStore(tmp_path / "blobs"))
    try:
        conv = make_conversation(store, SCOPE)
        root = conv.root_branch_id
        child = Branch(id=new_id("br"), tenant_id="acme", conversation_id=conv.id, parent_branch_id=root, fork_seq=4, name="x", created_at=at(0))
        grand = Branch(id=new_id("br"), tenant_id="acme", conversation_id=conv.id, parent_branch_id=child.id, fork_seq=6, name="y", created_at=at(0))
        with store.writer(SCOPE) as w:
            w.add_branch(child)
            w.add_branch(grand)
            w.allocate_seq(conv.id, 8)
            for seq, branch in ((1, root), (2, root), (3, root), (4, root), (5, child.id), (6, child.id), (7, root), (8, grand.id)):
                w.add_message(Message(
                    id=new_id("msg"), tenant_id="acme", conversation_id=conv.id, branch_id=branch, seq=seq, role=Role.USER,
                    parts=(TextPart(text="w " * seq),), token_count=seq, created_at=at(seq),
                ))
            # read inside the transaction: pending counts are applied first
            assert store.lineage_totals(SCOPE, conv.id, store.lineage(SCOPE, grand.id, w.conn), w.conn)["messages"] == 7
        counted = recount(store, SCOPE, conv.id)
        assert from_counters(store, SCOPE, conv.id) == counted
        assert counted[grand.id][0]["messages"] == 7  # root 1-4, child 5-6, grand 8
        assert counted[grand.id][0]["message_tokens"] == 1 + 2 + 3 + 4 + 5 + 6 + 8
        assert counted[child.id][1] == {"message": 2, "artifact": 0, "memory": 0}  # root 7, grand 8
    finally:
        store.close()


def test_a_memory_cannot_move_to_another_branch_or_seq(backend_url: str, tmp_path: Path) -> None:
    from contextledger.store.blobs import LocalBlobStore

    store = SqlStore(backend_url, LocalBlobStore(tmp_path / "blobs"))
    try:
        conv = make_conversation(store, SCOPE)
        _, _, mem = add_call_and_result(store, SCOPE, conv, conv.root_branch_id, "r1", "alpha")
        with pytest.raises(InputError, match="cannot change"), store.writer(SCOPE) as w:
            w.update_memory(mem.model_copy(update={"seq": mem.seq + 5}))
        with store.writer(SCOPE) as w:
            w.update_memory(mem.model_copy(update={"summary": "renamed"}))
        assert store.get_memory(SCOPE, mem.id).summary == "renamed"
        assert from_counters(store, SCOPE, conv.id) == recount(store, SCOPE, conv.id)
    finally:
        store.close()


def test_migration_backfills_the_counters_the_writer_maintains(backend_url: str, tmp_path: Path) -> None:
    """Data written at head, the schema taken back to 0002 (no counters), then upgraded:
    the backfilled rows equal the ones the Writer had maintained."""
    from contextledger.store.blobs import LocalBlobStore

    store = SqlStore(backend_url, LocalBlobStore(tmp_path / "blobs"))
    try:
        conv = make_conversation(store, SCOPE)
        root = conv.root_branch_id
        add_text(store, SCOPE, conv, root, "task")
        add_call_and_result(store, SCOPE, conv, root, "r1", "alpha beta")
        a = fork(store, SCOPE, conv, root, 2, "A").id
        add_call_and_result(store, SCOPE, conv, a, "a1", "gamma")
        fork(store, SCOPE, conv, a, 5, "B")
        add_text(store, SCOPE, conv, root, "more")
        other = make_conversation(store, Scope(tenant_id="globex"))
        add_text(store, Scope(tenant_id="globex"), other, other.root_branch_id, "elsewhere")
        maintained = counter_rows(store, conv.id) + counter_rows(store, other.id)
        cfg = alembic_config()
        with store.engine.begin() as c:
            cfg.attributes["connection"] = c
            command.downgrade(cfg, "0002_candidate_indexes")
        assert current_revision(store.engine) == "0002_candidate_indexes"
        assert "branch_counters" not in sa.inspect(store.engine).get_table_names()
        upgrade(store.engine)
        assert counter_rows(store, conv.id) + counter_rows(store, other.id) == maintained
        assert from_counters(store, SCOPE, conv.id) == recount(store, SCOPE, conv.id)
    finally:
        store.close()


WORKERS = 4
PER_WORKER = 40


def _worker(url: str, blobs: str, conv_id: str, worker: int, start: Any, out: Any) -> None:
    """Record on the root, fork from the worker's own message, record on the fork, and
    write on the root again below nobody's fork point — all into one conversation."""
    try:
        led = Ledger.open(url, blobs=blobs)
        rec = led.recorder(SCOPE)
        start.wait(300)
        anchor = rec.record_message(conv_id, "user", f"worker {worker} starts", branch_id=led.store.get_conversation(SCOPE, conv_id).root_branch_id)
        side = rec.fork(conv_id, anchor.id, name=f"w{worker}", activate=False)
        for i in range(PER_WORKER):
            branch = side.id if i % 2 else anchor.branch_id
            cid = f"w{worker}-{i}"
            rec.record_assistant(conv_id, tool_calls=[{"call_id": cid, "tool_name": "Bash", "arguments": {"i": i}}], branch_id=branch)
            rec.record_tool_result(conv_id, cid, f"worker {worker} result {i} " + "x" * (i * 7))
        led.close()
        out.put(("ok", worker))
    except BaseException:
        out.put(("error", traceback.format_exc()))


def test_concurrent_writers_keep_counters_exact(backend_url: str, tmp_path: Path) -> None:
    led = Ledger.open(backend_url, blobs=tmp_path / "blobs")
    try:
        conv = led.recorder(SCOPE).start_conversation(title="concurrent counters", system_prompt="You are a build agent.")
    finally:
        led.close()
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(WORKERS), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(backend_url, str(tmp_path / "blobs"), conv.id, k, start, out)) for k in range(WORKERS)]
    for p in procs:
        p.start()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(600)
    assert sorted(results) == [("ok", k) for k in range(WORKERS)], results
    led = Ledger.open(backend_url, blobs=tmp_path / "blobs")
    try:
        store = led.store
        counted = recount(store, SCOPE, conv.id)
        assert len(counted) == 1 + WORKERS
        assert from_counters(store, SCOPE, conv.id) == counted
        root_totals = counted[conv.root_branch_id][0]
        # root: system + per worker 1 anchor + 20 calls and 20 results; every result has an artifact and a memory
        assert root_totals["messages"] == 1 + WORKERS * (1 + PER_WORKER)
        assert root_totals["artifacts"] == root_totals["memories"] == WORKERS * PER_WORKER // 2
    finally:
        led.close()
