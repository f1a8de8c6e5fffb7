"""The batched recording path (``ingest/batch.py``) writes the same graph as the live path.

Two ledgers record the same exchanges — one through ``record_assistant`` +
``record_tool_result`` per exchange, the other through one ``record_exchanges`` batch —
after the same live prefix (so the batch links against stored memories too), with the
id generator made deterministic (a fixed clock and random source, reset per ledger: both
paths draw their ids in the same order, so the ids — and the token counts of texts that
quote them — are the same).  Every row of every table the recording writes (messages,
calls, artifacts, memories, memory terms, retrieval documents, branch counters) is
compared, times dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from contextledger import ids
from contextledger.errors import InputError
from contextledger.ingest.batch import Exchange, record_exchanges
from contextledger.ingest.recorder import Recorder
from contextledger.ledger import Ledger
from contextledger.store import schema as S

A_PY = "".join(f"line {i}: value = {i * 7}\n" for i in range(40))
BIG = "".join(f"{i:05d} a long log line of a build step that keeps going\n" for i in range(200))  # > 4 KiB: a blob

PREFIX = [
    Exchange(call_id="p1", tool_name="Read", arguments={"file_path": "/src/a.py"}, result=A_PY),
    Exchange(call_id="p2", tool_name="Bash", arguments={"command": "pytest -q"}, result="1 failed, 3 passed in 0.2s\nFAILED tests/test_a.py::test_x"),
]
BATCH = [
    Exchange(call_id="b1", tool_name="Read", arguments={"file_path": "/src/a.py"}, result=A_PY),
    Exchange(call_id="b2", tool_name="Edit", arguments={"file_path": "/src/a.py", "old_string": "value = 7", "new_string": "value = 8"}, result="The file /src/a.py has been updated."),
    Exchange(call_id="b3", tool_name="Read", arguments={"file_path": "/src/a.py"}, result=A_PY.replace("value = 7", "value = 8")),
    Exchange(call_id="b4", tool_name="Bash", arguments={"command": "pytest -q"}, result="4 passed in 0.2s"),
    Exchange(call_id="b5", tool_name="Grep", arguments={"pattern": "value", "path": "/src"}, result="/src/a.py:1:line 0: value = 0"),
    Exchange(call_id="b6", tool_name="Bash", arguments={"command": "cat build.log"}, result=BIG),
    Exchange(call_id="b7", tool_name="Bash", arguments={"command": "env"}, result="AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nHOME=/root"),
    Exchange(call_id="b8", tool_name="Bash", arguments="{\"command\": \"make\"}", result="make: *** [all] Error 2", is_error=True),
    Exchange(call_id="b9", tool_name="fetch", arguments={"url": "https://example.org/x.bin"}, result=b"\x89PNG\r\n\x1a\n\x00\xff\xfe"),
    Exchange(call_id="b10", tool_name="Bash", arguments={"command": "pytest -q"}, result="4 passed in 0.3s"),
]

_TIME_KEYS = ("created_at", "resolved_at", "observed_at", "stale_after", "valid_from")


def _strip_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_times(v) for k, v in value.items() if k not in _TIME_KEYS}
    if isinstance(value, list):
        return [_strip_times(v) for v in value]
    return value


def _dump(ledger: Ledger, conversation_id: str) -> list[str]:
    """Every recorded row of the conversation, in a fixed order, times dropped."""
    out: list[Any] = []
    with ledger.store.reader() as c:
        for table, order in (
            (S.messages, "seq"), (S.tool_calls, "seq"), (S.tool_artifacts, "seq"), (S.tool_memories, "seq"),
            (S.memory_terms, "seq, term"), (S.retrieval_docs, "doc_id"), (S.branch_counters, "branch_id"),
        ):
            rows = c.execute(sa.select(table).where(table.c.conversation_id == conversation_id).order_by(sa.text(order))).mappings().all()
            for r in rows:
                row = {k: (json.loads(v) if k == "body" and isinstance(v, str) else v) for k, v in r.items() if k != "doc_id"}
                if table is S.tool_artifacts and row["body"]["privacy_class"] == "secret_like":
                    # sealed under each ledger's own key: the envelope (and its key) differ
                    row["blob_key"] = row["body"]["blob_key"] = "<sealed>"
                out.append([table.name, _strip_times(row)])
    return [json.dumps(x, sort_keys=True, default=str, ensure_ascii=False) for x in out]


def _live(rec: Recorder, conv_id: str, xs: list[Exchange]) -> None:
    for x in xs:
        rec.record_assistant(conv_id, tool_calls=[{"call_id": x.call_id, "tool_name": x.tool_name, "arguments": x.arguments}])
        rec.record_tool_result(conv_id, x.call_id, x.result, is_error=x.is_error)


class _FixedClock:
    @staticmethod
    def time_ns() -> int:
        return 1_800_000_000_000_000_000


class _FixedRandom:
    @staticmethod
    def urandom(n: int) -> bytes:
        return bytes(range(1, n + 1))


@pytest.fixture
def second_url(backend_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A second fresh database of the same backend."""
    if backend_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'second.db'}"
        return
    from conftest import _admin_exec

    admin: str = request.getfixturevalue("pg_admin")
    name = "test_batch_" + backend_url.rsplit("/", 1)[1][-12:]
    _admin_exec(admin, f'CREATE DATABASE "{name}"')
    try:
        yield f"{admin.rsplit('/', 1)[0]}/{name}"
    finally:
        _admin_exec(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _record(url: str, blobs: Path, batched: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], str, list[str]]:
    monkeypatch.setattr(ids, "time", _FixedClock)
    monkeypatch.setattr(ids, "os", _FixedRandom)
    monkeypatch.setattr(ids, "_last_ms", 0)
    led = Ledger.open(url, blobs=blobs)
    try:
        rec = led.recorder()
        conv = rec.start_conversation(title="t", system_prompt="You are a coding agent.")
        rec.record_message(conv.id, "user", "Fix the failing test in /src/a.py.")
        _live(rec, conv.id, PREFIX)
        if batched:
            recorded = record_exchanges(rec, conv.id, BATCH)
            assert [r.call.call_id for r in recorded] == [x.call_id for x in BATCH]
            # the batch linked against the stored prefix: the prefix's read was superseded
            first_read = led.store.memories(led.scope(), conv.id, segments=None)[0]
            assert first_read.superseded_by == recorded[0].memory.id
        else:
            _live(rec, conv.id, BATCH)
        return _dump(led, conv.id), conv.id, sorted(p.name for p in blobs.rglob("*") if p.is_file())
    finally:
        led.close()


