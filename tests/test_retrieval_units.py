"""Retrieval building blocks without a database: the code-aware tokeniser, reciprocal
rank fusion, and the numpy MiniLM encoder against sentence-transformers' own vectors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from contextledger.retrieval.fusion import fuse
from contextledger.retrieval.model import RouteHit
from contextledger.retrieval.routes.keyword import bm25_scores
from contextledger.retrieval.statements import DocRow
from contextledger.retrieval.text import query_tokens, tokens


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("getUserById failed with HTTP 404", ["http_404", "getuserbyid", "user", "id", "fail", "http", "404"]),
        ("see src/app/auth_service.py", ["see", "src_app_auth_service_py", "auth_service_py", "src", "app", "auth", "servic", "py"]),
        ("E501 and TS2345, ORA-00942", ["e501", "501", "ts2345", "ts", "2345", "ora_00942", "ora", "00942"]),
        ("calendar_list_events os.path.join", ["calendar_list_events", "calendar", "list", "event", "os_path_join", "os", "path", "join"]),
        ("exit code 137; status: 503", ["code_137", "status_503", "exit", "code", "137", "statu", "503"]),
        ("本番環境のデータベースはポート5433で動いています", ["本番", "番環", "環境", "デー", "ータ", "タベ", "ベー", "ース", "ポー", "ート", "5433", "動"]),
        ("ＡＢＣ café XMLHttpRequest", ["abc", "cafe", "xmlhttprequest", "xml", "http", "request"]),
        ("x" * 5000 + " ok_then " + "xy1" * 40, ["ok_then", "ok", "xy", "1"]),
        ("commit 8e927421a04b, digest " + "ab1" * 40, ["commit", "8e927421a04b", "digest"]),
    ],
)
def test_tokens_are_code_aware(text: str, expected: list[str]) -> None:
    assert tokens(text) == expected


def test_query_tokens_are_bounded_and_documents_meet_queries() -> None:
    assert len(query_tokens(" ".join(f"word{i}x" for i in range(100)))) == 32
    doc = set(tokens("renewal of contract 4471 failed: TS2345 in billing/invoice.ts"))
    assert {"renew", "ts2345", "invoice_ts", "4471"} <= doc
    assert set(query_tokens("renewed contract, error TS2345, invoice.ts")) & doc == {"renew", "contract", "ts2345", "ts", "2345", "invoice_ts", "invoic"}


def test_reciprocal_rank_fusion_k60() -> None:
    def hits(*ids: str) -> list[RouteHit]:
        return [RouteHit(record_kind="memory", record_id=i, score=1.0) for i in ids]

    fused = fuse({"keyword": hits("a", "b", "c"), "semantic": hits("c", "d"), "graph": hits("c", "c")})
    assert [(f[1], round(f[2], 6), f[3]) for f in fused] == [
        ("c", round(1 / 63 + 1 / 61 + 1 / 61, 6), {"graph": 1, "keyword": 3, "semantic": 1}),
        ("a", round(1 / 61, 6), {"keyword": 1}),
        ("b", round(1 / 62, 6), {"keyword": 2}),
        ("d", round(1 / 62, 6), {"semantic": 2}),
    ]


def test_numpy_minilm_matches_sentence_transformers() -> None:
    np = pytest.importorskip("numpy")
    from contextledger.retrieval.embed import MiniLMEncoder

    ref = json.loads((Path(__file__).parent / "data" / "retrieval" / "minilm_reference.json").read_text())
    got = MiniLMEncoder().encode(ref["texts"])
    assert got.shape == (6, 384)
    assert float(np.abs(got - np.array(ref["vectors"], dtype=np.float32)).max()) < 1e-5
    assert np.allclose((got**2).sum(axis=1), 1.0, atol=1e-5)


def test_request_query_joins_user_input_task_state_and_unresolved_calls() -> None:
    from datetime import UTC, datetime

    from contextledger.records.enums import Role
    from contextledger.records.models import Message, ToolCall
    from contextledger.records.parts import TextPart
    from contextledger.retrieval.query import request_query

    at = datetime(2025, 1, 1, tzinfo=UTC)
    user = Message(id="msg_1", tenant_id="t", conversation_id="c", branch_id="b", seq=9, role=Role.USER, parts=(TextPart(text="fix the login in app/auth.py"),), created_at=at)
    call = ToolCall(id="tc_1", tenant_id="t", conversation_id="c", branch_id="b", message_id="msg_0", seq=8, call_id="c1", tool_name="run_tests", arguments_json='{"path": "tests/test_auth.py"}', created_at=at)
    q = request_query(user, task_state="goal: keep the public API", unresolved=[call])
    assert (q.text, q.vector_of) == ("fix the login in app/auth.py", "msg_1")
    assert q.context == 'goal: keep the public API\nrun_tests {"path": "tests/test_auth.py"}'
    assert q.paths == ("app/auth.py", "tests/test_auth.py")
    assert request_query(None, task_state="goal").vector_of is None


def test_keyword_bm25_is_computed_from_the_window_alone() -> None:
    # newest first, as both backends return them; "e501" is in 1 of 3 documents, "auth" in 2
    rows = [DocRow(3, "memory", "c", "b", 3, "auth login ok"), DocRow(2, "memory", "b", "b", 2, "e501 auth"), DocRow(1, "memory", "a", "b", 1, "unrelated words here now")]
    scores = bm25_scores(rows, ["e501", "auth"])
    idf_rare, idf_common = math.log(1 + 2.5 / 1.5), math.log(1 + 1.5 / 2.5)
    avgdl = 9 / 3

    def part(idf: float, dl: int) -> float:
        return idf * 2.2 / (1 + 1.2 * (0.25 + 0.75 * dl / avgdl))

    assert scores == [pytest.approx(part(idf_common, 3)), pytest.approx(part(idf_rare, 2) + part(idf_common, 2)), 0.0]
    assert bm25_scores([], ["x"]) == []


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("q8Rk3Zt1", ["q8rk3zt1"]),  # a guessed secret prefix: whole only
        ("Zq81xLk2 deploy", ["zq81xlk2", "deploy"]),
        ("getUserById2", ["getuserbyid2", "user", "id", "2"]),  # an identifier keeps its parts
        ("i18nKeys", ["i18nkeys", "18", "keys"]),
    ],
)
def test_random_looking_query_parts_match_whole_only(query: str, expected: list[str]) -> None:
    assert query_tokens(query) == expected
