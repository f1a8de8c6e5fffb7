"""The Messages proxy driven by the official ``anthropic`` SDK (plain and streaming)
against a scripted upstream: extended-thinking tool loops keep the signed thinking of the
continued turn byte-exact, the stable prefix carries a cache breakpoint, parameters pass
through, the client gets the upstream's answer unchanged and the ledger holds it once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from contextledger.ledger import Ledger
from contextledger.server.app import create_app
from contextledger.server.scripted import Plan, ScriptedUpstream
from contextledger.server.settings import ServerSettings
from service_support import serve

TOOLS = [{"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}]
SYSTEM = "You are a careful coding agent."
CONSTRAINT = "Never edit files under vendor/."
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"


def script(kind: str, body: dict[str, Any]) -> Plan:
    last = body["messages"][-1]["content"]
    if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
        return Plan(text="The bug is in login.py line 12.")
    return Plan(thinking=("I should read login.py first.", SIGNATURE), redacted=REDACTED, text="Reading the file.", tool_calls=[("read_file", {"path": "src/login.py"})])


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ScriptedUpstream, Ledger]]:
    home = tmp_path_factory.mktemp("svc")
    upstream = ScriptedUpstream(script)
    ledger = Ledger.open(home=home)
    with serve(upstream.app) as up, serve(create_app(ServerSettings(anthropic_upstream=up), ledger=ledger)) as proxy:
        yield proxy, upstream, ledger
    ledger.close()


def _create(client: anthropic.Anthropic, messages: list[dict[str, Any]], stream: bool) -> tuple[Any, str]:
    params: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 2048, "system": SYSTEM, "messages": messages, "tools": TOOLS,
                              "tool_choice": {"type": "auto"}, "thinking": {"type": "enabled", "budget_tokens": 1024}}
    if stream:
        with client.messages.stream(**params, extra_headers={"x-contextledger-budget": "6000"}) as events:
            message = events.get_final_message()
            return message, events.response.headers["x-contextledger-assembly-id"]
    raw = client.messages.with_raw_response.create(**params, extra_headers={"x-contextledger-budget": "6000"})
    return raw.parse(), raw.headers["x-contextledger-assembly-id"]


@pytest.mark.parametrize("stream", [False, True])
def test_thinking_tool_loop(stack: tuple[str, ScriptedUpstream, Ledger], stream: bool) -> None:
    proxy, upstream, ledger = stack
    before = len(upstream.received)
    content = "def login(user):\n    return redirect(None)  # line 12\n" + "# filler\n" * 40
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Find the login bug (stream={stream}). {CONSTRAINT}"}]
    with anthropic.Anthropic(base_url=proxy, api_key="sk-ant-client", max_retries=0) as client:
        first, asm1 = _create(client, messages, stream)
        assert [b.type for b in first.content] == ["thinking", "redacted_thinking", "text", "tool_use"]
        turn = {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]}
        tool_use = first.content[3]
        messages += [turn, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": content}]}]
        second, asm2 = _create(client, messages, stream)
    assert asm1 != asm2 and asm2.startswith("asm_")
    got = upstream.received[before:]
    assert len(got) == 2 and [r.problems for r in got] == [[], []]
    for req in got:
        assert "sk-ant-client" in (req.headers.get("x-api-key", "") + req.headers.get("authorization", ""))  # the client's own credential
        assert req.body["max_tokens"] == 2048 and req.body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
        assert req.body["tool_choice"] == {"type": "auto"} and req.body["tools"] == TOOLS
        system = req.body["system"]
        # the task is sent raw with its constraint: read there, not restated in the system blocks
        assert [b["text"] for b in system] == [SYSTEM] and CONSTRAINT in json.dumps(req.body["messages"][0])
    sent = got[1].body["messages"]
    # the continued turn is byte-exact (signed thinking and redacted thinking included)
    assert json.dumps(sent[-2], sort_keys=True) == json.dumps(turn, sort_keys=True)
    assert sent[-2]["content"][0] == {"type": "thinking", "thinking": "I should read login.py first.", "signature": SIGNATURE}
    assert sent[-2]["content"][1] == {"type": "redacted_thinking", "data": REDACTED}
    newest = sent[-1]["content"][0]
    assert newest["type"] == "tool_result" and newest["tool_use_id"] == tool_use.id and "return redirect(None)  # line 12" in json.dumps(newest)
    # the client got the upstream's answers unchanged
    assert tool_use.input == {"path": "src/login.py"} and second.content[-1].text == "The bug is in login.py line 12."
    assert ledger.store.get_assembly(ledger.scope(), asm2)[0].assembled_tokens <= 6000
    # the ledger holds every message and tool call once
    [conv] = [c for c in ledger.store.list_conversations(ledger.scope()) if f"stream={stream}" in c.conversation.title]
    recorded = ledger.store.messages(ledger.scope(), conv.conversation.id)
    assert [m.role.value for m in recorded] == ["system", "user", "assistant", "tool", "assistant"]
    thinking = [p for p in recorded[2].parts if p.kind == "thinking"]
    assert [(p.signature, p.redacted) for p in thinking] == [(SIGNATURE, False), (REDACTED, True)]
    [call] = ledger.store.tool_calls(ledger.scope(), conv.conversation.id)
    assert (call.call_id, call.tool_name, call.status.value) == (tool_use.id, "read_file", "succeeded")
    [art] = ledger.store.artifacts(ledger.scope(), conv.conversation.id)
    assert ledger.rehydrate(art.id).decode() == content


def test_upstream_errors_reach_the_client_unchanged(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, upstream, ledger = stack
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    upstream.script = lambda kind, body: Plan(status=529, error=error)
    try:
        with anthropic.Anthropic(base_url=proxy, api_key="k", max_retries=0) as client, pytest.raises(anthropic.APIStatusError) as info:
            client.messages.create(model="claude-sonnet-4-5", max_tokens=10, messages=[{"role": "user", "content": "hello overloaded"}])
        assert info.value.status_code == 529 and info.value.body == error
        upstream.script = lambda kind, body: Plan(text="partial answer that never ends", drop_after_events=4)
        with anthropic.Anthropic(base_url=proxy, api_key="k", max_retries=0) as client, pytest.raises(anthropic.APIError, match="ended before its last event"), \
                client.messages.stream(model="claude-sonnet-4-5", max_tokens=10, messages=[{"role": "user", "content": "hello dropped"}]) as events:
            events.get_final_message()
    finally:
        upstream.script = script
    # nothing half-recorded: the users' messages are there, no assistant answer
    for title in ("hello overloaded", "hello dropped"):
        [conv] = [c for c in ledger.store.list_conversations(ledger.scope()) if c.conversation.title == title]
        assert [m.role.value for m in ledger.store.messages(ledger.scope(), conv.conversation.id)] == ["user"]


def test_other_routes_are_forwarded_untouched(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, _upstream, _ledger = stack
    with anthropic.Anthropic(base_url=proxy, api_key="k", max_retries=0) as client:
        models = client.models.list()
    assert [m.id for m in models.data] == ["gpt-4o"]  # the scripted upstream's list, unchanged
