"""Secrets in a client's body never reach the provider through the proxy, nor the
ledger's stored messages and assemblies: for each API (Chat Completions, Messages,
Responses), an agent-loop body with secrets in the system prompt, user text, tool-call
arguments and tool results is sent twice (the second turn extends the first) through the
real service app over loopback, against a scripted upstream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from contextledger.ledger import Ledger
from contextledger.records.enums import PrivacyClass, Role
from contextledger.records.parts import TextPart
from contextledger.server.app import create_app
from contextledger.server.scripted import ReceivedRequest, ScriptedUpstream
from contextledger.server.settings import ServerSettings
from contextledger.store import schema as S
from service_support import serve

AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
GITHUB = "ghp_R8mY2kT4vN6pQ9sW1xZ3bC5dF7gH0jL2aE4u"
AWS_SECRET = "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"
STRIPE = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
DB_PASSWORD = "Pq7x9Lz2Vb"
ANTHROPIC = "sk-ant-api03-" + "Xy7" * 15
SECRETS = (AWS_KEY_ID, GITHUB, AWS_SECRET, STRIPE, DB_PASSWORD, ANTHROPIC)
AWS_KEY_MARKER = "[secret: AWS Access Key · sha256:1a5d44a2dca1]"
"""The marker of :data:`AWS_KEY_ID` (type and truncated SHA-256 of the value)."""
GITHUB_MARKER = "[secret: GitHub Token · sha256:c347e02f323b]"

SYSTEM = f"You are a coding agent. The deploy key is {ANTHROPIC}."
USER = f"Deploy with access key {AWS_KEY_ID} and push with {GITHUB}."
COMMAND = f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}; aws s3 ls"
RESULT = f"bucket-a\nDATABASE_URL=postgres://admin:{DB_PASSWORD}@db.internal:5432/app\nGITHUB_TOKEN={GITHUB}"
LATER = f"Now charge with {STRIPE}."


@dataclass
class Stack:
    proxy: httpx.Client
    upstream: ScriptedUpstream
    ledger: Ledger


@pytest.fixture
def stack(tmp_path: Any) -> Iterator[Stack]:
    upstream = ScriptedUpstream()
    ledger = Ledger.open(home=tmp_path / "home")
    with serve(upstream.app) as up:
        settings = ServerSettings(home=str(tmp_path / "home"), openai_upstream=f"{up}/v1", anthropic_upstream=up)
        with serve(create_app(settings, ledger=ledger)) as url, httpx.Client(base_url=url, headers={"authorization": "Bearer k", "x-api-key": "k", "anthropic-version": "2023-06-01"}, timeout=60) as client:
            yield Stack(client, upstream, ledger)
    ledger.close()


def _chat(later: list[dict[str, Any]]) -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": "execute_bash", "arguments": json.dumps({"command": COMMAND})}}
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}, {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": RESULT}, *later]
    return {"model": "gpt-4o", "messages": messages}


def _messages(later: list[dict[str, Any]]) -> dict[str, Any]:
    turn = {"role": "assistant", "content": [{"type": "thinking", "thinking": "Run the listing.", "signature": "sig-1"}, {"type": "text", "text": "Listing."},
                                             {"type": "tool_use", "id": "toolu_1", "name": "execute_bash", "input": {"command": COMMAND}}]}
    messages = [{"role": "user", "content": [{"type": "text", "text": USER}]}, turn,
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": RESULT}]}, *later]
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": SYSTEM, "messages": messages}


def _responses(later: list[dict[str, Any]]) -> dict[str, Any]:
    items = [{"role": "developer", "content": f"Project token {GITHUB}."}, {"role": "user", "content": [{"type": "input_text", "text": USER}]},
             {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc-1"},
             {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "execute_bash", "arguments": json.dumps({"command": COMMAND})},
             {"type": "function_call_output", "call_id": "call_1", "output": RESULT}, *later]
    return {"model": "gpt-5", "instructions": SYSTEM, "input": items}


_BODIES = {"/v1/chat/completions": _chat, "/v1/messages": _messages, "/v1/responses": _responses}


def _answer(path: str, answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The client's next turn: the answer as its history, then a user message with a secret."""
    if path == "/v1/chat/completions":
        return [answer["choices"][0]["message"], {"role": "user", "content": LATER}]
    if path == "/v1/messages":
        return [{"role": "assistant", "content": answer["content"]}, {"role": "user", "content": [{"type": "text", "text": LATER}]}]
    return [*answer["output"], {"role": "user", "content": [{"type": "input_text", "text": LATER}]}]


