"""Many OS processes recording into ONE conversation at once, through the public Recorder
API, on SQLite (WAL, ``BEGIN IMMEDIATE`` queueing) and PostgreSQL (row lock on the
conversation's sequence counter).  Afterwards every count is exact, seq numbers are unique
and gap-free, blobs verify, parent links are consistent, and re-recording is idempotent.

Processes start together on a barrier and are joined; nothing waits on a timer.
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from contextledger.ledger import Ledger
from contextledger.records.enums import Role, ToolCallStatus
from contextledger.records.parts import ToolCallPart, ToolResultPart
from contextledger.store import schema as S
from contextledger.store.base import Scope

WORKERS = 4
RESULTS_PER_WORKER = 500
REPLAYED = 50
SCOPE = Scope(tenant_id="acme")
BARRIER_TIMEOUT_S = 600.0


def call_id(worker: int, i: int) -> str:
    return f"w{worker}-call-{i:04d}"


def payload(worker: int, i: int) -> bytes:
    """Every 8th result is above the 4096-byte inline threshold (goes to the blob store)."""
    head = f"worker {worker} result {i}\n"
    if i % 8 == 0:
        return (head + "".join(f"{worker}:{i}:{n:05d} build output line\n" for n in range(200))).encode()
    return (head + "ok\n").encode()


def is_error(i: int) -> bool:
    return i % 13 == 0


def _worker(url: str, blobs: str, conv_id: str, worker: int, start: Any, checked: Any, out: Any) -> None:
    """Phase 1: record RESULTS_PER_WORKER call/result pairs.  Phase 2 (after the parent has
    checked the counts): re-record the first REPLAYED pairs and compare the ids returned."""
    try:
        led = Ledger.open(url, blobs=blobs)
        rec = led.recorder(SCOPE)
        first: dict[str, tuple[str, str, str, str]] = {}
        start.wait(BARRIER_TIMEOUT_S)
        for i in range(RESULTS_PER_WORKER):
            cid = call_id(worker, i)
            ask, _ = rec.record_assistant(
                conv_id, tool_calls=[{"call_id": cid, "tool_name": "Bash", "arguments": {"command": f"make step-{worker}-{i}"}}]
            )
            msg, art, mem = rec.record_tool_result(conv_id, cid, payload(worker, i), is_error=is_error(i))
            if i < REPLAYED:
                first[cid] = (ask.id, msg.id, art.id, mem.id)
        out.put(("recorded", worker, ""))
        checked.wait(BARRIER_TIMEOUT_S)
        mismatches = []
        for i in range(REPLAYED):
            cid = call_id(worker, i)
            ask, calls = rec.record_assistant(
                conv_id, tool_calls=[{"call_id": cid, "tool_name": "Bash", "arguments": {"command": f"make step-{worker}-{i}"}}]
            )
            msg, art, mem = rec.record_tool_result(conv_id, cid, payload(worker, i), is_error=is_error(i))
            if (ask.id, msg.id, art.id, mem.id) != first[cid] or len(calls) != 1:
                mismatches.append(cid)
        led.close()
        out.put(("replayed", worker, ",".join(mismatches)))
    except BaseException:
        out.put(("error", worker, traceback.format_exc()))


def _counts(led: Ledger, conv_id: str) -> dict[str, int]:
    out = {}
    with led.store.reader() as conn:
        for name, table in (("messages", S.messages), ("tool_calls", S.tool_calls), ("artifacts", S.tool_artifacts), ("memories", S.tool_memories)):
            out[name] = int(conn.execute(sa.select(sa.func.count()).where(table.c.conversation_id == conv_id)).scalar_one())
        out["next_seq"] = int(conn.execute(sa.select(S.conversations.c.next_seq).where(S.conversations.c.id == conv_id)).scalar_one())
    return out


def _collect(out: Any, kind: str, n: int) -> dict[int, str]:
    got: dict[int, str] = {}
    while len(got) < n:
        tag, worker, detail = out.get(timeout=BARRIER_TIMEOUT_S)
        if tag == "error":
            pytest.fail(f"worker {worker} failed:\n{detail}")
        assert tag == kind
        got[worker] = detail
    return got


def _check_graph(led: Ledger, conv_id: str) -> None:
    store = led.store
    total = WORKERS * RESULTS_PER_WORKER
    msgs = store.messages(SCOPE, conv_id)
    calls = store.tool_calls(SCOPE, conv_id)
    arts = store.artifacts(SCOPE, conv_id)
    mems = store.memories(SCOPE, conv_id)
    # seq numbers: unique and gap-free, one per message
    assert [m.seq for m in msgs] == list(range(1, 2 * total + 1))
    # call ids: exactly the expected set, no duplicates anywhere
    expected_ids = sorted(call_id(w, i) for w in range(WORKERS) for i in range(RESULTS_PER_WORKER))
    assert sorted(c.call_id for c in calls) == expected_ids
    assert sorted(a.call_id for a in arts) == expected_ids
    assert sorted(m.call_id or "" for m in mems) == expected_ids
    errors = sum(1 for i in range(RESULTS_PER_WORKER) if is_error(i)) * WORKERS
    assert len(store.tool_calls(SCOPE, conv_id, statuses=[ToolCallStatus.FAILED])) == errors
    assert len(store.tool_calls(SCOPE, conv_id, statuses=[ToolCallStatus.SUCCEEDED])) == total - errors
    assert store.tool_calls(SCOPE, conv_id, statuses=[ToolCallStatus.PENDING]) == []
    # payloads: exact bytes, sha256 verified; every 8th result lives in the blob store
    blobs = 0
    for a in arts:
        worker, i = int(a.call_id[1]), int(a.call_id.rsplit("-", 1)[1])
        assert store.read_artifact_bytes(SCOPE, a) == payload(worker, i)
        assert (a.blob_key is not None) == (i % 8 == 0)
        blobs += a.blob_key is not None
    assert blobs == WORKERS * len(range(0, RESULTS_PER_WORKER, 8))
    # parent links: each result hangs under the assistant message that made its call
    by_id = {m.id: m for m in msgs}
    call_by_cid = {c.call_id: c for c in calls}
    art_by_cid = {a.call_id: a for a in arts}
    for m in msgs:
        if m.role is Role.TOOL:
            [part] = m.parts
            assert isinstance(part, ToolResultPart)
            call = call_by_cid[part.call_id]
            ask = by_id[call.message_id]
            assert m.parent_message_id == ask.id and ask.seq < m.seq
            assert [p.call_id for p in ask.parts if isinstance(p, ToolCallPart)] == [part.call_id]
            assert call.result_message_id == m.id
            assert (art_by_cid[part.call_id].message_id, art_by_cid[part.call_id].seq) == (m.id, m.seq)
            assert part.artifact_id == art_by_cid[part.call_id].id
        else:
            assert m.role is Role.ASSISTANT
            if m.seq == 1:
                assert m.parent_message_id is None
            else:
                parent = by_id[m.parent_message_id or ""]
                # writers of one conversation are serialised from their head read on:
                # each new turn hangs under the message appended just before it
                assert parent.seq == m.seq - 1


@pytest.mark.slow
def test_processes_record_into_one_conversation(backend_url: str, tmp_path: Path) -> None:
    blobs = tmp_path / "blobs"
    led = Ledger.open(backend_url, blobs=blobs)
    conv = led.recorder(SCOPE).start_conversation(title="concurrent")
    ctx = mp.get_context("spawn")
    start, checked = ctx.Barrier(WORKERS), ctx.Barrier(WORKERS + 1)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(backend_url, str(blobs), conv.id, w, start, checked, out), name=f"recorder-{w}")
        for w in range(WORKERS)
    ]
    for p in procs:
        p.start()
    try:
        _collect(out, "recorded", WORKERS)
        total = WORKERS * RESULTS_PER_WORKER
        expected = {"messages": 2 * total, "tool_calls": total, "artifacts": total, "memories": total, "next_seq": 2 * total}
        assert _counts(led, conv.id) == expected
        _check_graph(led, conv.id)
        checked.wait(BARRIER_TIMEOUT_S)
        replays = _collect(out, "replayed", WORKERS)
        assert replays == dict.fromkeys(range(WORKERS), "")
        assert _counts(led, conv.id) == expected
    finally:
        checked.abort()
        for p in procs:
            p.join(BARRIER_TIMEOUT_S)
        led.close()
    assert [p.exitcode for p in procs] == [0] * WORKERS
