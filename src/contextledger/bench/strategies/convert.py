"""Converters between the neutral request and the peers' own message types.

Three peer formats (seed 000, benchmark "strategies compared side by side"):

* LangChain (``langchain_core.messages``): ``SystemMessage`` per system block,
  ``HumanMessage``, ``AIMessage`` with ``tool_calls``, ``ToolMessage``.
* autogen-core (``autogen_core.models``): ``UserMessage``, ``AssistantMessage`` (text, or a
  list of ``FunctionCall`` with accompanying text in ``thought`` as autogen's
  ``AssistantAgent`` stores it), ``FunctionExecutionResultMessage`` (one per run of
  consecutive tool messages, as autogen groups parallel results), ``SystemMessage``.
* OpenAI Responses input items (``agents.TResponseInputItem``): ``message`` items,
  ``function_call`` and ``function_call_output`` items.

Lossless for text, tool calls (call id, tool name, exact argument text) and tool results
(call id, text, ``is_error``): ``from_x(to_x(r))`` gives back ``r``'s system blocks and
messages, except for the fields a format has no slot for (listed per function).  Parts a
format cannot express natively (thinking, images, binaries, several text parts, a result's
``artifact_id``/images, OpenAI's missing error flag) travel as a text piece that starts with
:data:`PARTS_MARKER` followed by JSON; peers treat it as opaque text and the reverse
conversion restores the typed parts.  Tool calls are placed after a message's other parts.

Conversions never repair: an orphan result or an unanswered call a peer produced is
converted as it is, so the benchmark's validator sees it.  Messages a peer invents (a
summary, a "Skipped n messages." placeholder) come back as user text (or system text for a
system message).

Errors: :class:`~contextledger.errors.InputError` for a peer message type or item type the
converters do not know.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from autogen_core import FunctionCall
from autogen_core.models import (
    AssistantMessage,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    SystemMessage,
    UserMessage,
)
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages import SystemMessage as LcSystemMessage
from langchain_core.messages.tool import ToolCall
from pydantic import TypeAdapter

from contextledger.errors import InputError
from contextledger.providers.base import NeutralRequest, WireMessage
from contextledger.records.parts import ImagePart, Part, TextPart, ToolCallPart, ToolResultPart

__all__ = [
    "LC_ARGUMENTS_KEY",
    "LC_REF_KEY",
    "PARTS_MARKER",
    "decode_parts",
    "decode_result",
    "encode_parts",
    "encode_result",
    "from_autogen",
    "from_langchain",
    "from_openai_items",
    "to_autogen",
    "to_langchain",
    "to_openai_items",
]

PARTS_MARKER = "\x00contextledger-parts\x00"
"""Prefix of a text piece that carries typed parts (or result extras) as JSON."""
LC_ARGUMENTS_KEY = "contextledger_arguments"
"""``AIMessage.additional_kwargs`` key holding ``{call_id: exact argument text}``."""
LC_REF_KEY = "contextledger_ref"
"""``additional_kwargs`` key holding the neutral message's ``ref``."""

_PARTS = TypeAdapter(list[Part])
_IMAGES = TypeAdapter(list[ImagePart])


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def encode_parts(parts: Sequence[Part]) -> str:
    """One text carrying ``parts`` (no tool calls or results among them).

    A single non-empty :class:`TextPart` is its own text; no parts give ``""``; anything
    else is :data:`PARTS_MARKER` + the JSON list of the parts.
    """
    if not parts:
        return ""
    first = parts[0]
    if len(parts) == 1 and isinstance(first, TextPart) and first.text and not first.text.startswith(PARTS_MARKER):
        return first.text
    return PARTS_MARKER + _dumps([p.model_dump(mode="json") for p in parts])


def decode_parts(text: str) -> tuple[Part, ...]:
    """Inverse of :func:`encode_parts`; plain text becomes one :class:`TextPart`, ``""`` none."""
    if not text:
        return ()
    if text.startswith(PARTS_MARKER):
        return tuple(_PARTS.validate_json(text[len(PARTS_MARKER) :]))
    return (TextPart(text=text),)


def encode_result(part: ToolResultPart, *, carry_error: bool) -> str:
    """The text a peer sees for a tool result.

    ``part.text`` (``""`` when ``None``), followed by :data:`PARTS_MARKER` + JSON extras when
    the result has an ``artifact_id``, images, ``text=None`` or — with ``carry_error``, for
    formats without an error flag — ``is_error=True``.
    """
    extras: dict[str, Any] = {}
    if part.text is None:
        extras["text_none"] = True
    if part.artifact_id is not None:
        extras["artifact_id"] = part.artifact_id
    if part.images:
        extras["images"] = [i.model_dump(mode="json") for i in part.images]
    if carry_error and part.is_error:
        extras["is_error"] = True
    text = part.text or ""
    return text + PARTS_MARKER + _dumps(extras) if extras else text


