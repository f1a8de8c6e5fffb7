"""What Claude Code sends through the Messages proxy, as raw bodies against a scripted
upstream: ``role: "system"`` entries inside ``messages``, tool calls echoed with their
defaults filled in, session ids, identical retries, delta-mode clients, cache
breakpoints and query strings.  Every request must be assembled (never forwarded
untouched), and the upstream never receives anything from outside the request's own
history."""

from __future__ import annotations

import itertools
import json
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger.ledger import Ledger
from contextledger.records.enums import ToolCallStatus
from contextledger.server.app import create_app
from contextledger.server.scripted import Plan, ScriptedUpstream
from contextledger.server.settings import ServerSettings
from service_support import serve

EDIT = {"file_path": "/repo/calc.py", "old_string": "return a - b", "new_string": "return a + b"}
TOOLS = [{"name": "Edit", "description": "Edit a file.", "input_schema": {"type": "object", "properties": {
    "file_path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"},
    "replace_all": {"type": "boolean", "default": False}}, "required": ["file_path", "old_string", "new_string"]}}]
SYSTEM = [{"type": "text", "text": "You are a coding agent."}]
LISTING = "Available agent types for the Agent tool:\n- Explore: read-only search."
REMINDER = "The task tools haven't been used recently."


def script(kind: str, body: dict[str, Any]) -> Plan:
    """Every request gets a short text and one Edit call."""
    return Plan(text="Editing.", tool_calls=[("Edit", dict(EDIT))])


class QueryLog:
    """An ASGI wrapper that notes the path and query string of every request."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[tuple[str, str]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.seen.append((scope["path"], scope.get("query_string", b"").decode()))
        await self.app(scope, receive, send)


@dataclass
class Stack:
    proxy: httpx.Client
    upstream: ScriptedUpstream
    queries: QueryLog
    ledger: Ledger


@contextmanager
def _ledger(request: pytest.FixtureRequest, home: Path) -> Iterator[Ledger]:
    """A fresh ledger on the fixture's backend (SQLite file, or a new PostgreSQL database)."""
    if request.param == "sqlite":
        ledger = Ledger.open(home=home)
        yield ledger
        ledger.close()
        return
    import psycopg

    admin = str(request.getfixturevalue("pg_admin"))
    name = f"test_{uuid.uuid4().hex[:16]}"
    plain = admin.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type,unused-ignore]
    ledger = Ledger.open(f"{admin.rsplit('/', 1)[0]}/{name}", blobs=home / "blobs")
    try:
        yield ledger
    finally:
        ledger.close()
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type,unused-ignore]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    upstream = ScriptedUpstream(script)
    queries = QueryLog(upstream.app)
    with _ledger(request, tmp_path_factory.mktemp("svc")) as ledger, serve(queries) as up, \
            serve(create_app(ServerSettings(anthropic_upstream=up), ledger=ledger)) as url, \
            httpx.Client(base_url=url, headers={"x-api-key": "k", "anthropic-version": "2023-06-01"}, timeout=60) as client:
        yield Stack(client, upstream, queries, ledger)


_SESSIONS = itertools.count(1)


