"""Through the Messages proxy, each request of a conversation extends the previous one the
upstream received, block for block (breakpoint markers aside), unless the assembly record
gives a re-plan reason: a scripted Claude Code-like tool loop against a scripted upstream,
with constraints stated by the user in the middle of the epoch (with a tool result, and in
a later user turn), and a tail that finally outgrows the high-water mark."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from contextledger.explain import explain_assembly, render_explanation
from contextledger.ledger import Ledger
from contextledger.server.app import create_app
from contextledger.server.scripted import Plan, ScriptedUpstream
from contextledger.server.settings import ServerSettings
from service_support import serve

TOOLS = [{"name": "Bash", "description": "Run a shell command.", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}]
SYSTEM = [{"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}}]
FIRST = "Never edit setup.cfg."
WITH_RESULT = "Do not add new dependencies."
LATER = "Never push to main."
META = {"user_id": json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": "00000000-0000-4000-8000-00000000fe01"})}


def script(kind: str, body: dict[str, Any]) -> Plan:
    """Every request gets one Bash call, numbered by the tool results already answered."""
    n = sum(1 for m in body["messages"] for b in m["content"] if isinstance(m["content"], list) and b.get("type") == "tool_result")
    return Plan(text=f"Step {n}.", tool_calls=[("Bash", {"command": f"pytest -q -k case{n}"})])


@dataclass
class Stack:
    proxy: httpx.Client
    upstream: ScriptedUpstream
    ledger: Ledger


@pytest.fixture
def stack(tmp_path: Any) -> Iterator[Stack]:
    upstream = ScriptedUpstream(script)
    ledger = Ledger.open(home=tmp_path / "home")
    with serve(upstream.app) as up, serve(create_app(ServerSettings(anthropic_upstream=up), ledger=ledger)) as url, \
            httpx.Client(base_url=url, headers={"x-api-key": "k", "anthropic-version": "2023-06-01"}, timeout=60) as client:
        yield Stack(client, upstream, ledger)
    ledger.close()


def _marked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history with Claude Code's breakpoint on its last block."""
    out = [dict(m) for m in messages]
    last = out[-1]
    out[-1] = {**last, "content": [*last["content"][:-1], {**last["content"][-1], "cache_control": {"type": "ephemeral"}}]}
    return out


def _send(stack: Stack, history: list[dict[str, Any]], budget: int) -> tuple[dict[str, Any], dict[str, Any], str]:
    """POST the history; ``(answer, body the upstream received, assembly id)``."""
    body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": SYSTEM, "tools": TOOLS, "messages": _marked(history), "metadata": META}
    before = len(stack.upstream.received)
    response = stack.proxy.post("/v1/messages", json=body, headers={"x-contextledger-budget": str(budget)})
    assert response.status_code == 200, response.text
    assert "x-contextledger-passthrough" not in response.headers
    [received] = stack.upstream.received[before:]
    assert received.problems == []
    return response.json(), received.body, response.headers["x-contextledger-assembly-id"]