def decode_result(call_id: str, text: str, *, is_error: bool | None) -> ToolResultPart:
    """Inverse of :func:`encode_result`; ``is_error=None`` reads the flag from the extras."""
    body, marker, raw = text.partition(PARTS_MARKER)
    extras: dict[str, Any] = json.loads(raw) if marker else {}
    return ToolResultPart(
        call_id=call_id,
        text=None if extras.get("text_none") else body,
        artifact_id=extras.get("artifact_id"),
        images=tuple(_IMAGES.validate_python(extras.get("images", []))),
        is_error=bool(extras.get("is_error", False)) if is_error is None else is_error,
    )


def _split(message: WireMessage) -> tuple[list[Part], list[ToolCallPart], list[ToolResultPart]]:
    other: list[Part] = []
    calls: list[ToolCallPart] = []
    results: list[ToolResultPart] = []
    for part in message.parts:
        if isinstance(part, ToolCallPart):
            calls.append(part)
        elif isinstance(part, ToolResultPart):
            results.append(part)
        else:
            other.append(part)
    return other, calls, results


def _single_result(message: WireMessage, index: int) -> ToolResultPart:
    other, calls, results = _split(message)
    if len(results) != 1 or other or calls:
        raise InputError(f"messages[{index}]: a tool message must hold exactly one tool result")
    return results[0]


# --------------------------------------------------------------------------- LangChain


def _lc_args(arguments_json: str) -> dict[str, Any]:
    try:
        parsed = json.loads(arguments_json)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def to_langchain(request: NeutralRequest, *, include_system: bool = True) -> list[AnyMessage]:
    """LangChain messages for ``request`` (system blocks first when ``include_system``).

    Message ids are ``"m<index>"`` (index into ``request.messages``; system blocks get
    ``"s<index>"``) so LangChain code that needs ids does not draw random ones.  ``name`` is
    carried in ``name``, ``ref`` in ``additional_kwargs[LC_REF_KEY]``, exact argument text in
    ``additional_kwargs[LC_ARGUMENTS_KEY]`` (``args`` holds the parsed JSON object, ``{}``
    when the text is not a JSON object), ``is_error`` as ``ToolMessage.status == "error"``.

    Raises:
        InputError: a tool message that does not hold exactly one result.
    """
    out: list[AnyMessage] = []
    if include_system:
        out.extend(LcSystemMessage(content=block, id=f"s{i}") for i, block in enumerate(request.system))
    for index, message in enumerate(request.messages):
        kwargs: dict[str, Any] = {LC_REF_KEY: message.ref} if message.ref is not None else {}
        if message.role == "tool":
            part = _single_result(message, index)
            out.append(
                ToolMessage(
                    content=encode_result(part, carry_error=False),
                    tool_call_id=part.call_id,
                    status="error" if part.is_error else "success",
                    name=message.name,
                    id=f"m{index}",
                    additional_kwargs=kwargs,
                )
            )
            continue
        other, calls, results = _split(message)
        if results:
            raise InputError(f"messages[{index}]: a tool result outside a tool message")
        text = encode_parts(other)
        if message.role == "user":
            if calls:
                raise InputError(f"messages[{index}]: only assistant messages may call tools")
            out.append(HumanMessage(content=text, name=message.name, id=f"m{index}", additional_kwargs=kwargs))
            continue
        tool_calls = [
            ToolCall(name=c.tool_name, args=_lc_args(c.arguments_json), id=c.call_id, type="tool_call")
            for c in calls
        ]
        if calls:
            kwargs[LC_ARGUMENTS_KEY] = {c.call_id: c.arguments_json for c in calls}
        out.append(
            AIMessage(
                content=text,
                tool_calls=tool_calls,
                name=message.name,
                id=f"m{index}",
                additional_kwargs=kwargs,
            )
        )
    return out


def _lc_text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return message.text


def _lc_arguments(message: AIMessage, call: ToolCall) -> str:
    call_id = call.get("id") or ""
    raw_by_id = message.additional_kwargs.get(LC_ARGUMENTS_KEY, {})
    cleared = message.response_metadata.get("context_editing", {}).get("cleared_tool_inputs", [])
    raw = raw_by_id.get(call_id)
    if isinstance(raw, str) and call_id not in cleared and _lc_args(raw) == call["args"]:
        return raw
    return _dumps(call["args"])


