"""Epochs as the provider sees them: a real Claude Code session of signed thinking turns
(tool calls with the API's ``caller`` field, long Edit arguments) sent call by call
through the real Messages proxy on a loopback port, each to a local upstream answering
with the transcript's own answer.  Inside an epoch every body the upstream receives
extends the previous one block for block (breakpoint markers aside); tests/test_epochs.py
checks the assemblies, this checks what the proxy makes of them."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import real_params
from contextledger.bench.cost_sessions import claude_code_calls, client_body, fixed_prefix
from contextledger.ledger import Ledger
from contextledger.providers.cost import request_blocks
from contextledger.server.app import create_app
from contextledger.server.local import serve_in_thread
from contextledger.server.settings import ServerSettings

SIGNED_SESSION = real_params("randlee-claude-history/simple/session.jsonl")
META = {"user_id": json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": "00000000-0000-4000-8000-000000002300"})}


def _id(p: Path | None) -> str:
    return "real-data" if p is None else "/".join(p.parts[-2:])


def _declared(calls: list[Any]) -> list[dict[str, Any]]:
    """Minimal declarations for the tools the session calls beyond the fixed prefix's."""
    known = {t["name"] for t in fixed_prefix()[2]}
    used = sorted({b["name"] for c in calls for b in c.answer["content"] if b.get("type") == "tool_use"} - known)
    return [{"name": n, "description": f"The {n} tool.", "input_schema": {"type": "object", "properties": {}}} for n in used]


@pytest.mark.parametrize("budget", [8000, 32000])
@pytest.mark.parametrize("path", SIGNED_SESSION, ids=_id)
def test_a_real_thinking_session_through_the_proxy_extends_the_previous_body_inside_an_epoch(tmp_path: Path, path: Path, budget: int) -> None:
    calls = claude_code_calls(path)
    declared = _declared(calls)
    answer: dict[str, Any] = {}
    received: list[dict[str, Any]] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        received.append(body)
        return httpx.Response(200, json={"id": f"msg_{len(received):04d}", "type": "message", "role": "assistant", "model": body["model"], "content": answer["content"],
                                         "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}})

    ledger = Ledger.open(home=tmp_path / "home")
    epochs: list[dict[str, Any]] = []
    try:
        app = create_app(ServerSettings(anthropic_upstream="http://upstream.local"), ledger=ledger, http=httpx.AsyncClient(transport=httpx.MockTransport(upstream)))
        bodies = [client_body(c, declared=declared) for c in calls]
        fixed = sum(b.tokens for b in request_blocks("anthropic", {"system": bodies[0]["system"], "tools": bodies[0]["tools"]}))
        with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=600.0) as client:
            for call, body in zip(calls, bodies, strict=True):
                answer = call.answer
                r = client.post("/v1/messages", json={**body, "metadata": META}, headers={"x-contextledger-budget": str(budget + fixed)})
                assert r.status_code == 200 and "x-contextledger-passthrough" not in r.headers, r.text[:300]
                record, _ = ledger.store.get_assembly(ledger.scope(), r.headers["x-contextledger-assembly-id"])
                assert record.epoch is not None
                epochs.append(record.epoch)
    finally:
        ledger.close()
    assert len(received) == len(calls) == 94
    inside = broken = 0
    for i, (prev, cur) in enumerate(itertools.pairwise(received), start=1):
        if epochs[i]["first"]:
            continue
        inside += 1
        keys = [b.key for b in request_blocks("anthropic", prev)]
        broken += [b.key for b in request_blocks("anthropic", cur)][: len(keys)] != keys
    assert inside >= 75 and broken == 0, (inside, broken, [e["reason"] for e in epochs])
