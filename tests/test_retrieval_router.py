"""The retrieval stage of the pipeline over the retrieval router: the query is built from
the current user input, the task statement and the unresolved calls; the routes recall
older memories that are not candidates already, fused by reciprocal rank; the recalled
memories join the candidates with their exchanges and reach the request through the
usual policy; the ContextAssembly records the routes used, the unavailable ones and why,
and per recalled memory its routes, ranks and fused score."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from contextledger.assembly.assembler import Assembler
from contextledger.assembly.candidates import collect_candidates
from contextledger.assembly.retrieval import ASSEMBLY_ROUTES, DEFAULT_ROUTER, RetrievalRouter
from contextledger.ledger import Ledger
from contextledger.records.enums import MessageKind, Role, ToolCallStatus
from contextledger.records.models import Message, ToolCall
from contextledger.records.parts import TextPart
from contextledger.retrieval.embed import encode_queries as embed_queries
from contextledger.retrieval.model import RetrievalQuery, RouteHit
from contextledger.retrieval.routes import RouteContext

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _msg(text: str, seq: int, role: Role = Role.USER) -> Message:
    return Message(
        id=f"msg_{seq}", tenant_id="t", conversation_id="c", branch_id="b", seq=seq, role=role, kind=MessageKind.CHAT,
        parts=(TextPart(text=text),), created_at=T0,
    )


def _call(call_id: str, seq: int, status: ToolCallStatus) -> ToolCall:
    return ToolCall(
        id=f"tc_{call_id}", tenant_id="t", conversation_id="c", branch_id="b", message_id=f"msg_{seq}", seq=seq, call_id=call_id,
        tool_name="deploy", arguments_json=json.dumps({"target": "eu-west"}), status=status, created_at=T0,
    )


def test_the_query_is_the_input_with_task_state_and_unresolved_calls() -> None:
    router = RetrievalRouter()
    head = [_msg("Migrate the billing service to Postgres 16.", 1)]
    window = [_msg("Working on it.", 40, Role.ASSISTANT), _msg("Is the staging port still the same?", 41)]
    calls = [_call("c_done", 30, ToolCallStatus.SUCCEEDED), _call("c_wait", 35, ToolCallStatus.AWAITING_APPROVAL), _call("c_run", 38, ToolCallStatus.PENDING)]
    asked = router.query(window, head, calls)
    assert asked is not None
    q, described = asked
    assert q.text == "Is the staging port still the same?"
    assert q.context == 'Migrate the billing service to Postgres 16.\ndeploy {"target": "eu-west"}\ndeploy {"target": "eu-west"}'
    assert q.vector_of == "msg_41"
    assert described == {"message_id": "msg_41", "task_message_id": "msg_1", "unresolved_call_ids": ["c_wait", "c_run"]}


def test_no_query_without_input_task_state_or_unresolved_call() -> None:
    router = RetrievalRouter()
    assert router.query([], [], []) is None
    assert router.query([_msg("Hello.", 3, Role.ASSISTANT)], [], [_call("c1", 2, ToolCallStatus.SUCCEEDED)]) is None
    # the task statement is the current input itself: no separate task state
    q, described = router.query([_msg("Deploy it.", 1)], [], []) or (None, None)
    assert q is not None and (q.text, q.context) == ("Deploy it.", "")
    assert described == {"message_id": "msg_1", "task_message_id": None, "unresolved_call_ids": []}
    # an unresolved call alone is a query
    q2, _ = router.query([], [], [_call("c9", 5, ToolCallStatus.PENDING)]) or (None, None)
    assert q2 is not None and q2.text == "" and q2.context.startswith("deploy ")
    assert DEFAULT_ROUTER.route_names == ASSEMBLY_ROUTES == ("keyword", "semantic", "artifact", "memory", "graph")


class _Fixed:
    """A route that recalls given memories (best first)."""

    def __init__(self, name: str, ids: list[str]) -> None:
        self.name = name
        self.ids = ids
        self.queries: list[RetrievalQuery] = []

    def run(self, ctx: RouteContext, query: RetrievalQuery, limit: int) -> list[RouteHit]:
        self.queries.append(query)
        return [RouteHit(record_kind="memory", record_id=i, score=1.0) for i in self.ids if ctx.wanted("memory", i)][:limit]


def _history(led: Ledger) -> tuple[str, str]:
    rec = led.recorder()
    conv = rec.start_conversation(title="prep", system_prompt="You are an assistant.")
    rec.record_message(conv.id, "user", "Prepare the renewal call.")
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "call_cal", "tool_name": "calendar_list_events", "arguments": {"day": "2026-03-04"}}])
    rec.record_tool_result(conv.id, "call_cal", json.dumps({"events": [{"id": "evt_5521", "title": "Northwind renewal sync"}]}), observed_at=T0)
    for i in range(90):  # unrelated history pushes the calendar call out of the window and the newest memories
        rec.record_assistant(conv.id, tool_calls=[{"call_id": f"call_{i}", "tool_name": "ping", "arguments": {}}])
        rec.record_tool_result(conv.id, f"call_{i}", "ok", observed_at=T0 + timedelta(minutes=i + 1))
    mem = next(m for m in led.store.memories(led.scope(), conv.id) if m.source_tool == "calendar_list_events")
    return str(conv.id), mem.id


def test_a_route_brings_an_old_memory_into_the_request(sqlite_ledger: Ledger) -> None:
    led = sqlite_ledger
    conv, mem_id = _history(led)
    led.recorder().record_message(conv, "user", "Is it still on for Wednesday?")  # no term in common
    scope = led.scope()
    route = _Fixed("calendar", [mem_id])
    router = RetrievalRouter([route])
    plain = collect_candidates(led.store, scope, conv, None, recent_window=40, max_candidates=50, router=RetrievalRouter(()))
    routed = collect_candidates(led.store, scope, conv, None, recent_window=40, max_candidates=50, router=router)
    assert plain.retrieval is None
    assert mem_id not in {m.id for m in plain.memories} and mem_id in {m.id for m in routed.memories}
    assert routed.window_start_seq > next(m.seq for m in routed.memories if m.id == mem_id)
    assert route.queries[0].text == "Is it still on for Wednesday?"
    assert route.queries[0].context.startswith("Prepare the renewal call.")
    when = T0 + timedelta(days=3)
    without = Assembler(led, led.policy, router=RetrievalRouter(())).assemble(scope, conv, budget_tokens=2000, now=when, persist=False)
    with_route = Assembler(led, led.policy, router=router).assemble(scope, conv, budget_tokens=2000, now=when)
    assert "evt_5521" not in json.dumps(without.payload)
    assert "evt_5521" in json.dumps(with_route.payload)
    mem = led.store.get_memory(scope, mem_id)
    # recalled with its exchange: the call's result is in the request (raw or as its memory)
    assert {mem.id, *mem.source_artifact_ids} & set(with_route.record.selected_refs)
    assert not {mem.id, *mem.source_artifact_ids} & set(without.record.selected_refs)
    # recorded, persisted and explained
    stored, _ = led.store.get_assembly(scope, with_route.record.id)
    r: dict[str, Any] = stored.retrieval or {}
    assert r["routes_used"] == ["calendar"]
    assert r["hits"] == [{"record_id": mem_id, "record_kind": "memory", "routes": ["calendar"], "ranks": {"calendar": 1}, "fused_score": round(1 / 61, 6), "candidate": False, "sent": True, "handle": f"m{mem.seq}"}]
    assert r["routes"] == [{"name": "calendar", "hits": 1}] and with_route.record.timings_ms["retrieval"] >= 0
    current = led.store.messages(scope, conv, last=1)[0]
    first = led.store.messages(scope, conv, roles=["user"])[0]
    assert r["query"] == {"message_id": current.id, "task_message_id": first.id, "unresolved_call_ids": []}
    assert without.record.retrieval is None
    # the default routes find it too: the task statement ("renewal") is task state
    default = Assembler(led, led.policy).assemble(scope, conv, budget_tokens=2000, now=when, persist=False)
    hit = next(h for h in (default.record.retrieval or {})["hits"] if h["record_id"] == mem_id)
    assert hit["ranks"] == {"keyword": 1, "memory": 1}


def test_keyword_recall_is_recorded_and_semantic_degrades_saying_why(sqlite_ledger: Ledger) -> None:
    led = sqlite_ledger
    conv, mem_id = _history(led)
    led.recorder().record_message(conv, "user", "What was evt_5521 about?")
    res = led.assemble(conv, budget_tokens=2000, now=T0 + timedelta(days=1))
    r = res.record.retrieval
    assert r is not None
    assert r["routes_used"] == ["keyword", "artifact", "memory", "graph"]
    assert r["degraded"] == {"semantic": "embeddings are switched off (CONTEXTLEDGER_EMBEDDINGS=off)"}
    assert [x["name"] for x in r["routes"]] == ["keyword", "semantic", "artifact", "memory", "graph"]
    top = r["hits"][0]
    assert top["record_id"] == mem_id and top["routes"] == ["keyword", "memory"] and top["candidate"] is False
    assert top["ranks"] == {"keyword": 1, "memory": 1}
    assert top["fused_score"] == round(1 / 61 + 0.5 / 61, 6)
    assert "evt_5521" in json.dumps(res.payload)
    # memories that are candidates already are ranked too (their evidence lines outlast
    # the others under budget pressure) and marked so; at most 12 new ones, 24 in all
    newest = {m.id for m in led.store.memories(led.scope(), conv, last=50)}
    assert all(h["candidate"] == (h["record_id"] in newest) for h in r["hits"])
    assert len(r["hits"]) <= 24 and sum(not h["candidate"] for h in r["hits"]) <= 12
    assert "Northwind" not in json.dumps(r)  # ids only, never text


def test_explain_and_the_inspector_show_the_recall(sqlite_ledger: Ledger) -> None:
    from fastapi.testclient import TestClient

    from contextledger.explain import render_explanation
    from contextledger.server.app import create_app
    from contextledger.server.settings import ServerSettings

    led = sqlite_ledger
    conv, mem_id = _history(led)
    led.recorder().record_message(conv, "user", "What was evt_5521 about?")
    res = led.assemble(conv, budget_tokens=2000, now=T0 + timedelta(days=1))
    expl = led.explain(res.record.id)
    hit = expl["retrieval"]["hits"][0]
    mem = led.store.get_memory(led.scope(), mem_id)
    assert hit["record_id"] == mem_id and hit["sent"] is True
    assert {mem_id, *mem.source_artifact_ids} & set(res.record.selected_refs)
    text = render_explanation(expl)
    assert "retrieval routes: keyword, artifact, memory, graph (reciprocal-rank fusion, k = 60)" in text
    assert "  semantic unavailable: embeddings are switched off (CONTEXTLEDGER_EMBEDDINGS=off)" in text
    assert hit["handle"] == f"m{mem.seq}"
    assert f"    m{mem.seq}  {mem_id}  fused {1 / 61 + 0.5 / 61:.6f}  keyword #1, memory #1  sent" in text
    one = led.explain(res.record.id, record_id=mem_id)
    assert one["recalled"] == hit
    assert f"  recalled by retrieval: fused {1 / 61 + 0.5 / 61:.6f}, keyword #1, memory #1" in render_explanation(one)
    with TestClient(create_app(ServerSettings(), ledger=led)) as client:
        page = client.get(f"/assemblies/{res.record.id}").text
    assert 'id="h-retrieval"' in page and "Routes used: keyword, artifact, memory, graph" in page
    assert f'<span class="handle">m{mem.seq}</span> <a class="id" href="/records/{mem_id}?assembly={res.record.id}">{mem_id}</a></td><td>keyword #1, memory #1</td><td class="n">{1 / 61 + 0.5 / 61:.6f}</td><td>yes</td>' in page
    assert "embeddings are switched off" in page


class _Counting:
    """The real encoder, counting its forward batches."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.batches: list[int] = []
        self.queries: list[int] = []

    def encode(self, texts: Any) -> Any:
        self.batches.append(len(texts))
        return self.inner.encode(texts)

    def encode_queries(self, texts: Any) -> Any:
        self.queries.append(len(texts))
        return embed_queries(self.inner, texts)


