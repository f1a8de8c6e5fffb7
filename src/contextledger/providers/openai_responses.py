"""OpenAI Responses serializer.

Pipeline step 6 of the design (seed 000 §5.3: the assembly is the stable boundary between
stored state and provider serialization): a
:class:`~contextledger.providers.base.NeutralRequest` becomes the ``instructions`` /
``input`` / ``tools`` fields of a Responses API request body (``POST /v1/responses``).
Nothing is dropped silently; content that cannot be expressed raises
:class:`~contextledger.errors.ProviderSerializationError`.

Output shape (insertion order fixed, so ``json.dumps`` is byte-stable)::

    {"instructions": "...", "input": [items], "tools": [...]}

* ``instructions``: the non-blank system blocks joined with a blank line (the API puts
  them in front of the input as the system message); omitted when there is none.  Only
  trusted text is ever placed here: tool output travels in ``function_call_output`` items.
* ``input`` items, one neutral message after the other (roles need not alternate):

  - a user message: ``{"type": "message", "role": "user", "content": text}`` with the
    texts joined by ``"\\n"`` when every part renders as text; otherwise ``content`` is a
    list of ``{"type": "input_text", "text"}`` / ``{"type": "input_image", "image_url",
    "detail": "auto"}`` parts in part order (empty texts left out of the list);
  - an assistant message: ``{"type": "message", "role": "assistant", "content": text}``
    when it has text (or no tool call), then one ``{"type": "function_call", "call_id",
    "name", "arguments"}`` item per call, in call order, then the
    ``{"type": "function_call_output", "call_id", "output"}`` item of each call, in call
    order (results given in another order are put in call order);
  - ``output`` is the result text; a failed call's text is preceded by the line
    ``"[tool error]"`` (the format has no error flag); when the result holds images that
    can be sent, ``output`` is a list of one ``input_text`` part (when there is text) and
    the ``input_image`` parts.
* a speaker label (message items have no ``name`` field) becomes the prefix
  ``"[<label>] "`` of the message text, or the text ``"[<label>]"`` of an assistant
  message item put in front of the label's tool calls.
* ``tools``: ``{"type": "function", "name", "description"?, "parameters", "strict":
  false}`` sorted by name, undeclared called tools added with a minimal schema (see
  :func:`~contextledger.providers.openai_chat.declared_tools`).  ``strict`` is always
  sent as ``false``: recorded schemas are arbitrary JSON schemas, and strict mode
  rejects any schema that does not list every property as required and forbid others.
* tool names that are not identifiers are sent under their
  :func:`~contextledger.providers.openai_chat.safe_identifier`, in calls and declarations;
  call ids are rewritten the same way to match ``^[a-zA-Z0-9_-]{1,64}$`` (the API rejects a ``call_id`` longer than 64
  characters with ``string_above_max_length``), identically for the call and its output.
* custom (free-form) and built-in tools: :func:`native_tool_items` turns the calls of
  tools a request declares as ``custom``, ``local_shell`` or ``web_search`` into
  ``custom_tool_call`` / ``local_shell_call`` / ``web_search_call`` items answered by
  outputs of their own kind (the API pairs each output with a call of its kind).
* item ``id`` fields are never sent: ids name items the API stored (``msg_…``, ``fc_…``)
  and tie them to the reasoning item that produced them; an assembled request re-sends
  content, not stored items.
* reasoning: a :class:`~contextledger.records.parts.ThinkingPart` raises (the assembler
  strips reasoning before serializing).  A ``reasoning`` item is only valid as the API
  issued it (its ``id``, ``encrypted_content``, directly followed by the item it
  produced), so it is never re-created from recorded thinking text.

Images: a user image becomes a ``data:<mime>;base64,…`` URL when ``resolve_blob`` returns
its bytes, else its ``url``; images in assistant messages, media types the API does not
accept and images whose bytes are missing become the placeholder text of
:func:`~contextledger.providers.openai_chat.image_placeholder`; a
:class:`~contextledger.records.parts.BinaryPart` becomes
:func:`~contextledger.providers.openai_chat.binary_placeholder`.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from contextledger.errors import ProviderSerializationError
from contextledger.providers.base import (
    NeutralRequest,
    ToolSchema,
    WireMessage,
    clean_schema,
    label_first_text,
    speaker_labelled,
)
from contextledger.providers.openai_chat import (
    IMAGE_MEDIA_TYPES,
    TOOL_ERROR_MARK,
    BlobResolver,
    CallIdMap,
    binary_placeholder,
    declared_tools,
    image_bytes,
    image_placeholder,
    memo_tools,
    pair_tool_results,
    replay_memo_turn,
    safe_identifier,
    text_of,
)
from contextledger.records.parts import (
    BinaryPart,
    ImagePart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = [
    "IMAGE_DETAIL",
    "OPENAI_RESPONSES_CALL_ID_MAX_LENGTH",
    "assistant_items",
    "native_tool_items",
    "output_item",
    "serialize_openai_responses",
    "user_item",
]

OPENAI_RESPONSES_CALL_ID_MAX_LENGTH = 64
"""The Responses API rejects a ``call_id`` longer than this (``string_above_max_length``)."""

IMAGE_DETAIL = "auto"
"""``detail`` of every ``input_image`` part (a required field of the part)."""


def serialize_openai_responses(
    request: NeutralRequest,
    *,
    resolve_blob: BlobResolver | None = None,
    memo: dict[int, Any] | None = None,
) -> dict[str, Any]:
    """The Responses API ``instructions``, ``input`` and ``tools`` fields for ``request``.

    See the module docstring for the exact shapes.  ``memo``: as for
    :func:`~contextledger.providers.openai_chat.serialize_openai_chat` (the input items of
    each neutral message with its results, and each tool definition, are reused by object
    identity; reused dicts are shared between payloads and must not be mutated).

    Raises:
        ProviderSerializationError: no messages (``input`` needs at least one item);
            broken tool pairing, thinking parts, invalid tool names or schemas, colliding
            call ids (see :func:`~contextledger.providers.openai_chat.pair_tool_results`
            and :func:`~contextledger.providers.openai_chat.declared_tools`).
    """
    turns = pair_tool_results(request)
    tools = declared_tools(request)
    if not turns:
        raise ProviderSerializationError("request has no messages (the Responses input needs at least one item)")
    ids = CallIdMap(OPENAI_RESPONSES_CALL_ID_MAX_LENGTH)
    items: list[dict[str, Any]] = []
    for turn in turns:
        if memo is not None and replay_memo_turn(memo, turn, ids, items):
            continue
        start = len(items)
        if turn.message.role == "user":
            items.append(user_item(turn.message, resolve_blob))
        else:
            items.extend(assistant_items(turn.message, ids))
            items.extend(output_item(result, ids, resolve_blob) for result in turn.results)
        if memo is not None:
            memo[id(turn.message)] = (turn.message, turn.results, items[start:])
    payload: dict[str, Any] = {}
    instructions = "\n\n".join(block for block in request.system if block.strip())
    if instructions:
        payload["instructions"] = instructions
    payload["input"] = items
    if tools:
        payload["tools"] = memo_tools(memo, tools, _tool)
    return payload


def _image_part(part: ImagePart, resolve_blob: BlobResolver | None) -> dict[str, Any] | None:
    """The ``input_image`` part for ``part``, or ``None`` when it cannot be sent inline."""
    data = image_bytes(part, resolve_blob)
    if data is not None:
        url = f"data:{part.media_type};base64,{base64.b64encode(data).decode('ascii')}"
        return {"type": "input_image", "image_url": url, "detail": IMAGE_DETAIL}
    if part.url and part.media_type in IMAGE_MEDIA_TYPES:
        return {"type": "input_image", "image_url": part.url, "detail": IMAGE_DETAIL}
    return None


def user_item(message: WireMessage, resolve_blob: BlobResolver | None = None) -> dict[str, Any]:
    """The ``message`` item of a neutral user message (module docstring)."""
    parts: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            parts.append({"type": "input_text", "text": part.text})
        elif isinstance(part, ImagePart):
            image = _image_part(part, resolve_blob)
            parts.append(image if image is not None else {"type": "input_text", "text": image_placeholder(part)})
        elif isinstance(part, BinaryPart):
            parts.append({"type": "input_text", "text": binary_placeholder(part)})
    label_first_text(parts, message.name, text_type="input_text")
    content: str | list[dict[str, Any]]
    if all(p["type"] == "input_text" for p in parts):
        content = "\n".join(p["text"] for p in parts)
    else:
        content = [p for p in parts if p["type"] != "input_text" or p["text"]]
    return {"type": "message", "role": "user", "content": content}


def assistant_items(message: WireMessage, ids: CallIdMap) -> list[dict[str, Any]]:
    """The items of a neutral assistant message: its text message (when it has text, a
    label or no call), then one ``function_call`` per call (module docstring)."""
    texts = [t for t in map(text_of, message.parts) if t is not None]
    calls: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ToolCallPart):
            calls.append({"type": "function_call", "call_id": ids(part.call_id), "name": safe_identifier(part.tool_name), "arguments": part.arguments_json})
    text = "\n".join(texts)
    items: list[dict[str, Any]] = []
    if text or message.name or not calls:
        items.append({"type": "message", "role": "assistant", "content": speaker_labelled(text, message.name)})
    items.extend(calls)
    return items


def output_item(result: ToolResultPart, ids: CallIdMap, resolve_blob: BlobResolver | None = None) -> dict[str, Any]:
    """The ``function_call_output`` item of a result (module docstring)."""
    texts = [TOOL_ERROR_MARK] if result.is_error else []
    if result.text:
        texts.append(result.text)
    images: list[dict[str, Any]] = []
    for image in result.images:
        wire = _image_part(image, resolve_blob)
        if wire is not None:
            images.append(wire)
        else:
            texts.append(image_placeholder(image))
    text = "\n".join(texts)
    output: str | list[dict[str, Any]] = text
    if images:
        output = ([{"type": "input_text", "text": text}] if text else []) + images
    return {"type": "function_call_output", "call_id": ids(result.call_id), "output": output}


def _custom_input(arguments: Any) -> str:
    """The free text of a custom call recorded as ``{"input": text}`` (the arguments text
    itself when it is not such an object)."""
    value = _json_value(arguments)
    return value["input"] if isinstance(value, dict) and isinstance(value.get("input"), str) else str(arguments or "")


def _json_value(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return "\n".join(p["text"] for p in output if isinstance(p, dict) and isinstance(p.get("text"), str)) if isinstance(output, list) else ""


def _native_call(item: dict[str, Any], kinds: dict[str, str]) -> dict[str, Any] | None:
    """The item of its own kind for a ``function_call`` of a custom / built-in tool, or
    ``None`` when it stays a function call (a tool not declared so, arguments that do not
    hold the item's fields)."""
    name, call_id = item.get("name"), item.get("call_id")
    kind = kinds.get(str(name))
    if kind == "custom":
        return {"type": "custom_tool_call", "call_id": call_id, "name": name, "input": _custom_input(item.get("arguments"))}
    value = _json_value(item.get("arguments"))
    if kind == "local_shell" and isinstance(value, dict) and value.get("type") == "exec":
        return {"type": "local_shell_call", "call_id": call_id, "status": "completed", "action": value}
    if kind == "web_search" and isinstance(value, dict) and isinstance(value.get("action"), dict):
        return {"type": "web_search_call", "status": "completed", "action": value["action"]}
    return None


def native_tool_items(items: list[dict[str, Any]], tools: Any) -> list[dict[str, Any]]:
    """``items`` with the calls of tools that ``tools`` (a request's Responses ``tools``)
    declares as ``custom``, ``local_shell`` or ``web_search`` in their own item shape:

    * a ``custom`` tool's ``function_call`` (arguments ``{"input": text}``, as importers
      record it) → ``custom_tool_call`` (``call_id``, ``name``, ``input``), its output →
      ``custom_tool_call_output`` (``output``: the text);
    * ``local_shell`` (arguments: the ``exec`` action) → ``local_shell_call`` (``call_id``,
      ``status``, ``action``), answered by its ``function_call_output`` as Codex answers
      one;
    * ``web_search`` (arguments ``{"action": …}``, a server-side call) →
      ``web_search_call`` (``status``, ``action``); the result the importer recorded
      beside it is the item's own status and is dropped.

    The API pairs each output with a call of its own kind and a custom tool with its
    declaration.  Other items are returned as they are (the same objects); the input
    list is not changed."""
    kinds: dict[str, str] = {}
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict) and tool.get("type") == "custom" and isinstance(tool.get("name"), str):
            kinds[tool["name"]] = "custom"
        elif isinstance(tool, dict) and tool.get("type") in ("local_shell", "web_search"):
            kinds[str(tool["type"])] = str(tool["type"])
    if not kinds:
        return items
    answered: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type")
        native = _native_call(item, kinds) if kind == "function_call" else None
        if native is not None:
            answered[str(item.get("call_id"))] = native["type"]
            out.append(native)
        elif kind == "function_call_output" and str(item.get("call_id")) in answered:
            call_kind = answered[str(item.get("call_id"))]
            if call_kind == "custom_tool_call":
                out.append({"type": "custom_tool_call_output", "call_id": item.get("call_id"), "output": _output_text(item.get("output"))})
            elif call_kind == "local_shell_call":
                out.append(item)
        else:
            out.append(item)
    return out


def _tool(tool: ToolSchema) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "function", "name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["parameters"] = clean_schema(tool.parameters)
    out["strict"] = False
    return out
