"""Turn-by-turn replay of a real transcript through the proxy's recording path, for the
epoch tests: every point where the model was called becomes one persisted assembly."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextledger.assembly.assembler import AssemblyResult
from contextledger.ingest.importers.claude_code import parse_claude_code
from contextledger.ingest.importers.common import read_source
from contextledger.ingest.transcript import ImportedMessage
from contextledger.ledger import Ledger
from contextledger.records.enums import MessageKind, Role
from contextledger.records.parts import ToolCallPart
from contextledger.server.proxy.chain import chain_keys
from contextledger.server.proxy.reconcile import (
    ParsedRequest,
    conversation_for,
    record_chain,
    root_key,
)


def main_thread(path: Path) -> tuple[list[ImportedMessage], list[dict[str, Any]]]:
    """The main participant's chat messages on the transcript's active path, in order
    (linear), and its tools."""
    t = parse_claude_code(read_source(path))
    msgs = t.messages
    if t.tree and t.active_leaf_key:
        by_key = {m.key: m for m in msgs}
        path_keys: list[str] = []
        k: str | None = t.active_leaf_key
        while k is not None and k in by_key:
            path_keys.append(k)
            k = by_key[k].parent_key
        on = set(path_keys)
        msgs = [m for m in msgs if m.key in on]
    keep = [dataclasses.replace(m, parent_key=None) for m in msgs if m.participant_key == "main" and m.kind == MessageKind.CHAT and m.role in (Role.USER, Role.ASSISTANT, Role.TOOL)]
    # a client declares its tools up front: every tool the thread calls, when the file has none
    called = sorted({p.tool_name for m in keep for p in m.parts if isinstance(p, ToolCallPart)})
    tools = t.tools or [{"name": n, "description": f"The {n} tool.", "input_schema": {"type": "object", "properties": {}}} for n in called]
    return keep, tools


@dataclass
class Turn:
    index: int
    result: AssemblyResult


def replay(ledger: Ledger, path: Path, *, provider: str, budget: int, name: str, limit: int | None = None) -> Iterator[Turn]:
    """Record the main thread request by request (each history before a model answer)
    and assemble each, persisted, with ``now`` the newest message's time."""
    msgs, tools = main_thread(path)
    scope = ledger.scope()
    conv = conversation_for(ledger, scope, name, ParsedRequest(system_text="", messages=msgs[:1], tools=tools), source="proxy:test")
    root = root_key(conv.id)
    n = 0
    for i in range(1, len(msgs)):
        if msgs[i].role != Role.ASSISTANT or msgs[i - 1].role == Role.ASSISTANT:
            continue
        history = msgs[:i]
        pos = record_chain(ledger, scope, conv.id, history, chain_keys(root, history), tools=tools)
        now = next((m.created_at for m in reversed(history) if m.created_at is not None), None)
        yield Turn(index=i, result=ledger.assemble(conv.id, branch_id=pos.branch_id, provider=provider, budget_tokens=budget, scope=scope, now=now, replay="estimate"))
        n += 1
        if limit is not None and n >= limit:
            return


def conversation_items(payload: dict[str, Any]) -> list[str]:
    """The serialized JSON of each item of a payload's conversation list."""
    key = "input" if "input" in payload else "messages"
    return [json.dumps(m, sort_keys=True, ensure_ascii=False) for m in payload.get(key, [])]


def extends(prev: dict[str, Any], cur: dict[str, Any]) -> bool:
    """Whether ``cur``'s conversation list starts with ``prev``'s, item for item."""
    a, b = conversation_items(prev), conversation_items(cur)
    return len(b) >= len(a) and b[: len(a)] == a


def blocks(payload: dict[str, Any]) -> list[str]:
    """A Messages API payload as its sequence of ``(role, block)`` (what the prompt cache
    reads in order: a block added to the last message of a request keeps every earlier
    block where it was)."""
    return [json.dumps([m["role"], b], sort_keys=True, ensure_ascii=False) for m in payload.get("messages", []) for b in m["content"]]


def extends_blocks(prev: dict[str, Any], cur: dict[str, Any]) -> bool:
    """Whether ``cur``'s blocks start with ``prev``'s, block for block (Messages API)."""
    a, b = blocks(prev), blocks(cur)
    return len(b) >= len(a) and b[: len(a)] == a