def from_langchain(messages: Sequence[BaseMessage]) -> tuple[tuple[str, ...], tuple[WireMessage, ...]]:
    """System blocks and neutral messages of LangChain ``messages``.

    Every ``SystemMessage`` becomes a system block (in order).  A message a peer created
    (summary ``HumanMessage``) becomes a user message.  Argument text is the original text
    when the peer left ``args`` unchanged, else the compact JSON of the new ``args``.

    Raises:
        InputError: a message type other than system/human/AI/tool.
    """
    system: list[str] = []
    out: list[WireMessage] = []
    for index, message in enumerate(messages):
        ref = message.additional_kwargs.get(LC_REF_KEY)
        ref = ref if isinstance(ref, str) else None
        if isinstance(message, LcSystemMessage):
            system.append(_lc_text(message))
        elif isinstance(message, HumanMessage):
            out.append(WireMessage(role="user", parts=decode_parts(_lc_text(message)), name=message.name, ref=ref))
        elif isinstance(message, AIMessage):
            calls = tuple(
                ToolCallPart(call_id=c.get("id") or "", tool_name=c["name"], arguments_json=_lc_arguments(message, c))
                for c in message.tool_calls
            )
            parts = decode_parts(_lc_text(message)) + calls
            out.append(WireMessage(role="assistant", parts=parts, name=message.name, ref=ref))
        elif isinstance(message, ToolMessage):
            result = decode_result(message.tool_call_id, _lc_text(message), is_error=message.status == "error")
            out.append(WireMessage(role="tool", parts=(result,), name=message.name, ref=ref))
        else:
            raise InputError(f"LangChain message {index}: unsupported type {type(message).__name__}")
    return tuple(system), tuple(out)


# --------------------------------------------------------------------------- autogen


def to_autogen(request: NeutralRequest, *, include_system: bool = False) -> list[LLMMessage]:
    """autogen-core messages for ``request`` (system blocks first only when ``include_system``).

    autogen's ``AssistantAgent`` keeps its system messages outside the model context and
    prepends them per call, hence ``include_system=False`` by default.  ``name`` travels in
    ``source`` (``""`` for none); ``ref`` is not carried.  Consecutive tool messages form one
    ``FunctionExecutionResultMessage``; each result's ``name`` is the tool name of the call
    with the same id earlier in ``request`` (``""`` when there is none).

    Raises:
        InputError: a tool message that does not hold exactly one result, or tool calls
            outside an assistant message.
    """
    out: list[LLMMessage] = []
    if include_system:
        out.extend(SystemMessage(content=block) for block in request.system)
    tool_names: dict[str, str] = {}
    pending: list[FunctionExecutionResult] = []
    for index, message in enumerate(request.messages):
        if message.role == "tool":
            part = _single_result(message, index)
            pending.append(
                FunctionExecutionResult(
                    content=encode_result(part, carry_error=False),
                    name=tool_names.get(part.call_id, ""),
                    call_id=part.call_id,
                    is_error=part.is_error,
                )
            )
            continue
        if pending:
            out.append(FunctionExecutionResultMessage(content=pending))
            pending = []
        other, calls, results = _split(message)
        if results:
            raise InputError(f"messages[{index}]: a tool result outside a tool message")
        source = message.name or ""
        if message.role == "user":
            if calls:
                raise InputError(f"messages[{index}]: only assistant messages may call tools")
            out.append(UserMessage(content=encode_parts(other), source=source))
        elif calls:
            for c in calls:
                tool_names[c.call_id] = c.tool_name
            out.append(
                AssistantMessage(
                    content=[FunctionCall(id=c.call_id, arguments=c.arguments_json, name=c.tool_name) for c in calls],
                    thought=encode_parts(other) or None,
                    source=source,
                )
            )
        else:
            out.append(AssistantMessage(content=encode_parts(other), source=source))
    if pending:
        out.append(FunctionExecutionResultMessage(content=pending))
    return out


