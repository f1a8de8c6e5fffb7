"""Two-tier recording: the first tier commits a tool result with a derivation queue row,
the drain derives it in a transaction of its own (``ingest/drain.py``).

* a queued result has its artifact, result message and resolved call, and no memory;
  an assembly over an undrained queue is valid and carries the raw result;
* the drain derives exactly what the one-transaction path derived (memory, terms,
  retrieval documents) and deletes the rows; a second drain finds nothing;
* a process killed with SIGKILL right after the first tier loses nothing: the next drain
  resumes and derives the result.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from contextledger.cli.main import app
from contextledger.ingest.drain import drain, queued_artifact_ids
from contextledger.ledger import Ledger
from contextledger.records.enums import ToolCallStatus
from contextledger.store import schema as S

RESULT = "FAILED tests/test_login.py::test_redirect - AssertionError: 302 != 200\n1 failed, 12 passed in 0.41s"


def _queue_rows(led: Ledger) -> list[tuple[str, str]]:
    q = S.derivation_queue
    with led.store.engine.connect() as c:
        return [(r.artifact_id, r.call_status) for r in c.execute(sa.select(q.c.artifact_id, q.c.call_status).order_by(q.c.queue_id))]


def _exchange(led: Ledger, call_id: str = "c1") -> str:
    rec = led.recorder()
    conv = rec.start_conversation(title="fix login", system_prompt="You are a coding agent.")
    rec.record_message(conv.id, "user", "The login redirect fails; find the cause.")
    rec.record_assistant(conv.id, text="Running the tests.", tool_calls=[{"call_id": call_id, "tool_name": "Bash", "arguments": {"command": "pytest -q"}}])
    return conv.id


def test_first_tier_alone_is_durable_and_assembles_raw(ledger: Ledger) -> None:
    conv = _exchange(ledger)
    rec = ledger.recorder()
    msg, art = rec.queue_tool_result(conv, "c1", RESULT, is_error=True)
    scope = ledger.scope()
    assert _queue_rows(ledger) == [(art.id, ToolCallStatus.FAILED.value)]
    assert queued_artifact_ids(ledger.runtime, scope, conv) == {art.id}
    assert ledger.store.memories(scope, conv, artifact_ids=[art.id]) == []
    assert ledger.store.get_tool_call(scope, conv, "c1").status is ToolCallStatus.FAILED
    assert ledger.store.artifacts(scope, conv, ids=[art.id])[0].message_id == msg.id

    result = ledger.assemble(conv, provider="openai-chat", budget_tokens=20000)
    messages = result.payload["messages"]
    tool = [m for m in messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool] == ["c1"]
    assert RESULT in tool[0]["content"]
    assert [m["role"] for m in messages].count("assistant") == 1  # the call is paired with its result


def test_drain_derives_once_and_empties_the_queue(ledger: Ledger) -> None:
    conv = _exchange(ledger)
    rec = ledger.recorder()
    _, art = rec.queue_tool_result(conv, "c1", RESULT, is_error=True)
    report = drain(ledger.runtime)
    assert [m.source_artifact_ids for m in report.memories] == [(art.id,)]
    assert report.batches == 1
    assert _queue_rows(ledger) == []
    assert drain(ledger.runtime).memories == []  # nothing left, nothing derived twice
    scope = ledger.scope()
    mems = ledger.store.memories(scope, conv, artifact_ids=[art.id])
    assert [m.id for m in mems] == [report.memories[0].id]
    d, t = S.retrieval_docs, S.memory_terms
    with ledger.store.engine.connect() as c:
        docs = c.execute(sa.select(d.c.record_id).where(d.c.record_id == mems[0].id)).all()
        terms = c.execute(sa.select(sa.func.count()).select_from(t).where(t.c.memory_id == mems[0].id)).scalar_one()
    assert len(docs) == 1 and terms > 0


def test_record_tool_result_matches_first_tier_plus_drain(tmp_path: Path) -> None:
    """The library default (first tier, then a drain of the conversation) yields the same
    memory as a drain run later."""
    led_a = Ledger.open(home=tmp_path / "a")
    led_b = Ledger.open(home=tmp_path / "b")
    try:
        conv_a, conv_b = _exchange(led_a), _exchange(led_b)
        _, _, mem_a = led_a.recorder().record_tool_result(conv_a, "c1", RESULT, is_error=True)
        led_b.recorder().queue_tool_result(conv_b, "c1", RESULT, is_error=True)
        (mem_b,) = drain(led_b.runtime).memories
        drop = {"id", "tenant_id", "conversation_id", "branch_id", "source_artifact_ids", "source_message_ids", "created_at", "observed_at", "valid_from", "stale_after"}
        a, b = mem_a.model_dump(mode="json"), mem_b.model_dump(mode="json")
        assert a["payload"].pop("artifact") == mem_a.source_artifact_ids[0] and b["payload"].pop("artifact") == mem_b.source_artifact_ids[0]
        assert [r["artifact_id"] for r in a.pop("provenance_refs")] == list(mem_a.source_artifact_ids)
        assert [r["artifact_id"] for r in b.pop("provenance_refs")] == list(mem_b.source_artifact_ids)
        assert set(a) == set(b)
        assert {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}
        assert _queue_rows(led_a) == []
    finally:
        led_a.close()
        led_b.close()


_CHILD = """
import os, signal, sys
from contextledger.ledger import Ledger
led = Ledger.open(home=sys.argv[1])
rec = led.recorder()
conv = rec.start_conversation(title="t")
rec.record_assistant(conv.id, tool_calls=[{"call_id": "k1", "tool_name": "Bash", "arguments": {"command": "pytest -q"}}])
rec.queue_tool_result(conv.id, "k1", sys.argv[2], is_error=True)
print(conv.id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # after the first tier committed, before any drain
"""


def test_sigkill_after_the_first_tier_loses_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(home), RESULT], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    conv = proc.stdout.strip()
    led = Ledger.open(home=home)
    try:
        scope = led.scope()
        (art,) = led.store.artifacts(scope, conv)
        assert json.loads(json.dumps(_queue_rows(led))) == [[art.id, ToolCallStatus.FAILED.value]]
        assert led.store.memories(scope, conv, segments=None) == []
        (mem,) = drain(led.runtime).memories
        assert mem.source_artifact_ids == (art.id,)
        assert _queue_rows(led) == []
        assert [m.id for m in led.store.memories(scope, conv, segments=None)] == [mem.id]
    finally:
        led.close()


def test_cli_index_derives_the_queue(tmp_path: Path) -> None:
    home = tmp_path / "home"
    led = Ledger.open(home=home)
    try:
        conv = _exchange(led)
        _, art = led.recorder().queue_tool_result(conv, "c1", RESULT, is_error=True)
    finally:
        led.close()
    res = CliRunner().invoke(app, ["--home", str(home), "index", "--json"])
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)
    assert row["conversation_id"] == conv and row["derived"] == 1
    led = Ledger.open(home=home)
    try:
        assert _queue_rows(led) == []
        assert [m.source_artifact_ids for m in led.store.memories(led.scope(), conv, segments=None)] == [(art.id,)]
    finally:
        led.close()


def test_service_worker_drains_in_the_background(sqlite_ledger: Ledger) -> None:
    from fastapi.testclient import TestClient

    from contextledger.server.app import create_app
    from contextledger.server.settings import ServerSettings

    conv = _exchange(sqlite_ledger)
    _, art = sqlite_ledger.recorder().queue_tool_result(conv, "c1", RESULT, is_error=True)
    scope = sqlite_ledger.scope()
    with TestClient(create_app(ServerSettings(), ledger=sqlite_ledger)):
        deadline = time.monotonic() + 30
        while _queue_rows(sqlite_ledger) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert _queue_rows(sqlite_ledger) == []
    assert [m.source_artifact_ids for m in sqlite_ledger.store.memories(scope, conv, segments=None)] == [(art.id,)]


def test_a_failing_row_stays_queued_and_never_blocks_the_others(sqlite_ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    import contextledger.ingest.drain as drain_module

    rec = sqlite_ledger.recorder()
    conv = _exchange(sqlite_ledger, "c1")
    rec.record_assistant(conv, tool_calls=[{"call_id": "c2", "tool_name": "Bash", "arguments": {"command": "ls"}}])
    _, bad = rec.queue_tool_result(conv, "c1", RESULT, is_error=True)
    _, good = rec.queue_tool_result(conv, "c2", "a.py\nb.py")
    real = drain_module.derive_queued

    def derive(runtime: Any, w: Any, scope: Any, conversation_id: str, artifact_id: str, message_id: str, entry: Any, known: Any = None) -> Any:
        if artifact_id == bad.id:
            raise RuntimeError("extractor bug")
        return real(runtime, w, scope, conversation_id, artifact_id, message_id, entry, known)

    monkeypatch.setattr(drain_module, "derive_queued", derive)
    with pytest.raises(RuntimeError, match="extractor bug"):
        drain(sqlite_ledger.runtime)
    assert [a for a, _ in _queue_rows(sqlite_ledger)] == [bad.id, good.id]  # the batch rolled back whole
    report = drain(sqlite_ledger.runtime, skip_failed=True)
    assert [m.source_artifact_ids for m in report.memories] == [(good.id,)]
    assert [(a, e) for _, a, e in report.failed] == [(bad.id, "RuntimeError: extractor bug")]
    assert [a for a, _ in _queue_rows(sqlite_ledger)] == [bad.id]
    monkeypatch.undo()
    assert [m.source_artifact_ids for m in drain(sqlite_ledger.runtime).memories] == [(bad.id,)]
    assert _queue_rows(sqlite_ledger) == []
