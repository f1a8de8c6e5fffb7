"""``contextledger bench record``: recording throughput, live latency and disk use of
real tool exchanges, side by side with the peers' stores on the same bytes.

The data are the tool exchanges (a call's name, its argument text and its full result
text) of every supported real transcript (:func:`real_exchanges`), taken in file order
and repeated (with fresh call ids) until ``n`` are reached.  Every system records the
same ``n`` exchanges into a fresh SQLite file in its own temporary folder:

* ``contextledger batched`` — one :func:`~contextledger.ingest.batch.record_exchanges`
  call (the path of import, the service's batch endpoint and the proxy): every call, its
  result message, artifact, memory and index rows in one transaction;
* ``contextledger live`` — per exchange, ``record_assistant`` (the turn with its call)
  then ``record_tool_result``: the result's first tier (artifact, result message, call
  status, a derivation queue row) and the conversation's drain (memory, links, terms,
  retrieval documents) — three transactions;
* ``contextledger first tier`` — per exchange, ``record_assistant`` then
  ``queue_tool_result`` (the first tier alone, what a caller waits for when a worker
  drains); one drain of every queued result after the last exchange is in its wall
  time, not in its latency;
* ``openai-agents SQLiteSession`` — per exchange, ``add_items([function_call,
  function_call_output])`` (one transaction);
* ``langgraph SqliteSaver`` — per exchange, ``put`` of a checkpoint whose ``messages``
  channel holds that exchange (an ``AIMessage`` with the call, a ``ToolMessage`` with
  the result) — the delta only, never the whole history;
* ``bare sqlite`` — per exchange, one ``INSERT`` of (call id, name, arguments, result)
  and a commit — the floor of a durable per-call write of the same bytes.

Each system first records 20 exchanges unmeasured (imports, the tokenizer's tables, the
page cache).  Rounds alternate the systems (round *r* starts with system *r* mod the number of systems), so a load change
on the shared machine hits every system alike.  Reported per system: results/s (median
over rounds), the per-exchange latency p50/p95 in ms (all rounds pooled; for the batched
path the whole batch divided by ``n``), bytes on disk (database, WAL after a checkpoint,
blob files) against the raw bytes recorded (name + arguments + result, UTF-8), and every
figure as a ratio to the OpenAI Agents SDK session.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SYSTEMS", "Exchange", "RecordRow", "real_exchanges", "record_markdown", "run_record"]


@dataclass(frozen=True)
class Exchange:
    """One tool exchange: ``call_id``, ``tool_name``, ``arguments`` (JSON text) and the
    full ``result`` text."""

    call_id: str
    tool_name: str
    arguments: str
    result: str

    @property
    def raw_bytes(self) -> int:
        """UTF-8 bytes of name, arguments and result."""
        return len(self.tool_name.encode()) + len(self.arguments.encode()) + len(self.result.encode())


@dataclass(frozen=True)
class Measured:
    """One system's round: wall ``seconds`` for all exchanges, per-exchange
    ``latencies_ms`` (empty for a batch), ``disk_bytes``."""

    seconds: float
    latencies_ms: tuple[float, ...]
    disk_bytes: int


@dataclass(frozen=True)
class RecordRow:
    """A system's figures over every round (see the module docstring)."""

    system: str
    results_per_s: float
    p50_ms: float
    p95_ms: float
    disk_bytes: int
    raw_bytes: int
    rounds: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "system": self.system, "results_per_s": round(self.results_per_s, 1), "p50_ms": round(self.p50_ms, 3),
            "p95_ms": round(self.p95_ms, 3), "disk_bytes": self.disk_bytes, "raw_bytes": self.raw_bytes, "rounds": self.rounds,
        }


def real_exchanges(root: Path, n: int) -> list[Exchange]:
    """The first ``n`` tool exchanges of the supported real transcripts under ``root``
    (manifest order; a call with its result), repeated with call ids suffixed ``#k``
    when the files hold fewer.

    Raises:
        InputError: no file under ``root`` holds a tool exchange.
    """
    from contextledger.bench.real import real_files
    from contextledger.errors import ContextLedgerError, InputError
    from contextledger.ingest.importers import parse_file
    from contextledger.records.parts import ToolCallPart, ToolResultPart

    found: list[Exchange] = []
    for f in real_files(root):
        try:
            t = parse_file(f.path, f.format)
        except ContextLedgerError:
            continue  # a source-defective file: its exchanges are not taken
        calls: dict[str, ToolCallPart] = {}
        for m in t.messages:
            for p in m.parts:
                if isinstance(p, ToolCallPart):
                    calls[p.call_id] = p
                elif isinstance(p, ToolResultPart) and p.text is not None and p.call_id in calls:
                    c = calls.pop(p.call_id)
                    found.append(Exchange(f"x{len(found)}", c.tool_name, c.arguments_json, p.text))
        if len(found) >= n:
            break
    if not found:
        raise InputError(f"{root}: no tool exchange in the supported real transcripts")
    out = found[:n]
    k = 1
    while len(out) < n:
        out.extend(Exchange(f"{e.call_id}#{k}", e.tool_name, e.arguments, e.result) for e in found[: n - len(out)])
        k += 1
    return out


