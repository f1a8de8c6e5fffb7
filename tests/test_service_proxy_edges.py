"""The proxy's edges over real HTTP (the service and a scripted upstream on loopback):
root probes and ``HEAD``, token counts of the assembled request, side calls that never
become conversations, titles without injected preambles, and requests forwarded
unassembled that show in the log, the counters and the inspector."""

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
from contextledger.server.keys import create_key
from contextledger.server.scripted import Plan, ScriptedUpstream
from contextledger.server.settings import ServerSettings
from service_support import serve

TOOLS = [{"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}]
SYSTEM = "You are a careful coding agent."
SESSION = "5b0f6a4e-2d1c-4c8e-9a51-0d3f1c2b7e11"
ANTHROPIC = {"anthropic-version": "2023-06-01", "x-api-key": "sk-ant-client"}


def script(kind: str, body: dict[str, Any]) -> Plan:
    return Plan(text="ok")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ScriptedUpstream, Ledger]]:
    home = tmp_path_factory.mktemp("edges")
    upstream = ScriptedUpstream(script)
    ledger = Ledger.open(home=home)
    with serve(upstream.app) as up, serve(create_app(ServerSettings(anthropic_upstream=up, openai_upstream=up + "/v1"), ledger=ledger)) as proxy:
        yield proxy, upstream, ledger
    ledger.close()


def _titles(ledger: Ledger) -> list[str]:
    return sorted(c.conversation.title for c in ledger.store.list_conversations(ledger.scope()))


def _counts(proxy: str) -> dict[str, int]:
    counts: dict[str, int] = httpx.get(proxy + "/healthz").json()["proxy"]
    return counts


def _post(proxy: str, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(proxy + path, content=json.dumps(body), headers={"content-type": "application/json", **ANTHROPIC, **(headers or {})}, timeout=60)


# -- probes -------------------------------------------------------------------------------
def test_head_answers_as_get_without_content(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, _upstream, _ledger = stack
    for path in ("/", "/healthz"):
        got, head = httpx.get(proxy + path), httpx.head(proxy + path)
        assert got.status_code == 200 and head.status_code == 200, path
        assert head.content == b"" and got.content != b""
        assert head.headers["content-type"] == got.headers["content-type"]


def test_provider_root_probe_answers_as_the_upstream(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, _upstream, _ledger = stack
    before = _counts(proxy)["probe"]
    got = httpx.get(proxy + "/", headers=ANTHROPIC)
    head = httpx.head(proxy + "/", headers={"x-api-key": "k"})
    assert (got.status_code, got.headers["x-scripted-root"]) == (404, "GET")
    assert got.json() == {"type": "error", "error": {"type": "not_found_error", "message": "scripted root"}}
    assert (head.status_code, head.headers["x-scripted-root"], head.content) == (404, "HEAD", b"")
    assert _counts(proxy)["probe"] == before + 2
    assert httpx.get(proxy + "/").headers["content-type"].startswith("text/html")  # a browser still gets the inspector


# -- token counting -----------------------------------------------------------------------
def test_count_tokens_counts_the_request_as_it_will_be_sent(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, upstream, ledger = stack
    log = "\n".join(f"2026-12-01T10:{i % 60:02d}:00 INFO worker {i} finished batch {i * 7} without error" for i in range(1500))
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Count the failing workers in the log."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "worker.log"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": log}]},
    ]
    count_body = {"model": "claude-sonnet-4-5", "system": SYSTEM, "messages": history, "tools": TOOLS}
    budget = {"x-contextledger-budget": "3000"}
    conversations = len(ledger.store.list_conversations(ledger.scope()))
    before = len(upstream.received)
    counted = _post(proxy, "/v1/messages/count_tokens?beta=true", count_body, budget)
    assert counted.status_code == 200
    [sent_count] = upstream.received[before:]
    assert sent_count.path == "/v1/messages/count_tokens"
    assert len(ledger.store.list_conversations(ledger.scope())) == conversations  # a count records nothing
    raw_size = len(json.dumps(history)) // 4
    assert counted.json() == {"input_tokens": len(json.dumps(sent_count.body["messages"])) // 4}
    assert counted.json()["input_tokens"] < raw_size // 2  # the long result is not sent whole
    # the same history sent for an answer goes upstream exactly as it was counted
    answered = _post(proxy, "/v1/messages", {**count_body, "max_tokens": 256}, budget)
    assert answered.status_code == 200 and "x-contextledger-assembly-id" in answered.headers
    sent = upstream.received[-1]
    assert sent.path == "/v1/messages" and sent.problems == []
    assert sent_count.body["messages"] == sent.body["messages"]
    assert sent_count.body["system"] == sent.body["system"] and sent_count.body["tools"] == sent.body["tools"] == TOOLS
    assert "max_tokens" not in sent_count.body
    assert _counts(proxy)["count_tokens"] >= 1


def test_count_tokens_of_an_unreadable_body_is_counted_as_sent(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, upstream, _ledger = stack
    body = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": 5}]}
    got = _post(proxy, "/v1/messages/count_tokens", body)
    assert got.status_code == 200 and got.json() == {"input_tokens": len(json.dumps(body["messages"])) // 4}
    assert upstream.received[-1].body == body
    assert got.headers["x-contextledger-passthrough"] == "ImportFormatError: <request body>, messages[0].content: expected a string or an array of blocks, found a number"
    delta = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "and one more thing"}]}
    got = _post(proxy, "/v1/messages/count_tokens", delta, {"x-contextledger-conversation": "my-chat-9", "x-contextledger-history": "delta"})
    assert got.status_code == 200 and upstream.received[-1].body == delta
    assert got.headers["x-contextledger-passthrough"] == "InputError: a delta history is counted as sent: the count sees only the body, not the recorded history"


