"""Anthropic Messages serializer.

Pipeline step 6 of the design (seed 000 §5.3): a
:class:`~contextledger.providers.base.NeutralRequest` becomes the ``system`` / ``messages`` /
``tools`` fields of a Messages API request body.  Nothing is dropped silently except what
the API forbids and that carries no content (blank text, documented below); anything else
that cannot be expressed raises :class:`~contextledger.errors.ProviderSerializationError`.

Output shape (insertion order fixed, so ``json.dumps`` is byte-stable)::

    {"system": "...", "messages": [...], "tools": [...]}

* ``system``: the non-blank system blocks joined with a blank line; the key is omitted
  when there is no such block.
* ``messages``: every message is ``{"role", "content": [blocks]}`` (content is always a
  block list).  Roles alternate strictly, starting with ``user``:

  - consecutive neutral messages of the same role are merged into one message, their
    blocks concatenated in order;
  - when the conversation would start with ``assistant``, a user message holding the
    single text block ``"(continuing)"`` is inserted first (:data:`CONTINUATION_TEXT`);
  - the results of an assistant message's tool calls become ``tool_result`` blocks at the
    start of the next user message, one per ``tool_use``, in call order, before any other
    block of that message.
* text parts that are empty or whitespace only are dropped (the API rejects blank text
  blocks); a neutral message left with no block (and no tool results after it) is left
  out — a recorded message of only whitespace carries nothing; a request left with no
  message at all raises.
* a speaker label becomes the text prefix ``"[<label>] "`` on the message's first text
  block (or a ``"[<label>]"`` text block in front when the message has no text).
* tool calls become ``{"type": "tool_use", "id", "name", "input"}``; ``input`` is the parsed
  arguments when they are a JSON object, ``{}`` when the arguments are blank, and
  ``{"_raw": <text>}`` otherwise (:data:`RAW_ARGUMENTS_KEY`).
* results become ``{"type": "tool_result", "tool_use_id", "content"?, "is_error"?}``:
  ``content`` is the text, or a list of text/image blocks when the result holds images, and
  is omitted when blank; ``is_error`` is present (``true``) only for failed calls.
* call ids are rewritten by :func:`~contextledger.providers.openai_chat.safe_identifier` to
  match ``^[a-zA-Z0-9_-]+$`` (at most 64 characters), identically for the call and its result;
  tool names that do not match ``^[a-zA-Z0-9_-]{1,64}$`` likewise, in calls and declarations.
* images become ``{"type": "image", "source": {"type": "base64", "media_type", "data"}}``
  when ``resolve_blob`` gives the bytes, else ``{"type": "url", "url"}`` sources when the
  part has a URL, else the placeholder text; images in assistant messages are always
  placeholders (assistant turns hold no images).
* tools: ``{"name", "description"?, "input_schema"}`` sorted by name, undeclared called
  tools added with a minimal schema (see :func:`~contextledger.providers.openai_chat.declared_tools`).

A :class:`~contextledger.records.parts.ThinkingPart` raises: the assembler strips reasoning
before serializing (signed thinking blocks cannot be reproduced faithfully after selection).
"""

from __future__ import annotations

import base64
from typing import Any

