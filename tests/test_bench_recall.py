"""The recall suite runs and scores what a model would read: a fact asked for in other
words is recalled by hybrid retrieval, not by the recent tail or keywords alone."""

from __future__ import annotations

import pytest

from contextledger.bench import recall


def test_recall_suite_hybrid_beats_keyword_on_a_paraphrase(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("numpy")
    monkeypatch.setattr(recall, "FILLER", 6)
    report = recall.run_recall([1], budget=200, cases=["staging-db-port"])
    assert report["cases"] == 1 and [r["mode"] for r in report["rows"]] == list(recall.MODES)
    assert report["summary"]["1"] == {"none": 0.0, "keyword": 0.0, "semantic": 1.0, "hybrid": 1.0, "assembler": 0.0}
    assert all(r["tokens"] <= 200 for r in report["rows"] if r["mode"] != "assembler")
    assert "| 1× | 0.00 | 0.00 | 1.00 | 1.00 | 0.00 |" in recall.recall_markdown(report)
