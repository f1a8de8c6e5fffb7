"""Tool schemas carrying JSON ``null`` (OpenHands transcripts exported through a unified
tabular schema: ``"enum": null``, ``"file_text": null`` as a property) are sent clean to
every provider, and the validators reject a schema that still holds such a null — both
Anthropic and OpenAI refuse them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import real_data_dir, require_real_data
from contextledger.ledger import Ledger
from contextledger.providers.base import clean_schema, schema_null_problems
from contextledger.providers.registry import validate_payload

OPENHANDS = "adp-swe-gym-openhands/Project-MONAI__MONAI-3715_4.json"


def _schemas(provider: str, payload: dict[str, Any]) -> list[dict[str, Any]]:
    tools = payload.get("tools") or []
    if provider == "anthropic":
        return [t["input_schema"] for t in tools]
    if provider == "openai-chat":
        return [t["function"]["parameters"] for t in tools]
    return [t["parameters"] for t in tools]


def _nulls(value: Any) -> int:
    if value is None:
        return 1
    if isinstance(value, dict):
        return sum(_nulls(v) for v in value.values())
    if isinstance(value, list):
        return sum(_nulls(v) for v in value)
    return 0


@pytest.mark.parametrize("provider", ["anthropic", "openai-chat", "openai-responses"])
def test_real_openhands_tools_are_sent_without_nulls(tmp_path: Path, provider: str) -> None:
    require_real_data()
    src = real_data_dir() / OPENHANDS
    raw_tools = json.loads(src.read_text())["tools"]
    assert _nulls(raw_tools) > 0  # the file does carry them
    led = Ledger.open(home=tmp_path)
    conv = led.import_file(src).conversation_id
    res = led.assemble(conv, provider=provider, budget_tokens=4000)
    schemas = _schemas(provider, res.payload)
    assert schemas and all(_nulls(s) == 0 for s in schemas)
    editor = next(s for s in schemas if "enum" in s["properties"].get("command", {}))  # str_replace_editor: a real enum is kept
    assert editor["properties"]["file_text"]["type"] == "string"
    bash = next(s for s in schemas if "timeout" in s["properties"] or "is_input" in s["properties"] or s["properties"].get("file_text") == {})
    assert bash["properties"]["file_text"] == {} and "enum" not in bash["properties"]["command"]
    assert validate_payload(provider, res.payload) == []
    led.close()


def test_clean_schema_rules() -> None:
    schema = {
        "type": "object", "description": None, "required": ["a"],
        "properties": {"a": {"type": "string", "enum": None, "default": None}, "b": None, "c": {"const": None, "items": {"type": None}}},
    }
    assert clean_schema(schema) == {
        "type": "object", "required": ["a"],
        "properties": {"a": {"type": "string", "default": None}, "b": {}, "c": {"const": None, "items": {}}},
    }
    assert schema_null_problems(schema) == [
        ".description: null is not a valid value of 'description'",
        ".properties.a.enum: null is not a valid value of 'enum'",
        ".properties.b: null is not a JSON schema",
        ".properties.c.items.type: null is not a valid value of 'type'",
    ]
    assert schema_null_problems(clean_schema(schema)) == []


def test_validators_reject_null_schema_keywords() -> None:
    schema = {"type": "object", "properties": {"command": {"type": "string", "enum": None}, "file_text": None}}
    msgs = [{"role": "user", "content": "hi"}]
    chat = {"messages": msgs, "tools": [{"type": "function", "function": {"name": "edit", "parameters": schema}}]}
    assert validate_payload("openai-chat", chat) == [
        "tools[0].function.parameters.properties.command.enum: null is not a valid value of 'enum'",
        "tools[0].function.parameters.properties.file_text: null is not a JSON schema",
    ]
    anth = {"system": "s", "messages": msgs, "tools": [{"name": "edit", "input_schema": schema}]}
    assert validate_payload("anthropic", anth) == [
        "tools[0].input_schema.properties.command.enum: null is not a valid value of 'enum'",
        "tools[0].input_schema.properties.file_text: null is not a JSON schema",
    ]
    resp = {"input": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "name": "edit", "parameters": schema}]}
    assert validate_payload("openai-responses", resp) == [
        "tools[0].parameters.properties.command.enum: null is not a valid value of 'enum'",
        "tools[0].parameters.properties.file_text: null is not a JSON schema",
    ]
