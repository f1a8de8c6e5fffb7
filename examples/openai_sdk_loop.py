"""Your own agent loop on the OpenAI SDK (Responses API): record each item, send the
assembled request.

Run ``python examples/openai_sdk_loop.py`` (``pip install 'contextledger[server]' openai``).
It needs no network: a scripted upstream on loopback stands in for the OpenAI API and
checks every request against the Responses rules.  Against the real API, drop the
``base_url``.
"""

from __future__ import annotations

import sys
import tempfile

from contextledger.extras import missing_extra

try:
    from openai import OpenAI

    from contextledger import Ledger
    from contextledger.ingest.responses_log import ResponsesLog
    from contextledger.server.local import serve_in_thread
    from contextledger.server.scripted import ScriptedUpstream
except ModuleNotFoundError as exc:  # an optional extra is not installed
    sys.exit(missing_extra(exc, "examples/openai_sdk_loop.py"))

TOOLS = [{"type": "function", "function": {"name": "run", "description": "Run a shell command.",
                                            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]


def run(arguments: str) -> str:
    return "2 passed, 0 failed"


upstream = ScriptedUpstream()
with tempfile.TemporaryDirectory() as home, serve_in_thread(upstream.app) as url:
    ledger = Ledger.open(home=home)
    log = ResponsesLog.start(ledger, system_prompt="You are a build agent.", metadata={"tools": TOOLS})
    client = OpenAI(base_url=f"{url}/v1", api_key="sk-your-key")
    log.append([{"role": "user", "content": "Make the build green. Never skip the tests."}])
    while True:
        assembly = ledger.assemble(log.conversation_id, provider="openai-responses", budget_tokens=4000)
        response = client.responses.create(model="gpt-4o", **assembly.payload)  # instructions, input, tools
        log.append([item.model_dump(exclude_none=True) for item in response.output])
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            break
        log.append([{"type": "function_call_output", "call_id": c.call_id, "output": run(c.arguments)} for c in calls])
    print(response.output_text)
    print(f"{len(log.items())} items recorded; {upstream.count} requests, {upstream.invalid} invalid; "
          f"last request {assembly.record.assembled_tokens} tokens")
    ledger.close()