def session_meta() -> dict[str, Any]:
    """``metadata`` as Claude Code sends it, with a fresh session id."""
    sid = f"00000000-0000-4000-8000-{next(_SESSIONS):012d}"
    return {"user_id": json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": sid})}


def send(stack: Stack, messages: list[dict[str, Any]], *, metadata: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
         path: str = "/v1/messages") -> tuple[httpx.Response, dict[str, Any]]:
    """POST a Messages body; returns the response and the body the upstream received."""
    body: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": SYSTEM, "tools": TOOLS, "messages": messages}
    if metadata is not None:
        body["metadata"] = metadata
    before = len(stack.upstream.received)
    response = stack.proxy.post(path, json=body, headers=headers or {})
    assert response.status_code == 200, response.text
    assert "x-contextledger-passthrough" not in response.headers, response.headers.get("x-contextledger-passthrough")
    assert response.headers["x-contextledger-assembly-id"].startswith("asm_")
    [received] = stack.upstream.received[before:]
    assert received.problems == []
    return response, received.body


def echoed(answer: dict[str, Any]) -> dict[str, Any]:
    """The assistant turn as Claude Code echoes it: Edit inputs with ``replace_all`` filled
    in and the keys in another order."""
    content = []
    for block in answer["content"]:
        if block["type"] == "tool_use":
            block = {**block, "input": {"replace_all": False, **dict(reversed(list(block["input"].items())))}}
        content.append(block)
    return {"role": "assistant", "content": content}


def result_for(answer: dict[str, Any], text: str) -> dict[str, Any]:
    use = next(b for b in answer["content"] if b["type"] == "tool_use")
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": text}]}


def test_system_entries_are_folded_into_the_system_prefix(stack: Stack) -> None:
    user = {"role": "user", "content": [{"type": "text", "text": "Fix calc.py (folding).", "cache_control": {"type": "ephemeral"}}]}
    first, sent1 = send(stack, [user, {"role": "system", "content": LISTING}], metadata=session_meta())
    answer = first.json()
    history = [user, {"role": "system", "content": LISTING}, echoed(answer), result_for(answer, "updated"),
               {"role": "system", "content": [{"type": "text", "text": REMINDER}]}]
    second, sent2 = send(stack, [*history, {"role": "system", "content": REMINDER}], metadata=json.loads(first.request.content)["metadata"])
    assert [b["text"] for b in sent1["system"][:2]] == ["You are a coding agent.", LISTING]
    # later entries extend the prefix; a repeated one is folded once; none stays in messages
    assert [b["text"] for b in sent2["system"][:3]] == ["You are a coding agent.", LISTING, REMINDER]
    assert REMINDER not in json.dumps(sent2["system"][3:]) and all(m["role"] != "system" for m in sent2["messages"])
    assert first.headers["x-contextledger-conversation"] == second.headers["x-contextledger-conversation"]


def test_an_echoed_call_with_defaults_is_the_recorded_call(stack: Stack) -> None:
    user = {"role": "user", "content": "Fix calc.py (echo)."}
    first, _ = send(stack, [user], metadata=(meta := session_meta()))
    answer = first.json()
    history = [user, echoed(answer), result_for(answer, "The file calc.py has been updated.")]
    second, sent = send(stack, history, metadata=meta)
    third, _ = send(stack, [*history, echoed(second.json()), result_for(second.json(), "updated again")], metadata=meta)
    conv = first.headers["x-contextledger-conversation"]
    assert second.headers["x-contextledger-conversation"] == conv == third.headers["x-contextledger-conversation"]
    store, scope = stack.ledger.store, stack.ledger.scope()
    # one branch, each call recorded once and answered
    assert len(store.branches(scope, conv)) == 1
    calls = store.tool_calls(scope, conv)
    ids = [b["id"] for b in answer["content"] if b["type"] == "tool_use"] + [b["id"] for b in second.json()["content"] if b["type"] == "tool_use"]
    assert [(c.call_id, c.status) for c in calls[:2]] == [(ids[0], ToolCallStatus.SUCCEEDED), (ids[1], ToolCallStatus.SUCCEEDED)]
    assert [c.status for c in calls[2:]] == [ToolCallStatus.PENDING]  # the third answer's call
    assert [m.role.value for m in store.messages(scope, conv)] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert sent["messages"][-1]["content"][0]["tool_use_id"] == ids[0]


def test_an_identical_retry_is_assembled_from_the_same_point(stack: Stack) -> None:
    user = {"role": "user", "content": "Fix calc.py (retry)."}
    first, _ = send(stack, [user], metadata=(meta := session_meta()))
    history = [user, echoed(first.json()), result_for(first.json(), "retry result")]
    second, sent = send(stack, history, metadata=meta)
    retry, resent = send(stack, history, metadata=meta)
    assert _unmarked(resent["messages"]) == _unmarked(sent["messages"])  # the same request (its breakpoints aside)
    earlier = next(b["id"] for b in second.json()["content"] if b["type"] == "tool_use")
    assert earlier not in json.dumps(resent)  # the earlier answer to the same history is not appended
    assert retry.headers["x-contextledger-conversation"] == second.headers["x-contextledger-conversation"]
    again, _ = send(stack, history, metadata=meta)  # the retry's answer is recorded on its own branch
    assert again.headers["x-contextledger-conversation"] == second.headers["x-contextledger-conversation"]


def test_sessions_never_share_a_conversation(stack: Stack) -> None:
    user = {"role": "user", "content": "Fix calc.py (sessions)."}
    a, _ = send(stack, [user], metadata=(meta_a := session_meta()))
    b, _ = send(stack, [user], metadata=session_meta())
    a2, _ = send(stack, [user, echoed(a.json()), result_for(a.json(), "a")], metadata=meta_a)
    assert a.headers["x-contextledger-conversation"] != b.headers["x-contextledger-conversation"]
    assert a2.headers["x-contextledger-conversation"] == a.headers["x-contextledger-conversation"]
    # the session header names it too
    h, _ = send(stack, [user], headers={"x-claude-code-session-id": "hdr-session-1"})
    h2, _ = send(stack, [user, echoed(h.json()), result_for(h.json(), "h")], headers={"x-claude-code-session-id": "hdr-session-1"})
    assert h.headers["x-contextledger-conversation"] == h2.headers["x-contextledger-conversation"] != a.headers["x-contextledger-conversation"]


def test_without_a_session_the_first_answer_names_the_conversation(stack: Stack) -> None:
    user = {"role": "user", "content": "Fix calc.py (no session)."}
    a, _ = send(stack, [user])
    b, _ = send(stack, [user])  # another session with the same first message
    a2, _ = send(stack, [user, echoed(a.json()), result_for(a.json(), "a")])
    b2, _ = send(stack, [user, echoed(b.json()), result_for(b.json(), "b")])
    assert a.headers["x-contextledger-conversation"] != b.headers["x-contextledger-conversation"]
    assert a2.headers["x-contextledger-conversation"] == a.headers["x-contextledger-conversation"]
    assert b2.headers["x-contextledger-conversation"] == b.headers["x-contextledger-conversation"]


def test_delta_mode_requests_are_all_assembled(stack: Stack) -> None:
    headers = {"x-contextledger-conversation": "delta-client-1", "x-contextledger-history": "delta"}
    first, _ = send(stack, [{"role": "user", "content": "Fix calc.py (delta)."}], headers=headers)
    answer = first.json()
    for i in range(3):
        response, sent = send(stack, [echoed(answer), result_for(answer, f"delta result {i}")], headers=headers)
        answer = response.json()
        assert f"delta result {i}" in json.dumps(sent["messages"])
    conv = first.headers["x-contextledger-conversation"]
    calls = stack.ledger.store.tool_calls(stack.ledger.scope(), conv)
    assert [c.status for c in calls] == [ToolCallStatus.SUCCEEDED] * 3 + [ToolCallStatus.PENDING]


def test_breakpoints_and_query_string(stack: Stack) -> None:
    marked = {"type": "ephemeral", "ttl": "1h"}
    older = {"role": "user", "content": [{"type": "text", "text": "Fix calc.py (breakpoints).", "cache_control": {"type": "ephemeral"}}]}
    first, _ = send(stack, [older], metadata=(meta := session_meta()))
    newest = result_for(first.json(), "breakpoint result")
    newest["content"] = [{**newest["content"][0], "cache_control": marked}]
    body_system = [{"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "Be brief."}]
    stack.queries.seen.clear()
    before = len(stack.upstream.received)
    response = stack.proxy.post("/v1/messages?beta=true", json={"model": "m", "max_tokens": 64, "system": body_system, "metadata": meta,
                                "tools": [{**TOOLS[0], "cache_control": {"type": "ephemeral"}}], "messages": [older, echoed(first.json()), newest]})
    assert response.status_code == 200 and "x-contextledger-assembly-id" in response.headers
    sent = stack.upstream.received[before].body
    assert stack.queries.seen == [("/v1/messages", "beta=true")]
    text = json.dumps(sent)
    assert text.count('"cache_control"') == 4  # system, tools, newest message, end of the stable prefix
    assert sent["messages"][-1]["content"][-1]["cache_control"] == marked
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral"} and "cache_control" in sent["system"][-1]


# -- the isolation property ------------------------------------------------------------------
MARK = re.compile(r"tok\d+x")
_MARKS = itertools.count(1)


@dataclass
class ClientState:
    """One client history (ending with its newest user turn), its answer and its session."""

    history: list[dict[str, Any]]
    answer: dict[str, Any]
    metadata: dict[str, Any] | None


def _mark() -> str:
    return f"tok{next(_MARKS)}x"


OPS = st.lists(st.tuples(st.sampled_from(["new", "new-session", "continue", "retry", "edit"]), st.integers(0, 50)), min_size=3, max_size=9)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], database=None)
@given(ops=OPS)
def test_the_upstream_sees_only_the_requests_own_history(stack: Stack, ops: list[tuple[str, int]]) -> None:
    """Whatever sessions, continuations, retries and edited histories come, every marker
    the upstream receives is one the request itself holds."""
    states: list[ClientState] = []
    for op, pick in ops:
        if op.startswith("new") or not states:
            meta = session_meta() if op == "new-session" else None
            history = [{"role": "user", "content": f"Task {_mark()}."}]
        else:
            base = states[pick % len(states)]
            meta = base.metadata
            if op == "continue":
                history = [*base.history, echoed(base.answer), result_for(base.answer, f"result {_mark()}")]
            elif op == "retry":
                history = base.history
            else:  # the newest user turn edited: a changed history
                previous = base.history[:-1]
                edited = result_for(previous[-1], f"edited {_mark()}") if previous else {"role": "user", "content": f"Task {_mark()}."}
                history = [*previous, edited]
        response, sent = send(stack, history, metadata=meta)
        own = set(MARK.findall(json.dumps(history)))
        assert set(MARK.findall(json.dumps(sent))) <= own
        states.append(ClientState(history=history, answer=response.json(), metadata=meta))


def test_add_calls_returns_the_recorded_call_for_a_known_id(stack: Stack) -> None:
    from contextledger.ingest.recorder import Recorder

    first, _ = send(stack, [{"role": "user", "content": "Fix calc.py (add_calls)."}], metadata=(meta := session_meta()))
    user = {"role": "user", "content": "Fix calc.py (add_calls)."}
    send(stack, [user, echoed(first.json()), result_for(first.json(), "done")], metadata=meta)
    store, scope = stack.ledger.store, stack.ledger.scope()
    conv = first.headers["x-contextledger-conversation"]
    recorded = store.tool_calls(scope, conv)[0]
    [message] = store.messages(scope, conv, ids=[recorded.message_id])
    with store.writer(scope) as w:
        again = Recorder(stack.ledger, scope).add_calls(w, message)
    assert again == [recorded] and recorded.status is ToolCallStatus.SUCCEEDED


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
PDF = "JVBERi0xLjQKJcOkw7zDtsOfCjEgMCBvYmoKPDwvVHlwZS9DYXRhbG9nPj4KZW5kb2JqCnRyYWlsZXIKPDwvUm9vdCAxIDAgUj4+CiUlRU9G"


def test_every_block_type_is_assembled(stack: Stack) -> None:
    """Blocks of the Messages API beside text and tool calls: images, documents (base64,
    text, URL, content), search results, server tool use and its result, citations,
    signed and redacted thinking (the continued turn goes back byte for byte)."""
    user = {"role": "user", "content": [
        {"type": "text", "text": "Review these (blocks)."},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}, "title": "spec.pdf"},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "Plain spec text."}},
        {"type": "document", "source": {"type": "url", "url": "https://example.com/spec.pdf"}},
        {"type": "search_result", "source": "https://example.com/doc", "title": "Doc", "content": [{"type": "text", "text": "Found passage."}]},
    ]}
    searched = {"role": "assistant", "content": [
        {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "calc bug"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": [
            {"type": "web_search_result", "url": "https://example.com/a", "title": "A", "encrypted_content": "enc", "page_age": None}]},
        {"type": "text", "text": "The docs say so.", "citations": [{"type": "web_search_result_location", "url": "https://example.com/a", "title": "A",
                                                                  "encrypted_index": "ix", "cited_text": "so"}]},
    ]}
    assistant = {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Edit it.", "signature": "sig-abc"},
        {"type": "redacted_thinking", "data": "redacted-xyz"},
        {"type": "tool_use", "id": "toolu_blocks_1", "name": "Edit", "input": dict(EDIT)},
    ]}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_blocks_1", "content": [
        {"type": "text", "text": "Edited (blocks)."}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]}]}
    _, sent = send(stack, [user, searched, {"role": "user", "content": "Now fix it."}, assistant, result], metadata=session_meta())
    assert json.dumps(sent["messages"][-2], sort_keys=True) == json.dumps(assistant, sort_keys=True)
    assert sent["messages"][-1]["content"][0]["tool_use_id"] == "toolu_blocks_1"
    text = json.dumps(sent)
    for kept in ("Found passage.", "Plain spec text.", "https://example.com/spec.pdf", PNG, "The docs say so.", "calc bug"):
        assert kept in text


