"""The scale run at CI size (10² and 10³ artifacts on SQLite, 10² on PostgreSQL), and the
coding history shape at 10² (file memories, staleness after edits, the latest failing
test, the pinned constraint).

The full run (10⁴, 10⁵) is ``contextledger bench scale``.  What is asserted here is
structural and deterministic: the recorded history has the stated shape, the candidate
set is bounded (the same size at 10² and 10³ — latency must not grow with total
history), rows are labelled as replay estimates, and the report renders.  Latency numbers
are recorded, not asserted (the ≤ 10 ms p50 target at 10⁴ is checked by the CLI run).
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextledger.bench.report import build_report, markdown, write_report
from contextledger.bench.scale import (
    build_history,
    build_shape,
    measure_point,
    run_scale,
    scale_now,
)
from contextledger.bench.scale_coding import OPENING_CONSTRAINT, SLOTS, final_error_line
from contextledger.cli.main import app
from contextledger.handles import memory_handle
from contextledger.ledger import Ledger
from contextledger.records.enums import ResolutionState, Visibility


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
    assert "| sqlite | pipeline | 1000 |" in markdown(report)
    assert all(p.shape == "pipeline" for p in points)
    # the candidate set a 4,000-token request reads (window of 80 messages, not the
    # policy's full 200), and the machine's speed next to each point
    assert 80 <= large.candidate_messages < 200
    assert all(p.calibration_ms > 0 for p in points) and "| calibration ms |" in markdown(report)


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


def test_postgresql_recording_gets_planner_statistics_meanwhile(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While a PostgreSQL history is recorded, ``ANALYZE`` runs every
    ``ANALYZE_EVERY_S`` seconds (as autovacuum would): the tables have statistics before
    the recording ends.  Here every 0.2 s over a recording of a few seconds."""
    import sqlalchemy as sa

    from contextledger.bench import scale

    monkeypatch.setattr(scale, "ANALYZE_EVERY_S", 0.2)
    led = Ledger.open(pg_url, blobs=tmp_path / "blobs")
    try:
        with led.store.engine.connect() as c:
            before = c.execute(sa.text("SELECT count(*) FROM pg_stat_user_tables WHERE relname = 'tool_calls' AND last_analyze IS NOT NULL")).scalar_one()
        analyzed: list[int] = []
        original = scale.build_shape

        def build_and_look(ledger: Ledger, n: int, shape: str = "pipeline") -> tuple[str, float]:
            out = original(ledger, n, shape)
            with ledger.store.engine.connect() as c:  # still inside the recording
                analyzed.append(c.execute(sa.text("SELECT count(*) FROM pg_stat_user_tables WHERE relname = 'tool_calls' AND last_analyze IS NOT NULL")).scalar_one())
            return out

        monkeypatch.setattr(scale, "build_shape", build_and_look)
        scale.measure_point(led, "postgresql", 60, runs=1, blob_records=1)
    finally:
        led.close()
    assert before == 0 and analyzed == [1]


def test_unknown_backend_is_refused() -> None:
    from contextledger.errors import InputError

    with pytest.raises(InputError, match="unknown backend 'oracle'"):
        run_scale([10], backends=["oracle"])
    with pytest.raises(InputError, match="needs --pg URL"):
        run_scale([10], backends=["postgresql"])