# -- side calls ---------------------------------------------------------------------------
def _main_turn(text: str) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 32000, "system": SYSTEM, "tools": TOOLS, "stream": False,
            "metadata": {"user_id": json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": SESSION})},
            "messages": [{"role": "user", "content": [{"type": "text", "text": "<system-reminder>\nAs you answer, use the context below.\n</system-reminder>"},
                                                      {"type": "text", "text": text}]}]}


def test_side_calls_are_never_conversations(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, upstream, ledger = stack
    session = {"x-claude-code-session-id": SESSION, "x-app": "cli"}
    main = _post(proxy, "/v1/messages", _main_turn("Rename the config loader."), session)
    assert main.status_code == 200 and "x-contextledger-side-call" not in main.headers
    titles = _titles(ledger)
    assert "Rename the config loader." in titles  # the title skips the injected reminder
    before = _counts(proxy)["side_call"]
    title_call = {"model": "claude-haiku-4-5", "max_tokens": 32000, "tools": [], "metadata": _main_turn("")["metadata"],
                  "system": [{"type": "text", "text": "Write a short title for this coding session."}],
                  "messages": [{"role": "user", "content": "<session>Rename the config loader.</session> Write the title in English."}],
                  "output_format": {"type": "json_schema", "schema": {"type": "object", "properties": {"title": {"type": "string"}}}}}
    quota = {"model": "claude-haiku-4-5", "max_tokens": 1, "messages": [{"role": "user", "content": "quota"}]}
    got_title = _post(proxy, "/v1/messages", title_call, session)
    got_quota = _post(proxy, "/v1/messages", quota)  # before any session is known
    assert got_title.status_code == 200 and got_quota.status_code == 200
    assert got_title.headers["x-contextledger-side-call"] == f"one-shot call of session {SESSION}: no tools, one user turn"
    assert got_quota.headers["x-contextledger-side-call"] == "probe: at most 1 output token(s)"
    assert "x-contextledger-assembly-id" not in got_title.headers
    assert [r.body for r in upstream.received[-2:]] == [title_call, quota]  # forwarded byte for byte
    assert _titles(ledger) == titles  # no conversation for either
    assert _counts(proxy)["side_call"] == before + 2
    page = httpx.get(proxy + "/").text
    assert f"one-shot call of session {SESSION}: no tools, one user turn" in page and "probe: at most 1 output token(s)" in page


def test_codex_session_side_call_over_responses(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, upstream, ledger = stack
    titles = _titles(ledger)
    body = {"model": "gpt-5.5", "instructions": "Summarize.", "stream": False, "tools": [{"type": "web_search"}],
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Summarize the session."}]}]}
    got = httpx.post(proxy + "/v1/responses", json=body, headers={"authorization": "Bearer sk-client", "session_id": "0199a2b3-c4d5"}, timeout=60)
    assert got.status_code == 200 and got.headers["x-contextledger-side-call"] == "one-shot call of session 0199a2b3-c4d5: no tools, one user turn"
    assert upstream.received[-1].body == body and _titles(ledger) == titles


def test_a_plain_client_turn_is_not_a_side_call(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, _upstream, ledger = stack
    # no agent session: a one-message, tool-less request is a conversation of its own
    plain = _post(proxy, "/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "What is a monad?"}]})
    # a named conversation asks to be recorded, session or not
    named = _post(proxy, "/v1/messages", {"model": "claude-haiku-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "Name this chat."}]},
                  {"x-claude-code-session-id": SESSION, "x-contextledger-conversation": "my-chat-7"})
    for got in (plain, named):
        assert got.status_code == 200 and "x-contextledger-side-call" not in got.headers and got.headers["x-contextledger-assembly-id"].startswith("asm_")
    assert {"What is a monad?", "Name this chat."} <= set(_titles(ledger))


# -- requests that cannot be assembled --------------------------------------------------------
def test_unassembled_request_is_forwarded_and_visible(stack: tuple[str, ScriptedUpstream, Ledger], caplog: pytest.LogCaptureFixture) -> None:
    proxy, upstream, _ledger = stack
    before = _counts(proxy)["passthrough"]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": 7}]}
    reason = "ImportFormatError: <request body>, messages[0].content: expected a string or an array of blocks, found a number"
    with caplog.at_level(logging.WARNING, logger="contextledger.server.proxy"):
        got = _post(proxy, "/v1/messages", body)
    assert got.status_code == 200 and got.headers["x-contextledger-passthrough"] == reason
    assert upstream.received[-1].body == body
    assert f"anthropic forwarded untouched: {reason}" in [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert _counts(proxy)["passthrough"] == before + 1
    metrics = httpx.get(proxy + "/metrics")
    assert metrics.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert f'contextledger_proxy_requests_total{{kind="passthrough",dialect="all"}} {before + 1}' in metrics.text.splitlines()
    page = httpx.get(proxy + "/").text
    row = page[page.index('<table class="grid" id="forwarded">'):]
    assert "not assembled" in row and reason.replace("<", "&lt;").replace(">", "&gt;") in row


def test_forwarded_rows_belong_to_their_tenant(tmp_path: Path) -> None:
    upstream = ScriptedUpstream(script)
    ledger = Ledger.open(home=tmp_path)
    acme, _ = create_key(ledger, "acme")
    globex, _ = create_key(ledger, "globex")
    try:
        with serve(upstream.app) as up, serve(create_app(ServerSettings(anthropic_upstream=up), ledger=ledger)) as proxy:
            bad = {"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": [{"role": "user", "content": 9}]}
            assert _post(proxy, "/v1/messages", bad, {"x-contextledger-key": acme}).headers["x-contextledger-passthrough"].startswith("ImportFormatError")
            assert _post(proxy, "/v1/messages", bad).status_code == 401  # no key: refused, nothing forwarded or listed
            mine = httpx.get(proxy + "/", headers={"x-contextledger-key": acme}).text
            theirs = httpx.get(proxy + "/", headers={"x-contextledger-key": globex}).text
            assert 'id="forwarded"' in mine and "found a number" in mine
            assert 'id="forwarded"' not in theirs and "found a number" not in theirs
            assert _counts(proxy)["passthrough"] == 1 and len(upstream.received) == 1
    finally:
        ledger.close()
