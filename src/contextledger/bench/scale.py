"""The scale run: assembly latency and memory versus history size, recording throughput.

For each size ``n`` (10², 10³, 10⁴, 10⁵ by default) one conversation is recorded with
``n`` tool artifacts through the public :class:`~contextledger.ingest.recorder.Recorder`
(no bulk fast path): a user turn every 25 calls, three participants (the main agent, a
second model whose work is participant-private, a child subagent whose artifacts are
audit-only) and a sibling branch forked every 1,000 artifacts holding 5 artifacts of
its own.  Then the main branch is assembled ``runs`` times (OpenAI Chat, 4,000-token
budget, fixed ``now``, not persisted, ``replay="estimate"`` — the exact replay of a
10⁵-artifact history would dominate the measurement, so scale rows are labelled
``replay_estimated``) and p50/p95/p99 latency (ms) are taken, plus the peak of Python
allocations during one extra assembly (``tracemalloc``, bytes) and the size of the
bounded candidate set (messages).  On PostgreSQL the history is ``ANALYZE``d every
30 s while it is recorded and once before timing (planner statistics, as autovacuum
provides on a running server).

Two history shapes (``shape``): ``"pipeline"`` (above: one tool, no file memories) and
``"coding"`` (:mod:`contextledger.bench.scale_coding`: a coding agent reading, searching,
editing and testing a repository of a few hundred files, so the working-set read and the
file freshness rules run at scale).  The pipeline shape is assembled at ``now`` = the
first call + 1 day; the coding shape one minute after its last call (the agent's next
request), so its reads are stale because of later edits, not because of their age.

Recording throughput (artifacts/s) is the wall time of recording the ``n`` inline
results (payload ≈ 600 bytes); the blob variant records ``min(n, 1000)`` results of
≈ 6 KB each, above the 4,096-byte inline threshold, so every payload goes to the blob
store first.

Target (issue "Prove it"): p50 ≤ 10 ms at 10⁴ artifacts on SQLite on a 2-core machine,
and latency flat in ``n``.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from contextledger.assembly.assembler import candidate_limits
from contextledger.assembly.candidates import collect_candidates
from contextledger.ledger import Ledger
from contextledger.records.enums import RuntimeKind, Visibility

__all__ = ["DEFAULT_SIZES", "SHAPES", "ScalePoint", "build_history", "build_shape", "calibration_ms", "measure_point", "run_scale", "scale_now"]

DEFAULT_SIZES = (100, 1_000, 10_000, 100_000)
"""Artifact counts of the full scale run."""

SHAPES = ("pipeline", "coding")
"""History shapes of the scale run (module docstring)."""

_T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
_BUDGET = 4000


@dataclass(kw_only=True)
class ScalePoint:
    """One backend × shape × size measurement (times in ms, memory in bytes, rates per
    second); ``shape`` is one of :data:`SHAPES`; ``candidate_messages`` is the candidate
    set of a request of the measured budget; ``calibration_ms`` is
    :func:`calibration_ms` taken just before the timed assemblies."""

    backend: str
    artifacts: int
    runs: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    peak_bytes: int
    candidate_messages: int
    assembled_tokens: int
    replay_tokens_estimate: int
    record_per_s: float
    record_blob_per_s: float
    replay_estimated: bool = True
    shape: str = "pipeline"
    calibration_ms: float = 0.0
    now_step_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def calibration_ms(repeats: int = 5) -> float:
    """How fast this machine runs the kind of work an assembly does, right now: the
    median wall time (ms) of ``repeats`` runs of a fixed workload — encode and decode a
    ≈ 600 KB JSON document of 2,000 records (allocation, hashing, memory traffic, as
    record decoding) and sort 50,000 tuples.  A shared or virtual 2-core machine changes
    speed from minute to minute; this number, taken next to each scale point, tells
    whether rows of different runs ran on a fast or a slow machine."""
    doc = [{"id": f"mem_{i:08d}", "seq": i, "summary": f"Read succeeded: src/pkg/module_{i % 300:03d}.py " * 4, "payload": {"path": f"src/pkg/m{i}.py", "symbols": [f"def f{i}_{k}" for k in range(6)]}} for i in range(2000)]
    keys = [((i * 7919) % 50_000, f"k{i}") for i in range(50_000)]
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        json.loads(json.dumps(doc))
        sorted(keys)
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 2)


def _payload(i: int, size: int) -> str:
    head = f"step {i}: status ok; rows={i % 97}; file=out/part_{i:06d}.csv\n"
    body = "".join(f"{(i * 7919 + k) % 100000:05d} " for k in range(size // 6))
    return head + body


def build_history(ledger: Ledger, n: int, *, payload_bytes: int = 600) -> tuple[str, float]:
    """Record a conversation with ``n`` tool artifacts (structure in the module docstring).

    Returns ``(conversation_id, recording seconds)``.
    """
    rec = ledger.recorder()
    conv = rec.start_conversation(title=f"scale {n}", system_prompt="You are a data pipeline agent.", runtime_kind=RuntimeKind.MULTI_MODEL)
    main = rec.add_participant(conv.id, "agent", runtime_kind=RuntimeKind.MULTI_MODEL)
    peer = rec.add_participant(conv.id, "reviewer", runtime_kind=RuntimeKind.MULTI_MODEL)
    child = rec.add_participant(conv.id, "worker", runtime_kind=RuntimeKind.SUBAGENT_CHILD, parent_participant_id=main.id)
    root = conv.root_branch_id
    t0 = time.perf_counter()
    last_user = rec.record_message(conv.id, "user", "Process the nightly partitions.", branch_id=root)
    for i in range(n):
        if i and i % 25 == 0:
            last_user = rec.record_message(conv.id, "user", f"Continue with batch {i // 25}.", branch_id=root)
        if i and i % 1000 == 0:
            side = rec.fork(conv.id, last_user.id, name=f"alt {i}", activate=False)
            for k in range(5):
                cid = f"side_{i}_{k}"
                rec.record_assistant(conv.id, tool_calls=[{"call_id": cid, "tool_name": "run_step", "arguments": {"step": k}}], branch_id=side.id, participant_id=main.id, visibility=Visibility.BRANCH)
                rec.record_tool_result(conv.id, cid, _payload(i + k, payload_bytes), observed_at=_T0, visibility=Visibility.BRANCH)
        who = (main, peer, child)[i % 3] if i % 10 == 9 else main
        vis = Visibility.PARTICIPANT_PRIVATE if who is peer else Visibility.BRANCH
        cid = f"c{i:06d}"
        rec.record_assistant(conv.id, tool_calls=[{"call_id": cid, "tool_name": "run_step", "arguments": {"step": i}}], branch_id=root, participant_id=who.id, visibility=vis)
        # the child's results keep the recorder's default (audit-only until promoted)
        rec.record_tool_result(conv.id, cid, _payload(i, payload_bytes), observed_at=_T0 + timedelta(seconds=i), visibility=None if who is child else vis)
    rec.record_message(conv.id, "user", "Summarise the failures so far.", branch_id=root)
    return conv.id, time.perf_counter() - t0


def _check_shape(shape: str) -> None:
    from contextledger.errors import InputError

    if shape not in SHAPES:
        raise InputError(f"unknown history shape {shape!r}; expected {' or '.join(SHAPES)}")


def build_shape(ledger: Ledger, n: int, shape: str = "pipeline") -> tuple[str, float]:
    """Record the ``shape`` history with ``n`` tool artifacts on its main branch:
    :func:`build_history` (``"pipeline"``) or
    :func:`~contextledger.bench.scale_coding.build_coding_history` (``"coding"``).

    Returns ``(conversation_id, recording seconds)``.

    Raises:
        InputError: unknown ``shape``.
    """
    _check_shape(shape)
    if shape == "coding":
        from contextledger.bench.scale_coding import build_coding_history

        return build_coding_history(ledger, n)
    return build_history(ledger, n)


def scale_now(n: int, shape: str = "pipeline") -> datetime:
    """The ``now`` a history of ``n`` artifacts is assembled at (module docstring).

    Raises:
        InputError: unknown ``shape``.
    """
    _check_shape(shape)
    if shape == "coding":
        return _T0 + timedelta(seconds=n + 60)
    return _T0 + timedelta(days=1)


ANALYZE_EVERY_S = 30.0
"""Seconds between the ``ANALYZE`` runs of a PostgreSQL recording (see
:func:`_planner_statistics`)."""


def _analyze(ledger: Ledger) -> None:
    """``ANALYZE`` the whole PostgreSQL database of ``ledger`` (outside a transaction)."""
    with ledger.store.engine.connect() as c:
        c.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")


@contextlib.contextmanager
def _planner_statistics(ledger: Ledger) -> Iterator[None]:
    """On PostgreSQL, ``ANALYZE`` every :data:`ANALYZE_EVERY_S` seconds while the body
    runs, on its own connection — what autovacuum does on a server that has it on (the
    benchmark machine's server runs with ``autovacuum = off``).  Without statistics the
    planner may read a lookup by call id through another ``(tenant, conversation, …)``
    index and filter the whole conversation, so recording would slow down with the
    history for a reason no deployed server has.  Nothing on SQLite."""
    if ledger.store.dialect != "postgresql":
        yield
        return
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(ANALYZE_EVERY_S):
            _analyze(ledger)

    worker = threading.Thread(target=loop, name="bench-analyze", daemon=True)
    worker.start()
    try:
        yield
    finally:
        stop.set()
        worker.join()


def _blob_rate(ledger: Ledger, n: int) -> float:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="blob throughput")
    rec.record_message(conv.id, "user", "Export every partition.")
    t0 = time.perf_counter()
    for i in range(n):
        cid = f"b{i:06d}"
        rec.record_assistant(conv.id, tool_calls=[{"call_id": cid, "tool_name": "export", "arguments": {"part": i}}])
        rec.record_tool_result(conv.id, cid, _payload(i, 6000), observed_at=_T0)
    return n / (time.perf_counter() - t0)


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def measure_point(ledger: Ledger, backend: str, n: int, *, runs: int = 30, blob_records: int | None = None, shape: str = "pipeline", now_step_s: float = 0.0) -> ScalePoint:
    """Record the ``shape`` history with ``n`` artifacts into ``ledger`` and measure (see
    module docstring).  ``now_step_s`` > 0 moves ``now`` forward by that many seconds
    before every assembly (a live agent: ages and stale markers change between requests).

    Raises:
        InputError: unknown ``shape``, ``n`` or ``runs`` below 1.
    """
    from contextledger.errors import InputError

    if n < 1 or runs < 1:
        raise InputError(f"a scale point needs at least 1 artifact and 1 timed run, got n={n}, runs={runs}")
    with _planner_statistics(ledger):
        conv_id, seconds = build_shape(ledger, n, shape)
    if ledger.store.dialect == "postgresql":
        # planner statistics for the new rows (what autovacuum's analyze gives a server
        # that has run a while); without them PostgreSQL guesses one row per table and
        # picks the (tenant, conversation) prefix of any index.  SQLite runs without
        # statistics, as an embedded ledger does.
        _analyze(ledger)
    now = scale_now(n, shape)
    calibration = calibration_ms()
    times: list[float] = []
    res = None
    for k in range(runs + 2):
        at = now + timedelta(seconds=now_step_s * k)
        t0 = time.perf_counter()
        res = ledger.assemble(conv_id, provider="openai-chat", budget_tokens=_BUDGET, now=at, persist=False, replay="estimate")
        times.append((time.perf_counter() - t0) * 1000)
    times = times[2:]  # two warm-up runs (caches, tokenizer)
    tracemalloc.start()
    ledger.assemble(conv_id, provider="openai-chat", budget_tokens=_BUDGET, now=now, persist=False, replay="estimate")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    window, most, failed = candidate_limits(ledger.policy, _BUDGET)
    cands = collect_candidates(ledger.store, ledger.scope(), conv_id, None, recent_window=window, max_candidates=most, recovery_window=failed)
    assert res is not None
    return ScalePoint(
        backend=backend, artifacts=n, runs=runs, p50_ms=round(_pct(times, 0.5), 3), p95_ms=round(_pct(times, 0.95), 3),
        p99_ms=round(_pct(times, 0.99), 3), mean_ms=round(statistics.fmean(times), 3), peak_bytes=peak,
        candidate_messages=len(cands.messages), assembled_tokens=res.record.assembled_tokens,
        replay_tokens_estimate=res.record.replay_tokens, record_per_s=round(n / seconds, 1),
        record_blob_per_s=round(_blob_rate(ledger, blob_records if blob_records is not None else min(n, 1000)), 1),
        shape=shape, calibration_ms=calibration, now_step_s=now_step_s,
    )


def run_scale(
    sizes: Sequence[int] = DEFAULT_SIZES,
    *,
    backends: Sequence[str] = ("sqlite",),
    pg_url: str | None = None,
    runs: int = 30,
    workdir: str | None = None,
    shapes: Sequence[str] = ("pipeline",),
    now_step_s: float = 0.0,
) -> list[ScalePoint]:
    """Measure every size of every shape on every backend (rows in that order):
    ``"sqlite"`` (a fresh database file per shape and size) and ``"postgresql"`` (the
    database at ``pg_url``, one conversation per shape and size); ``now_step_s``: see
    :func:`measure_point`.

    Raises:
        InputError: an unknown shape or backend, ``"postgresql"`` without ``pg_url``,
            ``runs`` below 1, no size or a size below 1.
        BackendError: an unreachable ``pg_url``.
    """
    from contextledger.errors import InputError

    for shape in shapes:
        _check_shape(shape)
    if runs < 1:
        raise InputError(f"runs must be at least 1 timed assembly, got {runs}")
    if not sizes or min(sizes) < 1:
        raise InputError(f"sizes must be artifact counts of at least 1, got {list(sizes)}")
    points: list[ScalePoint] = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for backend, shape, n in [(b, s, n) for b in backends for s in shapes for n in sizes]:
            if backend == "sqlite":
                name = f"scale-{n}.db" if shape == "pipeline" else f"scale-{shape}-{n}.db"
                ledger = Ledger.open(f"sqlite:///{Path(tmp) / name}", blobs=Path(tmp) / "blobs")
            elif backend == "postgresql":
                if not pg_url:
                    raise InputError("the postgresql scale run needs --pg URL (an empty database)")
                ledger = Ledger.open(pg_url, blobs=Path(tmp) / "blobs")
            else:
                raise InputError(f"unknown backend {backend!r}; expected sqlite or postgresql")
            try:
                points.append(measure_point(ledger, backend, n, runs=runs, shape=shape, now_step_s=now_step_s))
            finally:
                ledger.close()
    return points
