"""The MCP server, in process with the ``mcp`` 2.x ``Client`` (no port, no subprocess),
and once over stdio through ``contextledger mcp`` as a subprocess."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client

from contextledger.adapters.mcp import build_server, streamable_http
from contextledger.ledger import Ledger
from contextledger.records.enums import PrivacyClass

OUTPUT = "collected 3 items\n" + "tests/test_parse.py::test_ok PASSED\n" * 700 + "E   AssertionError: quoted commas split the field\n1 failed, 2 passed\n"


def _seed(ledger: Ledger) -> dict[str, str]:
    rec = ledger.recorder()
    conv = rec.start_conversation(system_prompt="You are a coding agent.")
    rec.record_message(conv.id, "user", "Fix the CSV parser.")
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "c1", "tool_name": "Bash", "arguments": {"command": "pytest -q"}}])
    _, big, _ = rec.record_tool_result(conv.id, "c1", OUTPUT, is_error=True)
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "c2", "tool_name": "gmail_read", "arguments": {"id": "m1"}}])
    _, secret, _ = rec.record_tool_result(conv.id, "c2", "From: alice\nSubject: salary", privacy_class=PrivacyClass.GOOGLE_USER_DATA)
    asm = ledger.assemble(conv.id, budget_tokens=600)
    return {"conv": conv.id, "big": big.id, "secret": secret.id, "asm": asm.record.id}


def _call(ledger: Ledger, tool: str, args: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with Client(build_server(ledger), raise_exceptions=True) as client:
            result = await client.call_tool(tool, args)
            assert not result.is_error, result
            return result.structured_content

    return anyio.run(go)


def test_tools_and_resources_are_listed(sqlite_ledger: Ledger) -> None:
    ids = _seed(sqlite_ledger)

    async def go() -> tuple[list[str], list[str], str]:
        async with Client(build_server(sqlite_ledger), raise_exceptions=True) as client:
            tools = sorted(t.name for t in (await client.list_tools()).tools)
            templates = sorted(t.uri_template for t in (await client.list_resource_templates()).resource_templates)
            latest = (await client.read_resource(f"ledger://conversations/{ids['conv']}/assemblies/latest")).contents[0]
            return tools, templates, latest.text  # type: ignore[union-attr]

    tools, templates, latest = anyio.run(go)
    assert tools == ["explain_assembly", "rehydrate_artifact", "search_ledger", "why_not"]
    assert templates == ["ledger://assemblies/{assembly_id}", "ledger://conversations/{conversation_id}", "ledger://conversations/{conversation_id}/assemblies/latest"]
    body = json.loads(latest)
    assert body["record"]["id"] == ids["asm"] and body["payload"]["messages"][0]["role"] == "system"


def test_rehydrate_returns_exact_text_in_windows(sqlite_ledger: Ledger) -> None:
    ids = _seed(sqlite_ledger)
    limit = sqlite_ledger.policy.rehydration.per_record_max_bytes
    first = _call(sqlite_ledger, "rehydrate_artifact", {"artifact_id": ids["big"]})
    assert first["refused"] is False and first["size_bytes"] == len(OUTPUT.encode())
    assert first["text"] == OUTPUT[:limit] and first["next_offset_bytes"] == limit
    text, offset = first["text"], first["next_offset_bytes"]
    while offset is not None:
        part = _call(sqlite_ledger, "rehydrate_artifact", {"artifact_id": ids["big"], "offset_bytes": offset})
        text, offset = text + part["text"], part["next_offset_bytes"]
    assert text == OUTPUT  # byte for byte, verified against the sha256 on read


def test_rehydrate_refuses_where_the_policy_forbids(sqlite_ledger: Ledger) -> None:
    ids = _seed(sqlite_ledger)
    refused = _call(sqlite_ledger, "rehydrate_artifact", {"artifact_id": ids["secret"]})
    assert (refused["refused"], refused["reason"], refused["text"]) == (True, "privacy_restricted", None)
    assert "google_user_data" in refused["detail"]
    sqlite_ledger.apply_retention(ids["big"], reason="30-day retention")
    gone = _call(sqlite_ledger, "rehydrate_artifact", {"artifact_id": ids["big"]})
    assert (gone["refused"], gone["reason"]) == (True, "retention_deleted")


def test_search_explain_and_why_not(sqlite_ledger: Ledger) -> None:
    ids = _seed(sqlite_ledger)
    hits = _call(sqlite_ledger, "search_ledger", {"conversation_id": ids["conv"], "query": "which pytest run failed?"})["result"]
    assert [h["artifact_ids"] for h in hits][:1] == [[ids["big"]]]
    assert hits[0]["source_tool"] == "Bash" and "pytest" in hits[0]["matched_terms"]
    assert hits[0]["routes"] == ["keyword", "memory"] and hits[0]["ranks"] == {"keyword": 1, "memory": 1}
    assert hits[0]["fused_score"] == round(1 / 61 + 0.5 / 61, 6)
    assert ids["secret"] not in [a for h in hits for a in h["artifact_ids"]]  # google_user_data is never recalled raw
    explained = _call(sqlite_ledger, "explain_assembly", {"assembly_id": ids["asm"]})
    assert explained["assembly_id"] == ids["asm"] and explained["budget_tokens"] == 600
    why = _call(sqlite_ledger, "why_not", {"assembly_id": ids["asm"], "record_id": ids["secret"]})
    assert (why["record_id"], why["sent"]) == (ids["secret"], False)
    assert [(d["family"], d["decision"], d["reason"]) for d in why["decisions"]] == [("privacy", "omit", "privacy_restricted")]
    big = _call(sqlite_ledger, "why_not", {"assembly_id": ids["asm"], "record_id": ids["big"]})
    assert [(d["family"], d["reason"], d["cause"]) for d in big["decisions"]] == [("rehydration", "rehydration_refused", "budget")]


def test_streamable_http_mounted_in_a_host_app(sqlite_ledger: Ledger) -> None:
    """Mounted in another application, the MCP app answers once the host's lifespan
    enters the one :func:`streamable_http` returns."""
    from collections.abc import AsyncIterator
    from contextlib import asynccontextmanager

    from starlette.applications import Starlette
    from starlette.routing import Mount
    from starlette.testclient import TestClient

    app, lifespan = streamable_http(sqlite_ledger, json_response=True, stateless_http=True)

    @asynccontextmanager
    async def host_lifespan(_: Starlette) -> AsyncIterator[None]:
        async with lifespan():
            yield

    host = Starlette(routes=[Mount("/", app=app)], lifespan=host_lifespan)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    with TestClient(host, base_url="http://127.0.0.1:8000") as client:  # non-loopback Host headers get 421
        response = client.post("/mcp", json=init, headers={"accept": "application/json, text/event-stream"})
    assert response.status_code == 200, response.text
    assert response.json()["result"]["serverInfo"]["name"] == "contextledger"


def test_mcp_command_over_stdio(tmp_path: Path) -> None:
    """``contextledger mcp`` serves the ledger over stdio (one subprocess)."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    home = tmp_path / "home"
    ledger = Ledger.open(home=home)
    try:
        ids = _seed(ledger)
    finally:
        ledger.close()
    params = StdioServerParameters(command=sys.executable, args=["-m", "contextledger.cli.main", "--home", str(home), "mcp"], env={**os.environ})

    async def go() -> Any:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("rehydrate_artifact", {"artifact_id": ids["secret"]})
            return result.structured_content

    out = anyio.run(go)
    assert (out["refused"], out["reason"]) == (True, "privacy_restricted")