def _disk_bytes(folder: Path, db: Path) -> int:
    """Bytes of every file under ``folder`` after the WAL of ``db`` is checkpointed."""
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _ours_live(xs: Sequence[Exchange], folder: Path) -> Measured:
    from contextledger.ledger import Ledger

    ledger = Ledger.open(home=folder)
    rec = ledger.recorder()
    conv = rec.start_conversation(title="bench record")
    lat: list[float] = []
    t0 = time.perf_counter()
    for x in xs:
        s = time.perf_counter()
        rec.record_assistant(conv.id, tool_calls=[{"call_id": x.call_id, "tool_name": x.tool_name, "arguments": x.arguments}])
        rec.record_tool_result(conv.id, x.call_id, x.result)
        lat.append((time.perf_counter() - s) * 1000)
    seconds = time.perf_counter() - t0
    ledger.close()
    return Measured(seconds, tuple(lat), _disk_bytes(folder, folder / "ledger.db"))


def _ours_first_tier(xs: Sequence[Exchange], folder: Path) -> Measured:
    from contextledger.ingest.drain import drain
    from contextledger.ledger import Ledger

    ledger = Ledger.open(home=folder)
    rec = ledger.recorder()
    conv = rec.start_conversation(title="bench record")
    lat: list[float] = []
    t0 = time.perf_counter()
    for x in xs:
        s = time.perf_counter()
        rec.record_assistant(conv.id, tool_calls=[{"call_id": x.call_id, "tool_name": x.tool_name, "arguments": x.arguments}])
        rec.queue_tool_result(conv.id, x.call_id, x.result)
        lat.append((time.perf_counter() - s) * 1000)
    drain(ledger.runtime)  # the second tier, counted in the wall time
    seconds = time.perf_counter() - t0
    ledger.close()
    return Measured(seconds, tuple(lat), _disk_bytes(folder, folder / "ledger.db"))


def _ours_batched(xs: Sequence[Exchange], folder: Path) -> Measured:
    from contextledger.ingest.batch import Exchange as Batched
    from contextledger.ingest.batch import record_exchanges
    from contextledger.ledger import Ledger

    ledger = Ledger.open(home=folder)
    rec = ledger.recorder()
    conv = rec.start_conversation(title="bench record")
    t0 = time.perf_counter()
    record_exchanges(rec, conv.id, [Batched(call_id=x.call_id, tool_name=x.tool_name, arguments=x.arguments, result=x.result) for x in xs])
    seconds = time.perf_counter() - t0
    ledger.close()
    return Measured(seconds, (), _disk_bytes(folder, folder / "ledger.db"))


def _agents_sdk(xs: Sequence[Exchange], folder: Path) -> Measured:
    from agents import SQLiteSession

    db = folder / "agents.db"
    session = SQLiteSession("bench", db_path=db)
    lat: list[float] = []

    async def run() -> None:
        for x in xs:
            s = time.perf_counter()
            await session.add_items([
                {"type": "function_call", "call_id": x.call_id, "name": x.tool_name, "arguments": x.arguments},
                {"type": "function_call_output", "call_id": x.call_id, "output": x.result},
            ])
            lat.append((time.perf_counter() - s) * 1000)

    t0 = time.perf_counter()
    asyncio.run(run())
    seconds = time.perf_counter() - t0
    session.close()
    return Measured(seconds, tuple(lat), _disk_bytes(folder, db))


