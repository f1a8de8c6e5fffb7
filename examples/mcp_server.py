"""An MCP client asking the ledger for exact evidence, in process.

Run ``python examples/mcp_server.py`` (``pip install 'contextledger[mcp]'``).  The same
server runs over stdio with ``contextledger mcp`` (point an MCP client at that command);
``contextledger.adapters.mcp.streamable_http`` gives the HTTP app for a service.
"""

from __future__ import annotations

import sys
import tempfile

from contextledger.extras import missing_extra

try:
    import anyio
    from mcp import Client

    from contextledger import Ledger
    from contextledger.adapters.mcp import build_server
except ModuleNotFoundError as exc:  # an optional extra is not installed
    sys.exit(missing_extra(exc, "examples/mcp_server.py"))

LOG = "INFO start\n" + "INFO request ok\n" * 2000 + "ERROR pool exhausted: 64/64 connections in use\n"

with tempfile.TemporaryDirectory() as home:
    ledger = Ledger.open(home=home)
    rec = ledger.recorder()
    conv = rec.start_conversation(system_prompt="You are an SRE assistant.")
    rec.record_message(conv.id, "user", "Why do requests time out?")
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "call_1", "tool_name": "read_log", "arguments": {"name": "api.log"}}])
    _, artifact, _ = rec.record_tool_result(conv.id, "call_1", LOG)
    assembly = ledger.assemble(conv.id, budget_tokens=800)  # the 32 KB log is shaped, not sent whole

    async def ask() -> None:
        async with Client(build_server(ledger)) as client:
            why = await client.call_tool("why_not", {"assembly_id": assembly.record.id, "record_id": artifact.id})
            print("raw log sent:", why.structured_content["sent"])  # type: ignore[index]
            hits = await client.call_tool("search_ledger", {"conversation_id": conv.id, "query": "read_log api"})
            print("found:", hits.structured_content["result"][0]["artifact_ids"] == [artifact.id])  # type: ignore[index]
            window = await client.call_tool("rehydrate_artifact", {"artifact_id": artifact.id, "offset_bytes": len(LOG) - 60})
            print("exact tail:", window.structured_content["text"].strip().splitlines()[-1])  # type: ignore[index]

    anyio.run(ask)
    ledger.close()
