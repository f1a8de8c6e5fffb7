"""The scale run at CI size (10² and 10³ artifacts on SQLite, 10² on PostgreSQL).

The full run (10⁴, 10⁵) is ``contextledger bench scale``.  What is asserted here is
structural and deterministic: the recorded history has the stated shape, the candidate
set is bounded (the same size at 10² and 10³ — latency must not grow with total
history), rows are labelled as replay estimates, and the report renders.  Latency numbers
are recorded, not asserted (the ≤ 10 ms p50 target at 10⁴ is checked by the CLI run).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contextledger.bench.report import build_report, markdown, write_report
from contextledger.bench.scale import build_history, measure_point, run_scale
from contextledger.ledger import Ledger
from contextledger.records.enums import Visibility


def test_history_shape(sqlite_ledger: Ledger) -> None:
    conv_id, seconds = build_history(sqlite_ledger, 60)
    scope = sqlite_ledger.scope()
    store = sqlite_ledger.store
    arts = store.artifacts(scope, conv_id)
    assert len(arts) == 60 and seconds > 0
    assert [p.name for p in store.participants(scope, conv_id)] == ["agent", "reviewer", "worker"]
    assert sum(a.visibility_scope is Visibility.PARTICIPANT_PRIVATE for a in arts) == 2  # i = 19, 49
    assert sum(a.visibility_scope is Visibility.AUDIT_ONLY for a in arts) == 2  # i = 29, 59
    assert len(store.branches(scope, conv_id)) == 1


def test_sqlite_candidate_set_is_bounded() -> None:
    points = run_scale([100, 1000], runs=5)
    assert [(p.backend, p.artifacts, p.runs, p.replay_estimated) for p in points] == [("sqlite", 100, 5, True), ("sqlite", 1000, 5, True)]
    small, large = points
    assert small.candidate_messages == large.candidate_messages
    assert large.replay_tokens_estimate > 5 * small.replay_tokens_estimate
    assert 0 < small.p50_ms <= small.p95_ms <= small.p99_ms
    assert small.peak_bytes > 0 and large.record_per_s > 0 and large.record_blob_per_s > 0
    assert 0 < large.assembled_tokens <= 4000
    report = build_report("scale", [], scale=[p.as_dict() for p in points])
    assert "| sqlite | 1000 |" in markdown(report)


def test_postgresql_point(pg_url: str, tmp_path: Path) -> None:
    led = Ledger.open(pg_url, blobs=tmp_path / "blobs")
    try:
        point = measure_point(led, "postgresql", 100, runs=3, blob_records=20)
    finally:
        led.close()
    assert (point.backend, point.artifacts, point.runs) == ("postgresql", 100, 3)
    assert point.p50_ms > 0 and point.record_blob_per_s > 0
    paths = write_report(build_report("scale", [], scale=[point.as_dict()]), tmp_path / "out")
    assert [p.name for p in paths] == ["bench-scale.json", "bench-scale.md", "bench-scale-latency.png"]


def test_unknown_backend_is_refused() -> None:
    from contextledger.errors import InputError

    with pytest.raises(InputError, match="unknown backend 'oracle'"):
        run_scale([10], backends=["oracle"])
    with pytest.raises(InputError, match="needs --pg URL"):
        run_scale([10], backends=["postgresql"])
