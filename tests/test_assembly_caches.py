"""Caches of the assembly path never change what is assembled.

Store rows are decoded from their JSON text and memoised by those exact bytes
(``store.codec.decode_body``); values derived from one record (eviction keys) are memoised
per record object (``assembly.units.derived``); pure text helpers are memoised by their
arguments.  Assembling with every cache cold and with every cache warm gives the same
payload, record and trace, and an updated memory is read back with its new content.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from contextledger.assembly import render, units
from contextledger.bench.scenarios import all_scenarios, get_scenario
from contextledger.ledger import Ledger
from contextledger.providers import openai_chat
from contextledger.records.models import Message, ToolArtifact, ToolCall, ToolMemory
from contextledger.store import codec
from contextledger.store import schema as S


def _clear_caches() -> None:
    codec._decode_cached.cache_clear()
    units._DERIVED.clear()
    render.stale_line_parts.cache_clear()
    openai_chat._safe_identifier.cache_clear()
    render.compact_arguments.cache_clear()
    render._line_of.cache_clear()


def _assembly(led: Ledger, case: Any, budget: int | None = None) -> dict[str, Any]:
    res = led.assemble(
        case.conversation_id, branch_id=case.branch_id, participant_id=case.participant_id, provider=case.provider,
        budget_tokens=budget or case.budget_tokens, now=case.now, persist=False, trace=True,
    )
    out = res.as_dict()
    out.pop("assembly_id")
    out.pop("timings_ms")
    return out


def test_decoded_rows_equal_the_json_path(ledger: Ledger) -> None:
    """Every candidate row decodes to the record ``json.loads`` + ``model_validate``
    gives, and the same stored bytes give the same record object."""
    case = get_scenario("coding-walkthrough").build(ledger, 1)
    scope = ledger.scope()
    checked = 0
    with ledger.store.reader() as conn:
        for table, model in ((S.messages, Message), (S.tool_calls, ToolCall), (S.tool_artifacts, ToolArtifact), (S.tool_memories, ToolMemory)):
            rows = conn.execute(table.select().where(table.c.conversation_id == case.conversation_id)).all()
            assert rows
            for r in rows:
                assert codec.decode_body(model, json.dumps(r.body)) == model.model_validate(r.body)
                checked += 1
    assert checked > 40
    first = ledger.store.messages(scope, case.conversation_id)
    again = ledger.store.messages(scope, case.conversation_id)
    assert [m.id for m in first] == [m.id for m in again]
    assert all(a is b for a, b in zip(first, again, strict=True))


def test_decode_falls_back_for_what_pydantic_json_refuses() -> None:
    """Bodies ``json`` reads but pydantic's JSON parser refuses (a lone surrogate in tool
    output, ``NaN``) still decode, to what the ``json`` path gives."""
    body: dict[str, Any] = {
        "id": "mem_1", "tenant_id": "t", "conversation_id": "c", "branch_id": "b", "seq": 1, "source_artifact_ids": ["art_1"],
        "source_tool": "probe", "summary": "broken \ud800 output", "observed_at": "2026-01-01T00:00:00Z",
        "created_at": "2026-01-01T00:00:00Z", "payload": {"score": float("nan")},
    }
    text = json.dumps(body)
    assert "\\ud800" in text and "NaN" in text
    mem = codec.decode_body(ToolMemory, text)
    assert mem.summary == "broken \ud800 output"
    assert mem.payload["score"] != mem.payload["score"]  # NaN


def test_updated_memory_is_read_with_its_new_content(ledger: Ledger) -> None:
    case = get_scenario("seed-6").build(ledger, 1)
    scope = ledger.scope()
    before = ledger.store.memories(scope, case.conversation_id)
    target = before[-1]
    with ledger.store.writer(scope) as w:
        w.update_memory(target.model_copy(update={"summary": "updated summary text for the cache test"}))
    after = {m.id: m for m in ledger.store.memories(scope, case.conversation_id)}
    assert after[target.id].summary == "updated summary text for the cache test"
    assert after[target.id] is not target
    assert all(after[m.id] is m for m in before[:-1])  # unchanged rows: the same records


def test_cold_and_warm_caches_give_the_same_assembly(sqlite_ledger: Ledger) -> None:
    """Every scenario at 10× history, at its own budget and at a third of it (eviction of
    evidence lines, drop steps, refill), cold caches against warm caches."""
    led = sqlite_ledger
    cases = [s.build(led, 10) for s in all_scenarios()]
    cold: list[dict[str, Any]] = []
    for case in cases:
        for budget in (case.budget_tokens, max(200, case.budget_tokens // 3)):
            _clear_caches()
            cold.append(_assembly(led, case, budget))
    warm = [_assembly(led, case, budget) for case in cases for budget in (case.budget_tokens, max(200, case.budget_tokens // 3))]
    assert len(units._DERIVED) > 0  # eviction keys were memoised and reused
    for a, b in zip(cold, warm, strict=True):
        assert json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def test_assembly_follows_a_memory_update(sqlite_ledger: Ledger) -> None:
    """A memory whose summary changes between two assemblies is rendered with its new
    text (its cached record and derived values are not reused for the new record), and
    the warm assembly equals a cold one."""
    led = sqlite_ledger
    case = get_scenario("seed-6").build(led, 10)
    scope = led.scope()
    first = _assembly(led, case)
    shown = json.dumps(first["payload"], ensure_ascii=False)
    mems = led.store.memories(scope, case.conversation_id)
    target = next(m for m in reversed(mems) if m.id in first["selected"] and m.summary.strip().split("\n")[0] in shown)
    old_line = target.summary.strip().split("\n")[0]
    marker = "renewal confirmed by the vendor portal"
    with led.store.writer(scope) as w:
        w.update_memory(target.model_copy(update={"summary": target.summary.replace(old_line, marker)}))
    second = _assembly(led, case)
    _clear_caches()
    third = _assembly(led, case)
    assert json.dumps(second, sort_keys=True, default=str) == json.dumps(third, sort_keys=True, default=str)
    assert marker in json.dumps(second["payload"], ensure_ascii=False)
    assert old_line not in json.dumps(second["payload"], ensure_ascii=False)


def test_derived_is_per_record_object() -> None:
    calls: list[int] = []

    def compute(value: int) -> int:
        calls.append(value)
        return value

    mem = ToolMemory.model_validate(
        {"id": "mem_1", "tenant_id": "t", "conversation_id": "c", "branch_id": "b", "seq": 1, "source_artifact_ids": ["art_1"],
         "source_tool": "probe", "summary": "x", "observed_at": "2026-01-01T00:00:00Z", "created_at": "2026-01-01T00:00:00Z"}
    )
    twin = mem.model_copy()
    assert units.derived(mem, "k", lambda: compute(1)) == 1
    assert units.derived(mem, "k", lambda: compute(2)) == 1
    assert units.derived(twin, "k", lambda: compute(3)) == 3
    assert units.derived(mem, "other", lambda: compute(4)) == 4
    assert calls == [1, 3, 4]


def test_now_is_part_of_the_assembly_not_of_the_caches(sqlite_ledger: Ledger) -> None:
    """Warm caches do not carry one ``now``'s ages into another: stale markers show the
    ages of the new ``now``, as with cold caches."""
    led = sqlite_ledger
    case = get_scenario("seed-3").build(led, 1)
    a = led.assemble(case.conversation_id, provider=case.provider, budget_tokens=case.budget_tokens, now=case.now, persist=False)
    later = case.now + timedelta(days=30)
    b = led.assemble(case.conversation_id, provider=case.provider, budget_tokens=case.budget_tokens, now=later, persist=False)
    _clear_caches()
    c = led.assemble(case.conversation_id, provider=case.provider, budget_tokens=case.budget_tokens, now=later, persist=False)
    assert b.payload == c.payload
    assert b.record.omitted == c.record.omitted
    assert a.payload != b.payload  # ages of stale markers moved on


def test_memory_views_are_decided_per_viewer_provider_and_policy(sqlite_ledger: Ledger) -> None:
    """Memory views are decided once per record and (policy version, provider, viewer)
    across requests: assembling for one participant, then another, then with another
    provider, with warm caches, equals each assembly with cold caches — participant A's
    private memories never reach B through a cached view."""
    led = sqlite_ledger
    case = get_scenario("seed-5").build(led, 10)
    parts = led.store.participants(led.scope(), case.conversation_id)
    viewers = [p.id for p in parts if p.parent_participant_id is None]
    assert len(viewers) >= 2
    combos = [(v, prov) for v in viewers for prov in ("anthropic", "openai-chat")]

    def one(viewer: str, provider: str) -> dict[str, Any]:
        res = led.assemble(case.conversation_id, participant_id=viewer, provider=provider, budget_tokens=case.budget_tokens, now=case.now, persist=False, trace=True)
        out = res.as_dict()
        out.pop("assembly_id")
        out.pop("timings_ms")
        return out

    warm = [one(v, p) for v, p in combos]
    cold = []
    for v, p in combos:
        _clear_caches()
        cold.append(one(v, p))
    for a, b in zip(cold, warm, strict=True):
        assert json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)
    # the views differ between viewers (the private notes are A's only)
    by_viewer = {v: json.dumps(w["payload"], ensure_ascii=False) for (v, p), w in zip(combos, warm, strict=True) if p == "anthropic"}
    assert len(set(by_viewer.values())) == len(viewers)


def test_absorb_keeps_a_probe_trace_only_when_it_would_be_the_same() -> None:
    """``Evaluator.absorb`` records what a scratch copy recorded (bucket renamed), and
    refuses — recording nothing — when a record the scratch omitted is already omitted
    in the trace (its first reason could be read back differently)."""
    from datetime import UTC, datetime

    from contextledger.assembly.evaluate import Evaluator
    from contextledger.policy.loader import default_policy
    from contextledger.records.enums import OmissionReason, Shape

    ev = Evaluator(default_policy(), provider="openai-chat", now=datetime(2026, 1, 1, tzinfo=UTC), viewer=None, participants=[])
    scratch = ev.quiet()
    scratch.include("msg_1", "message", Shape.RAW, "\x00probe")
    scratch.include("art_1", "artifact", Shape.RAW, "raw")
    scratch.omit_record("mem_1", "memory", OmissionReason.STALE, "stale")
    assert ev.decisions == []
    assert ev.absorb(scratch, bucket=("\x00probe", "recent_tail"))
    assert [(d["record_id"], d.get("bucket")) for d in ev.decisions] == [("msg_1", "recent_tail"), ("art_1", "raw"), ("mem_1", None)]
    assert ev.last_reason("mem_1") == "stale"
    assert scratch.decisions[0]["bucket"] == "\x00probe"  # the scratch trace is not changed

    other = ev.quiet()
    other.omit_record("mem_1", "memory", OmissionReason.BUDGET, "budget")
    before = list(ev.decisions)
    assert not ev.absorb(other)
    assert ev.decisions == before
    assert ev.last_reason("mem_1") == "stale"


def test_raw_lower_bound_never_exceeds_the_raw_rendering(sqlite_ledger: Ledger) -> None:
    """The "does the whole history fit raw?" probe may conclude from lower bounds of the
    raw costs (``Shaper.raw_lower_bound``); every unit's bound is at most its raw
    rendering's cost — on every scenario at 1× and on real transcripts of each format —
    and it is positive for plain exchanges (the bound does stop the probe early)."""
    from datetime import UTC, datetime

    from conftest import real_data_dir, real_data_problem
    from contextledger.assembly.candidates import collect_candidates
    from contextledger.assembly.evaluate import Evaluator
    from contextledger.assembly.pieces import PROBE_BUCKET
    from contextledger.assembly.shape import Shaper
    from contextledger.assembly.units import build_units
    from contextledger.records.parts import ToolResultPart

    led = sqlite_ledger
    convs = [s.build(led, 1).conversation_id for s in all_scenarios()]
    real = real_data_dir()
    for rel in ("marot-spotter/tool_heavy.jsonl", "marot-spotter/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl") if real_data_problem() is None else ():
        convs.append(led.import_file(real / rel).conversation_id)
    asm = Shaper(led.runtime.tokenizer)
    checked = positive = 0
    for conv_id in convs:
        cands = collect_candidates(led.store, led.scope(), conv_id, None, recent_window=200, max_candidates=400)
        parts = [p for p in cands.participants if p.parent_participant_id is None]
        viewer = parts[0] if len(parts) == 1 else None
        for provider in ("openai-chat", "anthropic"):
            # at the newest record's time (most results current) and much later (stale
            # results carry a marker before the raw text)
            when = max(m.created_at for m in cands.messages) if provider == "openai-chat" else datetime(2027, 1, 1, tzinfo=UTC)
            ev = Evaluator(led.policy, provider=provider, now=when, viewer=viewer, participants=cands.participants)
            for u in build_units(cands.messages, cands.calls_by_message, cands.artifacts, cands.memories):
                if u.kind in ("system", "runtime", "cut"):
                    continue
                ev.unit_visible(u)
                bound = asm.raw_lower_bound(u, ev)
                piece = asm.render_unit(u, ev.quiet(), raw=True, bucket=PROBE_BUCKET, mandatory=False, order=(0, 0))
                raw_texts = [p.text for m in piece.messages if m.ref in piece.raw_artifacts for p in m.parts if isinstance(p, ToolResultPart) and p.text]
                sent = sum(asm.tok.count(t) for t in raw_texts)
                inline = sum(asm.tok.count(a.inline_text or "") for a in u.artifacts.values() if a.id in piece.raw_artifacts)
                # at most the raw result texts sent (so at most the unit's cost), and no
                # less than the raw payloads minus the 2-token allowance per result
                assert inline - 2 * len(piece.raw_artifacts) <= bound <= sent <= piece.cost, (conv_id, u.key, bound, inline, sent)
                checked += 1
                positive += bound > 0
    assert checked > 300 and positive > 0.3 * checked, (checked, positive)
