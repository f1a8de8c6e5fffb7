"""A real Claude Code session replayed request by request through the Messages proxy
records the same graph as ``contextledger import`` of the session file: the same user
texts, assistant turns, tool calls (ids, names, arguments) and raw tool results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import pytest

from conftest import real_data_dir
from contextledger.ledger import Ledger
from contextledger.records.parts import TextPart, ToolCallPart, ToolResultPart
from contextledger.server.app import create_app
from contextledger.server.proxy.chain import canonical_arguments
from contextledger.server.scripted import Plan, ScriptedUpstream
from contextledger.server.settings import ServerSettings
from service_support import serve

SESSION = "claude-reliability-snapshots/coverage-test-fix.jsonl"


def _api_messages(path: Path) -> list[dict[str, Any]]:
    """The Messages API conversation of a session without forks: its user and assistant
    records in file order (Claude Code writes parallel tool calls and their results as
    sibling records), assistant records of one ``message.id`` merged, consecutive user
    records merged; sidechain and meta records left out."""
    out: list[dict[str, Any]] = []
    for line in path.read_text().splitlines():
        r = json.loads(line) if line.strip() else {}
        if r.get("type") not in ("user", "assistant") or r.get("isSidechain") or r.get("isMeta"):
            continue
        content = r["message"]["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        same_turn = out and out[-1]["role"] == r["type"] and (r["type"] == "user" or out[-1].get("_id") == r["message"].get("id"))
        if same_turn:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": r["type"], "content": blocks, "_id": r["message"].get("id")})
    return out


def _projection(ledger: Ledger, conversation_id: str) -> list[tuple[Any, ...]]:
    scope = ledger.scope()
    conv = ledger.store.get_conversation(scope, conversation_id)
    segments = ledger.store.lineage(scope, conv.active_branch_id)
    out: list[tuple[Any, ...]] = []
    arts = {a.call_id: a.sha256 for a in ledger.store.artifacts(scope, conversation_id)}
    for m in ledger.store.messages(scope, conversation_id, segments):
        if m.role.value not in ("user", "assistant", "tool") or m.kind.value == "meta":
            continue
        texts = tuple(p.text for p in m.parts if isinstance(p, TextPart) and p.text.strip())
        calls = tuple((p.call_id, p.tool_name, canonical_arguments(p.arguments_json)) for p in m.parts if isinstance(p, ToolCallPart))
        results = tuple((p.call_id, arts.get(p.call_id)) for p in m.parts if isinstance(p, ToolResultPart))
        out.append((m.role.value, texts, calls, results))
    return out


def test_replayed_session_records_the_imported_graph(tmp_path: Path) -> None:
    path = real_data_dir() / SESSION
    if not path.exists():
        pytest.skip(f"real transcript not found: {path}")
    conversation = _api_messages(path)
    turns = [i for i, m in enumerate(conversation) if m["role"] == "assistant"]
    answers = iter([conversation[i] for i in turns])

    # the upstream answers each request with the session's own next assistant turn
    upstream = ScriptedUpstream(lambda kind, body: Plan())
    replies: list[dict[str, Any]] = []

    async def reply(request: Any) -> Any:
        from starlette.responses import JSONResponse

        await request.body()
        turn = next(answers)
        message = {"id": turn["_id"] or "msg_replay", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                   "content": turn["content"], "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
        replies.append(message)
        return JSONResponse(message)

    from starlette.routing import Route

    upstream.app.router.routes.insert(0, Route("/v1/messages", reply, methods=["POST"]))
    ledger = Ledger.open(home=tmp_path)
    try:
        imported = ledger.import_file(path, scope=ledger.scope("imported"))
        with serve(upstream.app) as up, serve(create_app(ServerSettings(anthropic_upstream=up), ledger=ledger)) as proxy, \
                anthropic.Anthropic(base_url=proxy, api_key="k", max_retries=0) as client:
            for i in turns:
                history = [{k: v for k, v in m.items() if k != "_id"} for m in conversation[:i]]
                client.messages.create(model="claude-sonnet-4-5", max_tokens=4096, messages=history)
        assert len(replies) == len(turns) >= 10
        [proxied] = ledger.store.list_conversations(ledger.scope())
        want = _projection_in(ledger, "imported", imported.conversation_id)
        got = _projection(ledger, proxied.conversation.id)
        assert got == want[: len(got)] and len(got) >= len(want) - 1
        assert proxied.tool_call_count == imported.tool_calls and proxied.artifact_count == imported.artifacts
    finally:
        ledger.close()


def _projection_in(ledger: Ledger, tenant: str, conversation_id: str) -> list[tuple[Any, ...]]:
    saved = ledger.scope
    ledger.scope = lambda tenant_id=tenant, **kw: saved(tenant_id, **kw)  # type: ignore[method-assign,misc]
    try:
        return _projection(ledger, conversation_id)
    finally:
        ledger.scope = saved  # type: ignore[method-assign]