def test_an_import_embeds_its_records_in_batches(sqlite_ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("numpy")
    import sqlalchemy as sa

    from contextledger.retrieval import embed
    from contextledger.store import schema as S

    monkeypatch.setenv("CONTEXTLEDGER_EMBEDDINGS", "auto")
    counting = _Counting(embed.get_encoder(required=True))
    monkeypatch.setattr(embed, "_ENCODER", [counting])
    imp = sqlite_ledger.import_file(Path(__file__).parent / "data" / "claude_code_session.jsonl")
    with sqlite_ledger.store.reader() as c:
        vectors = c.execute(sa.select(sa.func.count()).select_from(S.retrieval_vectors).where(S.retrieval_vectors.c.conversation_id == imp.conversation_id)).scalar_one()
    # one forward batch per side for the whole import (≤ 128 texts): user messages as
    # queries, the other records as documents
    assert vectors > 1 and len(counting.batches) == 1 and len(counting.queries) == 1
    assert counting.batches[0] + counting.queries[0] == vectors
    # the live recorder still embeds per call
    rec = sqlite_ledger.recorder()
    rec.record_message(imp.conversation_id, "user", "Which file did the parser test read?")
    assert counting.queries == [vectors - counting.batches[0], 1]


def test_the_retrieval_list_and_explain_record_agree_on_what_was_sent(sqlite_ledger: Ledger) -> None:
    """One rule for "sent": a recalled memory whose raw result is in the request is sent
    in the retrieval list and "in the payload" for ``explain --record``, in a plan and in
    an extension of its epoch (whose payload holds the previous request's records)."""
    from contextledger.explain import render_explanation

    led = sqlite_ledger
    conv, mem_id = _history(led)
    led.recorder().record_message(conv, "user", "What was evt_5521 about?")
    first = led.assemble(conv, budget_tokens=2000, now=T0 + timedelta(days=1))
    led.recorder().record_message(conv, "user", "And the renewal sync evt_5521 again?")
    second = led.assemble(conv, budget_tokens=2000, now=T0 + timedelta(days=1))
    assert second.record.epoch is not None and second.record.epoch["reason"] == "extends epoch"
    mem = led.store.get_memory(led.scope(), mem_id)
    for res in (first, second):
        hits = led.explain(res.record.id)["retrieval"]["hits"]
        assert [h["sent"] for h in hits if h["record_id"] == mem_id] == [True]
        for h in hits:
            one = led.explain(res.record.id, record_id=h["record_id"])
            assert one["selected_in_payload"] is h["sent"] and one["recalled"] == h
        one = led.explain(res.record.id, record_id=mem_id)
        assert f"record m{mem.seq} {mem_id}: in the payload" in render_explanation(led.explain(res.record.id, record_id=f"m{mem.seq}"))
        assert one["selected_in_payload"] is True
