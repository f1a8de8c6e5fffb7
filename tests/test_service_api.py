"""The REST API under /api: recording, assembly, explanations, rehydration, search,
compaction, promotion; problem details; API keys and tenants."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from contextledger.ledger import Ledger
from contextledger.server.app import create_app
from contextledger.server.keys import create_key, revoke_key
from contextledger.server.settings import ServerSettings


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    led = Ledger.open(home=tmp_path)
    yield led
    led.close()


@pytest.fixture
def client(ledger: Ledger) -> Iterator[TestClient]:
    with TestClient(create_app(ServerSettings(), ledger=ledger)) as c:
        yield c


def test_record_assemble_explain_rehydrate(client: TestClient) -> None:
    conv = client.post("/api/conversations", json={"title": "login", "system_prompt": "You are a coding agent."})
    assert conv.status_code == 201
    cid = conv.json()["id"]
    user = client.post(f"/api/conversations/{cid}/messages", json={"role": "user", "content": "Fix the login redirect. Never push to main.", "content_key": "u1"})
    assert user.status_code == 201
    again = client.post(f"/api/conversations/{cid}/messages", json={"role": "user", "content": "Fix the login redirect. Never push to main.", "content_key": "u1"})
    assert again.json()["message"]["id"] == user.json()["message"]["id"]
    raw = "FAILED tests/test_session.py::test_redirect - TypeError: 'NoneType'\n" + "ok\n" * 3000
    batch = client.post(f"/api/conversations/{cid}/records", json={"records": [
        {"type": "tool_calls", "text": "Running the tests.", "tool_calls": [{"call_id": "call_1", "tool_name": "Bash", "arguments": {"command": "pytest -q"}}]},
        {"type": "tool_result", "call_id": "call_1", "result": raw, "is_error": True},
    ]})
    assert batch.status_code == 201, batch.text
    art = batch.json()["records"][1]["artifact"]
    assert art["size_bytes"] == len(raw.encode()) and art["blob_key"] is not None
    got = client.get(f"/api/artifacts/{art['id']}/raw")
    assert got.status_code == 200 and got.content == raw.encode() and got.headers["x-contextledger-sha256"] == art["sha256"]
    asm = client.post(f"/api/conversations/{cid}/assemble", json={"provider": "anthropic", "budget_tokens": 3000, "trace": True})
    assert asm.status_code == 200, asm.text
    body = asm.json()
    assert body["assembled_tokens"] <= 3000 and "Never push to main" in json.dumps(body["payload"])
    expl = client.get(f"/api/assemblies/{body['assembly_id']}/explain").json()
    assert expl["assembly_id"] == body["assembly_id"] and expl["trace_kept"] is True
    why = client.get(f"/api/assemblies/{body['assembly_id']}/why-not/{user.json()['message']['id']}").json()
    assert why["record_id"] == user.json()["message"]["id"] and why["selected_in_payload"] is True
    found = client.get(f"/api/conversations/{cid}/search", params={"q": "test_redirect failure"}).json()
    assert [r["source_artifact_ids"] for r in found["results"]] == [[art["id"]]]
    mem_hit = next(h for h in found["hits"] if h["record_kind"] == "memory")
    assert found["results"][0]["routes"] == mem_hit["routes"] == ["keyword", "memory"] and found["results"][0]["ranks"]["memory"] == 1
    assert found["results"][0]["fused_score"] == mem_hit["fused_score"] == round(1 / (60 + mem_hit["ranks"]["keyword"]) + 0.5 / 61, 6)
    assert found["degraded"] == {"semantic": "embeddings are switched off (CONTEXTLEDGER_EMBEDDINGS=off)"}
    listed = client.get("/api/conversations").json()
    assert [(c["id"], c["messages"], c["tool_calls"], c["artifacts"]) for c in listed] == [(cid, 4, 1, 1)]


def test_errors_are_problem_details(client: TestClient) -> None:
    missing = client.get("/api/conversations/conv_nope")
    assert missing.status_code == 404 and missing.headers["content-type"] == "application/problem+json"
    assert missing.json() == {"type": "urn:contextledger:problem:not-found", "title": "Not Found", "status": 404, "detail": "conversation 'conv_nope' not found", "instance": "/api/conversations/conv_nope"}
    bad = client.post("/api/conversations", json={"title": 7})
    assert bad.status_code == 422 and bad.headers["content-type"] == "application/problem+json" and bad.json()["errors"][0]["loc"] == ["body", "title"]
    cid = client.post("/api/conversations", json={}).json()["id"]
    unknown = client.post(f"/api/conversations/{cid}/tool-results", json={"call_id": "call_x", "result": "r"})
    assert unknown.status_code == 404 and unknown.json()["detail"] == "tool call 'call_x' not found"
    naive = client.post(f"/api/conversations/{cid}/assemble", json={"now": "2026-01-01T00:00:00"})
    assert naive.status_code == 400 and "timezone-aware" in naive.json()["detail"]


def test_keys_map_to_tenants(client: TestClient, ledger: Ledger) -> None:
    cid = client.post("/api/conversations", json={"title": "local"}).json()["id"]
    key, record = create_key(ledger, "acme")
    assert key.startswith("clk_") and key not in str(ledger.store.engine.url)
    denied = client.get("/api/conversations")
    assert denied.status_code == 401 and denied.headers["content-type"] == "application/problem+json"
    acme = {"x-contextledger-key": key}
    assert client.get("/api/conversations", headers=acme).json() == []
    assert client.get(f"/api/conversations/{cid}", headers=acme).status_code == 404
    mine = client.post("/api/conversations", json={"title": "acme's"}, headers={"authorization": f"Bearer {key}"}).json()
    assert mine["tenant_id"] == "acme"
    revoke_key(ledger, record.id)
    assert client.get("/api/conversations", headers=acme).status_code == 401


def test_non_loopback_without_keys_refuses_to_start(tmp_path: Path) -> None:
    app = create_app(ServerSettings(host="0.0.0.0", home=str(tmp_path)))
    with pytest.raises(RuntimeError, match="no API key exists"), TestClient(app):
        pass


def test_healthz_and_openapi(client: TestClient) -> None:
    assert client.get("/healthz").json()["status"] == "ok"
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/api/conversations", "/api/conversations/{conversation_id}/records", "/api/assemblies/{assembly_id}/why-not/{record_id}", "/v1/chat/completions"} <= set(paths)


def test_batch_endpoint_records_runs_of_exchanges_batched(client: TestClient) -> None:
    """A run of exchanges in ``/records`` goes through the batched path (one transaction):
    every item answered in order, the graph complete; re-sending the same batch is safe
    (the run falls back to the items one by one, which find them recorded)."""
    cid = client.post("/api/conversations", json={"title": "batch"}).json()["id"]
    records: list[dict[str, object]] = [{"type": "message", "role": "user", "content": "Read the three modules.", "content_key": "u1"}]
    for i in range(3):
        records.append({"type": "tool_calls", "tool_calls": [{"call_id": f"r{i}", "tool_name": "Read", "arguments": {"file_path": f"/src/m{i}.py"}}]})
        records.append({"type": "tool_result", "call_id": f"r{i}", "result": f"def f{i}():\n    return {i}\n"})
    first = client.post(f"/api/conversations/{cid}/records", json={"records": records})
    assert first.status_code == 201, first.text
    got = first.json()["records"]
    assert [r["type"] for r in got] == ["message"] + ["tool_calls", "tool_result"] * 3
    assert [r["tool_calls"][0]["call_id"] for r in got[1::2]] == ["r0", "r1", "r2"]
    assert [r["artifact"]["call_id"] for r in got[2::2]] == ["r0", "r1", "r2"]
    assert [r["message"]["seq"] for r in got] == [1, 2, 3, 4, 5, 6, 7]
    assert got[2]["message"]["parent_message_id"] == got[1]["message"]["id"] and got[3]["message"]["parent_message_id"] == got[2]["message"]["id"]
    again = client.post(f"/api/conversations/{cid}/records", json={"records": records})
    assert again.status_code == 201, again.text
    assert [r["message"]["id"] for r in again.json()["records"]] == [r["message"]["id"] for r in got]
    listed = [c for c in client.get("/api/conversations").json() if c["id"] == cid]
    assert [(c["messages"], c["tool_calls"], c["artifacts"]) for c in listed] == [(7, 3, 3)]