def _flat(body: dict[str, Any]) -> list[str]:
    """What the prompt cache reads, in order, without breakpoint markers: every other
    field, then the tools, the system blocks and each message block with its role."""
    def plain(b: Any) -> Any:
        return {k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b
    head = [json.dumps({k: v for k, v in body.items() if k not in ("tools", "system", "messages")}, sort_keys=True)]
    blocks = [["tool", plain(t)] for t in body["tools"]] + [["system", plain(s)] for s in body["system"]]
    blocks += [[m["role"], i == 0, plain(b)] for m in body["messages"] for i, b in enumerate(m["content"])]
    return head + [json.dumps(b, sort_keys=True, ensure_ascii=False) for b in blocks]


def _conversation(stack: Stack, budget: int, turns: int, output_lines: int) -> list[tuple[dict[str, Any], str]]:
    """A tool loop of ``turns`` requests: the task (with a constraint), then one Bash
    result each; the third result comes with a user constraint in the same message and
    the fifth request is a user turn of its own stating another."""
    history: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": f"Fix the failing tests in calc.py. {FIRST}"}]}]
    sent: list[tuple[dict[str, Any], str]] = []
    for turn in range(turns):
        answer, body, assembly = _send(stack, history, budget)
        sent.append((body, assembly))
        use = next(b for b in answer["content"] if b["type"] == "tool_use")
        history.append({"role": "assistant", "content": answer["content"]})
        output = "\n".join(f"tests/test_calc.py::case{turn}_{j} PASSED" for j in range(output_lines))
        content: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": use["id"], "content": output}]
        if turn == 2:
            content.append({"type": "text", "text": WITH_RESULT})
        history.append({"role": "user", "content": content})
        if turn == 4:
            history += [{"role": "assistant", "content": [{"type": "text", "text": "The tests pass now."}]},
                        {"role": "user", "content": [{"type": "text", "text": LATER}]}]
    return sent


def _epoch(stack: Stack, assembly: str) -> dict[str, Any]:
    record, _ = stack.ledger.store.get_assembly(stack.ledger.scope(), assembly)
    assert record.epoch is not None
    return record.epoch


def _check_extensions(stack: Stack, sent: list[tuple[dict[str, Any], str]]) -> list[str]:
    """Each request starts with the previous one unless explain gives a re-plan reason;
    the reasons, in order."""
    reasons = []
    for (prev, _), (cur, assembly) in itertools.pairwise(sent):
        expl = explain_assembly(stack.ledger, stack.ledger.scope(), assembly)["epoch"]
        reasons.append(expl["reason"])
        if not expl["first"]:
            assert expl["reason"] == "extends epoch"
            assert _flat(cur)[: len(_flat(prev))] == _flat(prev), expl
    return reasons


def _system_text(body: dict[str, Any]) -> str:
    return "\n".join(b["text"] for b in body["system"])


def test_constraints_stated_inside_an_epoch_extend_the_request_in_the_tail(stack: Stack) -> None:
    sent = _conversation(stack, budget=20000, turns=9, output_lines=2)
    assert _check_extensions(stack, sent) == ["extends epoch"] * 8
    first = sent[0][0]
    # the task is sent raw: its constraint is read there, once, not restated in the system blocks
    assert FIRST not in _system_text(first) and WITH_RESULT not in _system_text(first) and FIRST in json.dumps(first["messages"][0])
    # the new constraints reach the model verbatim where the user stated them: in the tail
    for body, _ in sent[3:]:
        assert body["system"] == first["system"] or [{k: v for k, v in b.items() if k != "cache_control"} for b in body["system"]] == \
            [{k: v for k, v in b.items() if k != "cache_control"} for b in first["system"]]
        assert WITH_RESULT in json.dumps(body["messages"])
    assert LATER in json.dumps(sent[5][0]["messages"][-1])
    deferred = [_epoch(stack, a).get("constraints_in_tail") for _, a in sent]
    assert [len(d or ()) for d in deferred] == [1, 1, 1, 2, 2, 3, 3, 3, 3] and deferred[8][:1] == deferred[0]
    expl = explain_assembly(stack.ledger, stack.ledger.scope(), sent[8][1])
    assert expl["epoch"]["constraints_in_tail"] == deferred[8]
    assert "3 constraints are sent where the user stated them, not restated in the system blocks (restated once that message is no longer sent raw)" in render_explanation(expl)


def test_a_re_plan_pins_the_constraints_stated_inside_the_previous_epoch(stack: Stack) -> None:
    sent = _conversation(stack, budget=3000, turns=14, output_lines=12)
    reasons = _check_extensions(stack, sent)
    replans = [i + 1 for i, r in enumerate(reasons) if r != "extends epoch"]
    assert replans and all(reasons[i - 1].startswith("re-planned: tail over high water (") for i in replans), reasons
    after = next(i for i in replans if i > 5)  # the first re-plan after both constraints were stated
    system, messages = _system_text(sent[after][0]), json.dumps(sent[after][0]["messages"])
    # each constraint reaches the model verbatim: restated, or in its own message sent raw
    assert all(c in system or c in messages for c in (FIRST, WITH_RESULT, LATER))
    tail = _epoch(stack, sent[after][1]).get("constraints_in_tail") or []
    assert len(tail) == sum(c not in system for c in (FIRST, WITH_RESULT, LATER))
