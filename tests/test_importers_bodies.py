"""Provider request bodies as transcripts: ``parse_request_body(provider, body)``.

The bodies are written here from the public API references: OpenAI Chat Completions and
Responses (``input`` items ``message`` / ``reasoning`` / ``function_call`` /
``function_call_output`` / ``custom_tool_call`` / ``local_shell_call`` /
``web_search_call``; the response object's ``output``), and Anthropic Messages
(``system`` blocks, ``tool_use`` / ``tool_result``, ``thinking`` with ``signature``,
``redacted_thinking`` with ``data``, ``server_tool_use`` + ``web_search_tool_result``).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from contextledger.errors import ImportFormatError, InputError
from contextledger.ingest.importers import (
    BODY_PROVIDERS,
    detect_body_provider,
    detect_format,
    parse_file,
    parse_request_body,
)
from contextledger.ingest.transcript import ImportedTranscript
from contextledger.ledger import Ledger
from contextledger.providers.registry import validate_payload
from contextledger.records.enums import MessageKind, Role
from contextledger.records.parts import (
    BinaryPart,
    ImagePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n tiny").decode()
SIGNATURE = "EqQBCkgIARABGAIiQL+/sig==\n"
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"
ENCRYPTED = "gAAAAABqAZLpDBVX3heq9f5RwzU7LNkny4dZ7BOgfOxEx3IWEQ25omWhOOAUra9jvlVP"


def _shape(t: ImportedTranscript) -> list[tuple[str, str, list[str]]]:
    """(role, kind, part kinds) per message, in order."""
    return [(m.role.value, m.kind.value, [p.kind for p in m.parts]) for m in t.messages]


def _calls(t: ImportedTranscript) -> list[ToolCallPart]:
    return [p for m in t.messages for p in m.parts if isinstance(p, ToolCallPart)]


def _results(t: ImportedTranscript) -> list[ToolResultPart]:
    return [p for m in t.messages for p in m.parts if isinstance(p, ToolResultPart)]


# ------------------------------------------------------------------------ Anthropic

ANTHROPIC_BODY: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 4096,
    "thinking": {"type": "enabled", "budget_tokens": 2048},
    "system": [
        {"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Repository: /srv/app"},
    ],
    "tools": [
        {"name": "read_file", "description": "Read a file", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
    ],
    "messages": [
        {"role": "user", "content": "What port does the server listen on?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Check config.toml first.", "signature": SIGNATURE},
                {"type": "text", "text": "Reading the config."},
                {"type": "tool_use", "id": "toolu_01A", "name": "read_file", "input": {"path": "config.toml"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A", "content": [{"type": "text", "text": "port = 8080"}]},
                {"type": "text", "text": "Also check the docs online."},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "redacted_thinking", "data": REDACTED},
                {"type": "server_tool_use", "id": "srvtoolu_01B", "name": "web_search", "input": {"query": "app default port"}},
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01B", "content": [{"type": "web_search_result", "url": "https://example.com/docs", "title": "Docs"}]},
                {"type": "text", "text": "The docs say 8080 as well."},
            ],
        },
        {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}, {"type": "text", "text": "And this screenshot?"}]},
    ],
}
ANTHROPIC_RESPONSE: dict[str, Any] = {
    "id": "msg_01X",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "The screenshot shows port 8080."}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 900, "output_tokens": 12},
}


def test_anthropic_body_messages_in_order() -> None:
    t = parse_request_body("anthropic", ANTHROPIC_BODY, response=ANTHROPIC_RESPONSE)
    assert t.format == "anthropic-messages" and t.path == "<request body>" and not t.tree
    assert _shape(t) == [
        ("system", "chat", ["text", "text"]),
        ("user", "chat", ["text"]),
        ("assistant", "chat", ["thinking", "text", "tool_call"]),
        ("tool", "chat", ["tool_result"]),
        ("user", "chat", ["text"]),
        ("assistant", "chat", ["thinking", "tool_call"]),
        ("tool", "chat", ["tool_result"]),
        ("assistant", "chat", ["text"]),
        ("user", "chat", ["image", "text"]),
        ("assistant", "chat", ["text"]),
    ]
    assert [m.key for m in t.messages] == [
        "system", "msg:0", "msg:1", "msg:2", "msg:2#1", "msg:3", "msg:3#1", "msg:3#2", "msg:4", "response",
    ]
    assert [m.source_ref for m in t.messages][:4] == ["system", "messages[0]", "messages[1]", "messages[2]"]
    assert t.title == "What port does the server listen on?"
    assert t.participants[0].model == "claude-sonnet-4-5" and t.participants[0].provider == "anthropic"
    assert t.notes == []


def test_anthropic_thinking_kept_byte_exact() -> None:
    t = parse_request_body("anthropic", ANTHROPIC_BODY)
    thinking = [p for m in t.messages for p in m.parts if isinstance(p, ThinkingPart)]
    assert thinking == [
        ThinkingPart(text="Check config.toml first.", signature=SIGNATURE),
        ThinkingPart(text="", signature=REDACTED, redacted=True),
    ]


def test_anthropic_calls_results_tools_and_metadata() -> None:
    t = parse_request_body("anthropic", ANTHROPIC_BODY, response=ANTHROPIC_RESPONSE)
    assert [(c.call_id, c.tool_name, json.loads(c.arguments_json)) for c in _calls(t)] == [
        ("toolu_01A", "read_file", {"path": "config.toml"}),
        ("srvtoolu_01B", "web_search", {"query": "app default port"}),
    ]
    first, server = _results(t)
    assert (first.call_id, first.text, first.is_error) == ("toolu_01A", "port = 8080", False)
    assert server.call_id == "srvtoolu_01B" and json.loads(server.text or "")[0]["url"] == "https://example.com/docs"
    assert t.messages[6].metadata == {"server_tool": True}
    assert t.tools == [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}, "description": "Read a file"}}]
    assert t.metadata["server_tools"] == [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]
    assert t.metadata["max_tokens"] == 4096 and t.metadata["response"]["stop_reason"] == "end_turn"
    image = t.messages[8].parts[0]
    assert isinstance(image, ImagePart) and image.media_type == "image/png"
    assert t.messages[8].attachments[image.blob_key or ""] == base64.b64decode(PNG)


def test_anthropic_document_and_orphan_result() -> None:
    body = {
        "messages": [
            {"role": "user", "content": [
                {"type": "document", "title": "spec.pdf", "source": {"type": "base64", "media_type": "application/pdf", "data": PNG}},
                {"type": "tool_result", "tool_use_id": "toolu_gone", "content": "stale", "is_error": True},
            ]},
        ]
    }
    t = parse_request_body("anthropic", body)
    assert _shape(t) == [("user", "observation", ["text"]), ("user", "chat", ["binary"])]
    assert t.messages[0].metadata == {"orphan_call_id": "toolu_gone", "is_error": True}
    document = t.messages[1].parts[0]
    assert isinstance(document, BinaryPart) and (document.name, document.media_type) == ("spec.pdf", "application/pdf")
    assert t.notes == ["messages[0].content[1]: tool result for call 'toolu_gone' answers no earlier call; kept as an observation"]


@pytest.mark.parametrize(
    ("body", "location", "reason"),
    [
        ({"system": "x"}, "messages", "expected an array of messages, found null"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0]", "unknown role 'wizard': expected 'user', 'assistant' or 'system'"),
        ({"messages": [{"role": "system", "content": [{"type": "image"}]}]}, "messages[0].content[0]", "a system entry holds text blocks only, found an object"),
        ({"messages": [{"content": "x"}]}, "messages[0]", "message has no 'role'"),
        ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content", "expected a string or an array of blocks, found a number"),
        ({"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t"}]}]}, "messages[0].content[0]", "tool_use block has no name"),
        ({"messages": [], "system": [{"type": "image"}]}, "system[0]", "expected a text block, found an object"),
    ],
)
def test_anthropic_errors_name_the_place(body: dict[str, Any], location: str, reason: str) -> None:
    with pytest.raises(ImportFormatError) as info:
        parse_request_body("anthropic", body, label="req.json")
    assert (info.value.path, info.value.location, info.value.reason) == ("req.json", location, reason)
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------------ OpenAI Responses

RESPONSES_BODY: dict[str, Any] = {
    "model": "gpt-5",
    "instructions": "You are a careful coding agent.",
    "previous_response_id": None,
    "tools": [
        {"type": "function", "name": "read_file", "description": "Read a file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}, "strict": True},
        {"type": "custom", "name": "apply_patch", "description": "Apply a patch"},
        {"type": "web_search"},
    ],
    "input": [
        {"role": "user", "content": "Fix the port in config.toml"},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "Here is the error:"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"},
        ]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Read both files."}], "encrypted_content": ENCRYPTED},
        {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "read_file", "arguments": "{\"path\":\"config.toml\"}"},
        {"type": "function_call", "id": "fc_2", "call_id": "call_b", "name": "read_file", "arguments": "{\"path\":\"README.md\"}"},
        {"type": "function_call_output", "call_id": "call_a", "output": "port = 8000"},
        {"type": "function_call_output", "call_id": "call_b", "output": [{"type": "input_text", "text": "Serve on 8080."}]},
        {"type": "custom_tool_call", "call_id": "call_c", "name": "apply_patch", "input": "*** Begin Patch\n*** Update File: config.toml\n-port = 8000\n+port = 8080\n*** End Patch\n"},
        {"type": "custom_tool_call_output", "call_id": "call_c", "output": "Done!"},
        {"type": "local_shell_call", "id": "ls_1", "call_id": "call_d", "status": "completed", "action": {"type": "exec", "command": ["pytest", "-q"], "timeout_ms": 60000}},
        {"type": "local_shell_call_output", "id": "call_d", "output": "1 failed"},
        {"type": "item_reference", "id": "msg_old"},
    ],
}
RESPONSE_OBJECT: dict[str, Any] = {
    "id": "resp_1",
    "object": "response",
    "model": "gpt-5-2025-08-07",
    "status": "completed",
    "output": [
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "pytest port fixture"}},
        {"type": "message", "id": "msg_9", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": "Port fixed; one test still fails.", "annotations": []}]},
    ],
}


def test_responses_items_grouped_into_turns() -> None:
    t = parse_request_body("openai-responses", RESPONSES_BODY, response=RESPONSE_OBJECT)
    assert t.format == "openai-responses"
    assert _shape(t) == [
        ("system", "chat", ["text"]),
        ("user", "chat", ["text"]),
        ("user", "chat", ["text", "image"]),
        ("assistant", "chat", ["thinking", "tool_call", "tool_call"]),
        ("tool", "chat", ["tool_result"]),
        ("tool", "chat", ["tool_result"]),
        ("assistant", "chat", ["tool_call"]),
        ("tool", "chat", ["tool_result"]),
        ("assistant", "chat", ["tool_call"]),
        ("tool", "chat", ["tool_result"]),
        ("system", "meta", ["text"]),
        ("assistant", "chat", ["tool_call", "text"]),
        ("tool", "chat", ["tool_result"]),
    ]
    assert [m.key for m in t.messages] == [
        "instructions", "item:0", "item:1", "item:2", "item:5", "item:6", "item:7", "item:8", "item:9",
        "item:10", "item:11", "output:0", "output:0#result",
    ]
    assert t.messages[3].source_ref == "input[2]" and t.messages[11].source_ref == "output[0]"
    assert t.messages[11].model == "gpt-5"
    assert t.notes == ["input[11]: item of type 'item_reference' kept as meta"]


def test_responses_calls_outputs_and_reasoning() -> None:
    t = parse_request_body("openai-responses", RESPONSES_BODY, response=RESPONSE_OBJECT)
    assert [(c.call_id, c.tool_name, c.arguments_json) for c in _calls(t)] == [
        ("call_a", "read_file", '{"path":"config.toml"}'),
        ("call_b", "read_file", '{"path":"README.md"}'),
        ("call_c", "apply_patch", json.dumps({"input": RESPONSES_BODY["input"][7]["input"]}, separators=(",", ":"))),
        ("call_d", "local_shell", '{"type":"exec","command":["pytest","-q"],"timeout_ms":60000}'),
        ("ws_1", "web_search", '{"action":{"type":"search","query":"pytest port fixture"}}'),
    ]
    assert [(r.call_id, r.text) for r in _results(t)] == [
        ("call_a", "port = 8000"),
        ("call_b", "Serve on 8080."),
        ("call_c", "Done!"),
        ("call_d", "1 failed"),
        ("ws_1", '{"status": "completed"}'),
    ]
    turn = t.messages[3]
    assert turn.parts[0] == ThinkingPart(text="Read both files.", signature=ENCRYPTED)
    assert turn.metadata["reasoning_ids"] == ["rs_1"]
    assert t.messages[6].metadata["call_item_types"] == {"call_c": "custom_tool_call"}
    assert t.tools[0] == {"type": "function", "function": {"name": "read_file", "parameters": RESPONSES_BODY["tools"][0]["parameters"], "description": "Read a file"}}
    assert t.tools[1]["function"]["parameters"]["required"] == ["input"]
    assert t.metadata["builtin_tools"] == [{"type": "web_search"}]
    assert t.metadata["response"]["id"] == "resp_1" and "previous_response_id" in t.metadata


def test_responses_string_input_response_alone_and_bare_list() -> None:
    t = parse_request_body("openai-responses", {"model": "gpt-5", "input": "hello"})
    assert _shape(t) == [("user", "chat", ["text"])] and t.title == "hello"
    alone = parse_request_body("openai-responses", RESPONSE_OBJECT)
    assert _shape(alone) == [("assistant", "chat", ["tool_call", "text"]), ("tool", "chat", ["tool_result"])]
    assert alone.participants[0].model == "gpt-5-2025-08-07"
    bare = parse_request_body("openai-responses", RESPONSES_BODY["input"][2:7])
    assert [m.source_ref for m in bare.messages] == ["[0]", "[3]", "[4]"]


def test_responses_failed_and_orphan_outputs() -> None:
    items = [
        {"type": "shell_call", "call_id": "call_s", "action": {"commands": ["make"]}},
        {"type": "shell_call_output", "call_id": "call_s", "output": [{"stdout": "", "stderr": "make: *** No rule", "outcome": {"type": "exit", "exit_code": 2}}]},
        {"type": "function_call_output", "call_id": "call_zz", "output": "late"},
    ]
    t = parse_request_body("openai-responses", items)
    result = _results(t)[0]
    assert (result.text, result.is_error) == ("make: *** No rule\n[exit 2]", True)
    assert t.messages[-1].kind is MessageKind.OBSERVATION and t.messages[-1].metadata == {"orphan_call_id": "call_zz"}


@pytest.mark.parametrize(
    ("body", "location", "reason"),
    [
        ({"input": 5}, "input", "expected a string or an array of items, found a number"),
        ({"input": ["hi"]}, "input[0]", "expected an item object, found a string"),
        ({"input": [{"type": "message", "role": "robot", "content": "x"}]}, "input[0]", "unknown role 'robot'"),
        ({"input": [{"type": "function_call_output", "output": "x"}]}, "input[0]", "function_call_output has no 'call_id'"),
        ({"input": [{"type": "function_call", "call_id": "c"}]}, "input[0]", "function_call has no 'name'"),
        ({"input": [{"role": "user", "content": 7}]}, "input[0].content", "content must be a string or a list of parts, found a number"),
    ],
)
def test_responses_errors_name_the_place(body: dict[str, Any], location: str, reason: str) -> None:
    with pytest.raises(ImportFormatError) as info:
        parse_request_body("openai-responses", body, label="log.json")
    assert (info.value.location, info.value.reason) == (location, reason)


# ------------------------------------------------------------------------ Chat Completions and the shared shape

CHAT_BODY: dict[str, Any] = {
    "model": "gpt-4o",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "List files"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"},
    ],
    "tools": [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object", "properties": {}}}}],
}
CHAT_RESPONSE = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-2024-08-06", "choices": [{"index": 0, "message": {"role": "assistant", "content": "Two files."}, "finish_reason": "stop"}]}


def test_chat_body_with_response() -> None:
    t = parse_request_body("openai-chat", CHAT_BODY, response=CHAT_RESPONSE)
    assert t.format == "openai-chat"
    assert _shape(t)[-2:] == [("tool", "chat", ["tool_result"]), ("assistant", "chat", ["text"])]
    assert t.messages[-1].key == "response" and t.metadata["response"]["id"] == "chatcmpl-1"
    assert t.tools == CHAT_BODY["tools"]


def test_one_entry_point_for_every_provider() -> None:
    bodies = {"openai-chat": CHAT_BODY, "openai-responses": RESPONSES_BODY, "anthropic": ANTHROPIC_BODY}
    assert set(bodies) == set(BODY_PROVIDERS)
    formats = {p: parse_request_body(p, b, label=f"{p}.json") for p, b in bodies.items()}
    assert {p: (t.format, t.path) for p, t in formats.items()} == {
        "openai-chat": ("openai-chat", "openai-chat.json"),
        "openai-responses": ("openai-responses", "openai-responses.json"),
        "anthropic": ("anthropic-messages", "anthropic.json"),
    }
    for provider, body in bodies.items():
        assert detect_body_provider(body) == provider
        again = parse_request_body(provider, json.loads(json.dumps(body)))
        assert again.content_key == parse_request_body(provider, body).content_key
    with pytest.raises(InputError, match=r"unknown provider 'gemini'; expected one of \['openai-chat', 'openai-responses', 'anthropic'\]"):
        parse_request_body("gemini", CHAT_BODY)


def test_deep_bodies_are_refused_in_one_line() -> None:
    deep: Any = "x"
    for _ in range(150):
        deep = [deep]
    body = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {"a": deep}}]}]}
    with pytest.raises(ImportFormatError) as info:
        parse_request_body("anthropic", body, label="req")
    assert str(info.value) == "req: invalid JSON: nesting deeper than 100 levels"


def test_message_list_dialects() -> None:
    assert detect_body_provider([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}]) == "anthropic"
    assert detect_body_provider([{"role": "user", "content": "hi"}]) == "openai-chat"
    assert detect_body_provider({"system": "s", "messages": [{"role": "user", "content": "hi"}]}) == "anthropic"
    assert detect_body_provider([{"type": "function_call_output", "call_id": "c", "output": "x"}]) == "openai-responses"
    with pytest.raises(ImportFormatError, match="not a request body: found keys 'prompt'"):
        detect_body_provider({"prompt": "x"})


# ------------------------------------------------------------------------ files: detection and import


def _write(path: Path, value: Any, jsonl: bool = False) -> Path:
    if jsonl:
        path.write_text("".join(json.dumps(v) + "\n" for v in value), encoding="utf-8")
    else:
        path.write_text(json.dumps(value, indent=1), encoding="utf-8")
    return path


def test_files_are_detected(tmp_path: Path) -> None:
    cases = {
        "anthropic.json": (ANTHROPIC_BODY, False, "anthropic-messages"),
        "anthropic-exchange.json": ({"request": ANTHROPIC_BODY, "response": ANTHROPIC_RESPONSE}, False, "anthropic-messages"),
        # starts with a tool result, then a thinking-only assistant turn: still Messages API
        "anthropic-list.json": (ANTHROPIC_BODY["messages"][2:4], False, "anthropic-messages"),
        "responses.json": (RESPONSES_BODY, False, "openai-responses"),
        "response-object.json": (RESPONSE_OBJECT, False, "openai-responses"),
        "responses-exchange.json": ({"request": RESPONSES_BODY, "response": RESPONSE_OBJECT}, False, "openai-responses"),
        # JSON Lines of items whose first record is an encrypted reasoning item
        "responses.jsonl": (RESPONSES_BODY["input"][2:], True, "openai-responses"),
        "chat-exchange.json": ({"request": CHAT_BODY, "response": CHAT_RESPONSE}, False, "openai-chat"),
    }
    for name, (value, jsonl, expected) in cases.items():
        path = _write(tmp_path / name, value, jsonl)
        assert detect_format(path) == expected, name
        transcript = parse_file(path)
        assert transcript.format == expected and transcript.path == str(path)
        assert transcript.messages, name
    exchange = parse_file(tmp_path / "responses-exchange.json")
    assert exchange.messages[-1].key == "output:0#result"
    lines = parse_file(tmp_path / "responses.jsonl")
    assert lines.messages[0].source_ref == "line 1" and isinstance(lines.messages[0].parts[0], ThinkingPart)


def test_file_errors_name_file_and_item(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.jsonl", [RESPONSES_BODY["input"][3], {"type": "function_call_output", "output": "x"}], jsonl=True)
    with pytest.raises(ImportFormatError) as info:
        parse_file(path)
    assert str(info.value) == f"{path}, line 2: function_call_output has no 'call_id'"


@pytest.mark.parametrize("provider", ["openai-chat", "anthropic"])
def test_imported_bodies_assemble_without_reasoning(tmp_path: Path, provider: str) -> None:
    ledger = Ledger.open(home=tmp_path)
    try:
        paths = [
            _write(tmp_path / "anthropic.json", {"request": ANTHROPIC_BODY, "response": ANTHROPIC_RESPONSE}),
            _write(tmp_path / "responses.json", {"request": RESPONSES_BODY, "response": RESPONSE_OBJECT}),
        ]
        for path in paths:
            result = ledger.import_file(path)
            res = ledger.assemble(result.conversation_id, provider=provider, budget_tokens=4000)
            assert validate_payload(provider, res.payload) == []
            text = json.dumps(res.payload)
            for secret in (SIGNATURE.strip(), REDACTED, ENCRYPTED, "Check config.toml first.", "Read both files."):
                assert json.dumps(secret)[1:-1] not in text
    finally:
        ledger.close()


def test_developer_and_tool_roles_survive() -> None:
    t = parse_request_body("openai-responses", {"input": [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]}]})
    assert t.messages[0].role is Role.DEVELOPER and t.messages[0].parts == [TextPart(text="rules")]


def test_a_record_the_store_refuses_is_named_with_its_file_and_nothing_is_written(tmp_path: Path) -> None:
    body = {"model": "gpt-4.1", "messages": [
        {"role": "user", "content": "List the files."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "x" * 300, "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
    ]}
    path = tmp_path / "long-tool-name.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    led = Ledger.open(home=tmp_path / "home")
    try:
        with pytest.raises(ImportFormatError) as info:
            led.import_file(path)
        assert str(info.value) == f"{path}: tool_calls.tool_name is 300 characters, above its 200-character limit"
        assert led.store.list_conversations(led.scope()) == []
    finally:
        led.close()
