"""Serialize any neutral request — well paired or not — so it can be counted and validated.

Peer strategies legitimately produce sequences the strict serializers refuse (an orphan
tool result at the head of a window, a call whose result fell out of it).  The benchmark
must still count what such a peer would send and then *score* its validity, so
:func:`lenient_payload` renders the request to the provider's wire shape without any
pairing or order checks and :func:`~contextledger.providers.registry.validate_payload`
reports what is broken (issue "Prove it": provider validity per strategy × scenario).

Rules of the lenient rendering (same shapes as the strict serializers,
:mod:`contextledger.providers.openai_chat`, :mod:`contextledger.providers.anthropic` and
:mod:`contextledger.providers.openai_responses`):

* a request the strict serializer accepts is serialized strictly — byte-identical;
* otherwise every neutral message is rendered *where it stands*: nothing is moved,
  paired, dropped or invented (except Anthropic's merge of consecutive same-role
  messages and its ``"(continuing)"`` opener, which the strict path applies too);
* tool results inside ``tool`` messages become OpenAI ``tool`` messages, Anthropic
  ``tool_result`` blocks in a user message or Responses ``function_call_output`` items;
  call ids go through
  :func:`~contextledger.providers.openai_chat.safe_identifier` without collision checks;
* thinking parts are left out (no provider receives them); images and binaries become
  their placeholder text;
* tool schemas: the strict :func:`~contextledger.providers.openai_chat.declared_tools`
  list, or — when it refuses the request — the declared schemas plus a minimal schema
  per called tool, names unchecked.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from contextledger.errors import ProviderSerializationError
from contextledger.providers.anthropic import (
    ANTHROPIC_ID_MAX_LENGTH,
    CONTINUATION_TEXT,
    parse_tool_input,
)
from contextledger.providers.base import NeutralRequest, ToolSchema, speaker_labelled
from contextledger.providers.openai_chat import (
    MISSING_SCHEMA_DESCRIPTION,
    OPENAI_CALL_ID_MAX_LENGTH,
    TOOL_ERROR_MARK,
    declared_tools,
    image_placeholder,
    safe_identifier,
    text_of,
)
from contextledger.providers.openai_responses import OPENAI_RESPONSES_CALL_ID_MAX_LENGTH
from contextledger.providers.registry import serialize
from contextledger.records.parts import (
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["lenient_payload", "payload_json", "render_anthropic", "render_openai_chat", "render_openai_responses"]


def _wire_id(call_id: str, max_length: int) -> str:
    try:
        return safe_identifier(call_id, max_length)
    except ValueError:  # pragma: no cover - max_length constants are > 8
        return call_id


def _tools(request: NeutralRequest) -> list[ToolSchema]:
    try:
        return declared_tools(request)
    except ProviderSerializationError:
        by_name = {t.name: t for t in request.tools}
        for m in request.messages:
            for p in m.parts:
                if isinstance(p, ToolCallPart) and p.tool_name not in by_name:
                    by_name[p.tool_name] = ToolSchema(name=p.tool_name, description=MISSING_SCHEMA_DESCRIPTION, parameters={"type": "object"})
        return [by_name[k] for k in sorted(by_name)]




def _result_text(result: ToolResultPart) -> str:
    texts = [result.text] if result.text else []
    texts.extend(image_placeholder(i) for i in result.images)
    return "\n".join(texts)


def render_openai_chat(request: NeutralRequest) -> dict[str, Any]:
    """Chat Completions ``messages``/``tools`` for ``request`` with no pairing checks.

    Shapes follow :mod:`contextledger.providers.openai_chat`; see the module docstring
    for what is (not) checked.  Never raises for a well-typed request.
    """
    messages: list[dict[str, Any]] = []
    system = "\n\n".join(b for b in request.system if b.strip())
    if system:
        messages.append({"role": "system", "content": system})
    for m in request.messages:
        texts = [t for t in (text_of(p) for p in m.parts) if t is not None]
        calls = [p for p in m.parts if isinstance(p, ToolCallPart)]
        results = [p for p in m.parts if isinstance(p, ToolResultPart)]
        if m.role != "tool" or texts or calls:
            role = "user" if m.role == "tool" else m.role
            head: dict[str, Any] = {"role": role}
            if m.name:
                head["name"] = safe_identifier(m.name)
            text = speaker_labelled("\n".join(texts), m.name if m.role != "tool" else None)
            head["content"] = text if text or not calls else None
            if calls:
                head["tool_calls"] = [
                    {"id": _wire_id(c.call_id, OPENAI_CALL_ID_MAX_LENGTH), "type": "function", "function": {"name": safe_identifier(c.tool_name), "arguments": c.arguments_json}}
                    for c in calls
                ]
            if texts or calls or not results:
                messages.append(head)
        for r in results:
            body = _result_text(r)
            if r.is_error:
                body = TOOL_ERROR_MARK + ("\n" + body if body else "")
            messages.append({"role": "tool", "tool_call_id": _wire_id(r.call_id, OPENAI_CALL_ID_MAX_LENGTH), "content": body})
    payload: dict[str, Any] = {"messages": messages}
    tools = _tools(request)
    if tools:
        payload["tools"] = [
            {"type": "function", "function": {"name": t.name, **({"description": t.description} if t.description else {}), "parameters": copy.deepcopy(t.parameters)}}
            for t in tools
        ]
    return payload


def render_anthropic(request: NeutralRequest) -> dict[str, Any]:
    """Messages API ``system``/``messages``/``tools`` for ``request`` with no pairing checks.

    Shapes follow :mod:`contextledger.providers.anthropic`; tool results stay where they
    stand (as ``tool_result`` blocks of a user message).  Never raises for a well-typed
    request.
    """
    entries: list[tuple[str, list[dict[str, Any]]]] = []
    for m in request.messages:
        blocks: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        for p in m.parts:
            text = text_of(p)
            if text is not None:
                if text.strip():
                    blocks.append({"type": "text", "text": text})
            elif isinstance(p, ToolCallPart):
                blocks.append({"type": "tool_use", "id": _wire_id(p.call_id, ANTHROPIC_ID_MAX_LENGTH), "name": safe_identifier(p.tool_name), "input": parse_tool_input(p.arguments_json)})
            elif isinstance(p, ToolResultPart):
                block: dict[str, Any] = {"type": "tool_result", "tool_use_id": _wire_id(p.call_id, ANTHROPIC_ID_MAX_LENGTH)}
                body = _result_text(p)
                if body.strip():
                    block["content"] = body
                if p.is_error:
                    block["is_error"] = True
                results.append(block)
        if m.name and m.role != "tool":
            first = next((b for b in blocks if b["type"] == "text"), None)
            if first is not None:
                first["text"] = speaker_labelled(first["text"], m.name)
            else:
                blocks.insert(0, {"type": "text", "text": speaker_labelled("", m.name)})
        if results:
            entries.append(("user", results))
        if blocks:
            entries.append(("user" if m.role == "tool" else str(m.role), blocks))
    messages: list[dict[str, Any]] = []
    for role, blocks in entries:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    if messages and messages[0]["role"] == "assistant":
        messages.insert(0, {"role": "user", "content": [{"type": "text", "text": CONTINUATION_TEXT}]})
    payload: dict[str, Any] = {}
    system = "\n\n".join(b for b in request.system if b.strip())
    if system:
        payload["system"] = system
    payload["messages"] = messages
    tools = _tools(request)
    if tools:
        payload["tools"] = [
            {"name": t.name, **({"description": t.description} if t.description else {}), "input_schema": copy.deepcopy(t.parameters)} for t in tools
        ]
    return payload


def render_openai_responses(request: NeutralRequest) -> dict[str, Any]:
    """Responses ``instructions``/``input``/``tools`` for ``request`` with no pairing checks.

    Shapes follow :mod:`contextledger.providers.openai_responses`; each neutral message
    becomes its items where it stands (a tool message's results become
    ``function_call_output`` items, any text of it a user message).  Never raises for a
    well-typed request.
    """
    items: list[dict[str, Any]] = []
    for m in request.messages:
        texts = [t for t in (text_of(p) for p in m.parts) if t is not None]
        calls = [p for p in m.parts if isinstance(p, ToolCallPart)]
        results = [p for p in m.parts if isinstance(p, ToolResultPart)]
        text = "\n".join(texts)
        if m.name and m.role != "tool":
            text = speaker_labelled(text, m.name)
        if text or (not calls and not results):
            items.append({"type": "message", "role": "assistant" if m.role == "assistant" else "user", "content": text})
        items.extend(
            {"type": "function_call", "call_id": _wire_id(c.call_id, OPENAI_RESPONSES_CALL_ID_MAX_LENGTH), "name": safe_identifier(c.tool_name), "arguments": c.arguments_json}
            for c in calls
        )
        for r in results:
            body = _result_text(r)
            if r.is_error:
                body = TOOL_ERROR_MARK + ("\n" + body if body else "")
            items.append({"type": "function_call_output", "call_id": _wire_id(r.call_id, OPENAI_RESPONSES_CALL_ID_MAX_LENGTH), "output": body})
    payload: dict[str, Any] = {}
    system = "\n\n".join(b for b in request.system if b.strip())
    if system:
        payload["instructions"] = system
    payload["input"] = items
    tools = _tools(request)
    if tools:
        payload["tools"] = [
            {"type": "function", "name": t.name, **({"description": t.description} if t.description else {}), "parameters": copy.deepcopy(t.parameters), "strict": False}
            for t in tools
        ]
    return payload


_RENDERERS = {"openai-chat": render_openai_chat, "anthropic": render_anthropic, "openai-responses": render_openai_responses}


def lenient_payload(provider: str, request: NeutralRequest) -> tuple[dict[str, Any], bool]:
    """``(payload, strict)``: the strict serialization when it succeeds (``strict=True``),
    else the lenient rendering of this module (``strict=False``).

    Raises:
        InputError: unknown provider.
    """
    try:
        return serialize(provider, request), True
    except ProviderSerializationError:
        pass
    render = _RENDERERS.get(str(provider))
    if render is None:
        serialize(provider, request)  # raises InputError for an unknown provider
        raise AssertionError("unreachable")  # pragma: no cover
    return render(request), False


def payload_json(payload: dict[str, Any]) -> str:
    """Canonical JSON of a payload (sorted keys, UTF-8 kept) for hashing and display."""
    return json.dumps(payload, sort_keys=True, ensure_ascii=False)
