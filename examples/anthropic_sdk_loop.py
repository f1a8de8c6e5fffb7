"""Your own agent loop on the Anthropic SDK: record each turn, send the assembled request.

Run ``python examples/anthropic_sdk_loop.py`` (``pip install 'contextledger[server]' anthropic``).
It needs no network: a scripted upstream on loopback stands in for the Messages API and
checks every request against the Messages rules.  Against the real API, drop the
``base_url``.
"""

from __future__ import annotations

import json
import sys
import tempfile

from contextledger.extras import missing_extra

try:
    from anthropic import Anthropic

    from contextledger import Ledger
    from contextledger.server.local import serve_in_thread
    from contextledger.server.scripted import ScriptedUpstream
except ModuleNotFoundError as exc:  # an optional extra is not installed
    sys.exit(missing_extra(exc, "examples/anthropic_sdk_loop.py"))

TOOLS = [{"name": "run", "description": "Run a shell command.",
          "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]


def run(arguments: dict[str, object]) -> str:
    return "2 passed, 0 failed"


upstream = ScriptedUpstream()
with tempfile.TemporaryDirectory() as home, serve_in_thread(upstream.app) as url:
    ledger = Ledger.open(home=home)
    rec = ledger.recorder()
    conv = rec.start_conversation(system_prompt="You are a build agent.", metadata={"tools": TOOLS})
    client = Anthropic(base_url=url, api_key="sk-ant-your-key")
    rec.record_message(conv.id, "user", "Make the build green. Never skip the tests.")
    while True:
        assembly = ledger.assemble(conv.id, provider="anthropic", budget_tokens=4000)
        message = client.messages.create(model="claude-sonnet-4-5", max_tokens=1024, **assembly.payload)  # system, messages, tools
        text = "".join(b.text for b in message.content if b.type == "text")
        calls = [b for b in message.content if b.type == "tool_use"]
        rec.record_assistant(conv.id, text=text, tool_calls=[{"call_id": b.id, "tool_name": b.name, "arguments": json.dumps(b.input)} for b in calls])
        if not calls:
            break
        for b in calls:
            rec.record_tool_result(conv.id, b.id, run(b.input))  # type: ignore[arg-type]
    print(text)
    print(f"{upstream.count} requests, {upstream.invalid} invalid; last request {assembly.record.assembled_tokens} tokens")
    ledger.close()
