"""Property-based run of the REST API against its own OpenAPI schema (schemathesis):
whatever a client sends, the service never answers 5xx."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings

from contextledger.ledger import Ledger
from contextledger.server.app import create_app
from contextledger.server.settings import ServerSettings


def _client(home: Path) -> Iterator[TestClient]:
    ledger = Ledger.open(home=home)
    app = create_app(ServerSettings(), ledger=ledger)
    with TestClient(app) as client:  # one client, the lifespan running, for every call
        cid = client.post("/api/conversations", json={"title": "seed", "system_prompt": "You are an agent."}).json()["id"]
        client.post(f"/api/conversations/{cid}/records", json={"records": [
            {"type": "message", "role": "user", "content": "Run the tests. Never push."},
            {"type": "tool_calls", "tool_calls": [{"call_id": "call_1", "tool_name": "Bash", "arguments": {"command": "pytest"}}]},
            {"type": "tool_result", "call_id": "call_1", "result": "1 failed"},
        ]})
        yield client
    ledger.close()


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    yield from _client(tmp_path_factory.mktemp("openapi"))


def test_no_server_errors(client: TestClient) -> None:
    # the /v1 proxy routes take the providers' own bodies and forward them upstream; the
    # SDK and fuzz tests drive them
    schema = schemathesis.openapi.from_dict(client.get("/openapi.json").json()).include(path_regex="^/(api|healthz)")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 14
    seen: set[int] = set()
    for operation in operations:
        _no_5xx(client, operation, seen)
    assert seen == {2, 4}  # generated requests both succeed and get problem details


def _no_5xx(client: TestClient, operation: Any, seen: set[int]) -> None:
    @given(case=operation.as_strategy())
    @settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(case: schemathesis.Case) -> None:
        kwargs = case.as_transport_kwargs(base_url="http://testserver")
        body = kwargs.pop("json", None)
        response = client.request(kwargs["method"], kwargs["url"], params=kwargs.get("params"), headers=kwargs.get("headers"), json=body)
        assert response.status_code < 500, (operation.label, response.status_code, response.text[:500])
        seen.add(response.status_code // 100)

    run()
