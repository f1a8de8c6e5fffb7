"""Property-based run of the REST API against its own OpenAPI schema (schemathesis):
whatever a client sends, the service never answers 5xx."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings

from contextledger.ledger import Ledger
from contextledger.server.app import create_app
from contextledger.server.settings import ServerSettings


def _app(home: Path) -> Iterator[FastAPI]:
    ledger = Ledger.open(home=home)
    app = create_app(ServerSettings(), ledger=ledger)
    with TestClient(app) as client:  # runs the lifespan: the ledger is attached to the app
        cid = client.post("/api/conversations", json={"title": "seed", "system_prompt": "You are an agent."}).json()["id"]
        client.post(f"/api/conversations/{cid}/records", json={"records": [
            {"type": "message", "role": "user", "content": "Run the tests. Never push."},
            {"type": "tool_calls", "tool_calls": [{"call_id": "call_1", "tool_name": "Bash", "arguments": {"command": "pytest"}}]},
            {"type": "tool_result", "call_id": "call_1", "result": "1 failed"},
        ]})
        yield app
    ledger.close()


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FastAPI]:
    yield from _app(tmp_path_factory.mktemp("openapi"))


def test_no_server_errors(app: FastAPI) -> None:
    # the /v1 proxy routes take the providers' own bodies and forward them upstream; the
    # SDK tests drive them
    schema = schemathesis.openapi.from_asgi("/openapi.json", app).include(path_regex="^/(api|healthz)")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 14
    for operation in operations:
        _no_5xx(operation)


def _no_5xx(operation: Any) -> None:
    @given(case=operation.as_strategy())
    @settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(case: schemathesis.Case) -> None:
        response = case.call()
        assert response.status_code < 500, (operation.label, response.status_code, response.text[:500])

    run()
