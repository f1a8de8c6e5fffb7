"""The retrieval slot of the pipeline: routes recall older memories for the current input,
the router merges them (scores add, ties newest first, then id) and keeps the best; the
recalled memories join the candidates with their exchanges and reach the request."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from contextledger.assembly.assembler import Assembler
from contextledger.assembly.candidates import collect_candidates
from contextledger.assembly.retrieval import (
    DEFAULT_ROUTER,
    Recall,
    RetrievalQuery,
    RetrievalRouter,
    TermIndexRoute,
)
from contextledger.ledger import Ledger
from contextledger.memory.terms import query_terms
from contextledger.records.enums import MessageKind, Role
from contextledger.records.models import Message
from contextledger.records.parts import TextPart

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


class _Fixed:
    """A route that recalls given memories with given scores."""

    def __init__(self, name: str, recalls: list[Recall]) -> None:
        self.name = name
        self.recalls = recalls
        self.queries: list[RetrievalQuery] = []

    def recall(self, reads: Any, query: RetrievalQuery) -> list[Recall]:
        self.queries.append(query)
        return [r for r in self.recalls if r.memory_id not in query.exclude]


class _Reads:
    """What the router reads: the memories of the chosen ids (here: the ids)."""

    def memories_by_id(self, ids: list[str]) -> list[str]:
        return list(ids)


def _user(text: str, seq: int = 9) -> Message:
    return Message(
        id=f"msg_{seq}", tenant_id="t", conversation_id="c", branch_id="b", seq=seq, role=Role.USER, kind=MessageKind.CHAT,
        parts=(TextPart(text=text),), created_at=T0,
    )


def test_the_router_adds_route_scores_and_keeps_the_best() -> None:
    a = _Fixed("a", [Recall("m1", 0.5, 10), Recall("m2", 1.0, 5), Recall("m3", 0.25, 30)])
    b = _Fixed("b", [Recall("m1", 0.75, 10), Recall("m4", 1.25, 2), Recall("m3", 0.75, 30)])
    router = RetrievalRouter([a, b], limit=3)
    got = router.recall(_Reads(), [_user("where is the Northwind invoice?")], [], {"m4"})  # type: ignore[arg-type]
    # m1 1.25, m3 1.0 (newer than m2), m2 1.0; m4 is a candidate already
    assert got == ["m1", "m3", "m2"]
    query = a.queries[0]
    assert (query.text, query.terms, query.exclude) == ("where is the Northwind invoice?", tuple(sorted(query_terms(query.text))), frozenset({"m4"}))
    assert "northwind" in query.terms
    assert b.queries == [query]


def test_no_query_without_a_current_user_input_or_its_terms() -> None:
    route = _Fixed("a", [Recall("m1", 1.0, 1)])
    router = RetrievalRouter([route])
    assert router.recall(_Reads(), [], [], set()) == []  # type: ignore[arg-type]
    assert router.recall(_Reads(), [_user("ok")], [], set()) == []  # type: ignore[arg-type]
    assert route.queries == []


def test_a_route_brings_an_old_memory_into_the_request(sqlite_ledger: Ledger) -> None:
    led = sqlite_ledger
    rec = led.recorder()
    conv = rec.start_conversation(title="prep", system_prompt="You are an assistant.")
    rec.record_message(conv.id, "user", "Prepare the renewal call.")
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "call_cal", "tool_name": "calendar_list_events", "arguments": {"day": "2026-03-04"}}])
    rec.record_tool_result(conv.id, "call_cal", json.dumps({"events": [{"id": "evt_5521", "title": "Northwind renewal sync"}]}), observed_at=T0)
    for i in range(90):  # unrelated history pushes the calendar call out of the window and the newest memories
        rec.record_assistant(conv.id, tool_calls=[{"call_id": f"call_{i}", "tool_name": "ping", "arguments": {}}])
        rec.record_tool_result(conv.id, f"call_{i}", "ok", observed_at=T0 + timedelta(minutes=i + 1))
    rec.record_message(conv.id, "user", "Is it still on for Wednesday?")  # no term in common
    scope = led.scope()
    mem = next(m for m in led.store.memories(scope, conv.id) if m.source_tool == "calendar_list_events")
    route = _Fixed("calendar", [Recall(mem.id, 1.0, mem.seq)])
    router = RetrievalRouter([TermIndexRoute(), route])
    plain = collect_candidates(led.store, scope, conv.id, None, recent_window=40, max_candidates=50)
    routed = collect_candidates(led.store, scope, conv.id, None, recent_window=40, max_candidates=50, router=router)
    assert mem.id not in {m.id for m in plain.memories} and mem.id in {m.id for m in routed.memories}
    assert routed.window_start_seq > mem.seq
    assert route.queries[0].text == "Is it still on for Wednesday?"
    when = T0 + timedelta(days=3)
    without = Assembler(led, led.policy).assemble(scope, conv.id, budget_tokens=2000, now=when, persist=False)
    with_route = Assembler(led, led.policy, router=router).assemble(scope, conv.id, budget_tokens=2000, now=when, persist=False)
    assert "evt_5521" not in json.dumps(without.payload)
    assert "evt_5521" in json.dumps(with_route.payload)
    # recalled with its exchange: the call's result is in the request (raw or as its memory)
    assert {mem.id, *mem.source_artifact_ids} & set(with_route.record.selected_refs)
    assert not {mem.id, *mem.source_artifact_ids} & set(without.record.selected_refs)
    assert DEFAULT_ROUTER.routes[0].name == "terms" and len(DEFAULT_ROUTER.routes) == 1
