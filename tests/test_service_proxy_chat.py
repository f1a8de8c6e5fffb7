"""The Chat Completions proxy driven by the official ``openai`` SDK against a scripted
upstream on loopback: what the upstream receives, what the client gets, what the ledger
holds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from contextledger.ledger import Ledger
from contextledger.providers.registry import validate_payload
from contextledger.server.app import create_app
from contextledger.server.scripted import ScriptedUpstream
from contextledger.server.settings import ServerSettings
from service_support import serve

TOOLS = [{"type": "function", "function": {"name": "run", "description": "Run a shell command.", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]
SYSTEM = "You are a coding agent."
CONSTRAINT = "Do not change the public API."


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ScriptedUpstream, Ledger]]:
    home = tmp_path_factory.mktemp("svc")
    upstream = ScriptedUpstream()
    ledger = Ledger.open(home=home)
    with serve(upstream.app) as up:
        settings = ServerSettings(home=str(home), openai_upstream=f"{up}/v1")
        with serve(create_app(settings, ledger=ledger)) as proxy:
            yield proxy, upstream, ledger
    ledger.close()


def _loop(client: openai.OpenAI, task: str, *, stream: bool, result: str) -> tuple[list[dict], list]:
    messages: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"{task} {CONSTRAINT}"}]
    answers = []
    for _ in range(2):
        if stream:
            text, calls = "", {}
            with client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS, stream=True) as events:
                for chunk in events:
                    delta = chunk.choices[0].delta if chunk.choices else None
                    if delta is None:
                        continue
                    text += delta.content or ""
                    for c in delta.tool_calls or []:
                        slot = calls.setdefault(c.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                        slot["id"] = c.id or slot["id"]
                        slot["function"]["name"] += c.function.name or ""
                        slot["function"]["arguments"] += c.function.arguments or ""
            message = {"role": "assistant", "content": text or None, **({"tool_calls": [calls[i] for i in sorted(calls)]} if calls else {})}
        else:
            raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=messages, tools=TOOLS)
            assert raw.headers["x-contextledger-assembly-id"].startswith("asm_")
            message = raw.parse().choices[0].message.model_dump(exclude_none=True)
        answers.append(message)
        messages.append(message)
        for call in message.get("tool_calls", []):
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return messages, answers


@pytest.mark.parametrize("stream", [False, True])
def test_tool_loop_through_the_proxy(stack: tuple[str, ScriptedUpstream, Ledger], stream: bool) -> None:
    proxy, upstream, ledger = stack
    before = len(upstream.received)
    result = "FAILED tests/test_login.py::test_redirect - TypeError\n" + "x" * 6000
    with openai.OpenAI(base_url=f"{proxy}/v1", api_key="sk-client-secret", max_retries=0) as client:
        messages, answers = _loop(client, f"Fix the login redirect (stream={stream}).", stream=stream, result=result)
        _check(upstream, ledger, before, stream, result, answers)
        # resending the same history records nothing twice
        client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    conv_id = _conversation(ledger, stream)
    again = ledger.store.messages(ledger.scope(), conv_id)
    assert [m.role.value for m in again] == ["system", "user", "assistant", "tool", "assistant", "assistant"]
    assert validate_payload("openai-chat", {"messages": upstream.received[-1].body["messages"]}) == []


def _conversation(ledger: Ledger, stream: bool) -> str:
    convs = [c for c in ledger.store.list_conversations(ledger.scope()) if f"stream={stream}" in c.conversation.title]
    assert len(convs) == 1
    return convs[0].conversation.id


def _check(upstream: ScriptedUpstream, ledger: Ledger, before: int, stream: bool, result: str, answers: list) -> None:
    got = upstream.received[before:]
    assert len(got) == 2
    for req in got:
        assert req.problems == []
        assert req.headers["authorization"] == "Bearer sk-client-secret"
        assert req.body["model"] == "gpt-4o" and req.body["tools"] == TOOLS and req.body.get("stream", False) is stream
        assert req.body["messages"][0] == {"role": "system", "content": SYSTEM}
        sent = json.dumps(req.body["messages"])
        assert CONSTRAINT in sent
    # the newest tool result reached the upstream, with its call
    second = got[1].body["messages"]
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == answers[0]["tool_calls"][0]["id"]
    assert "FAILED tests/test_login.py::test_redirect - TypeError" in second[-1]["content"]
    # the client got the upstream's answers unchanged
    assert answers[0]["tool_calls"][0]["function"]["name"] == "run"
    assert json.loads(answers[0]["tool_calls"][0]["function"]["arguments"]) == {"command": "make check", "step": 1}
    assert answers[1]["content"] == "Done: the step finished."
    # the ledger holds every message and tool call once
    conv_id = _conversation(ledger, stream)
    recorded = ledger.store.messages(ledger.scope(), conv_id)
    assert [m.role.value for m in recorded] == ["system", "user", "assistant", "tool", "assistant"]
    calls = ledger.store.tool_calls(ledger.scope(), conv_id)
    assert [(c.call_id, c.status.value) for c in calls] == [(answers[0]["tool_calls"][0]["id"], "succeeded")]
    arts = ledger.store.artifacts(ledger.scope(), conv_id)
    assert len(arts) == 1 and ledger.rehydrate(arts[0].id) == result.encode()
    # each answer is tied to the generation that produced it and the assembly it saw
    runs = {r.id: r for r in ledger.store.model_runs(ledger.scope(), conv_id)}
    answered = [m for m in recorded if m.role.value == "assistant"]
    assert len(runs) == 2 and all(m.model_run_id in runs for m in answered)
    assert all(runs[m.model_run_id].assembly_id == m.metadata["assembly_id"] and runs[m.model_run_id].model == "gpt-4o" for m in answered)


def test_delta_requests_continue_a_named_conversation(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, upstream, ledger = stack
    rec = ledger.recorder()
    conv = rec.start_conversation(title="delta", system_prompt=SYSTEM)
    rec.record_message(conv.id, "user", "Port the parser to Rust. Never use unsafe blocks.")
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "call_d0", "tool_name": "run", "arguments": {"command": "cargo build"}}])
    rec.record_tool_result(conv.id, "call_d0", "error[E0308]: mismatched types in src/parse.rs:41")
    headers = {"x-contextledger-conversation": conv.id, "x-contextledger-history": "delta"}
    with openai.OpenAI(base_url=f"{proxy}/v1", api_key="sk-x", max_retries=0, default_headers=headers) as client:
        first = client.chat.completions.create(model="gpt-4o", tools=TOOLS, messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Fix the type error."}])
        call = first.choices[0].message.tool_calls[0]
        sent = upstream.received[-1].body["messages"]
        assert "Never use unsafe blocks" in json.dumps(sent) and "src/parse.rs:41" in json.dumps(sent)
        client.chat.completions.create(model="gpt-4o", tools=TOOLS, messages=[{"role": "system", "content": SYSTEM}, {"role": "tool", "tool_call_id": call.id, "content": "Finished dev profile"}])
    recorded = ledger.store.messages(ledger.scope(), conv.id)
    assert [m.role.value for m in recorded] == ["system", "user", "assistant", "tool", "user", "assistant", "tool", "assistant"]
    assert [m.parent_message_id for m in recorded[4:]] == [m.id for m in recorded[3:-1]]
    with openai.OpenAI(base_url=f"{proxy}/v1", api_key="sk-x", max_retries=0) as client, pytest.raises(openai.BadRequestError, match="delta"):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}], extra_headers={"x-contextledger-history": "delta"})


def test_model_list_is_forwarded(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, _upstream, _ledger = stack
    with openai.OpenAI(base_url=f"{proxy}/v1", api_key="sk-x", max_retries=0) as client:
        assert [m.id for m in client.models.list()] == ["gpt-4o"]


def test_unreachable_upstream_answers_in_the_provider_shape(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    ledger = Ledger.open(home=tmp_path)
    try:
        with serve(create_app(ServerSettings(openai_upstream=f"http://127.0.0.1:{dead}/v1"), ledger=ledger)) as proxy, \
                openai.OpenAI(base_url=f"{proxy}/v1", api_key="sk-x", max_retries=0) as client, pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "anyone there?"}])
        assert info.value.status_code == 502 and info.value.body["type"] == "api_error"  # type: ignore[index]
        assert "could not be reached" in info.value.message
        [conv] = ledger.store.list_conversations(ledger.scope())
        assert [m.role.value for m in ledger.store.messages(ledger.scope(), conv.conversation.id)] == ["user"]
    finally:
        ledger.close()


def test_an_edited_message_forks_the_conversation(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, upstream, ledger = stack
    named = {"x-contextledger-conversation": "fork-test"}
    with openai.OpenAI(base_url=f"{proxy}/v1", api_key="sk-x", max_retries=0, default_headers=named) as client:
        history: list[dict] = [{"role": "user", "content": "Plan the storage migration."}]

        def send(messages: list[dict]) -> dict:
            message = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS).choices[0].message
            return message.model_dump(exclude_none=True)

        first = send(history)
        history += [first, {"role": "tool", "tool_call_id": first["tool_calls"][0]["id"], "content": "3 tables, 2 views"}]
        history.append(send(history))
        send([*history, {"role": "user", "content": "Use Postgres."}])
        send([*history, {"role": "user", "content": "Use SQLite instead."}])  # the user edited their message
    assert "Use Postgres." not in json.dumps(upstream.received[-1].body) and "Use SQLite instead." in json.dumps(upstream.received[-1].body)
    [conv] = [c.conversation for c in ledger.store.list_conversations(ledger.scope()) if c.conversation.title == "Plan the storage migration."]
    scope = ledger.scope()
    branches = ledger.store.branches(scope, conv.id)
    assert len(branches) == 2
    fork = next(b for b in branches if b.parent_branch_id is not None)
    assert ledger.store.get_conversation(scope, conv.id).active_branch_id == fork.id
    texts = lambda msgs: [p.text for m in msgs for p in m.parts if p.kind == "text"]  # noqa: E731
    on_fork = ledger.store.messages(scope, conv.id, ledger.store.lineage(scope, fork.id))
    on_root = ledger.store.messages(scope, conv.id, ledger.store.lineage(scope, conv.root_branch_id))
    assert [m.role.value for m in on_fork] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert "Use SQLite instead." in texts(on_fork) and "Use Postgres." not in texts(on_fork)
    assert "Use Postgres." in texts(on_root) and len(on_root) == 6
    assert fork.fork_message_id == on_root[3].id


def test_proxy_requests_act_for_the_tenant_of_their_key(tmp_path: Path) -> None:
    from contextledger.server.keys import create_key

    upstream = ScriptedUpstream()
    ledger = Ledger.open(home=tmp_path)
    key, _ = create_key(ledger, "acme")
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello from acme"}]}
    try:
        with serve(upstream.app) as up, serve(create_app(ServerSettings(openai_upstream=f"{up}/v1"), ledger=ledger)) as proxy, \
                openai.OpenAI(base_url=f"{proxy}/v1", api_key="sk-provider", max_retries=0) as client:
            with pytest.raises(openai.AuthenticationError):
                client.chat.completions.create(**body)
            client.chat.completions.create(**body, extra_headers={"x-contextledger-key": key})
        assert ledger.store.list_conversations(ledger.scope()) == []
        [conv] = ledger.store.list_conversations(ledger.scope("acme"))
        assert conv.conversation.title == "hello from acme"
        assert len(upstream.received) == 1 and "x-contextledger-key" not in upstream.received[0].headers
        assert upstream.received[0].headers["authorization"] == "Bearer sk-provider"
    finally:
        ledger.close()


def test_two_sessions_that_start_alike_stay_two_conversations(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    """opencode sends its session in ``x-session-id``: two sessions with one prompt are two
    conversations, and the second is not sent the first one's history."""
    proxy, upstream, ledger = stack
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"Fix the flaky login test. {CONSTRAINT}"}]
    convs = []
    for session in ("ses_A1", "ses_B2"):
        client = openai.OpenAI(base_url=f"{proxy}/v1", api_key="sk-test", default_headers={"x-session-id": session})
        first = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=messages, tools=TOOLS)
        answer = first.parse().choices[0].message.model_dump(exclude_none=True)
        call = answer["tool_calls"][0]
        follow = [*messages, answer, {"role": "tool", "tool_call_id": call["id"], "content": f"result of {session}"}]
        second = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=follow, tools=TOOLS)
        assert second.headers["x-contextledger-conversation"] == first.headers["x-contextledger-conversation"]
        convs.append(first.headers["x-contextledger-conversation"])
    assert convs[0] != convs[1]
    # keyed by the session itself, not only by the first answer
    assert all((ledger.store.get_conversation(ledger.scope(), c).content_key or "").startswith("proxy-s:") for c in convs)
    assert "result of ses_A1" not in json.dumps(upstream.received[-1].body)
    assert "result of ses_B2" in json.dumps(upstream.received[-1].body)


