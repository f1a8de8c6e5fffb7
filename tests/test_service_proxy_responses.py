"""The Responses proxy driven by the official ``openai`` SDK (plain and streaming) against
a scripted upstream: reasoning of the continued tool-loop turn is sent exactly, the
client gets the upstream's answer unchanged, the ledger holds every item once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from contextledger.ledger import Ledger
from contextledger.server.app import create_app
from contextledger.server.scripted import Plan, ScriptedUpstream
from contextledger.server.settings import ServerSettings
from service_support import serve

TOOLS = [{"type": "function", "name": "run", "description": "Run a shell command.", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}, "strict": False}]
INSTRUCTIONS = "You are a release agent."
CONSTRAINT = "Never tag a release on Friday."


def script(kind: str, body: dict[str, Any]) -> Plan:
    last = body["input"][-1]
    if last.get("type") == "function_call_output":
        return Plan(text="Release notes drafted.")
    return Plan(thinking=("Check the changelog first.", "gAAAAABencrypted-reasoning=="), tool_calls=[("run", {"command": "git log --oneline -5"})])


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ScriptedUpstream, Ledger]]:
    home = tmp_path_factory.mktemp("svc")
    upstream = ScriptedUpstream(script)
    ledger = Ledger.open(home=home)
    with serve(upstream.app) as up, serve(create_app(ServerSettings(openai_upstream=f"{up}/v1"), ledger=ledger)) as proxy:
        yield proxy, upstream, ledger
    ledger.close()


def _create(client: openai.OpenAI, items: list[dict[str, Any]], stream: bool) -> Any:
    params: dict[str, Any] = {"model": "o4-mini", "instructions": INSTRUCTIONS, "input": items, "tools": TOOLS, "store": False, "reasoning": {"effort": "low"}}
    if not stream:
        return client.responses.create(**params)
    final = None
    for event in client.responses.create(**params, stream=True):
        if event.type == "response.completed":
            final = event.response
    assert final is not None
    return final


@pytest.mark.parametrize("stream", [False, True])
def test_reasoning_tool_loop(stack: tuple[str, ScriptedUpstream, Ledger], stream: bool) -> None:
    proxy, upstream, ledger = stack
    before = len(upstream.received)
    items: list[dict[str, Any]] = [{"role": "user", "content": f"Draft the release notes (stream={stream}). {CONSTRAINT}"}]
    with openai.OpenAI(base_url=f"{proxy}/v1", api_key="sk-client", max_retries=0) as client:
        first = _create(client, items, stream)
        assert [o.type for o in first.output] == ["reasoning", "function_call"]
        turn = [o.model_dump(exclude_none=True) for o in first.output]
        call = first.output[1]
        items += [*turn, {"type": "function_call_output", "call_id": call.call_id, "output": "a1b2c3 fix: login redirect\nd4e5f6 feat: export"}]
        second = _create(client, items, stream)
    got = upstream.received[before:]
    assert len(got) == 2 and [r.problems for r in got] == [[], []]
    for req in got:
        assert req.headers["authorization"] == "Bearer sk-client"
        assert req.body["store"] is False and req.body["reasoning"] == {"effort": "low"} and req.body["tools"] == TOOLS
        # the task is sent raw with its constraint: read there, not restated in the instructions
        assert req.body["instructions"] == INSTRUCTIONS and CONSTRAINT in json.dumps(req.body["input"][0])
    sent = got[1].body["input"]
    # the continued turn goes upstream exactly as the client sent it (encrypted reasoning included)
    assert sent[-3:] == items[-3:]
    assert "d4e5f6 feat: export" in json.dumps(sent[-1])
    assert second.output[-1].content[0].text == "Release notes drafted." and call.name == "run"
    [conv] = [c for c in ledger.store.list_conversations(ledger.scope()) if f"stream={stream}" in c.conversation.title]
    recorded = ledger.store.messages(ledger.scope(), conv.conversation.id)
    assert [m.role.value for m in recorded] == ["system", "user", "assistant", "tool", "assistant"]
    assert [(c.call_id, c.status.value) for c in ledger.store.tool_calls(ledger.scope(), conv.conversation.id)] == [(call.call_id, "succeeded")]


def test_server_side_state_is_forwarded_untouched(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, upstream, _ledger = stack
    body = {"model": "o4-mini", "previous_response_id": "resp_123", "input": [{"role": "user", "content": "and then?"}]}
    with openai.OpenAI(base_url=f"{proxy}/v1", api_key="sk-client", max_retries=0) as client:
        raw = client.responses.with_raw_response.create(**body)
    assert raw.headers["x-contextledger-passthrough"].startswith("InputError")
    assert upstream.received[-1].body == body