def _langgraph(xs: Sequence[Exchange], folder: Path) -> Measured:
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = folder / "langgraph.db"
    conn = sqlite3.connect(db, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    config: Any = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
    lat: list[float] = []
    t0 = time.perf_counter()
    for step, x in enumerate(xs):
        s = time.perf_counter()
        ai = AIMessage(content="", tool_calls=[{"id": x.call_id, "name": x.tool_name, "args": json.loads(x.arguments or "{}") if x.arguments.startswith("{") else {"input": x.arguments}}])
        cp = empty_checkpoint()
        version = saver.get_next_version(None if step == 0 else f"{step:032}", None)
        cp["channel_values"] = {"messages": [ai, ToolMessage(content=x.result, tool_call_id=x.call_id)]}
        cp["channel_versions"] = {"messages": version}
        config = saver.put(config, cp, {"source": "loop", "step": step, "parents": {}}, {"messages": version})
        lat.append((time.perf_counter() - s) * 1000)
    seconds = time.perf_counter() - t0
    conn.close()
    return Measured(seconds, tuple(lat), _disk_bytes(folder, db))


def _bare(xs: Sequence[Exchange], folder: Path) -> Measured:
    db = folder / "bare.db"
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute("CREATE TABLE exchanges (call_id TEXT PRIMARY KEY, tool_name TEXT, arguments TEXT, result TEXT)")
    lat: list[float] = []
    t0 = time.perf_counter()
    for x in xs:
        s = time.perf_counter()
        con.execute("BEGIN")
        con.execute("INSERT INTO exchanges VALUES (?, ?, ?, ?)", (x.call_id, x.tool_name, x.arguments, x.result))
        con.execute("COMMIT")
        lat.append((time.perf_counter() - s) * 1000)
    seconds = time.perf_counter() - t0
    con.close()
    return Measured(seconds, tuple(lat), _disk_bytes(folder, db))


Runner = Callable[[Sequence[Exchange], Path], Measured]

SYSTEMS: dict[str, Runner] = {
    "contextledger batched": _ours_batched,
    "contextledger live": _ours_live,
    "contextledger first tier": _ours_first_tier,
    "openai-agents SQLiteSession": _agents_sdk,
    "langgraph SqliteSaver": _langgraph,
    "bare sqlite": _bare,
}
"""System name → runner (records the exchanges into a fresh folder)."""

REFERENCE = "openai-agents SQLiteSession"
"""The system every ratio is taken against."""


def run_record(exchanges: Sequence[Exchange], *, rounds: int = 3, systems: Sequence[str] | None = None) -> list[RecordRow]:
    """Record ``exchanges`` ``rounds`` times with every system of ``systems`` (default
    all of :data:`SYSTEMS`), alternating their order, and return one row per system.

    Raises:
        InputError: an unknown system name.
    """
    from contextledger.errors import InputError

    names = list(systems or SYSTEMS)
    unknown = [s for s in names if s not in SYSTEMS]
    if unknown:
        raise InputError(f"unknown system {unknown[0]!r}; expected one of {', '.join(SYSTEMS)}")
    results: dict[str, list[Measured]] = {s: [] for s in names}
    for name in names:  # warm-up, not measured: imports, the tokenizer, page cache
        with tempfile.TemporaryDirectory(prefix="cl-bench-record-") as tmp:
            SYSTEMS[name](exchanges[:20], Path(tmp))
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            with tempfile.TemporaryDirectory(prefix="cl-bench-record-") as tmp:
                results[name].append(SYSTEMS[name](exchanges, Path(tmp)))
    raw = sum(x.raw_bytes for x in exchanges)
    rows = []
    for name in names:
        ms = results[name]
        lat = sorted(v for m in ms for v in m.latencies_ms) or [statistics.median(m.seconds for m in ms) * 1000 / len(exchanges)]
        rows.append(RecordRow(
            system=name, results_per_s=statistics.median(len(exchanges) / m.seconds for m in ms),
            p50_ms=lat[len(lat) // 2], p95_ms=lat[min(len(lat) - 1, int(len(lat) * 0.95))],
            disk_bytes=int(statistics.median(m.disk_bytes for m in ms)), raw_bytes=raw, rounds=len(ms),
        ))
    return rows


def record_markdown(rows: Sequence[RecordRow], n: int) -> str:
    """The Markdown table of :func:`run_record`'s rows, ratios to :data:`REFERENCE`."""
    ref = next((r for r in rows if r.system == REFERENCE), None)
    lines = [
        f"{n:,} real tool exchanges, {rows[0].rounds} alternating rounds; raw bytes recorded: {rows[0].raw_bytes / 1e6:.1f} MB",
        "",
        "| system | results/s | × Agents SDK | p50 ms / exchange | p95 ms | disk MB | disk / raw |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ratio = f"{r.results_per_s / ref.results_per_s:.2f}" if ref else "–"
        lines.append(
            f"| {r.system} | {r.results_per_s:,.0f} | {ratio} | {r.p50_ms:.2f} | {r.p95_ms:.2f} | "
            f"{r.disk_bytes / 1e6:.1f} | {r.disk_bytes / r.raw_bytes:.2f} |"
        )
    return "\n".join(lines) + "\n"
