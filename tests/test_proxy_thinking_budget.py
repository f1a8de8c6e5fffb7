"""The signed thinking of earlier assistant turns does not take budget from the history
(Anthropic's context-window rule: the API strips previous turns' thinking, only the
continued turn's counts).  The proxy sends those turns back byte-exact to keep the
prefix stable; counting them would cut the assembled history a little more every turn
of a thinking session until the task itself no longer fits."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from contextledger.ledger import Ledger
from contextledger.server.app import create_app
from contextledger.server.proxy.anthropic import AnthropicDialect
from contextledger.server.scripted import Plan, ScriptedUpstream
from contextledger.server.settings import ServerSettings
from contextledger.tokens import count_tokens
from service_support import serve

TOOLS = [{"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}]


def _signature(turn: int) -> str:
    """A signature-shaped string of ~2,000 o200k tokens (base64 of hashes)."""
    import base64

    raw = b"".join(hashlib.sha256(f"{turn}:{i}".encode()).digest() for i in range(150))
    return base64.b64encode(raw).decode()


def _turn(turn: int) -> dict[str, Any]:
    return {"role": "assistant", "content": [
        {"type": "thinking", "thinking": f"Next I read module {turn}.", "signature": _signature(turn)},
        {"type": "text", "text": f"Reading module {turn}."},
        {"type": "tool_use", "id": f"toolu_{turn:02d}", "name": "read_file", "input": {"path": f"src/mod{turn}.py"}},
    ]}


@pytest.fixture()
def stack(tmp_path: Any) -> Iterator[tuple[str, ScriptedUpstream, Ledger]]:
    upstream = ScriptedUpstream(lambda kind, body: Plan(text="ok"))
    ledger = Ledger.open(home=tmp_path)
    with serve(upstream.app) as up, serve(create_app(ServerSettings(anthropic_upstream=up), ledger=ledger)) as proxy:
        yield proxy, upstream, ledger
    ledger.close()


def test_older_turns_thinking_is_not_counted_against_the_history(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, upstream, ledger = stack
    task = "Audit the eight modules under src/ for unchecked None returns; report each finding with its line."
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    budgets, kept_task = [], []
    with httpx.Client(base_url=proxy, timeout=60) as client:
        for turn in range(8):
            messages += [_turn(turn), {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{turn:02d}", "content": f"mod{turn}.py: finding-{turn} at line {turn + 3}"}]}]
            body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "You are an auditor.", "tools": TOOLS, "messages": messages,
                    "thinking": {"type": "enabled", "budget_tokens": 1024}}
            r = client.post("/v1/messages", json=body, headers={"x-contextledger-budget": "6000", "x-api-key": "sk-ant-test"})
            assert r.status_code == 200 and "x-contextledger-passthrough" not in r.headers
            record, _ = ledger.store.get_assembly(ledger.scope(), r.headers["x-contextledger-assembly-id"])
            budgets.append(record.budget_tokens)
            sent = json.dumps(upstream.received[-1].body["messages"], ensure_ascii=False)
            kept_task.append(task in sent)
            messages.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
            messages.append({"role": "user", "content": f"Go on with module {turn + 1}."})
    # the older turns' ~2,000-token signatures (sent back, 14,000 tokens by the end) never
    # shrink the history's budget: only the continued turn's thinking is charged
    assert len(set(budgets)) == 1, budgets
    assert all(kept_task)
    last = upstream.received[-1].body
    assert sum(json.dumps(m).count('"signature"') for m in last["messages"]) >= 2  # older turns still go back signed


def test_upstream_tokens_count_only_the_continued_turns_thinking() -> None:
    dialect = AnthropicDialect()
    old, continued = _turn(1), _turn(2)
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_02", "content": "ok"}]}
    body = {"system": "s", "tools": TOOLS, "messages": [{"role": "user", "content": "go"}, old, {"role": "user", "content": "more"}, continued, result]}
    stripped_old = {**old, "content": old["content"][1:]}
    expected = {"system": "s", "messages": [{"role": "user", "content": "go"}, stripped_old, {"role": "user", "content": "more"}, continued, result], "tools": TOOLS}
    assert dialect.upstream_tokens(body) == count_tokens(json.dumps(expected, ensure_ascii=False, separators=(",", ":")))
    # without a tool result answering it, no turn is continued: every thinking block is stripped
    plain = {**body, "messages": body["messages"][:4]}
    stripped_new = {**continued, "content": continued["content"][1:]}
    expected_plain = {"system": "s", "messages": [{"role": "user", "content": "go"}, stripped_old, {"role": "user", "content": "more"}, stripped_new], "tools": TOOLS}
    assert dialect.upstream_tokens(plain) == count_tokens(json.dumps(expected_plain, ensure_ascii=False, separators=(",", ":")))
