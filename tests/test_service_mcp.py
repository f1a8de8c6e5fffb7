"""The ledger's MCP server mounted at /mcp (streamable HTTP, stateless JSON answers)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from contextledger.ledger import Ledger
from contextledger.server.app import create_app
from contextledger.server.settings import ServerSettings

pytest.importorskip("mcp")
pytest.importorskip("contextledger.adapters.mcp")

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json", "mcp-protocol-version": "2025-06-18"}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    ledger = Ledger.open(home=tmp_path)
    with TestClient(create_app(ServerSettings(), ledger=ledger), base_url="http://127.0.0.1:8787") as c:
        yield c
    ledger.close()


def _rpc(client: TestClient, method: str, params: dict, rid: int = 1):  # type: ignore[no-untyped-def]
    return client.post("/mcp", json={"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, headers=HEADERS)


def test_mcp_server_answers_on_the_service(client: TestClient) -> None:
    init = _rpc(client, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
    assert init.status_code == 200, init.text
    assert init.json()["result"]["serverInfo"]["name"]
    tools = _rpc(client, "tools/list", {}, 2)
    assert tools.status_code == 200, tools.text
    names = {t["name"] for t in tools.json()["result"]["tools"]}
    assert "why_not" in names
    assert client.get("/healthz").status_code == 200  # the mount at / does not shadow the service's routes
