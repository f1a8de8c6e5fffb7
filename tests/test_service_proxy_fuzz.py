"""Property-based bodies on the proxy routes: whatever JSON a client sends, the proxy
answers with the upstream's response or a provider-shaped error, never a 5xx of its own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from contextledger.ledger import Ledger
from contextledger.server.app import create_app
from contextledger.server.settings import ServerSettings
from service_support import serve


async def _ok(request: Request) -> JSONResponse:
    await request.body()
    return JSONResponse({"ok": True})


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    upstream = Starlette(routes=[Route("/v1/{path:path}", _ok, methods=["POST"])])
    ledger = Ledger.open(home=tmp_path_factory.mktemp("fuzz"))
    with serve(upstream) as up, serve(create_app(ServerSettings(openai_upstream=f"{up}/v1", anthropic_upstream=up), ledger=ledger)) as url:
        yield url
    ledger.close()


_scalar = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=12)
_json = st.recursive(_scalar, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["role", "content", "type", "text", "tool_calls", "id", "tool_call_id", "function", "name", "arguments", "input", "tool_use_id", "call_id", "output", "system"]), inner, max_size=5), max_leaves=20)
_roles = st.sampled_from(["system", "developer", "user", "assistant", "tool", "function", "other"])
_message = st.fixed_dictionaries({"role": _roles}, optional={"content": _json, "tool_calls": _json, "tool_call_id": _json, "name": _json})
_body = st.fixed_dictionaries({"model": st.text(max_size=8)}, optional={"messages": st.lists(_message, max_size=5) | _json, "input": _json, "system": _json, "tools": _json, "instructions": _json, "stream": st.booleans()})


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_no_server_errors_of_its_own(proxy: str, path: str) -> None:
    with httpx.Client(base_url=proxy, timeout=60) as client:

        @given(body=_body)
        @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def run(body: dict[str, Any]) -> None:
            response = client.post(path, content=json.dumps(body), headers={"authorization": "Bearer k", "content-type": "application/json"})
            assert response.status_code in (200, 400), (response.status_code, response.text[:300])

        run()


def test_non_object_bodies_get_the_provider_error(proxy: str, tmp_path: Path) -> None:
    with httpx.Client(base_url=proxy, timeout=60) as client:
        bad = client.post("/v1/messages", content=b"[1, 2", headers={"content-type": "application/json"})
        assert bad.status_code == 400 and bad.json() == {"type": "error", "error": {"type": "invalid_request_error", "message": "the request body is not valid JSON"}}
        listed = client.post("/v1/chat/completions", json=[1, 2])
        assert listed.status_code == 400 and listed.json()["error"]["type"] == "invalid_request_error"