def test_coding_history_structure(sqlite_ledger: Ledger) -> None:
    n = 100  # four user turns of 25 calls; the last call is the closing failing test
    conv_id, _ = build_shape(sqlite_ledger, n, "coding")
    scope, store = sqlite_ledger.scope(), sqlite_ledger.store
    arts = {a.call_id: a for a in store.artifacts(scope, conv_id)}
    assert len(arts) == n and len(store.branches(scope, conv_id)) == 1  # first fork at 1,000
    assert [p.name for p in store.participants(scope, conv_id)] == ["agent", "reviewer", "worker"]
    assert collections.Counter(a.tool_name for a in arts.values()) == {
        "Read": 36, "Bash": 25, "Edit": 15, "Grep": 12, "Glob": 4, "read_file": 4, "str_replace_editor": 4,
    }
    assert collections.Counter(a.visibility_scope for a in arts.values()) == {
        Visibility.BRANCH: 88, Visibility.PARTICIPANT_PRIVATE: 8, Visibility.AUDIT_ONLY: 4,
    }
    mems = {m.source_artifact_ids[0]: m for m in store.memories(scope, conv_id, segments=None)}
    # 16 of the 25 slots touch one file (reads, edits, a grep inside one file); the last
    # slot of the last turn (an edit) is replaced by the closing test run
    file_mems = [m for m in mems.values() if (m.subject_key or "").startswith("file:")]
    assert len(file_mems) == 4 * 16 - 1 == 63
    # modules 0..7 (A, B, D of turns 0..3), far files 11, 48, 85, 122, four test files
    # and the three hot files
    assert len({m.subject_key for m in file_mems}) == 8 + 4 + 4 + 3
    assert collections.Counter(str(m.payload["extractor"]) for m in mems.values()) == {
        "file_read": 40, "file_write": 19, "test_run": 17, "search": 16, "command": 8,
    }
    # turn 3 reads src/pkg/module_007.py (slot read_d) and then edits it (slot edit_d)
    assert SLOTS[16:18] == ("read_d", "edit_d")
    read, edit = mems[arts["c000091"].id], mems[arts["c000092"].id]
    assert read.subject_key == edit.subject_key == "file:src/pkg/module_007.py"
    assert read.resolution_state is ResolutionState.STALE and read.limits == f"file changed later (m{edit.seq})"
    assert edit.resolution_state is ResolutionState.CURRENT
    # a failing run is superseded by the passing rerun of the same command after the edit
    failed, passed = mems[arts["c000078"].id], mems[arts["c000081"].id]
    assert (failed.payload["status"], passed.payload["status"]) == ("failed", "passed")
    assert failed.superseded_by == passed.id
    closing = mems[arts["c000099"].id]
    assert closing.payload["status"] == "failed" and closing.payload["error"] == final_error_line(n)

    res = sqlite_ledger.assemble(conv_id, provider="openai-chat", budget_tokens=4000, now=scale_now(n, "coding"), persist=False, replay="estimate", trace=True)
    by_call = {m.get("tool_call_id"): m["content"] for m in res.payload["messages"] if m["role"] == "tool"}
    # the pre-edit read is shown as a stale marker naming its memory, never as current code
    decisions = {(d["record_id"], d["decision"], d.get("reason")) for d in res.trace or []}
    assert (read.id, "mark_stale", "stale_marked") in decisions
    assert (arts["c000091"].id, "shape", "stale") in decisions
    # ... by its handle (the memory's seq), never by its random id
    assert read.seq == 189 and memory_handle(read) == "m189"
    assert by_call["c000091"].splitlines()[0] == "[stale memory m189 · Read · observed 1 min ago]"
    assert read.id not in by_call["c000091"] and '"""Module 007 of pkg' not in by_call["c000091"]
    assert by_call["c000092"].startswith("The file src/pkg/module_007.py has been updated.")
    assert f"E       {final_error_line(n)}" in by_call["c000099"]
    system = res.payload["messages"][0]
    # the task statement is sent raw with its constraint, so the constraint is not restated
    assert system["role"] == "system" and "Constraints stated by the user" not in system["content"]
    assert OPENING_CONSTRAINT in str(res.payload["messages"][1]["content"])
    working_set = [m["content"] for m in res.payload["messages"] if "files read or edited on this branch" in str(m["content"])]
    assert len(working_set) == 1
    assert "- src/pkg/module_007.py (edited)\n" in working_set[0]
    # the reviewer's private edit of the test file is not in the shared view, and it
    # does not mark the agent's read stale there either (private state never reaches
    # others, not even as "changed since")
    assert "- tests/test_module_003.py (read)\n" in working_set[0]
    assert "changed since" not in working_set[0]
    assert 0 < res.record.assembled_tokens <= 4000


def test_coding_history_is_deterministic(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    other = Ledger.open(f"sqlite:///{tmp_path / 'again.db'}", blobs=tmp_path / "blobs-again")
    try:
        a, _ = build_shape(sqlite_ledger, 40, "coding")
        b, _ = build_shape(other, 40, "coding")
        first = [(x.call_id, x.tool_name, x.arguments_json, x.sha256) for x in sqlite_ledger.store.artifacts(sqlite_ledger.scope(), a)]
        second = [(x.call_id, x.tool_name, x.arguments_json, x.sha256) for x in other.store.artifacts(other.scope(), b)]
    finally:
        other.close()
    assert len(first) == 40 and sorted(first) == sorted(second)


def test_cli_scale_reports_both_shapes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["--home", str(tmp_path / "home"), "bench", "scale", "--sizes", "30", "--runs", "2", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)["scale"]
    assert [(r["backend"], r["shape"], r["artifacts"], r["runs"]) for r in rows] == [("sqlite", "pipeline", 30, 2), ("sqlite", "coding", 30, 2)]
    assert set(rows[0]) == set(rows[1]) and {"p50_ms", "record_per_s", "candidate_messages", "replay_estimated"} <= set(rows[0])
    md = (out / "bench-scale.md").read_text(encoding="utf-8")
    assert "| backend | shape | artifacts |" in md and "| sqlite | pipeline | 30 |" in md and "| sqlite | coding | 30 |" in md
    assert (out / "bench-scale-latency.png").stat().st_size > 0
    bad = CliRunner().invoke(app, ["--home", str(tmp_path / "home"), "bench", "scale", "--sizes", "30", "--shape", "chat", "--out", str(out), "--json"])
    assert bad.exit_code != 0 and "unknown --shape 'chat'" in bad.output


def test_unknown_shape_is_refused() -> None:
    from contextledger.errors import InputError

    with pytest.raises(InputError, match="unknown history shape 'chat'"):
        run_scale([10], shapes=["chat"])


def test_cli_scale_moving_now(tmp_path: Path) -> None:
    """``--now-step``: every assembly of a point moves ``now`` forward (a live agent); the
    step is reported with the point."""
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["--home", str(tmp_path / "home"), "bench", "scale", "--sizes", "30", "--runs", "2", "--shape", "coding", "--now-step", "67", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)["scale"]
    assert [(r["shape"], r["artifacts"], r["runs"], r["now_step_s"]) for r in rows] == [("coding", 30, 2, 67.0)]
    assert 0 < rows[0]["p50_ms"] <= rows[0]["p95_ms"]
