"""The rules behind the proxy's edges, one by one: which requests are side calls, which
session a request names, titles without client-injected preambles, and a replay estimate
that carries the tool declarations like the assembled request it is compared with."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from contextledger.assembly.replay import tool_schema_tokens
from contextledger.explain import explain_assembly, render_explanation
from contextledger.ingest.importers.bodies import parse_request_body
from contextledger.ingest.importers.common import title_of
from contextledger.ledger import Ledger
from contextledger.providers.base import NeutralRequest, ToolSchema, WireMessage
from contextledger.providers.registry import count_payload_tokens, serialize
from contextledger.records.parts import TextPart
from contextledger.server.proxy.events import RECENT_MAX, ProxyEvent, ProxyEvents
from contextledger.server.proxy.side_calls import session_of, side_call

SESSION = "7c1d2e3f-aaaa-4bbb-8ccc-0123456789ab"
META = {"user_id": json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": SESSION})}
TOOL = {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}


# -- sessions -------------------------------------------------------------------------------
@pytest.mark.parametrize(("headers", "body", "expected"), [
    ({"X-Claude-Code-Session-Id": "hdr-1"}, {"metadata": META}, "hdr-1"),  # the header first
    ({}, {"metadata": META}, SESSION),  # metadata.user_id as a JSON object
    ({}, {"metadata": {"user_id": f"user_{'ab' * 32}_account_0f0e_session_{SESSION}"}}, SESSION),  # the older form
    ({"session_id": "0199a2b3-c4d5"}, {}, "0199a2b3-c4d5"),  # Codex
    ({}, {"metadata": {"user_id": "customer-42"}}, None),  # an application's own user id
    ({}, {"metadata": {"user_id": json.dumps({"device_id": "x"})}}, None),
    ({}, {}, None),
])
def test_session_of(headers: dict[str, str], body: dict[str, Any], expected: str | None) -> None:
    assert session_of(headers, body) == expected


# -- side calls ---------------------------------------------------------------------------
def _body(**fields: Any) -> dict[str, Any]:
    return {"model": "claude-haiku-4-5", "max_tokens": 512, "metadata": META, "messages": [{"role": "user", "content": "Is this a new topic?"}], **fields}


@pytest.mark.parametrize(("body", "named", "rule"), [
    (_body(max_tokens=1, metadata={}), False, "probe"),  # quota / model validation, with or without a session
    ({"model": "gpt-5.5", "max_output_tokens": 1, "input": "ping"}, False, "probe"),
    ({"model": "gpt-4o", "max_completion_tokens": 0, "messages": [{"role": "user", "content": "x"}]}, False, "probe"),
    (_body(), False, "one-shot"),  # title / topic check: no tools, one user turn, a session
    (_body(tools=[]), False, "one-shot"),
    (_body(tools=[{"type": "web_search_20250305", "name": "web_search"}]), False, "one-shot"),  # a server tool is no client tool
    (_body(system=[{"type": "text", "text": "Write a title."}], messages=[{"role": "system", "content": "x"}, {"role": "user", "content": "y"}]), False, "one-shot"),
    (_body(tools=[TOOL]), False, None),  # the main loop declares its tools
    (_body(messages=[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]), False, None),
    (_body(messages=[{"role": "assistant", "content": "b"}]), False, None),
    (_body(metadata={}), False, None),  # no agent session: a plain client's first turn
    (_body(), True, None),  # the client named its conversation
    (_body(max_tokens=2, metadata={}), False, None),
    (_body(max_tokens=True, metadata={}), False, None),  # not a number
])
def test_side_call_rule(body: dict[str, Any], named: bool, rule: str | None) -> None:
    found = side_call({}, body, named=named)
    assert (found.rule if found else None) == rule


def test_side_call_reasons_name_the_session() -> None:
    one = side_call({"x-claude-code-session-id": "s-9"}, _body())
    probe = side_call({}, _body(max_tokens=1))
    assert one is not None and (one.session, one.reason) == ("s-9", "one-shot call of session s-9: no tools, one user turn")
    assert probe is not None and (probe.session, probe.reason) == (SESSION, f"probe of session {SESSION}: at most 1 output token(s)")


# -- titles -------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "title"), [
    ("<system-reminder>\nThe date is 2026-12-01.\n</system-reminder>\nFix   the\nlogin bug", "Fix the login bug"),
    ("<command-message>init is analyzing your codebase…</command-message>\n<command-name>/init</command-name>", ""),
    ("<command-name>/clear</command-name>\n<command-message>clear</command-message>\n<command-args></command-args>", ""),
    ("<command-message>review is running…</command-message>\n<command-name>/review</command-name>\n<command-args>src/parser.py  --strict</command-args>",
     "/review src/parser.py --strict"),
    ("<command-name></command-name><system-reminder>x</system-reminder>", ""),
    ("<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>", ""),
    ("Add a --json flag " + "x" * 100, "Add a --json flag " + "x" * 61 + "…"),
])
def test_title_of(text: str, title: str) -> None:
    assert title_of(text) == title


def test_a_bare_slash_command_is_the_title_of_last_resort() -> None:
    clear = "<command-name>/clear</command-name>\n<command-message>clear</command-message>\n<command-args></command-args>"
    first = {"model": "m", "messages": [{"role": "user", "content": clear}, {"role": "assistant", "content": "Cleared."},
                                        {"role": "user", "content": "Port the CLI to click."}]}
    only = {"model": "m", "messages": [{"role": "user", "content": "<command-message>init is analyzing…</command-message>\n<command-name>/init</command-name>"}]}
    assert parse_request_body("anthropic", first).title == "Port the CLI to click."
    assert parse_request_body("anthropic", only).title == "/init"


def test_request_body_titles_skip_injected_turns() -> None:
    responses = {"model": "gpt-5.5", "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/repo</cwd>\n  <shell>bash</shell>\n</environment_context>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Make the tests pass."}]},
    ]}
    messages = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>Skills are available.</system-reminder>"},
        {"type": "text", "text": "<local-command-caveat>Caveat: the messages below were generated by local commands.</local-command-caveat>"}]},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": [{"type": "text", "text": "Review the parser change."}]}]}
    assert parse_request_body("openai-responses", responses).title == "Make the tests pass."
    assert parse_request_body("anthropic", messages).title == "Review the parser change."


# -- replay versus assembled: like with like -------------------------------------------------
def test_tool_schema_tokens_is_the_serialized_difference() -> None:
    tools = (ToolSchema(name="read_file", description="Read a file.", parameters=TOOL["input_schema"]),)
    probe = (WireMessage(role="user", parts=(TextPart(text="."),)),)
    for provider in ("anthropic", "openai-chat", "openai-responses"):
        with_tools = count_payload_tokens(provider, serialize(provider, NeutralRequest(system=(), messages=probe, tools=tools), resolve_blob=None))
        without = count_payload_tokens(provider, serialize(provider, NeutralRequest(system=(), messages=probe, tools=()), resolve_blob=None))
        assert tool_schema_tokens(provider, tools) == with_tools - without > 20
        assert tool_schema_tokens(provider, ()) == 0


def _conversation(ledger: Ledger, tools: list[dict[str, Any]]) -> str:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="estimate", system_prompt="You are a coding agent.", metadata={"tools": tools})
    rec.record_message(conv.id, "user", "List the files of the repository.")
    rec.record_assistant(conv.id, text="Listing.", tool_calls=[{"call_id": "c1", "tool_name": "read_file", "arguments": {"path": "."}}])
    rec.record_tool_result(conv.id, "c1", "README.md\nsrc/\ntests/\n", is_error=False)
    return conv.id


def test_replay_estimate_carries_the_tool_declarations(tmp_path: Path) -> None:
    many = [{**TOOL, "name": f"tool_{i}", "description": f"Tool number {i}: " + "does a careful thing. " * 20} for i in range(30)]
    ledger = Ledger.open(home=tmp_path)
    try:
        bare = ledger.assemble(_conversation(ledger, [TOOL]), provider="anthropic", replay="estimate").record
        wide = ledger.assemble(_conversation(ledger, [TOOL, *many]), provider="anthropic", replay="estimate").record
        exact = ledger.assemble(_conversation(ledger, [TOOL, *many]), provider="anthropic", replay="exact").record
        schemas = tuple(sorted((ToolSchema(name=t["name"], description=t["description"], parameters=t["input_schema"]) for t in many), key=lambda s: s.name))
        one = (ToolSchema(name="read_file", description="Read a file.", parameters=TOOL["input_schema"]),)
        added = tool_schema_tokens("anthropic", tuple(sorted(one + schemas, key=lambda s: s.name))) - tool_schema_tokens("anthropic", one)
        assert wide.replay_tokens - bare.replay_tokens == added > 3000
        assert wide.replay_mode == "estimate" and exact.replay_mode == "exact"
        # an unreduced request: the estimate and the assembled count are of the same request
        assert abs(wide.replay_tokens - wide.assembled_tokens) < 0.05 * wide.assembled_tokens
        assert abs(wide.replay_tokens - exact.replay_tokens) < 0.05 * exact.replay_tokens
        text = render_explanation(explain_assembly(ledger, ledger.scope(), wide.id))
        assert f"replay (estimated) {wide.replay_tokens:,} → assembled {wide.assembled_tokens:,} (both with system prompt and tool declarations)" in text
    finally:
        ledger.close()


# -- the proxy's events ---------------------------------------------------------------------
def _event(kind: Any, reason: str) -> ProxyEvent:
    return ProxyEvent(kind=kind, dialect="anthropic", path="/v1/messages", reason=reason, at_utc=datetime(2026, 12, 1, tzinfo=UTC))


def test_proxy_events_are_kept_per_tenant_and_bounded() -> None:
    events = ProxyEvents()
    assert events.counts() == {"passthrough": 0, "side_call": 0, "count_tokens": 0, "probe": 0}
    for i in range(RECENT_MAX + 5):
        events.add("acme", _event("passthrough", f"acme {i}"))
    events.add("globex", _event("side_call", "globex title"))
    events.add("globex", _event("count_tokens", "assembled"))  # counted, never listed
    events.add(None, _event("probe", "HEAD /"))
    assert [e.reason for e in events.recent("globex")] == ["globex title"]
    acme = events.recent("acme")
    assert len(acme) == RECENT_MAX and acme[0].reason == f"acme {RECENT_MAX + 4}" and acme[-1].reason == "acme 5"
    assert events.recent("initech") == []
    assert events.counts() == {"passthrough": RECENT_MAX + 5, "side_call": 1, "count_tokens": 1, "probe": 1}
    assert events.by_dialect() == [("count_tokens", "anthropic", 1), ("passthrough", "anthropic", RECENT_MAX + 5), ("probe", "anthropic", 1), ("side_call", "anthropic", 1)]
