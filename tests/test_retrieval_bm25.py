"""The keyword route ranks by BM25 over every matching document of the conversation
(collection statistics, no newest-N window), exactly — the max-score cut returns the
same list as scoring every document — and the same on SQLite and PostgreSQL."""

from __future__ import annotations

import math

import pytest

from contextledger.ledger import Ledger
from contextledger.retrieval import search
from contextledger.retrieval.routes.keyword import K1, MIN_SHARE, B
from contextledger.retrieval.text import query_tokens, tokens


@pytest.fixture(autouse=True)
def _no_embeddings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTLEDGER_EMBEDDINGS", "off")


def _talk(ledger: Ledger, turns: int) -> tuple[str, str, list[str]]:
    """An old turn holding a rare word, then ``turns`` newer turns that all share the
    speaker's name (the common word); returns (conversation, old message id, texts)."""
    rec = ledger.recorder()
    conv = rec.start_conversation(title="bm25")
    texts = ["Caroline: my sister Ana moved to Porto and opened a bakery."]
    old = rec.record_message(conv.id, "user", texts[0])
    moods = ("tired", "happy", "busy", "calm", "sleepy", "curious", "hungry")
    for n in range(turns):
        texts.append(f"Caroline: today I feel {moods[n % len(moods)]}, day {n}.")
        rec.record_message(conv.id, "user" if n % 2 else "assistant", texts[-1])
    return str(conv.id), str(old.id), texts


def _brute(texts: list[str], query: str) -> list[float]:
    """BM25 of every text over the whole collection (k1 1.2, b 0.75); 0 for a text whose
    terms carry less than the floor (a share of the query terms' summed idf)."""
    docs = [tokens(t) for t in texts]
    q = set(query_tokens(query))
    n, avgdl = len(docs), sum(len(d) for d in docs) / len(docs)
    df = {t: sum(t in d for d in docs) for t in q}
    idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
    out = []
    for d in docs:
        norm = K1 * (1 - B + B * len(d) / avgdl)
        out.append(sum(idf[t] * d.count(t) * (K1 + 1) / (d.count(t) + norm) for t in sorted(q) if t in d))
    floor = MIN_SHARE * sum(idf.values())
    return [s if sum(idf[t] for t in q if t in d) >= floor else 0.0 for s, d in zip(out, docs, strict=True)]


def test_a_common_word_does_not_hide_an_older_turn(ledger: Ledger) -> None:
    conv, old, _ = _talk(ledger, 220)  # far more than any window of newest matches
    res = search(ledger, ledger.scope(), conv, "Caroline sister Porto", routes=("keyword",), limit=5, encoder=None)
    assert res.hits[0].record_id == old and res.hits[0].ranks == {"keyword": 1}


def test_a_turn_sharing_only_the_speakers_name_is_not_a_match(ledger: Ledger) -> None:
    conv, _, _ = _talk(ledger, 30)
    res = search(ledger, ledger.scope(), conv, "What is the name of Caroline's pet?", routes=("keyword",), encoder=None)
    assert res.hits == []


def test_the_cut_ranks_as_scoring_every_document(ledger: Ledger) -> None:
    conv, _, texts = _talk(ledger, 60)
    for query in ("Caroline feel tired day", "sleepy Caroline", "bakery day 7"):
        res = search(ledger, ledger.scope(), conv, query, routes=("keyword",), limit=10, encoder=None)
        brute = sorted(((s, i) for i, s in enumerate(_brute(texts, query)) if s > 0), key=lambda x: (-x[0], -x[1]))[:10]
        assert [round(h.scores["keyword"], 4) for h in res.hits] == [round(s, 4) for s, _ in brute], query
        assert [h.text for h in res.hits] == [texts[i] for _, i in brute], query