from contextledger.errors import ProviderSerializationError
from contextledger.limits import loads_json
from contextledger.providers.base import (
    NeutralRequest,
    ToolSchema,
    WireMessage,
    clean_schema,
    label_first_text,
)
from contextledger.providers.openai_chat import (
    IMAGE_MEDIA_TYPES,
    BlobResolver,
    CallIdMap,
    binary_placeholder,
    declared_tools,
    image_bytes,
    image_placeholder,
    memo_tools,
    pair_tool_results,
    safe_identifier,
    turn_call_ids,
)
from contextledger.records.parts import (
    BinaryPart,
    ImagePart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = [
    "ANTHROPIC_ID_MAX_LENGTH",
    "CONTINUATION_TEXT",
    "RAW_ARGUMENTS_KEY",
    "parse_tool_input",
    "serialize_anthropic",
]

CONTINUATION_TEXT = "(continuing)"
"""Text of the user message inserted when the conversation would start with the assistant."""

RAW_ARGUMENTS_KEY = "_raw"
"""Key holding tool-call arguments that are not a JSON object (``input`` must be an object)."""

ANTHROPIC_ID_MAX_LENGTH = 64
"""Length limit applied to ``tool_use`` ids (the API pattern is ``^[a-zA-Z0-9_-]+$``)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def parse_tool_input(arguments_json: str) -> dict[str, Any]:
    """The ``tool_use.input`` object for a call's argument text.

    Returns:
        the parsed object when the text is a JSON object; ``{}`` for blank text;
        ``{"_raw": arguments_json}`` for anything else (invalid JSON, arrays, scalars,
        ``NaN``/``Infinity``), so the model still sees exactly what was called.
    """
    if not arguments_json.strip():
        return {}
    try:
        value = loads_json(arguments_json, parse_constant=_reject_constant, replace_surrogates=True)
    except ValueError:
        return {RAW_ARGUMENTS_KEY: arguments_json}
    if isinstance(value, dict):
        return value
    return {RAW_ARGUMENTS_KEY: arguments_json}


def serialize_anthropic(
    request: NeutralRequest,
    *,
    resolve_blob: BlobResolver | None = None,
    memo: dict[int, Any] | None = None,
) -> dict[str, Any]:
    """The Messages API ``system``, ``messages`` and ``tools`` fields for ``request``.

    See the module docstring for the exact shapes and the documented rewrites.
    ``memo``: as for :func:`~contextledger.providers.openai_chat.serialize_openai_chat`
    (content blocks of each neutral message and its results, tool definitions).

    Raises:
        ProviderSerializationError: no messages, or nothing left once blank ones are left out;
            broken tool pairing, thinking parts, invalid tool names or schemas, colliding
            ids (see :func:`~contextledger.providers.openai_chat.pair_tool_results`).
    """
    turns = pair_tool_results(request)
    tools = declared_tools(request)
    if not turns:
        raise ProviderSerializationError(
            "request has no messages (the Messages API needs at least one)"
        )
    ids = CallIdMap(ANTHROPIC_ID_MAX_LENGTH)
    entries: list[tuple[str, list[dict[str, Any]]]] = []
    for turn in turns:
        hit = memo.get(id(turn.message)) if memo is not None else None
        if hit is not None and hit[0] is turn.message and len(hit[1]) == len(turn.results) and all(a is b for a, b in zip(hit[1], turn.results, strict=True)):
            for call_id in turn_call_ids(turn):
                ids(call_id)  # collisions are still detected
            blocks, results = hit[2], hit[3]
        else:
            blocks = _blocks(turn.message, turn.index, ids, resolve_blob)
            results = [_result_block(r, ids, resolve_blob) for r in turn.results]
            if memo is not None:
                memo[id(turn.message)] = (turn.message, turn.results, blocks, results)
        if blocks:
            entries.append((turn.message.role, blocks))
        if results:
            entries.append(("user", results))
    if not entries:
        raise ProviderSerializationError("request has nothing to send: every message is blank (the Messages API needs at least one)")
    messages: list[dict[str, Any]] = []
    for role, blocks in entries:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": list(blocks)})
    if messages[0]["role"] == "assistant":
        messages.insert(
            0, {"role": "user", "content": [{"type": "text", "text": CONTINUATION_TEXT}]}
        )
    payload: dict[str, Any] = {}
    system = "\n\n".join(block for block in request.system if block.strip())
    if system:
        payload["system"] = system
    payload["messages"] = messages
    if tools:
        payload["tools"] = memo_tools(memo, tools, _tool)
    return payload



def _blocks(
    message: WireMessage, index: int, ids: CallIdMap, resolve_blob: BlobResolver | None
) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text.strip():
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            if message.role == "user":
                blocks.append(_image_block(part, resolve_blob))
            else:
                blocks.append({"type": "text", "text": image_placeholder(part)})
        elif isinstance(part, BinaryPart):
            blocks.append({"type": "text", "text": binary_placeholder(part)})
        elif isinstance(part, ToolCallPart):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": ids(part.call_id),
                    "name": safe_identifier(part.tool_name),
                    "input": parse_tool_input(part.arguments_json),
                }
            )
    label_first_text(blocks, message.name)
    return blocks


def _image_block(part: ImagePart, resolve_blob: BlobResolver | None) -> dict[str, Any]:
    data = image_bytes(part, resolve_blob)
    if data is not None:
        source = {
            "type": "base64",
            "media_type": part.media_type,
            "data": base64.b64encode(data).decode("ascii"),
        }
        return {"type": "image", "source": source}
    if part.url and part.media_type in IMAGE_MEDIA_TYPES:
        return {"type": "image", "source": {"type": "url", "url": part.url}}
    return {"type": "text", "text": image_placeholder(part)}


def _result_block(
    result: ToolResultPart, ids: CallIdMap, resolve_blob: BlobResolver | None
) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": ids(result.call_id)}
    text = result.text or ""
    if result.images:
        content: list[dict[str, Any]] = []
        if text.strip():
            content.append({"type": "text", "text": text})
        content.extend(_image_block(image, resolve_blob) for image in result.images)
        block["content"] = content
    elif text.strip():
        block["content"] = text
    if result.is_error:
        block["is_error"] = True
    return block


def _tool(tool: ToolSchema) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["input_schema"] = clean_schema(tool.parameters)
    return out
