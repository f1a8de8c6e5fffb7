"""The assembly record off the request path (contextledger.store.deferred): the proxy
sends the request under an id allocated first and writes the record after the response,
ordered per conversation — the next request extends the previous assembly, explain and
``/api`` find every one, the answer's usage lands on it, and the deferred record is the
record an immediate assembly writes."""

from __future__ import annotations

import json
import logging
import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextledger.explain import explain_assembly
from contextledger.ledger import Ledger
from contextledger.records.models import ContextAssembly
from contextledger.server.app import create_app
from contextledger.server.scripted import ScriptedUpstream
from contextledger.server.settings import ServerSettings
from contextledger.store.deferred import DeferredAssemblies, PendingAssembly
from service_support import serve

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
TOOLS = [{"type": "function", "function": {"name": "run", "description": "Run a shell command.", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[httpx.Client, ScriptedUpstream, Ledger]]:
    upstream = ScriptedUpstream()
    ledger = Ledger.open(home=tmp_path / "home")
    with serve(upstream.app) as up, serve(create_app(ServerSettings(openai_upstream=f"{up}/v1"), ledger=ledger)) as url, \
            httpx.Client(base_url=url, headers={"authorization": "Bearer k"}, timeout=60) as client:
        yield client, upstream, ledger
    ledger.close()


def _answer(response: httpx.Response, stream: bool) -> dict[str, Any]:
    if not stream:
        message: dict[str, Any] = response.json()["choices"][0]["message"]
        return {k: v for k, v in message.items() if v is not None}
    text, calls = "", {}
    for line in response.text.splitlines():
        if not line.startswith("data: {"):
            continue
        for choice in json.loads(line[6:]).get("choices", []):
            delta = choice.get("delta") or {}
            text += delta.get("content") or ""
            for c in delta.get("tool_calls") or []:
                slot = calls.setdefault(c["index"], {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                slot["id"] = c.get("id") or slot["id"]
                slot["function"]["name"] += c["function"].get("name") or ""
                slot["function"]["arguments"] += c["function"].get("arguments") or ""
    return {"role": "assistant", "content": text or None, **({"tool_calls": [calls[i] for i in sorted(calls)]} if calls else {})}


def _loop(client: httpx.Client, stream: bool, requests: int) -> list[str]:
    """A tool loop of ``requests`` requests (whole history each time); the assembly ids."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": f"Fix the build (stream={stream})."}]
    ids = []
    for i in range(requests):
        response = client.post("/v1/chat/completions", json={"model": "gpt-4o", "messages": messages, "tools": TOOLS, "stream": stream,
                                                              **({"stream_options": {"include_usage": True}} if stream else {})})
        assert response.status_code == 200 and "x-contextledger-passthrough" not in response.headers
        ids.append(response.headers["x-contextledger-assembly-id"])
        message = _answer(response, stream)
        messages.append(message)
        for call in message.get("tool_calls", []):
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": f"step {i}: ok\n" + "line\n" * 40})
        if not message.get("tool_calls"):
            messages.append({"role": "user", "content": f"Now step {i + 1}."})
    return ids


@pytest.mark.parametrize("stream", [False, True])
def test_every_proxied_assembly_is_recorded_in_order(stack: tuple[httpx.Client, ScriptedUpstream, Ledger], stream: bool) -> None:
    client, _, ledger = stack
    ids = _loop(client, stream, 6)
    records = [ledger.store.get_assembly(ledger.scope(), i)[0] for i in ids]
    assert [r.id for r in records] == ids
    assert [r.created_at for r in records] == sorted(r.created_at for r in records)
    # the next request saw the previous assembly: each one extends it
    assert [(r.epoch or {}).get("reason") for r in records] == ["first request"] + ["extends epoch"] * 5
    assert [(r.epoch or {}).get("extends") for r in records[1:]] == ids[:-1]
    for r in records:  # the full record: decisions, buckets, cost, the answer's usage
        assert r.record_decisions and r.buckets and r.cost is not None and r.payload_sha256
        assert r.upstream_usage is not None and r.upstream_usage["input_tokens"] == 10
    for r in records[1:]:
        assert r.prefix_change is None and r.cost["previous_assembly_id"] == ids[ids.index(r.id) - 1]
    assert ledger.store.deferred.pending() == 0
    explained = client.get(f"/api/assemblies/{ids[-1]}/explain")
    assert explained.status_code == 200 and explained.json()["assembly_id"] == ids[-1]


def _record_history(ledger: Ledger) -> str:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="deferred", system_prompt="You are a data pipeline agent.")
    rec.record_message(conv.id, "user", "Process the nightly partitions.")
    for i in range(6):
        rec.record_assistant(conv.id, tool_calls=[{"call_id": f"c{i}", "tool_name": "run_step", "arguments": {"step": i}}])
        rec.record_tool_result(conv.id, f"c{i}", f"partition {i}: 120 rows\n" + "ok\n" * 50, observed_at=NOW)
    return conv.id


_ID = re.compile(r"\b([a-z]+)_[0-9A-Z]{26}\b")


def _normal(record: ContextAssembly, payload: dict[str, Any] | None) -> str:
    """The record and payload as JSON without creation time and timings, each record id
    replaced by its kind and rank of first appearance (the two ledgers' later records
    have ids of their own)."""
    text = json.dumps([record.model_dump(mode="json", exclude={"created_at", "timings_ms"}), payload], sort_keys=True)
    seen: dict[str, str] = {}
    return _ID.sub(lambda m: seen.setdefault(m.group(0), f"{m.group(1)}#{len(seen)}"), text)


def _two_requests(ledger: Ledger, conv: str, defer: bool) -> list[str]:
    """A plan, two new records, an extension: the assembly ids (the deferred ones not yet written)."""
    first = ledger.assemble(conv, budget_tokens=6000, now=NOW, defer=defer)
    rec = ledger.recorder()
    rec.record_assistant(conv, tool_calls=[{"call_id": "c9", "tool_name": "run_step", "arguments": {"step": 9}}])
    rec.record_tool_result(conv, "c9", "partition 9: 7 rows", observed_at=NOW)
    second = ledger.assemble(conv, budget_tokens=6000, now=NOW, defer=defer)
    if defer:  # the provisional record carries what the request path reads
        assert second.record.epoch is not None and second.record.epoch["reason"] == "extends epoch"
        assert ledger.store.deferred.pending() == 1  # the second request wrote the first's record before its epoch state was read
    return [first.record.id, second.record.id]


def test_a_deferred_record_is_the_immediate_one(tmp_path: Path) -> None:
    base = Ledger.open(home=tmp_path / "a")
    conv = _record_history(base)
    base.close()
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    now_ledger, later_ledger = Ledger.open(home=tmp_path / "a"), Ledger.open(home=tmp_path / "b")
    immediate = _two_requests(now_ledger, conv, defer=False)
    deferred = _two_requests(later_ledger, conv, defer=True)
    later_ledger.store.deferred.start(deferred[-1])
    for a, b in zip(immediate, deferred, strict=True):
        assert _normal(*now_ledger.store.get_assembly(now_ledger.scope(), a)) == _normal(*later_ledger.store.get_assembly(later_ledger.scope(), b))
    assert explain_assembly(later_ledger, later_ledger.scope(), deferred[-1])["assembly_id"] == deferred[-1]
    now_ledger.close()
    later_ledger.close()


def test_a_failed_deferred_record_is_logged_and_the_next_runs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ledger = Ledger.open(home=tmp_path / "home")
    conv = _record_history(ledger)
    first = ledger.assemble(conv, budget_tokens=6000, now=NOW, defer=True)
    assert ledger.store.deferred.annotate(first.record.id, {"upstream_usage": "not a usage object"})
    with caplog.at_level(logging.ERROR, logger="contextledger.store.deferred"):
        second = ledger.assemble(conv, budget_tokens=6000, now=NOW, defer=True)  # reads the epoch state: runs the first job
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"assembly {first.record.id} of conversation {conv} not recorded: ValidationError")
    ledger.store.deferred.start(second.record.id)
    stored = ledger.store.get_assembly(ledger.scope(), second.record.id)[0]
    assert stored.epoch is not None and stored.epoch["reason"] == "first request"
    ledger.close()


def test_jobs_run_in_order_per_conversation_once() -> None:
    deferred = DeferredAssemblies()
    ran: list[str] = []
    for conv, n in (("c1", 3), ("c2", 2)):
        for i in range(n):
            deferred.add(PendingAssembly(assembly_id=f"{conv}-{i}", conversation_id=conv, work=lambda fields, name=f"{conv}-{i}": ran.append(name)))
    deferred.start("c1-1")
    assert ran == ["c1-0", "c1-1"]
    assert deferred.annotate("c1-2", {"proxy": {"mode": "shadow"}}) and not deferred.annotate("c1-0", {})
    deferred.settle("c2")
    deferred.settle()
    deferred.start("c1-0")
    assert ran == ["c1-0", "c1-1", "c2-0", "c2-1", "c1-2"] and deferred.pending() == 0
