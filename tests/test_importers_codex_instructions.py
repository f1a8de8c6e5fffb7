"""A Codex rollout's base instructions are the conversation's system prompt.

codex-rs writes ``SessionMeta.base_instructions`` as ``{"text": …}`` (earlier builds a bare
string, the pre-envelope layout ``instructions``); Codex sends that text as the
``instructions`` of every request, so an assembly of the imported rollout carries it in the
system slot of each provider.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import real_params
from contextledger.ingest.importers import parse_file
from contextledger.ingest.importers.codex_rollout import base_instructions_of
from contextledger.ledger import Ledger
from contextledger.providers.registry import validate_payload
from contextledger.records.enums import MessageKind, Role
from contextledger.records.parts import TextPart

BASE = "You are Codex, a coding agent. Keep the repository's conventions."


def _rollout(path: Path, base: Any) -> Path:
    lines = [
        {"timestamp": "2026-05-11T08:27:00.000Z", "type": "session_meta",
         "payload": {"id": "019e", "timestamp": "2026-05-11T08:26:55Z", "cwd": "/repo", "cli_version": "0.125.0", "base_instructions": base}},
        {"timestamp": "2026-05-11T08:27:01.000Z", "type": "response_item",
         "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run the tests"}]}},
        {"timestamp": "2026-05-11T08:27:02.000Z", "type": "response_item",
         "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "All 3 pass."}]}},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _system_texts(payloads: dict[str, dict[str, Any]]) -> dict[str, str]:
    chat = [m["content"] for m in payloads["openai-chat"]["messages"] if m["role"] == "system"]
    return {"openai-responses": str(payloads["openai-responses"].get("instructions") or ""), "openai-chat": "\n".join(map(str, chat))}


def _assemble(home: Path, path: Path, budget: int) -> dict[str, dict[str, Any]]:
    ledger = Ledger.open(home=home)
    try:
        conv = ledger.import_file(path).conversation_id
        out = {p: ledger.assemble(conv, provider=p, budget_tokens=budget).payload for p in ("openai-responses", "openai-chat")}
    finally:
        ledger.close()
    for provider, payload in out.items():
        assert validate_payload(provider, payload) == []
    return out


@pytest.mark.parametrize("base", [{"text": BASE}, BASE], ids=["object", "string"])
def test_base_instructions_become_the_system_prompt(tmp_path: Path, base: Any) -> None:
    path = _rollout(tmp_path / "rollout-2026-05-11T08-26-55-019e.jsonl", base)
    t = parse_file(path)
    head = t.messages[:2]
    assert [(m.role, m.kind) for m in head] == [(Role.SYSTEM, MessageKind.META), (Role.SYSTEM, MessageKind.CHAT)]
    assert head[1].parts == [TextPart(text=BASE)] and head[1].source_ref == "line 1"
    assert "base_instructions" not in t.metadata and "You are Codex" not in head[0].parts[0].text  # kept once
    payloads = _assemble(tmp_path / "ledger", path, 4000)
    assert payloads["openai-responses"]["instructions"] == BASE
    assert payloads["openai-chat"]["messages"][0] == {"role": "system", "content": BASE}
    assert [m["role"] for m in payloads["openai-chat"]["messages"]] == ["system", "user", "assistant"]


def test_meta_without_instructions_adds_no_system_prompt(tmp_path: Path) -> None:
    path = _rollout(tmp_path / "r.jsonl", None)
    assert [(m.role, m.kind) for m in parse_file(path).messages][:2] == [(Role.SYSTEM, MessageKind.META), (Role.USER, MessageKind.CHAT)]
    payloads = _assemble(tmp_path / "ledger", path, 4000)
    assert "instructions" not in payloads["openai-responses"] or not payloads["openai-responses"]["instructions"]
    assert [m["role"] for m in payloads["openai-chat"]["messages"]] == ["user", "assistant"]


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ({"base_instructions": {"text": "A"}, "instructions": "B"}, "A"),
        ({"base_instructions": "A"}, "A"),
        ({"base_instructions": None, "instructions": "B"}, "B"),  # pre-envelope layout
        ({"base_instructions": {"text": "  "}}, None),
        ({"instructions": None}, None),
    ],
)
def test_base_instructions_of(meta: dict[str, Any], expected: str | None) -> None:
    assert base_instructions_of(meta) == expected


@pytest.mark.parametrize("path", real_params("**/rollout-*.jsonl"), ids=lambda p: getattr(p, "name", str(p)))
def test_real_rollouts_send_their_base_instructions(tmp_path: Path, path: Path) -> None:
    meta = json.loads(path.read_text(encoding="utf-8").splitlines()[0])["payload"]
    base = base_instructions_of(meta)
    assert base is not None and base.startswith("You are Codex")
    payloads = _assemble(tmp_path / "ledger", path, 32000)  # room for the whole system prompt
    for provider, text in _system_texts(payloads).items():
        assert base.strip() in text, provider  # the assembly trims the trailing newline
