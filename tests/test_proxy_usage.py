"""The upstream's reported usage, read from answers in each provider's own format (JSON
bodies and SSE streams written after the providers' API references) and normalised to
one shape: input (cached included), cache read, cache write, output, and the raw object."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextledger.server.proxy.anthropic import AnthropicDialect
from contextledger.server.proxy.dialect import Answer, Dialect
from contextledger.server.proxy.openai_chat import OpenAIChatDialect
from contextledger.server.proxy.openai_responses import OpenAIResponsesDialect
from contextledger.server.proxy.sse import SseParser
from contextledger.server.proxy.usage import upstream_usage, with_stream_usage

MESSAGES_REQUEST = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": [{"role": "user", "content": "Say hello."}]}
CHAT_REQUEST = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Say hello."}], "stream": True}
RESPONSES_REQUEST = {"model": "gpt-4.1", "input": [{"role": "user", "content": "Say hello."}]}


def _sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = ""
    for name, data in events:
        out += (f"event: {name}\n" if name else "") + "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n"
    return out.encode()


def _streamed(dialect: Dialect, request: dict[str, Any], stream: bytes, chunk: int = 7) -> Answer:
    """The answer ``dialect`` reads from ``stream`` fed in ``chunk``-byte pieces."""
    parsed = dialect.parse(request)
    acc, parser = dialect.answer_stream(parsed), SseParser()
    for i in range(0, len(stream), chunk):
        for event in parser.feed(stream[i:i + chunk]):
            acc.event(event)
    answer = acc.answer()
    assert answer is not None and acc.ended()
    return answer


# -- Anthropic Messages ----------------------------------------------------------------------
MESSAGES_JSON = {
    "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "Hello!"}], "stop_reason": "end_turn", "stop_sequence": None,
    "usage": {"input_tokens": 2095, "cache_creation_input_tokens": 2051, "cache_read_input_tokens": 0,
              "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 2051}, "output_tokens": 503, "service_tier": "standard"},
}


def test_anthropic_json_usage() -> None:
    dialect = AnthropicDialect()
    answer = dialect.answer_from_json(dialect.parse(MESSAGES_REQUEST), MESSAGES_JSON)
    assert upstream_usage("anthropic", answer.usage) == {
        "input_tokens": 4146, "cached_read_tokens": 0, "cache_write_tokens": 2051, "output_tokens": 503,
        "cache_write_5m_tokens": 0, "cache_write_1h_tokens": 2051, "raw": MESSAGES_JSON["usage"],
    }


def test_anthropic_stream_usage_from_message_start_and_message_delta() -> None:
    start_usage = {"input_tokens": 12, "cache_creation_input_tokens": 310, "cache_read_input_tokens": 18204,
                   "cache_creation": {"ephemeral_5m_input_tokens": 310, "ephemeral_1h_input_tokens": 0}, "output_tokens": 1, "service_tier": "standard"}
    stream = _sse([
        ("message_start", {"type": "message_start", "message": {"id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY", "type": "message", "role": "assistant", "content": [],
                                                               "model": "claude-sonnet-4-5", "stop_reason": None, "stop_sequence": None, "usage": start_usage}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("ping", {"type": "ping"}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "!"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 15}}),
        ("message_stop", {"type": "message_stop"}),
    ])
    usage = upstream_usage("anthropic", _streamed(AnthropicDialect(), {**MESSAGES_REQUEST, "stream": True}, stream).usage)
    assert usage is not None
    assert {k: v for k, v in usage.items() if k != "raw"} == {
        "input_tokens": 18526, "cached_read_tokens": 18204, "cache_write_tokens": 310, "output_tokens": 15,
        "cache_write_5m_tokens": 310, "cache_write_1h_tokens": 0,
    }
    assert usage["raw"] == {**start_usage, "output_tokens": 15}  # message_delta's cumulative count wins


def test_anthropic_stream_without_cache_fields() -> None:
    stream = _sse([
        ("message_start", {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5",
                                                               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 25, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 6}}),
        ("message_stop", {"type": "message_stop"}),
    ])
    usage = upstream_usage("anthropic", _streamed(AnthropicDialect(), {**MESSAGES_REQUEST, "stream": True}, stream).usage)
    assert usage == {"input_tokens": 25, "cached_read_tokens": 0, "cache_write_tokens": 0, "output_tokens": 6, "raw": {"input_tokens": 25, "output_tokens": 6}}


# -- OpenAI Chat Completions -----------------------------------------------------------------
CHAT_USAGE = {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306, "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
              "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}


def test_chat_json_usage() -> None:
    dialect = OpenAIChatDialect()
    body = {"id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object": "chat.completion", "created": 1741569952, "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello!", "refusal": None, "annotations": []}, "logprobs": None, "finish_reason": "stop"}],
            "usage": CHAT_USAGE, "service_tier": "default"}
    answer = dialect.answer_from_json(dialect.parse({**CHAT_REQUEST, "stream": False}), body)
    assert upstream_usage("openai-chat", answer.usage) == {"input_tokens": 2006, "cached_read_tokens": 1920, "cache_write_tokens": 0, "output_tokens": 300, "raw": CHAT_USAGE}


def _chat_chunks(usage: dict[str, Any] | None) -> bytes:
    base = {"id": "chatcmpl-123", "object": "chat.completion.chunk", "created": 1694268190, "model": "gpt-4o-mini", "system_fingerprint": "fp_44709d6fcb"}
    tail = {"usage": None} if usage is not None else {}
    events: list[tuple[str | None, Any]] = [
        (None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}], **tail}),
        (None, {**base, "choices": [{"index": 0, "delta": {"content": "Hello"}, "logprobs": None, "finish_reason": None}], **tail}),
        (None, {**base, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}], **tail}),
    ]
    if usage is not None:
        events.append((None, {**base, "choices": [], "usage": usage}))
    return _sse([*events, (None, "[DONE]")])


def test_chat_stream_usage_with_include_usage() -> None:
    usage = {"prompt_tokens": 1200, "completion_tokens": 12, "total_tokens": 1212, "prompt_tokens_details": {"cached_tokens": 1024}}
    request = {**CHAT_REQUEST, "stream_options": {"include_usage": True}}
    got = upstream_usage("openai-chat", _streamed(OpenAIChatDialect(), request, _chat_chunks(usage)).usage)
    assert got == {"input_tokens": 1200, "cached_read_tokens": 1024, "cache_write_tokens": 0, "output_tokens": 12, "raw": usage}


def test_chat_stream_without_include_usage_has_no_usage() -> None:
    answer = _streamed(OpenAIChatDialect(), CHAT_REQUEST, _chat_chunks(None))
    assert answer.messages and upstream_usage("openai-chat", answer.usage) is None


# -- OpenAI Responses ----------------------------------------------------------------------
RESPONSES_USAGE = {"input_tokens": 2329, "input_tokens_details": {"cached_tokens": 2048}, "output_tokens": 41, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2370}


def _response(usage: dict[str, Any] | None, status: str = "completed") -> dict[str, Any]:
    message = {"type": "message", "id": "msg_67ccd3acc8d48190a77525dc6de64b4104becd04e1a1d6b1", "status": "completed", "role": "assistant",
               "content": [{"type": "output_text", "text": "Hello!", "annotations": []}]}
    return {"id": "resp_67ccd3a9da748190baa7f1570fe91ac604becb25c2fa0cd0", "object": "response", "created_at": 1741476777, "status": status,
            "model": "gpt-4.1-2025-04-14", "output": [message] if status == "completed" else [], "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "error": None, "incomplete_details": None, "usage": usage}


def test_responses_json_usage() -> None:
    dialect = OpenAIResponsesDialect()
    answer = dialect.answer_from_json(dialect.parse(RESPONSES_REQUEST), _response(RESPONSES_USAGE))
    assert upstream_usage("openai-responses", answer.usage) == {"input_tokens": 2329, "cached_read_tokens": 2048, "cache_write_tokens": 0, "output_tokens": 41, "raw": RESPONSES_USAGE}


def test_responses_stream_usage_from_response_completed() -> None:
    done = _response(RESPONSES_USAGE)
    item = done["output"][0]
    stream = _sse([
        ("response.created", {"type": "response.created", "sequence_number": 0, "response": _response(None, "in_progress")}),
        ("response.in_progress", {"type": "response.in_progress", "sequence_number": 1, "response": _response(None, "in_progress")}),
        ("response.output_item.added", {"type": "response.output_item.added", "sequence_number": 2, "output_index": 0, "item": {**item, "status": "in_progress", "content": []}}),
        ("response.content_part.added", {"type": "response.content_part.added", "sequence_number": 3, "item_id": item["id"], "output_index": 0, "content_index": 0,
                                         "part": {"type": "output_text", "text": "", "annotations": []}}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": 4, "item_id": item["id"], "output_index": 0, "content_index": 0, "delta": "Hello!"}),
        ("response.output_text.done", {"type": "response.output_text.done", "sequence_number": 5, "item_id": item["id"], "output_index": 0, "content_index": 0, "text": "Hello!"}),
        ("response.output_item.done", {"type": "response.output_item.done", "sequence_number": 6, "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "sequence_number": 7, "response": done}),
    ])
    usage = upstream_usage("openai-responses", _streamed(OpenAIResponsesDialect(), {**RESPONSES_REQUEST, "stream": True}, stream).usage)
    assert usage == {"input_tokens": 2329, "cached_read_tokens": 2048, "cache_write_tokens": 0, "output_tokens": 41, "raw": RESPONSES_USAGE}


# -- the rule over malformed and absent counts ------------------------------------------------
@pytest.mark.parametrize(("dialect", "raw"), [
    ("anthropic", {}), ("anthropic", None), ("anthropic", "12"), ("openai-chat", {"total_tokens": 9}),
    ("openai-responses", {"input_tokens": -1, "output_tokens": True}), ("gemini", {"input_tokens": 5}),
])
def test_no_usage_without_a_count(dialect: str, raw: Any) -> None:
    assert upstream_usage(dialect, raw) is None


def test_malformed_counts_count_zero() -> None:
    raw = {"input_tokens": 40, "cache_read_input_tokens": "many", "cache_creation_input_tokens": -3, "output_tokens": 2.5, "cache_creation": {"ephemeral_1h_input_tokens": 7}}
    assert upstream_usage("anthropic", raw) == {"input_tokens": 40, "cached_read_tokens": 0, "cache_write_tokens": 0, "output_tokens": 0, "cache_write_1h_tokens": 7, "raw": raw}


def test_stream_usage_option_added_only_to_streamed_chat_requests_without_it() -> None:
    assert with_stream_usage("openai-chat", CHAT_REQUEST) == {**CHAT_REQUEST, "stream_options": {"include_usage": True}}
    keep = {**CHAT_REQUEST, "stream_options": {"include_usage": False}}
    assert with_stream_usage("openai-chat", keep) is keep  # the client's explicit choice stands
    assert with_stream_usage("openai-chat", {**CHAT_REQUEST, "stream_options": {"include_obfuscation": False}})["stream_options"] == {"include_obfuscation": False, "include_usage": True}
    plain = {**CHAT_REQUEST, "stream": False}
    assert with_stream_usage("openai-chat", plain) is plain
    assert with_stream_usage("anthropic", {**MESSAGES_REQUEST, "stream": True}) == {**MESSAGES_REQUEST, "stream": True}
