"""Shadow mode and the upstream's usage, end to end over real HTTP (the service and a
scripted upstream on loopback, SQLite and PostgreSQL): in shadow mode the upstream
receives the client's body byte for byte, the ledger records the conversation, the answer
and its usage as in assemble mode, and the assembly the proxy would have sent is stored,
marked ``shadow`` with the tokens of both requests, and shown by the response headers,
``explain``, ``/api``, the inspector and ``/metrics`` — never as a passthrough."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from contextledger.cli.main import app as cli
from contextledger.errors import NotFoundError
from contextledger.explain import explain_assembly, render_explanation
from contextledger.ledger import Ledger
from contextledger.providers.registry import count_payload_tokens
from contextledger.server.app import create_app
from contextledger.server.scripted import Plan, ScriptedUpstream
from contextledger.server.settings import ServerSettings
from contextledger.store.base import Scope
from service_support import serve

TOOLS = [{"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}]
SYSTEM = "You are a careful coding agent."
ANTHROPIC = {"anthropic-version": "2023-06-01", "x-api-key": "sk-ant-client", "content-type": "application/json"}
FIRST_USAGE = {"input_tokens": 40, "cache_creation_input_tokens": 1200, "cache_read_input_tokens": 0,
               "cache_creation": {"ephemeral_5m_input_tokens": 1200, "ephemeral_1h_input_tokens": 0}, "output_tokens": 30}
SECOND_USAGE = {"input_tokens": 900, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1240, "output_tokens": 12}
FILE = "def login(user):\n    return redirect(None)  # line 12\n" + "".join(f"# filler line {i}: padding the file so it is long\n" for i in range(300))


def _last_is_result(body: dict[str, Any]) -> bool:
    content = body["messages"][-1]["content"]
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def script(kind: str, body: dict[str, Any]) -> Plan:
    if kind == "chat":
        return Plan(text="Hello.", usage={"prompt_tokens": 800, "completion_tokens": 4, "total_tokens": 804, "prompt_tokens_details": {"cached_tokens": 768}})
    if kind == "responses":
        return Plan(text="Hello.", usage={"input_tokens": 1500, "input_tokens_details": {"cached_tokens": 1280}, "output_tokens": 9, "total_tokens": 1509})
    if _last_is_result(body):
        return Plan(text="The bug is in login.py line 12.", usage=SECOND_USAGE)
    return Plan(text="Reading the file.", tool_calls=[("read_file", {"path": "src/login.py"})], usage=FIRST_USAGE)


def _stack(ledger: Ledger, **settings: Any) -> Iterator[tuple[str, ScriptedUpstream]]:
    upstream = ScriptedUpstream(script)
    with serve(upstream.app) as up, serve(create_app(ServerSettings(anthropic_upstream=up, openai_upstream=up + "/v1", **settings), ledger=ledger)) as proxy:
        yield proxy, upstream


@pytest.fixture
def shadow(ledger: Ledger) -> Iterator[tuple[str, ScriptedUpstream]]:
    yield from _stack(ledger, proxy_mode="shadow")


@pytest.fixture
def assemble(ledger: Ledger) -> Iterator[tuple[str, ScriptedUpstream]]:
    yield from _stack(ledger, stream_usage=True)


def _raw(body: dict[str, Any]) -> bytes:
    """A client's own serialization: indented, ASCII escapes (the proxy's is compact UTF-8)."""
    return json.dumps(body, indent=2, ensure_ascii=True).encode()


def _send(proxy: str, path: str, raw: bytes, headers: dict[str, str] | None = None) -> tuple[httpx.Response, bytes]:
    with httpx.Client(timeout=60) as client, client.stream("POST", proxy + path, content=raw, headers={**ANTHROPIC, **(headers or {})}) as res:
        return res, res.read()


def _first_body(tag: str, stream: bool, session: str) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5", "max_tokens": 2048, "stream": stream,
        "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}], "tools": TOOLS,
        "messages": [{"role": "system", "content": "Available agent types: general-purpose."},
                     {"role": "user", "content": [{"type": "text", "text": f"Find the login bug — café ({tag}).", "cache_control": {"type": "ephemeral"}}]}],
        "metadata": {"user_id": json.dumps({"session_id": session})},
    }


def _answer_turn(data: bytes, stream: bool) -> dict[str, Any]:
    """The assistant message of a JSON answer or of a Messages stream (its tool_use)."""
    if not stream:
        message = json.loads(data)
        return {"role": "assistant", "content": message["content"]}
    blocks: list[dict[str, Any]] = []
    partial = ""
    for line in data.decode().splitlines():
        if not line.startswith("data: "):
            continue
        event = json.loads(line[6:])
        if event["type"] == "content_block_start":
            blocks.append(dict(event["content_block"]))
        elif event["type"] == "content_block_delta" and event["delta"]["type"] == "text_delta":
            blocks[-1]["text"] += event["delta"]["text"]
        elif event["type"] == "content_block_delta" and event["delta"]["type"] == "input_json_delta":
            partial += event["delta"]["partial_json"]
        elif event["type"] == "content_block_stop" and blocks[-1]["type"] == "tool_use":
            blocks[-1]["input"], partial = json.loads(partial), ""
    return {"role": "assistant", "content": blocks}


def _tool_loop(proxy: str, tag: str, stream: bool, session: str, headers: dict[str, str] | None = None) -> list[tuple[dict[str, Any], bytes, httpx.Response]]:
    """Two requests of one tool loop: ``(client body, its bytes, response)`` each."""
    body = _first_body(tag, stream, session)
    raw = _raw(body)
    res, data = _send(proxy, "/v1/messages", raw, headers)
    assert res.status_code == 200, data
    turn = _answer_turn(data, stream)
    use = turn["content"][-1]
    assert use["type"] == "tool_use"
    second = {**body, "messages": [*body["messages"], turn, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": FILE}]}]}
    raw2 = _raw(second)
    res2, data2 = _send(proxy, "/v1/messages", raw2, headers)
    assert res2.status_code == 200, data2
    return [(body, raw, res), (second, raw2, res2)]


def _normalised(raw: dict[str, Any]) -> dict[str, Any]:
    split = raw.get("cache_creation") or {}
    return {"input_tokens": raw["input_tokens"] + raw["cache_read_input_tokens"] + raw["cache_creation_input_tokens"],
            "cached_read_tokens": raw["cache_read_input_tokens"], "cache_write_tokens": raw["cache_creation_input_tokens"], "output_tokens": raw["output_tokens"],
            **{f"cache_write_{t}_tokens": split[f"ephemeral_{t}_input_tokens"] for t in ("5m", "1h") if f"ephemeral_{t}_input_tokens" in split}}


def _metric(proxy: str, line_start: str) -> int:
    [line] = [x for x in httpx.get(proxy + "/metrics").text.splitlines() if x.startswith(line_start + " ")]
    return int(line.rsplit(" ", 1)[1])


@pytest.mark.parametrize("stream", [False, True])
def test_shadow_forwards_the_clients_bytes_and_records_everything(shadow: tuple[str, ScriptedUpstream], ledger: Ledger, stream: bool) -> None:
    proxy, upstream = shadow
    sent = _tool_loop(proxy, f"stream={stream}", stream, "0d3f1c2b-5b0f-4c8e-9a51-6a4e2d1c7e11", {"x-contextledger-budget": "2500"})
    assert [r.raw for r in upstream.received] == [raw for _b, raw, _r in sent]  # byte for byte
    scope = ledger.scope()
    for (body, raw, res), usage in zip(sent, (FIRST_USAGE, SECOND_USAGE), strict=True):
        record, payload = ledger.store.get_assembly(scope, res.headers["x-contextledger-assembly-id"])
        client_tokens = count_payload_tokens("anthropic", body)
        mark = record.proxy
        assert mark is not None and sorted(mark) == ["assembled_request_tokens", "client_body_sha256", "client_request_tokens", "mode"]
        assert (mark["mode"], mark["client_request_tokens"], mark["client_body_sha256"]) == ("shadow", client_tokens, "sha256:" + hashlib.sha256(raw).hexdigest())
        assert res.headers["x-contextledger-mode"] == "shadow"
        assert res.headers["x-contextledger-client-tokens"] == str(client_tokens)
        assert res.headers["x-contextledger-shadow-tokens"] == str(mark["assembled_request_tokens"])
        assert "x-contextledger-passthrough" not in res.headers
        assert "shadow;dur=" in res.headers["server-timing"]
        assert record.upstream_usage == {**_normalised(usage), "raw": usage}
        assert payload is not None and payload["messages"]  # the assembly it would have sent, persisted
    # the tool result is cut under the budget: the assembled request is the smaller one
    last = ledger.store.get_assembly(scope, sent[1][2].headers["x-contextledger-assembly-id"])[0]
    assert last.proxy is not None and last.proxy["assembled_request_tokens"] < last.proxy["client_request_tokens"]
    # the conversation, the answer and its tool call are recorded as in assemble mode
    [conv] = [c for c in ledger.store.list_conversations(scope) if f"stream={stream}" in c.conversation.title]
    assert [m.role.value for m in ledger.store.messages(scope, conv.conversation.id)] == ["system", "user", "assistant", "tool", "assistant"]
    [call] = ledger.store.tool_calls(scope, conv.conversation.id)
    assert (call.tool_name, call.status.value) == ("read_file", "succeeded")
    [art] = ledger.store.artifacts(scope, conv.conversation.id)
    assert ledger.rehydrate(art.id).decode() == FILE
    # counted as shadow forwards, never as passthroughs; the usage in the token counters
    assert httpx.get(proxy + "/healthz").json()["proxy"]["passthrough"] == 0
    assert _metric(proxy, 'contextledger_proxy_requests_total{kind="passthrough",dialect="all"}') == 0
    assert _metric(proxy, 'contextledger_proxy_shadow_requests_total{dialect="anthropic"}') == 2
    assert _metric(proxy, 'contextledger_proxy_upstream_tokens_total{type="cache_read",dialect="anthropic"}') == 1240
    assert _metric(proxy, 'contextledger_proxy_upstream_tokens_total{type="cache_write",dialect="all"}') == 1200
    assert _metric(proxy, 'contextledger_proxy_upstream_tokens_total{type="input",dialect="anthropic"}') == 1240 + 2140
    assert _metric(proxy, 'contextledger_proxy_upstream_tokens_total{type="output",dialect="anthropic"}') == 42


def test_shadow_is_shown_by_explain_api_and_inspector(shadow: tuple[str, ScriptedUpstream], ledger: Ledger) -> None:
    proxy, _upstream = shadow
    sent = _tool_loop(proxy, "shown", False, "7e110d3f-1c2b-4c8e-9a51-6a4e2d1c5b0f")
    asm = sent[1][2].headers["x-contextledger-assembly-id"]
    record = ledger.store.get_assembly(ledger.scope(), asm)[0]
    assert record.proxy is not None
    client, assembled = record.proxy["client_request_tokens"], record.proxy["assembled_request_tokens"]
    expl = explain_assembly(ledger, ledger.scope(), asm)
    assert expl["proxy"] == record.proxy and expl["upstream_usage"] == record.upstream_usage
    lines = render_explanation(expl).splitlines()
    assert f"shadow mode: the client's own request was forwarded ({client:,} tokens); this assembly was not — it would have sent {assembled:,} ({(assembled - client) / client:+.0%})" in lines
    assert "upstream usage: input 2,140 tokens (cache read 1,240, cache write 0), output 12" in lines
    api = httpx.get(f"{proxy}/api/assemblies/{asm}/explain").json()
    assert api["proxy"] == record.proxy and api["upstream_usage"]["cached_read_tokens"] == 1240
    page = httpx.get(f"{proxy}/assemblies/{asm}").text
    assert f"The proxy sent the client's own request ({client:,} tokens)" in page and f"would have sent {assembled:,} tokens" in page
    assert '<table class="grid compact" id="usage">' in page and '<td class="n">2,140</td><td class="n">1,240</td>' in page
    conversation = httpx.get(f"{proxy}/conversations/{record.conversation_id}").text
    assert conversation.count('<span class="tag">shadow</span>') == 4  # two requests, in the transcript and the request list
    assert "upstream usage 1,240 in (0 cache read, 1,200 cache write), 30 out" in conversation
    assert "upstream usage 2,140 in (1,240 cache read, 0 cache write), 12 out" in conversation


def test_shadow_tokens_are_what_assemble_mode_sends(assemble: tuple[str, ScriptedUpstream], ledger: Ledger) -> None:
    """The same history in two conversations, one per mode (the request's header): the
    shadow mark's assembled tokens are the tokens of the body assemble mode sent."""
    proxy, upstream = assemble
    budget = {"x-contextledger-budget": "2500"}
    shadowed = _tool_loop(proxy, "twin", False, "11111111-2d1c-4c8e-9a51-0d3f1c2b7e11", {**budget, "x-contextledger-mode": "shadow"})
    assembled = _tool_loop(proxy, "twin", False, "22222222-2d1c-4c8e-9a51-0d3f1c2b7e11", {**budget, "x-contextledger-mode": "ASSEMBLE"})
    received = upstream.received
    assert [r.raw for r in received[:2]] == [raw for _b, raw, _r in shadowed]
    assert all(r.problems == [] for r in received[2:]) and all(r.raw != raw for r, (_b, raw, _r) in zip(received[2:], assembled, strict=True))
    for (_b, _raw, shadow_res), sent in zip(shadowed, received[2:], strict=True):
        mark = ledger.store.get_assembly(ledger.scope(), shadow_res.headers["x-contextledger-assembly-id"])[0].proxy
        assert mark is not None and mark["assembled_request_tokens"] == count_payload_tokens("anthropic", sent.body)
    for _b, _raw, res in assembled:
        record = ledger.store.get_assembly(ledger.scope(), res.headers["x-contextledger-assembly-id"])[0]
        assert record.proxy is None and "x-contextledger-mode" not in res.headers and record.upstream_usage is not None


def test_bad_mode_header_and_unreadable_bodies(shadow: tuple[str, ScriptedUpstream], ledger: Ledger) -> None:
    proxy, upstream = shadow
    body = _first_body("bad mode", False, "33333333-2d1c-4c8e-9a51-0d3f1c2b7e11")
    res, data = _send(proxy, "/v1/messages", _raw(body), {"x-contextledger-mode": "mirror"})
    assert res.status_code == 400 and json.loads(data) == {"type": "error", "error": {"type": "invalid_request_error", "message": "x-contextledger-mode is 'assemble' or 'shadow', got 'mirror'"}}
    assert upstream.received == []
    # a body the proxy cannot assemble is a passthrough in shadow mode too
    bad = {**body, "messages": [{"role": "user", "content": 7}]}
    res, _data = _send(proxy, "/v1/messages", _raw(bad))
    assert res.headers["x-contextledger-passthrough"].startswith("ImportFormatError") and "x-contextledger-mode" not in res.headers
    assert httpx.get(proxy + "/healthz").json()["proxy"]["passthrough"] == 1
    assert _metric(proxy, 'contextledger_proxy_shadow_requests_total{dialect="all"}') == 0
    # a token count in shadow mode counts the request as it will be sent: the client's
    count = _raw({k: v for k, v in body.items() if k in ("model", "system", "messages", "tools")})
    res, _data = _send(proxy, "/v1/messages/count_tokens", count)
    assert res.status_code == 200 and res.headers["x-contextledger-mode"] == "shadow"
    assert (upstream.received[-1].path, upstream.received[-1].raw) == ("/v1/messages/count_tokens", count)


def test_openai_usage_recorded_and_stream_usage_asked_only_when_configured(assemble: tuple[str, ScriptedUpstream], ledger: Ledger) -> None:
    proxy, upstream = assemble
    chat = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "Say hello (chat)."}], "tools": [{"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}]}
    res, data = _send(proxy, "/v1/chat/completions", _raw(chat))
    assert res.status_code == 200 and b'"choices": [], "usage"' in data
    assert upstream.received[-1].body["stream_options"] == {"include_usage": True}  # configured: stream_usage
    record = ledger.store.get_assembly(ledger.scope(), res.headers["x-contextledger-assembly-id"])[0]
    assert record.upstream_usage is not None and {k: v for k, v in record.upstream_usage.items() if k != "raw"} == {
        "input_tokens": 800, "cached_read_tokens": 768, "cache_write_tokens": 0, "output_tokens": 4}
    # in shadow mode the body is the client's: nothing added, and no usage to record
    res, data = _send(proxy, "/v1/chat/completions", _raw({**chat, "messages": [{"role": "user", "content": "Say hello (chat, shadow)."}]}), {"x-contextledger-mode": "shadow"})
    assert res.status_code == 200 and "stream_options" not in upstream.received[-1].body and b'"usage"' not in data
    assert ledger.store.get_assembly(ledger.scope(), res.headers["x-contextledger-assembly-id"])[0].upstream_usage is None
    responses = {"model": "gpt-4.1", "input": [{"role": "user", "content": "Say hello (responses)."}], "tools": [{"type": "function", "name": "run", "parameters": {"type": "object"}}]}
    res, _data = _send(proxy, "/v1/responses", _raw(responses))
    record = ledger.store.get_assembly(ledger.scope(), res.headers["x-contextledger-assembly-id"])[0]
    assert record.upstream_usage == {"input_tokens": 1500, "cached_read_tokens": 1280, "cache_write_tokens": 0, "output_tokens": 9,
                                     "raw": {"input_tokens": 1500, "input_tokens_details": {"cached_tokens": 1280}, "output_tokens": 9, "total_tokens": 1509}}
    assert _metric(proxy, 'contextledger_proxy_upstream_tokens_total{type="cache_read",dialect="all"}') == 768 + 1280


def test_annotate_assembly_is_tenant_scoped_and_validated(shadow: tuple[str, ScriptedUpstream], ledger: Ledger) -> None:
    proxy, _upstream = shadow
    [(_body, _raw_bytes, res), _second] = _tool_loop(proxy, "annotate", False, "44444444-2d1c-4c8e-9a51-0d3f1c2b7e11")
    asm = res.headers["x-contextledger-assembly-id"]
    with pytest.raises(NotFoundError), ledger.store.writer(Scope(tenant_id="someone-else")) as w:
        w.annotate_assembly(asm, {"upstream_usage": {"input_tokens": 1}})
    with pytest.raises(NotFoundError), ledger.store.writer(ledger.scope()) as w:
        w.annotate_assembly("asm_unknown", {"upstream_usage": {"input_tokens": 1}})
    with pytest.raises(ValidationError), ledger.store.writer(ledger.scope()) as w:
        w.annotate_assembly(asm, {"not_a_field": 1})
    before, payload = ledger.store.get_assembly(ledger.scope(), asm)
    with ledger.store.writer(ledger.scope()) as w:
        after = w.annotate_assembly(asm, {"upstream_usage": None})
    assert after == before.model_copy(update={"upstream_usage": None}) and ledger.store.get_assembly(ledger.scope(), asm) == (after, payload)


def test_mode_settings() -> None:
    assert ServerSettings().proxy_mode == "assemble" and ServerSettings().stream_usage is False
    given = ServerSettings.from_env({"CONTEXTLEDGER_PROXY_MODE": "Shadow", "CONTEXTLEDGER_STREAM_USAGE": "1"})
    assert (given.proxy_mode, given.stream_usage) == ("shadow", True)
    assert ServerSettings.from_env(given.to_env()) == given
    with pytest.raises(ValueError, match="proxy mode must be one of assemble, shadow, got 'mirror'"):
        ServerSettings.from_env({"CONTEXTLEDGER_PROXY_MODE": "mirror"})


def test_serve_refuses_an_unknown_mode(tmp_path: Any) -> None:
    done = CliRunner().invoke(cli, ["--home", str(tmp_path), "serve", "--proxy-mode", "mirror"])
    assert done.exit_code == 2 and "proxy mode must be one of assemble, shadow, got 'mirror'" in done.output and "Traceback" not in done.output


@pytest.mark.parametrize("mode", ["shadow", "assemble"])
def test_an_unreachable_upstream_keeps_the_headers_and_the_record_says_nothing_reached_the_provider(ledger: Ledger, mode: str) -> None:
    with serve(create_app(ServerSettings(anthropic_upstream="http://127.0.0.1:9", proxy_mode=mode), ledger=ledger)) as proxy:
        res, data = _send(proxy, "/v1/messages", _raw(_first_body("down", False, "s-down")))
    assert res.status_code == 502 and json.loads(data)["type"] == "error"
    assembly = res.headers["x-contextledger-assembly-id"]
    assert res.headers["x-contextledger-conversation"].startswith("conv_")
    record, _ = ledger.store.get_assembly(ledger.scope(), assembly)
    assert record.proxy is not None and record.proxy["mode"] == mode
    assert record.proxy["upstream_error"] == "the upstream could not be reached or timed out (the client got 502)"
    lines = render_explanation(explain_assembly(ledger, ledger.scope(), assembly))
    assert "upstream: the upstream could not be reached or timed out (the client got 502); nothing reached the provider" in lines