def _unmarked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]} for m in messages]


def test_inside_an_epoch_the_upstream_prefix_is_stable_and_a_breakpoint_ends_the_frozen_part(stack: Stack) -> None:
    meta = session_meta()
    user = {"role": "user", "content": [{"type": "text", "text": "Fix calc.py (frozen prefix)."}]}
    first, _ = send(stack, [user], metadata=meta)
    history = [user, echoed(first.json()), result_for(first.json(), "frozen result 1")]
    second, sent2 = send(stack, history, metadata=meta)
    history += [echoed(second.json()), result_for(second.json(), "frozen result 2")]
    third, sent3 = send(stack, history, metadata=meta)
    rec, _ = stack.ledger.store.get_assembly(stack.ledger.scope(), third.headers["x-contextledger-assembly-id"])
    assert rec.epoch is not None and rec.epoch["reason"] == "extends epoch"
    # every block the upstream saw last time is where it was (markers aside; the second Edit
    # supersedes the first, announced by one more block of the junction's user message)
    def flat(body: dict[str, Any]) -> list[str]:
        return [json.dumps([m["role"], b], sort_keys=True) for m in _unmarked(body["messages"]) for b in m["content"]]
    assert flat(sent3)[: len(flat(sent2))] == flat(sent2)
    reused = rec.epoch["reused_messages"]
    assert reused in (len(sent2["messages"]), len(sent2["messages"]) - 1)
    assert sent3["messages"][reused - 1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert json.dumps(sent3).count('"cache_control"') <= 4 and sent3["system"] == sent2["system"]