def test_batch_writes_the_live_paths_graph(backend_url: str, second_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    live, live_conv, live_blobs = _record(backend_url, tmp_path / "blobs-live", False, monkeypatch)
    batch, batch_conv, batch_blobs = _record(second_url, tmp_path / "blobs-batch", True, monkeypatch)
    assert live_conv == batch_conv
    assert len(live) == len(batch) > 80
    for a, b in zip(live, batch, strict=True):
        assert a == b
    # the same content-addressed blobs, and the secret's raw payload sealed per ledger
    assert len(live_blobs) == len(batch_blobs) == 3 and len(set(live_blobs) - set(batch_blobs)) == 1


def test_batch_refuses_recorded_and_duplicate_call_ids(ledger: Ledger) -> None:
    """A batch is all or nothing: a recorded or repeated call id, or no exchange, is
    refused before anything is written."""
    rec = ledger.recorder()
    conv = rec.start_conversation(title="t")
    record_exchanges(rec, conv.id, PREFIX)
    with pytest.raises(InputError, match="already recorded"):
        record_exchanges(rec, conv.id, [PREFIX[0], BATCH[0]])
    with pytest.raises(InputError, match="duplicate call ids"):
        record_exchanges(rec, conv.id, [BATCH[0], BATCH[0]])
    with pytest.raises(InputError, match="at least one"):
        record_exchanges(rec, conv.id, [])
    assert [c.call_id for c in ledger.store.tool_calls(ledger.scope(), conv.id)] == ["p1", "p2"]


def test_bench_record_runs_every_system_on_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench record``'s runner: every system records the same exchanges; raw bytes are
    name + arguments + result; disk and rate are measured per system."""
    from contextledger.bench.record import SYSTEMS, record_markdown, run_record
    from contextledger.bench.record import Exchange as BenchExchange

    monkeypatch.setenv("CONTEXTLEDGER_EMBEDDINGS", "off")
    xs = [BenchExchange(f"c{i}", "Read", json.dumps({"file_path": f"/src/m{i}.py"}), A_PY) for i in range(25)]
    rows = run_record(xs, rounds=1)
    assert [r.system for r in rows] == list(SYSTEMS)
    raw = sum(len(b"Read") + len(json.dumps({"file_path": f"/src/m{i}.py"}).encode()) + len(A_PY.encode()) for i in range(25))
    assert {r.raw_bytes for r in rows} == {raw}
    assert all(r.results_per_s > 0 and r.disk_bytes > 0 and r.rounds == 1 for r in rows)
    table = record_markdown(rows, len(xs))
    assert "| openai-agents SQLiteSession |" in table and "| 1.00 |" in table
    with pytest.raises(InputError, match="unknown system"):
        run_record(xs, systems=["nope"])


def test_bench_startup_times_each_command_against_a_bare_interpreter() -> None:
    """``bench startup``: three commands, each run the asked number of times, the bare
    interpreter first (the ratios' base)."""
    from contextledger.bench.startup import run_startup, startup_markdown

    rows = run_startup(runs=1)
    assert [r.command for r in rows] == ["python -c pass", "contextledger --help", "contextledger conversations (empty ledger)"]
    assert all(r.runs == 1 and r.min_s == r.median_s > 0 for r in rows)
    assert startup_markdown(rows).splitlines()[2].endswith("| 1.0 |")


def test_linking_reads_the_subjects_current_memories_not_its_history(sqlite_ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test command run thirty times: linking the newest run reads the one current run
    (superseded runs are not read on a branch without inherited history), and every run
    is still superseded by the next, live and batched alike."""
    rec = sqlite_ledger.recorder()
    conv = rec.start_conversation(title="t")
    runs = [Exchange(call_id=f"t{i}", tool_name="Bash", arguments={"command": "pytest -q"}, result=f"{i + 1} passed in 0.1s") for i in range(30)]
    _live(rec, conv.id, runs[:20])
    record_exchanges(rec, conv.id, runs[20:29])
    store = sqlite_ledger.store
    read: list[int] = []
    real = type(store).memories

    def spy(self: Any, *args: Any, **kw: Any) -> Any:
        got = real(self, *args, **kw)
        if kw.get("subject_keys") is not None:
            read.append(len(got))
        return got

    monkeypatch.setattr(type(store), "memories", spy)
    _live(rec, conv.id, runs[29:])
    assert read == [2]  # the run before and the new one itself
    mems = sqlite_ledger.store.memories(sqlite_ledger.scope(), conv.id, segments=None)
    assert [m.superseded_by for m in mems[:-1]] == [m.id for m in mems[1:]]
    assert mems[-1].superseded_by is None and mems[-1].supersedes == (mems[-2].id,)
