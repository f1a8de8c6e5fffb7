"""Point the OpenAI SDK at the contextledger proxy: an agent's tool loop, unchanged.

Run ``python examples/proxy_openai.py``.  It needs no network: a scripted upstream on
loopback stands in for the OpenAI API.  Against the real API, start the service with
``contextledger serve`` and keep only the client part, with
``OpenAI(base_url="http://127.0.0.1:8787/v1")`` (your ``OPENAI_API_KEY`` is forwarded,
never stored).
"""

from __future__ import annotations

import logging
import sys
import tempfile

from contextledger.extras import missing_extra

try:
    from openai import OpenAI

    from contextledger import Ledger
    from contextledger.server.app import create_app  # imports the server extra here
    from contextledger.server.local import serve_in_thread
    from contextledger.server.scripted import ScriptedUpstream
    from contextledger.server.settings import ServerSettings
except ModuleNotFoundError as exc:  # an optional extra is not installed
    sys.exit(missing_extra(exc, "examples/proxy_openai.py"))

# the HTTP clients' and the service's INFO lines are not the example's output
logging.disable(logging.INFO)

TOOLS = [{"type": "function", "function": {"name": "run", "description": "Run a shell command.",
                                            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]

with tempfile.TemporaryDirectory() as home, serve_in_thread(ScriptedUpstream().app) as upstream:
    ledger = Ledger.open(home=home)
    with serve_in_thread(create_app(ServerSettings(openai_upstream=f"{upstream}/v1"), ledger=ledger)) as service:
        client = OpenAI(base_url=f"{service}/v1", api_key="sk-your-key")
        messages = [{"role": "system", "content": "You are a build agent."},
                    {"role": "user", "content": "Make the build green. Never skip the tests."}]
        while True:  # the agent's own loop: send the whole history, run the tools asked for
            raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=messages, tools=TOOLS)
            message = raw.parse().choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                break
            for call in message.tool_calls:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": "2 passed, 0 failed"})
        assembly_id = raw.headers["x-contextledger-assembly-id"]
        print(message.content)
        explanation = ledger.explain(assembly_id)
        print(f"assembly {assembly_id}: {explanation['assembled_tokens']} tokens sent, {explanation['replay_tokens']} on replay")
    ledger.close()