def test_each_conversation_gets_its_own_prompt_cache_key_unless_the_client_sent_one(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, upstream, _ = stack
    keys = []
    for session in ("ses_K1", "ses_K2"):
        client = openai.OpenAI(base_url=f"{proxy}/v1", api_key="sk-test", default_headers={"x-session-id": session})
        messages = [{"role": "user", "content": f"Fix the cache test ({session})."}]
        first = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=messages, tools=TOOLS)
        sent_first = upstream.received[-1].body["prompt_cache_key"]
        answer = first.parse().choices[0].message.model_dump(exclude_none=True)
        follow = [*messages, answer, {"role": "tool", "tool_call_id": answer["tool_calls"][0]["id"], "content": "ok"}]
        client.chat.completions.create(model="gpt-4o", messages=follow, tools=TOOLS)
        assert upstream.received[-1].body["prompt_cache_key"] == sent_first and sent_first.startswith("cl-") and len(sent_first) == 35
        keys.append(sent_first)
    assert keys[0] != keys[1]
    own = openai.OpenAI(base_url=f"{proxy}/v1", api_key="sk-test", default_headers={"x-session-id": "ses_K3"})
    own.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Own key."}], tools=TOOLS, extra_body={"prompt_cache_key": "mine"})
    assert upstream.received[-1].body["prompt_cache_key"] == "mine"