def from_autogen(messages: Sequence[LLMMessage]) -> tuple[tuple[str, ...], tuple[WireMessage, ...]]:
    """System blocks and neutral messages of autogen ``messages``.

    A ``UserMessage`` a peer created (HeadAndTail's ``"Skipped n messages."`` with
    ``source="System"``) becomes a user message named after its source.

    Raises:
        InputError: image content in a user message (not produced by :func:`to_autogen`).
    """
    system: list[str] = []
    out: list[WireMessage] = []
    for index, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            system.append(message.content)
        elif isinstance(message, UserMessage):
            if not isinstance(message.content, str):
                if not all(isinstance(piece, str) for piece in message.content):
                    raise InputError(f"autogen message {index}: image content is not supported")
                text = "\n".join(cast(list[str], message.content))
            else:
                text = message.content
            out.append(WireMessage(role="user", parts=decode_parts(text), name=message.source or None))
        elif isinstance(message, AssistantMessage):
            if isinstance(message.content, str):
                parts = decode_parts(message.content)
            else:
                calls = tuple(
                    ToolCallPart(call_id=c.id, tool_name=c.name, arguments_json=c.arguments) for c in message.content
                )
                parts = decode_parts(message.thought or "") + calls
            out.append(WireMessage(role="assistant", parts=parts, name=message.source or None))
        else:
            for result in message.content:
                part = decode_result(result.call_id, result.content, is_error=bool(result.is_error))
                out.append(WireMessage(role="tool", parts=(part,)))
    return tuple(system), tuple(out)


# --------------------------------------------------------------------------- OpenAI Responses


def to_openai_items(request: NeutralRequest, *, include_system: bool = False) -> list[dict[str, Any]]:
    """OpenAI Responses input items for ``request``.

    ``{"type": "message", "role": "user", "content": [{"type": "input_text", "text"}]}`` for
    a user message; an assistant message gives a ``message`` item with one ``output_text``
    (only when it has non-call parts) followed by one ``function_call`` item per call; a tool
    message gives ``{"type": "function_call_output", "call_id", "output"}`` (``is_error``
    rides in the output extras, the format has no error flag).  System blocks become
    ``role: "system"`` message items only with ``include_system`` (the Agents SDK sends
    them as ``instructions`` instead).  ``name`` and ``ref`` are not carried.

    Raises:
        InputError: a tool message that does not hold exactly one result.
    """
    items: list[dict[str, Any]] = []
    if include_system:
        for block in request.system:
            items.append({"type": "message", "role": "system", "content": [{"type": "input_text", "text": block}]})
    for index, message in enumerate(request.messages):
        if message.role == "tool":
            part = _single_result(message, index)
            items.append(
                {"type": "function_call_output", "call_id": part.call_id, "output": encode_result(part, carry_error=True)}
            )
            continue
        other, calls, results = _split(message)
        if results:
            raise InputError(f"messages[{index}]: a tool result outside a tool message")
        if message.role == "user":
            if calls:
                raise InputError(f"messages[{index}]: only assistant messages may call tools")
            items.append(
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": encode_parts(other)}]}
            )
            continue
        follows_text_only = bool(items) and items[-1].get("role") == "assistant"
        if other or not calls or follows_text_only:
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": encode_parts(other), "annotations": []}],
                }
            )
        items.extend(
            {"type": "function_call", "call_id": c.call_id, "name": c.tool_name, "arguments": c.arguments_json}
            for c in calls
        )
    return items


def _item_text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    pieces = [str(p.get("text", "")) for p in content or [] if isinstance(p, dict)]
    return "".join(pieces)


def from_openai_items(items: Sequence[Any]) -> tuple[tuple[str, ...], tuple[WireMessage, ...]]:
    """System blocks and neutral messages of Responses input items.

    ``function_call`` items join the assistant message directly before them (the
    ``message`` item, or earlier calls of the same run), else start a new assistant
    message.  System and developer message items become system blocks.

    Raises:
        InputError: an item type other than message / function_call / function_call_output.
    """
    system: list[str] = []
    out: list[WireMessage] = []
    open_assistant = False
    for index, raw in enumerate(items):
        item = cast(dict[str, Any], raw)
        kind = item.get("type", "message")
        if kind == "function_call":
            call = ToolCallPart(call_id=item["call_id"], tool_name=item["name"], arguments_json=item["arguments"])
            if open_assistant:
                last = out[-1]
                out[-1] = WireMessage(role="assistant", parts=(*last.parts, call), name=last.name, ref=last.ref)
            else:
                out.append(WireMessage(role="assistant", parts=(call,)))
                open_assistant = True
            continue
        open_assistant = False
        if kind == "function_call_output":
            output = item["output"]
            text = output if isinstance(output, str) else _item_text({"content": output})
            out.append(WireMessage(role="tool", parts=(decode_result(item["call_id"], text, is_error=None),)))
        elif kind == "message":
            role = item.get("role")
            text = _item_text(item)
            if role in ("system", "developer"):
                system.append(text)
            elif role == "assistant":
                out.append(WireMessage(role="assistant", parts=decode_parts(text)))
                open_assistant = True
            else:
                out.append(WireMessage(role="user", parts=decode_parts(text)))
        else:
            raise InputError(f"Responses item {index}: unsupported type {kind!r}")
    return tuple(system), tuple(out)
