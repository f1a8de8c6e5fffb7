"""Per-record decisions of every assembly, the why-not search and their CLI (seed 000
§2.5, §4.4; seed 001 §9 ContextPlan)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import real_data_dir, require_real_data
from contextledger.assembly.decisions import (
    RecordDecision,
    compact_decisions,
    expand_compact,
    reduce_trace,
)
from contextledger.cli.common import EXIT_INPUT, EXIT_NOT_FOUND
from contextledger.cli.main import app
from contextledger.errors import InputError, NotFoundError
from contextledger.inspector.resolve import assembly_decisions
from contextledger.inspector.whynot import why_not
from contextledger.ledger import Ledger
from contextledger.records.models import ContextAssembly

BRANCHY = real_data_dir() / "claude-code-viewer-dkimuson" / "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
LONG = real_data_dir() / "aider-chat-history" / "afi-core.aider.chat.history.md"


def e(rid: str, decision: str, reason: str, kind: str = "message", family: str = "budget", **kw: object) -> dict[str, object]:
    return {"record_id": rid, "record_kind": kind, "family": family, "decision": decision, "reason": reason, **kw}


def outcome(trace: list[dict[str, object]]) -> list[tuple[str, str, str, str | None]]:
    return [(d.record_id, d.decision, d.reason, d.shape) for d in reduce_trace(trace)]


def test_a_trace_folds_into_one_outcome_per_record() -> None:
    trace = [
        # sent raw, then dropped for budget: omitted, budget
        e("m1", "include", "selected", shape="raw", bucket="recent_tail"), e("m1", "omit", "budget", detail="drop order"),
        # long arguments cut, then sent raw: raw, the shaping kept as a note
        e("m2", "shape", "replaced_by_memory", family="rehydration", shape="extract", detail="args cut"), e("m2", "include", "selected", shape="raw", bucket="tool_results"),
        # dropped, restored, sent as an extract: memory
        e("k3", "omit", "budget", kind="memory"), e("k3", "include", "restored", kind="memory"), e("k3", "include", "selected", kind="memory", shape="extract", bucket="retrieval"),
        # marked stale and never sent otherwise: a stale marker
        e("k4", "mark_stale", "stale_marked", kind="memory", family="freshness"),
        # a superseded raw result sent as a reference, rehydration refused
        e("a5", "shape", "superseded", kind="artifact", family="conflict", shape="reference"), e("a5", "refuse", "rehydration_refused", kind="artifact", family="rehydration", cause="superseded"),
        # rehydrated, then refused for the byte budget: the memory stays
        e("a6", "shape", "replaced_by_memory", kind="artifact", family="rehydration", shape="extract"), e("a6", "rehydrate", "exact_evidence_requested", kind="artifact", family="rehydration"),
        e("a6", "refuse", "rehydration_refused", kind="artifact", family="rehydration", cause="budget"),
        # a protected pending call
        e("c7", "protect", "recovery_protected", kind="tool_call", family="recovery"),
        # a counted bulk entry is not a record
        e("12 message(s)", "omit", "outside_window", count=12),
    ]
    assert outcome(trace) == [
        ("m1", "omitted", "budget", None),
        ("m2", "raw", "selected", "raw"),
        ("k3", "memory", "restored", "extract"),
        ("k4", "stale_marker", "stale", "stale_marker"),
        ("a5", "reference", "superseded", "reference"),
        ("a6", "memory", "replaced_by_memory", "extract"),
        ("c7", "raw", "recovery_protected", None),
    ]
    m2 = reduce_trace(trace)[1]
    assert m2.notes == ["shaped: replaced_by_memory (args cut)"] and m2.bucket == "tool_results"
    assert reduce_trace(trace)[4].notes == ["rehydration_refused: superseded"]


def test_the_compact_form_round_trips() -> None:
    ds = [RecordDecision(record_id="msg_1", kind="message", decision="omitted", reason="budget", detail="drop order"),
          RecordDecision(record_id="mem_2", kind="memory", decision="memory", reason="selected", shape="extract", bucket="retrieval", notes=["x"])]
    rows = compact_decisions(ds)
    assert rows[0] == ["msg_1", "message", "omitted", "budget", "budget", None, None, "drop order"]
    assert [d.as_dict() for d in expand_compact(json.loads(json.dumps(rows)))] == [d.as_dict() for d in ds]


@pytest.fixture(scope="module")
def branchy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, str]:
    """A real Claude Code session with forks and subagents, assembled twice: traced and not."""
    require_real_data()
    home = tmp_path_factory.mktemp("insp")
    led = Ledger.open(home=home)
    imp = led.import_file(BRANCHY)
    traced = led.assemble(imp.conversation_id, provider="anthropic", budget_tokens=4000, trace=True).record.id
    plain = led.assemble(imp.conversation_id, provider="anthropic", budget_tokens=4000).record.id
    led.close()
    return home, imp.conversation_id, traced, plain


def _without_stored(led: Ledger, assembly_id: str, *, keep_trace: bool) -> ContextAssembly:
    """The stored record as an assembly recorded before per-record decisions were kept."""
    rec = led.runtime.store.get_assembly(led.scope(), assembly_id)[0]
    return rec.model_copy(update={"record_decisions": None, **({} if keep_trace else {"trace": None})})


def test_every_assembly_stores_its_decisions_and_they_equal_the_trace_and_a_recomputation(branchy: tuple[Path, str, str, str]) -> None:
    home, _, traced, plain = branchy
    led = Ledger.open(home=home)
    try:
        stored = assembly_decisions(led, led.scope(), plain)
        from_trace = assembly_decisions(led, led.scope(), _without_stored(led, traced, keep_trace=True))
        recomputed = assembly_decisions(led, led.scope(), _without_stored(led, plain, keep_trace=False))
        assert (stored.source, from_trace.source, recomputed.source) == ("stored", "trace", "recomputed")
        assert [d.as_dict() for d in stored.records] == [d.as_dict() for d in from_trace.records] == [d.as_dict() for d in recomputed.records]
        assert stored.watermark == recomputed.watermark is not None
        # every record of the other branches is listed by id, as many as the assembly counted
        listed = [d for d in stored.records if d.reason == "out_of_lineage"]
        assert len(listed) == stored.assembly.omitted["out_of_lineage"] == 36
        assert {d.kind for d in listed} == {"message", "artifact", "memory"}
    finally:
        led.close()


def test_records_older_than_the_window_are_listed_not_only_counted(tmp_path: Path) -> None:
    require_real_data()
    led = Ledger.open(home=tmp_path)
    try:
        imp = led.import_file(LONG)
        rec = led.assemble(imp.conversation_id, provider="openai-chat", budget_tokens=4000).record
        ds = assembly_decisions(led, led.scope(), rec.id)
        older = [d.record_id for d in ds.records if d.reason == "outside_window"]
        assert rec.omitted["outside_window"] == len(older) == 396
        assert len(set(older)) == len(older) and all(i.startswith("msg_") for i in older)
    finally:
        led.close()


def test_a_graph_changed_since_is_never_recomputed(tmp_path: Path) -> None:
    led = Ledger.open(home=tmp_path)
    try:
        conv = led.import_file(Path(__file__).parent / "data" / "claude_code_session.jsonl").conversation_id
        rec = led.assemble(conv, provider="openai-chat", budget_tokens=3000).record
        legacy = _without_stored(led, rec.id, keep_trace=False)
        assert assembly_decisions(led, led.scope(), legacy).source == "recomputed"
        led.recorder().record_message(conv, "user", "one more question")
        ds = assembly_decisions(led, led.scope(), legacy)
        assert ds.source == "summary_only" and ds.records == []
        # the stored list does not depend on the graph staying unchanged
        assert assembly_decisions(led, led.scope(), rec.id).source == "stored"
    finally:
        led.close()


def test_why_not_answers_with_the_decision_of_every_match(branchy: tuple[Path, str, str, str]) -> None:
    home, _, _, plain = branchy
    led = Ledger.open(home=home)
    try:
        sc = led.scope()
        final = assembly_decisions(led, sc, plain).by_id()
        hits = why_not(led, sc, plain, "package.json")
        assert hits and {h.kind for h in hits} >= {"message", "artifact"}
        for h in hits:
            if h.record_id in final:
                assert (h.decision, h.reason) == (final[h.record_id].decision, final[h.record_id].reason)
            else:  # never a candidate: older than the window, or on another branch
                assert h.reason in ("outside_window", "out_of_lineage") and h.decision == "omitted"
            assert "package.json" in h.excerpt.lower() or "package.json" in h.record_id
        off_lineage = [h for h in hits if not h.in_lineage]
        assert all(h.reason == "out_of_lineage" for h in off_lineage)
        # an id finds its record
        some = hits[0].record_id
        assert [h.record_id for h in why_not(led, sc, plain, some)] == [some]
        with pytest.raises(InputError):
            why_not(led, sc, plain, "   ")
        with pytest.raises(NotFoundError):
            why_not(led, sc, "asm_unknown", "x")
    finally:
        led.close()


runner = CliRunner()


def test_cli_why_not_messages_and_unknown_ids(branchy: tuple[Path, str, str, str]) -> None:
    home, conv, _, plain = branchy
    res = runner.invoke(app, ["--home", str(home), "explain", plain, "--why-not", "package.json", "--json"])
    assert res.exit_code == 0, res.output
    hits = json.loads(res.stdout)
    assert hits and all({"record_id", "kind", "decision", "reason"} <= set(h) for h in hits)
    res = runner.invoke(app, ["--home", str(home), "explain", plain, "--json"])
    expl = json.loads(res.stdout)
    assert expl["decision_source"] == "stored" and len(expl["decisions"]) > 40
    res = runner.invoke(app, ["--home", str(home), "messages", conv, "--json"])
    rows = json.loads(res.stdout)
    assert res.exit_code == 0 and len(rows) == 45 and all(r["message_id"].startswith("msg_") for r in rows)
    assert [r["seq"] for r in rows] == sorted(r["seq"] for r in rows)
    for args in (["messages", "conv_nope"], ["explain", "asm_nope", "--why-not", "x"], ["explain", plain, "--record", "msg_nope"]):
        res = runner.invoke(app, ["--home", str(home), *args])
        assert res.exit_code == EXIT_NOT_FOUND and "Traceback" not in res.output, args
    res = runner.invoke(app, ["--home", str(home), "explain", plain, "--why-not", "x", "--record", "y"])
    assert res.exit_code == EXIT_INPUT
