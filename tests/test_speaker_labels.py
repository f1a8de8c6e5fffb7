"""Speaker attribution in every wire format: a message from a named participant carries
``[label] `` in its text in Chat Completions, Anthropic Messages and OpenAI Responses
(:func:`~contextledger.providers.base.speaker_labelled`); Chat Completions sends the
``name`` field too, which the OpenAI SDK's message types declare for user and assistant
messages.  The label's tokens are counted where pieces are costed."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from contextledger.assembly.pieces import message_cost
from contextledger.providers.base import NeutralRequest, WireMessage, speaker_labelled
from contextledger.providers.counting import count_openai_responses_tokens
from contextledger.providers.registry import serialize, validate_payload
from contextledger.records.parts import ImagePart, TextPart, ToolCallPart, ToolResultPart
from contextledger.tokens import get_tokenizer

PNG_URL = "https://example.com/chart.png"


def _request() -> NeutralRequest:
    return NeutralRequest(
        system=("Moderated debate.",),
        messages=(
            WireMessage(role="user", parts=(TextPart(text="Topic: tabs or spaces?"),), name="moderator"),
            WireMessage(role="assistant", parts=(TextPart(text="Spaces."),), name="pro"),
            WireMessage(role="assistant", parts=(ToolCallPart(call_id="c1", tool_name="count_votes", arguments_json="{}"),), name="con"),
            WireMessage(role="tool", parts=(ToolResultPart(call_id="c1", text="12 to 9"),)),
            WireMessage(role="user", parts=(ImagePart(media_type="image/png", url=PNG_URL), TextPart(text="Closing statements.")), name="moderator"),
        ),
    )


def test_speaker_labelled() -> None:
    assert [speaker_labelled("Spaces.", "pro"), speaker_labelled("", "pro"), speaker_labelled("Spaces.", None), speaker_labelled("Spaces.", "")] == [
        "[pro] Spaces.", "[pro]", "Spaces.", "Spaces.",
    ]


def test_chat_completions_carries_the_label_in_the_text_and_the_name() -> None:
    payload = serialize("openai-chat", _request())
    assert validate_payload("openai-chat", payload) == []
    assert payload["messages"] == [
        {"role": "system", "content": "Moderated debate."},
        {"role": "user", "name": "moderator", "content": "[moderator] Topic: tabs or spaces?"},
        {"role": "assistant", "name": "pro", "content": "[pro] Spaces."},
        {"role": "assistant", "name": "con", "content": "[con]", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "count_votes", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "12 to 9"},
        {"role": "user", "name": "moderator", "content": [{"type": "image_url", "image_url": {"url": PNG_URL}}, {"type": "text", "text": "[moderator] Closing statements."}]},
    ]


def test_anthropic_and_responses_carry_the_same_label_text() -> None:
    anthropic = serialize("anthropic", _request())
    assert validate_payload("anthropic", anthropic) == []
    assert [[b.get("text") for b in m["content"] if b["type"] == "text"] for m in anthropic["messages"]] == [
        ["[moderator] Topic: tabs or spaces?"], ["[pro] Spaces.", "[con]"], ["[moderator] Closing statements."],
    ]
    responses = serialize("openai-responses", _request())
    assert validate_payload("openai-responses", responses) == []
    assert [i.get("content") for i in responses["input"] if i["type"] == "message"] == [
        "[moderator] Topic: tabs or spaces?", "[pro] Spaces.", "[con]",
        [{"type": "input_image", "image_url": PNG_URL, "detail": "auto"}, {"type": "input_text", "text": "[moderator] Closing statements."}],
    ]


def test_chat_messages_pass_the_openai_sdk_message_types() -> None:
    """Each message validated by the SDK's TypedDict of its role comes back unchanged: every
    key it sends (``name`` on user and assistant messages included) is one the SDK
    declares (an unknown key would be dropped)."""
    types = pytest.importorskip("openai.types.chat")
    by_role: dict[str, Any] = {
        "system": types.ChatCompletionSystemMessageParam, "user": types.ChatCompletionUserMessageParam,
        "assistant": types.ChatCompletionAssistantMessageParam, "tool": types.ChatCompletionToolMessageParam,
    }
    for m in serialize("openai-chat", _request())["messages"]:
        back = pydantic.TypeAdapter(by_role[m["role"]]).validate_python(m, strict=True)
        # ``Iterable`` fields (content parts, tool calls) come back as lazy validators
        assert {k: v if isinstance(v, (str, type(None))) else list(v) for k, v in back.items()} == m
    assert "name" in types.ChatCompletionUserMessageParam.__annotations__
    assert "name" in types.ChatCompletionAssistantMessageParam.__annotations__


def test_message_cost_counts_the_label_text_and_the_name() -> None:
    """The label's cost in a piece: the tokens the ``[label] `` prefix adds to the text
    (what the Responses count of the payload adds too), plus the Chat ``name`` field (its
    tokens and one); a message with no text counts the text ``[label]``."""
    tok = get_tokenizer()
    text = "Electric buses cut per-km energy cost by 62%."

    def responses(msg: WireMessage) -> int:
        return count_openai_responses_tokens(serialize("openai-responses", NeutralRequest(messages=(msg,))))

    plain = WireMessage(role="assistant", parts=(TextPart(text=text),))
    labelled = WireMessage(role="assistant", parts=(TextPart(text=text),), name="pro")
    prefix = tok.count("[pro] " + text) - tok.count(text)
    assert prefix == responses(labelled) - responses(plain) > 0
    assert message_cost(tok, [labelled]) - message_cost(tok, [plain]) == prefix + tok.count("pro") + 1
    call = (ToolCallPart(call_id="c1", tool_name="count_votes", arguments_json="{}"),)
    only_call, labelled_call = WireMessage(role="assistant", parts=call), WireMessage(role="assistant", parts=call, name="pro")
    assert message_cost(tok, [labelled_call]) - message_cost(tok, [only_call]) == tok.count("[pro]") + tok.count("pro") + 1
