"""A thinking tool loop through the Messages proxy: every assistant turn is signed, its
tool calls carry a field the records do not keep (``caller``, as the Messages API
returns it) and some calls have arguments over the tool-output limit.  The continued
turn must go upstream as the client sent it; every later request of the epoch must
send that turn the same way, so each request extends the previous one byte for byte
(breakpoint markers aside) — issue 23's breaks inside epochs on a real session."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from contextledger.ledger import Ledger
from contextledger.server.app import create_app
from contextledger.server.scripted import Plan, ScriptedUpstream
from contextledger.server.settings import ServerSettings
from service_support import serve

TOOLS = [{"name": n, "description": f"The {n} tool.", "input_schema": {"type": "object", "properties": {}}} for n in ("Bash", "Edit")]
SYSTEM = [{"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}}]
META = {"user_id": json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": "00000000-0000-4000-8000-0000000023a1"})}
BIG = 6000  # characters of an Edit's new text: over the 4,096-byte tool limit of the default policy


def _results(body: dict[str, Any]) -> int:
    return sum(1 for m in body["messages"] if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result")


def script(kind: str, body: dict[str, Any]) -> Plan:
    """Signed thinking and one call per request; every third call an Edit with long text."""
    n = _results(body)
    signature = hashlib.sha256(f"sig{n}".encode()).hexdigest() * 4
    if n % 3 == 1:
        text = "".join(f"line {i} of the new parser module\n" for i in range(BIG // 30))
        call = ("Edit", {"file_path": f"src/parser{n}.py", "old_string": "pass", "new_string": text})
    else:
        call = ("Bash", {"command": f"pytest -q -k case{n}"})
    return Plan(text=f"Step {n}.", tool_calls=[call], thinking=(f"I should run step {n} next.", signature))


@pytest.fixture
def stack(tmp_path: Any) -> Iterator[tuple[httpx.Client, ScriptedUpstream, Ledger]]:
    upstream = ScriptedUpstream(script)
    ledger = Ledger.open(home=tmp_path / "home")
    with serve(upstream.app) as up, serve(create_app(ServerSettings(anthropic_upstream=up), ledger=ledger)) as url, \
            httpx.Client(base_url=url, headers={"x-api-key": "k", "anthropic-version": "2023-06-01"}, timeout=60) as client:
        yield client, upstream, ledger
    ledger.close()


def _flat(body: dict[str, Any]) -> list[str]:
    """What the prompt cache reads, in order, without breakpoint markers."""
    def plain(b: Any) -> Any:
        return {k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b
    blocks = [["tool", plain(t)] for t in body["tools"]] + [["system", plain(s)] for s in body["system"]]
    blocks += [[m["role"], i == 0, plain(b)] for m in body["messages"] for i, b in enumerate(m["content"])]
    return [json.dumps(b, sort_keys=True, ensure_ascii=False) for b in blocks]


def _with_caller(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The answer as the client keeps it: its tool calls with the API's ``caller`` field."""
    return [{**b, "caller": {"type": "direct"}} if b["type"] == "tool_use" else b for b in content]


def test_signed_turns_with_unkept_fields_and_long_arguments_extend_the_previous_request(stack: tuple[httpx.Client, ScriptedUpstream, Ledger]) -> None:
    client, upstream, ledger = stack
    history: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "Write the parser and keep the tests green."}]}]
    sent: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for turn in range(8):
        marked = [*history[:-1], {**history[-1], "content": [*history[-1]["content"][:-1], {**history[-1]["content"][-1], "cache_control": {"type": "ephemeral"}}]}]
        body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": SYSTEM, "tools": TOOLS, "messages": marked, "metadata": META,
                "thinking": {"type": "enabled", "budget_tokens": 1024}}
        r = client.post("/v1/messages", json=body, headers={"x-contextledger-budget": "40000"})
        assert r.status_code == 200 and "x-contextledger-passthrough" not in r.headers, r.text
        record, _ = ledger.store.get_assembly(ledger.scope(), r.headers["x-contextledger-assembly-id"])
        assert record.epoch is not None and upstream.received[-1].problems == []
        sent.append((upstream.received[-1].body, record.epoch))
        answer = r.json()["content"]
        use = next(b for b in answer if b["type"] == "tool_use")
        history.append({"role": "assistant", "content": _with_caller(answer)})
        history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": f"ok {turn}"}]})
    assert [ep["reason"] for _, ep in sent] == ["first request"] + ["extends epoch"] * 7
    for turn, ((prev, _), (cur, _)) in enumerate(itertools.pairwise(sent), start=1):
        assert _flat(cur)[: len(_flat(prev))] == _flat(prev), f"request {turn} does not extend request {turn - 1}"
    # every earlier turn goes back as the client sent it: signed, with its caller and whole arguments
    last = sent[-1][0]["messages"]
    assert [m for m in last if m["role"] == "assistant"] == [m for m in history[:-2] if m["role"] == "assistant"]
    assert sum(len(json.dumps(m)) > BIG for m in last if m["role"] == "assistant") == 2