def _post(stack: Stack, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], ReceivedRequest]:
    before = len(stack.upstream.received)
    response = stack.proxy.post(path, json=body)
    assert response.status_code == 200, response.text
    assert "x-contextledger-passthrough" not in response.headers
    [received] = stack.upstream.received[before:]
    assert received.problems == []
    return response.json(), received


def _history(path: str, body: dict[str, Any]) -> list[Any]:
    """What the upstream body holds as context, in order, without cache breakpoints."""
    key = "input" if path == "/v1/responses" else "messages"
    history: list[Any] = json.loads(json.dumps(body[key]), object_hook=lambda d: {k: v for k, v in d.items() if k != "cache_control"})
    return history


def _stored_text(ledger: Ledger) -> str:
    """Every row the ledger holds, as text (restricted blobs are sealed)."""
    with ledger.store.reader() as conn:
        return "\n".join(repr(tuple(row)) for table in S.metadata.sorted_tables for row in conn.execute(sa.select(table)))


@pytest.mark.parametrize("path", list(_BODIES))
def test_no_secret_reaches_the_upstream_or_the_ledger(stack: Stack, path: str) -> None:
    first = _BODIES[path]([])
    answer, one = _post(stack, path, first)
    _, two = _post(stack, path, _BODIES[path](_answer(path, answer)))
    for received in (one, two):
        for secret in SECRETS:
            assert secret.encode() not in received.raw, (path, secret)
        assert AWS_KEY_MARKER.encode() in received.raw
    assert STRIPE not in json.dumps(two.body) and "[secret: Stripe Access Key" in json.dumps(two.body, ensure_ascii=False)
    # the second turn extends the first: the provider's cached prefix stays valid
    h1, h2 = _history(path, one.body), _history(path, two.body)
    if path == "/v1/responses":
        # the continued turn goes upstream as the client sent it (reasoning, item ids); the
        # next request renders it from the ledger: the same screened texts, the prefix before it unchanged
        turn = 2
        assert h2[:turn] == h1[:turn]
        tool_items = ("function_call", "function_call_output")
        assert [(i["type"], i.get("arguments"), i.get("output")) for i in h2[turn:len(h1)] if i.get("type") in tool_items] == \
            [(i["type"], i.get("arguments"), i.get("output")) for i in h1[turn:] if i.get("type") in tool_items]
    else:
        assert h2[:len(h1)] == h1
    assert {k: two.body[k] for k in ("system", "instructions") if k in two.body} == {k: one.body[k] for k in ("system", "instructions") if k in one.body}
    stored = _stored_text(stack.ledger)
    for secret in SECRETS:
        assert secret not in stored, (path, secret)
    scope = stack.ledger.scope()
    [conv] = stack.ledger.store.list_conversations(scope)
    messages = stack.ledger.store.messages(scope, conv.conversation.id)
    user = next(m for m in messages if m.role is Role.USER)
    assert user.privacy_class is PrivacyClass.SECRET_LIKE
    assert [f["type"] for f in user.metadata["secrets"]["found"]] == ["AWS Access Key", "GitHub Token"]
    assert [p.text for p in user.parts if isinstance(p, TextPart)] == [USER.replace(AWS_KEY_ID, AWS_KEY_MARKER).replace(GITHUB, GITHUB_MARKER)]


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/messages", {"model": "claude-haiku-4-5", "max_tokens": 1, "messages": [{"role": "user", "content": USER}]}),  # a probe: a side call
    ("/v1/responses", {"model": "gpt-5", "previous_response_id": "resp_1", "input": [{"role": "user", "content": USER}]}),  # forwarded untouched
    ("/v1/messages/count_tokens", {"model": "claude-sonnet-4-5", "system": SYSTEM, "messages": [{"role": "user", "content": USER}]}),
])
def test_bodies_forwarded_as_given_are_screened_too(stack: Stack, path: str, body: dict[str, Any]) -> None:
    before = len(stack.upstream.received)
    response = stack.proxy.post(path, json=body)
    assert response.status_code == 200, response.text
    [received] = stack.upstream.received[before:]
    for secret in SECRETS:
        assert secret.encode() not in received.raw, (path, secret)
    assert json.dumps(USER.replace(AWS_KEY_ID, AWS_KEY_MARKER).replace(GITHUB, GITHUB_MARKER), ensure_ascii=False).encode() in received.raw
    assert received.body["model"] == body["model"]


def test_a_body_without_secrets_is_forwarded_byte_for_byte(stack: Stack) -> None:
    raw = b'{"model": "gpt-5",  "previous_response_id": "resp_1", "input": [{"role": "user", "content": "and then?"}]}'
    before = len(stack.upstream.received)
    response = stack.proxy.post("/v1/responses", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    [received] = stack.upstream.received[before:]
    assert received.raw == raw
