"""Bodies the provider would refuse and the response headers, over real HTTP (the service
and a scripted upstream, both uvicorn on loopback): a body whose history field is missing,
not a list, or holds an item that is not an object is answered 400 in the provider's own
error shape for Chat, Messages and Responses, with one log line; it is never forwarded and
nothing is recorded.  A relayed answer carries one ``server`` and one ``date`` header."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextledger.ledger import Ledger
from contextledger.server.app import create_app
from contextledger.server.scripted import Plan, ScriptedUpstream
from contextledger.server.settings import ServerSettings
from service_support import serve

ANTHROPIC = {"anthropic-version": "2023-06-01", "x-api-key": "sk-ant-client"}
OPENAI = {"authorization": "Bearer sk-client"}
OPENAI_ERROR = "invalid_request_error"


def _script(kind: str, body: dict[str, Any]) -> Plan:
    return Plan(text="ok")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ScriptedUpstream, Ledger]]:
    home: Path = tmp_path_factory.mktemp("invalid-bodies")
    upstream = ScriptedUpstream(_script)
    ledger = Ledger.open(home=home)
    with serve(upstream.app) as up, serve(create_app(ServerSettings(anthropic_upstream=up, openai_upstream=up + "/v1"), ledger=ledger)) as proxy:
        yield proxy, upstream, ledger
    ledger.close()


def _post(proxy: str, path: str, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    return httpx.post(proxy + path, content=json.dumps(body), headers={"content-type": "application/json", **headers}, timeout=60)


def _anthropic_error(message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def _openai_error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": OPENAI_ERROR, "param": None, "code": None}}


CASES = [
    # (path, headers, body, expected error body, log line)
    ("/v1/messages", ANTHROPIC, {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": "x"},
     _anthropic_error("'messages' must be an array, got a string"), "anthropic request refused (400): 'messages' must be an array, got a string"),
    ("/v1/messages", ANTHROPIC, {"model": "claude-sonnet-4-5", "max_tokens": 10},
     _anthropic_error("the request body has no 'messages' field"), "anthropic request refused (400): the request body has no 'messages' field"),
    ("/v1/messages", ANTHROPIC, {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}, "more"]},
     _anthropic_error("'messages[1]' must be an object, got a string"), "anthropic request refused (400): 'messages[1]' must be an object, got a string"),
    ("/v1/chat/completions", OPENAI, {"model": "gpt-4o", "messages": "x"},
     _openai_error("'messages' must be an array, got a string"), "openai-chat request refused (400): 'messages' must be an array, got a string"),
    ("/v1/chat/completions", OPENAI, {"model": "gpt-4o", "messages": {"role": "user"}},
     _openai_error("'messages' must be an array, got an object"), "openai-chat request refused (400): 'messages' must be an array, got an object"),
    ("/v1/chat/completions", OPENAI, {"model": "gpt-4o"},
     _openai_error("the request body has no 'messages' field"), "openai-chat request refused (400): the request body has no 'messages' field"),
    ("/v1/chat/completions", OPENAI, {"model": "gpt-4o", "messages": [7]},
     _openai_error("'messages[0]' must be an object, got a number"), "openai-chat request refused (400): 'messages[0]' must be an object, got a number"),
    ("/v1/responses", OPENAI, {"model": "gpt-5", "input": 3},
     _openai_error("'input' must be an array or a string, got a number"), "openai-responses request refused (400): 'input' must be an array or a string, got a number"),
    ("/v1/responses", OPENAI, {"model": "gpt-5"},
     _openai_error("the request body has no 'input' field"), "openai-responses request refused (400): the request body has no 'input' field"),
    ("/v1/responses", OPENAI, {"model": "gpt-5", "input": [{"role": "user", "content": "hi"}, None]},
     _openai_error("'input[1]' must be an object, got null"), "openai-responses request refused (400): 'input[1]' must be an object, got null"),
]


@pytest.mark.parametrize(("path", "headers", "body", "error", "line"), CASES)
def test_an_invalid_body_is_answered_400_never_forwarded_nor_recorded(
    stack: tuple[str, ScriptedUpstream, Ledger], caplog: pytest.LogCaptureFixture,
    path: str, headers: dict[str, str], body: dict[str, Any], error: dict[str, Any], line: str,
) -> None:
    proxy, upstream, ledger = stack
    before = len(upstream.received)
    conversations = len(ledger.store.list_conversations(ledger.scope()))
    with caplog.at_level(logging.WARNING, logger="contextledger.server.proxy"):
        got = _post(proxy, path, body, headers)
    assert (got.status_code, got.json()) == (400, error)
    assert len(upstream.received) == before
    assert len(ledger.store.list_conversations(ledger.scope())) == conversations
    assert [r.getMessage() for r in caplog.records if r.name == "contextledger.server.proxy"] == [line]


def test_a_request_continuing_server_state_needs_no_input(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, upstream, _ledger = stack
    got = _post(proxy, "/v1/responses", {"model": "gpt-5", "previous_response_id": "resp_1"}, OPENAI)
    assert got.status_code == 200 and upstream.received[-1].body == {"model": "gpt-5", "previous_response_id": "resp_1"}


@pytest.mark.parametrize(("path", "headers", "body"), [
    ("/v1/messages", ANTHROPIC, {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": "hello"}]}),
    ("/v1/chat/completions", OPENAI, {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]}),
    ("/v1/responses", OPENAI, {"model": "gpt-5", "input": "hello"}),
    ("/v1/messages", ANTHROPIC, {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": 7}]}),  # a passthrough
])
def test_a_relayed_answer_has_one_server_and_one_date_header(stack: tuple[str, ScriptedUpstream, Ledger], path: str, headers: dict[str, str], body: dict[str, Any]) -> None:
    proxy, _upstream, _ledger = stack
    got = _post(proxy, path, body, headers)
    assert got.status_code == 200
    assert len(got.headers.get_list("server")) == 1 and len(got.headers.get_list("date")) == 1
    streamed = {**body, "stream": True}
    with httpx.Client(timeout=60) as client, client.stream("POST", proxy + path, content=json.dumps(streamed), headers={"content-type": "application/json", **headers}) as res:
        res.read()
    assert res.status_code == 200 and len(res.headers.get_list("server")) == 1 and len(res.headers.get_list("date")) == 1
