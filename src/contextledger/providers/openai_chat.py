"""OpenAI Chat Completions serializer, and the neutral-request checks every serializer shares.

Pipeline step 6 of the design (seed 000 §5.3: the assembly is the stable boundary between
stored state and provider serialization): a :class:`~contextledger.providers.base.NeutralRequest`
becomes the ``messages`` / ``tools`` fields of a Chat Completions request body.  Nothing is
dropped silently; content that cannot be expressed raises
:class:`~contextledger.errors.ProviderSerializationError`.

Output shape (``dict`` with insertion order fixed, so ``json.dumps`` is byte-stable)::

    {"messages": [...], "tools": [...]}     # "tools" present only when at least one tool

Message rules (OpenAI Chat Completions API reference):

* the system blocks become one leading ``{"role": "system", "content": text}`` message, the
  non-blank blocks joined with a blank line; no system message when there is no such block;
* ``user``: ``{"role", "name"?, "content"}``; ``content`` is the texts joined with ``"\n"``
  when every part renders as text, otherwise a list of ``{"type": "text"}`` /
  ``{"type": "image_url"}`` parts in part order (empty text parts are left out of the list);
* ``assistant``: ``{"role", "name"?, "content", "tool_calls"?}``; text parts joined with
  ``"\\n"``; ``content`` is ``None`` when the message only calls tools (and has no
  speaker label);
* each result: ``{"role": "tool", "tool_call_id", "content": text}`` directly after its
  assistant message, in call order (results given in another order are put in call order);
  a failed call's text is preceded by the line ``"[tool error]"`` (the API has no error flag),
  and images of the result follow as placeholder lines.

Speaker labels: the text carries the label as every format does
(:func:`~contextledger.providers.base.speaker_labelled`: ``"[<label>] "`` in front of the
first text, or the text ``"[<label>]"`` of a message that has none, e.g. an assistant
message that only calls tools), and the ``name`` field (accepted by the API on user and
assistant messages, and checked against the SDK's message types by the tests) carries it
as an identifier too.

Identifiers: speaker labels in the ``name`` field must match ``^[a-zA-Z0-9_-]{1,64}$``,
as must tool names (in calls and declarations); call ids are limited to 40 characters by the
API.  All are rewritten by :func:`safe_identifier` (deterministic, collision-resistant) only
when they do not comply.

Images: a user image becomes a ``data:<mime>;base64,…`` URL when ``resolve_blob`` returns its
bytes, else its ``url``; images in tool results (tool messages hold text only), images in
assistant messages, media types the API does not accept, and images whose bytes are missing
become the text placeholder of :func:`image_placeholder`.  A
:class:`~contextledger.records.parts.BinaryPart` always becomes :func:`binary_placeholder`.
A :class:`~contextledger.records.parts.ThinkingPart` raises: the assembler strips reasoning
before serializing.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
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
from contextledger.records.parts import (
    BinaryPart,
    ImagePart,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = [
    "IDENTIFIER_PATTERN",
    "IMAGE_MEDIA_TYPES",
    "MISSING_SCHEMA_DESCRIPTION",
    "OPENAI_CALL_ID_MAX_LENGTH",
    "TOOL_ERROR_MARK",
    "BlobResolver",
    "CallIdMap",
    "NeutralTurn",
    "binary_placeholder",
    "declared_tools",
    "image_bytes",
    "image_placeholder",
    "missing_tool_schema",
    "pair_tool_results",
    "replay_memo_turn",
    "safe_identifier",
    "serialize_openai_chat",
    "text_of",
]

BlobResolver = Callable[[str], bytes | None]
"""Returns the bytes stored under a blob key (``sha256:<hex>``), or ``None`` when unavailable."""

IDENTIFIER_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""Tool names (both providers) and OpenAI speaker names must match this."""

IMAGE_MEDIA_TYPES = ("image/gif", "image/jpeg", "image/png", "image/webp")
"""Image media types both providers accept inline; other images become placeholders."""

OPENAI_CALL_ID_MAX_LENGTH = 40
"""Chat Completions rejects ``tool_calls[].id`` longer than this (``string_above_max_length``)."""

TOOL_ERROR_MARK = "[tool error]"
"""First line of a failed call's tool message (Chat Completions has no ``is_error`` field)."""

MISSING_SCHEMA_DESCRIPTION = ""
"""Description of the minimal schema added for a called tool the request does not declare:
none (an empty description is left out of the wire form — a placeholder sentence would be
read by the model as the tool's documentation)."""

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_DIGEST_CHARS = 8


def safe_identifier(value: str, max_length: int = 64) -> str:
    """``value`` made to match ``^[a-zA-Z0-9_-]{1,max_length}$``, deterministically.

    A compliant value is returned unchanged.  Otherwise every other character becomes
    ``_``, the result is cut to leave room, and ``-`` plus the first 8 hex digits of the
    sha256 of the original value is appended, so two different originals do not map to the
    same identifier (the same original always maps to the same identifier, which keeps a
    call and its result consistent).

    Raises:
        ValueError: ``max_length`` is below 9 (no room for the digest).
    """
    if max_length <= _DIGEST_CHARS:
        raise ValueError(f"max_length must be at least {_DIGEST_CHARS + 1}, got {max_length}")
    return _safe_identifier(value, max_length)


@functools.lru_cache(maxsize=65536)
def _safe_identifier(value: str, max_length: int) -> str:
    # memoised: every budget round of an assembly maps the same call ids again
    if value and len(value) <= max_length and not _UNSAFE.search(value):
        return value
    digest = hashlib.sha256(value.encode("utf-8")).hexdigest()[:_DIGEST_CHARS]
    head = _UNSAFE.sub("_", value)[: max_length - _DIGEST_CHARS - 1]
    return f"{head}-{digest}" if head else digest


def image_placeholder(part: ImagePart) -> str:
    """The text standing in for an image that cannot be sent inline.

    Shape: ``"[image <mime>, <size> bytes, artifact <id>]"``; an unknown size reads
    ``"size unknown"``; without an artifact id the blob key (``"blob sha256:…"``) or URL
    (``"url …"``) is given, or nothing.
    """
    return _placeholder(
        "image", part.media_type, part.size_bytes, None, part.artifact_id, part.blob_key, part.url
    )


def binary_placeholder(part: BinaryPart) -> str:
    """The text standing in for a binary payload, e.g. ``"[binary application/pdf, 120 bytes, name r.pdf, artifact art_1]"``."""
    return _placeholder(
        "binary", part.media_type, part.size_bytes, part.name, part.artifact_id, part.blob_key, None
    )


def text_of(part: Part) -> str | None:
    """The text a part shows in a text-only slot: a :class:`TextPart`'s text, the
    placeholder of an image or binary (:func:`image_placeholder`,
    :func:`binary_placeholder`); ``None`` for calls, results and thinking."""
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, ImagePart):
        return image_placeholder(part)
    if isinstance(part, BinaryPart):
        return binary_placeholder(part)
    return None


def _placeholder(
    kind: str,
    media_type: str,
    size: int | None,
    name: str | None,
    artifact_id: str | None,
    blob_key: str | None,
    url: str | None,
) -> str:
    items = [f"{kind} {media_type}", f"{size} bytes" if size is not None else "size unknown"]
    if name:
        items.append(f"name {name}")
    if artifact_id:
        items.append(f"artifact {artifact_id}")
    elif blob_key:
        items.append(f"blob {blob_key}")
    elif url:
        items.append(f"url {url}")
    return "[" + ", ".join(items) + "]"


def image_bytes(part: ImagePart, resolve_blob: BlobResolver | None) -> bytes | None:
    """The bytes of ``part`` when they can be sent inline, else ``None``.

    ``None`` when the media type is not one of :data:`IMAGE_MEDIA_TYPES`, there is no blob
    key or resolver, or the resolver has no bytes for the key.
    """
    if part.media_type not in IMAGE_MEDIA_TYPES or part.blob_key is None or resolve_blob is None:
        return None
    return resolve_blob(part.blob_key)


@dataclass(frozen=True)
class NeutralTurn:
    """One non-tool neutral message with the results answering its tool calls.

    Attributes:
        index: position of ``message`` in ``NeutralRequest.messages`` (for error paths).
        message: a ``user`` or ``assistant`` message.
        results: for an assistant message with tool calls, one result per call, in call
            order; empty otherwise.
    """

    index: int
    message: WireMessage
    results: tuple[ToolResultPart, ...] = ()


def pair_tool_results(request: NeutralRequest) -> list[NeutralTurn]:
    """Check the neutral tool-call structure and attach each result to its call.

    Rules (the pairing invariant of DESIGN.md pipeline step 6, common to both providers):
    a ``tool`` message holds exactly one ``ToolResultPart`` with text or images and no
    speaker label; the tool messages after an assistant message with calls answer those
    calls, one result per call; every call is answered; call ids are unique in the request;
    tool calls appear only in assistant messages and results only in tool messages; no
    ``ThinkingPart`` anywhere.

    Returns:
        the user/assistant messages in order, each with its results in call order.

    Raises:
        ProviderSerializationError: any rule broken; the message names the neutral path
            (``messages[3].parts[1]``) and the call id.
    """
    messages = request.messages
    turns: list[NeutralTurn] = []
    seen_calls: dict[str, int] = {}
    i = 0
    while i < len(messages):
        message = messages[i]
        if message.role == "tool":
            raise ProviderSerializationError(
                f"messages[{i}]: tool message does not follow an assistant message with tool calls"
            )
        calls: list[ToolCallPart] = []
        for k, part in enumerate(message.parts):
            if isinstance(part, TextPart):
                continue  # the common case: nothing to check
            if isinstance(part, ThinkingPart):
                raise ProviderSerializationError(
                    f"messages[{i}].parts[{k}]: thinking parts are not sent to providers; strip them before serializing"
                )
            if isinstance(part, ToolResultPart):
                raise ProviderSerializationError(
                    f"messages[{i}].parts[{k}]: a tool result must be its own tool message"
                )
            if isinstance(part, ToolCallPart):
                if message.role != "assistant":
                    raise ProviderSerializationError(
                        f"messages[{i}].parts[{k}]: only assistant messages may call tools"
                    )
                if not part.call_id:
                    raise ProviderSerializationError(f"messages[{i}].parts[{k}]: empty tool call id")
                if part.call_id in seen_calls:
                    raise ProviderSerializationError(
                        f"messages[{i}].parts[{k}]: duplicate tool call id {part.call_id!r} (first in messages[{seen_calls[part.call_id]}])"
                    )
                seen_calls[part.call_id] = i
                calls.append(part)
        j = i + 1
        answered: dict[str, ToolResultPart] = {}
        if calls:
            wanted = {c.call_id for c in calls}
            while j < len(messages) and messages[j].role == "tool":
                result = _single_result(messages[j], j)
                if result.call_id not in wanted:
                    raise ProviderSerializationError(
                        f"messages[{j}]: tool result {result.call_id!r} answers no call of messages[{i}]"
                    )
                if result.call_id in answered:
                    raise ProviderSerializationError(
                        f"messages[{j}]: second result for tool call {result.call_id!r}"
                    )
                answered[result.call_id] = result
                j += 1
            for k, part in enumerate(message.parts):
                if isinstance(part, ToolCallPart) and part.call_id not in answered:
                    raise ProviderSerializationError(
                        f"messages[{i}].parts[{k}]: tool call {part.call_id!r} has no result "
                        "(a pending call must be rendered as recovery state, never sent bare)"
                    )
        turns.append(NeutralTurn(i, message, tuple(answered[c.call_id] for c in calls)))
        i = j
    return turns


def _single_result(message: WireMessage, index: int) -> ToolResultPart:
    if message.name is not None:
        raise ProviderSerializationError(
            f"messages[{index}]: a tool message cannot carry a speaker label"
        )
    if len(message.parts) != 1 or not isinstance(message.parts[0], ToolResultPart):
        raise ProviderSerializationError(
            f"messages[{index}]: a tool message must hold exactly one tool result part"
        )
    result = message.parts[0]
    if result.text is None and not result.images:
        raise ProviderSerializationError(
            f"messages[{index}].parts[0]: tool result {result.call_id!r} has no text; "
            "fill it in from the artifact before serializing"
        )
    return result


@functools.lru_cache(maxsize=4096)
def missing_tool_schema(name: str) -> ToolSchema:
    """The minimal schema :func:`declared_tools` declares for a called tool the request
    does not declare: ``ToolSchema(name, parameters={"type": "object"})`` with no
    description (none is sent).  One object per name (memoised), so the
    serializers' ``memo`` reuses its wire form and count; it must not be mutated."""
    return ToolSchema(name=name, description=MISSING_SCHEMA_DESCRIPTION, parameters={"type": "object"})


def declared_tools(request: NeutralRequest) -> list[ToolSchema]:
    """The tools to declare, sorted by name (stable prefix for prompt caching, seed 001 問題七).

    ``request.tools`` plus, for every tool name used by a call but not declared, a minimal
    ``ToolSchema(name, parameters={"type": "object"})`` with no description.
    Identical duplicate declarations collapse to one.  A name that does not match
    :data:`IDENTIFIER_PATTERN` (a transcript's ``read file``, a Gemini ``ns.tool``) is
    declared under its :func:`safe_identifier`, the name its calls carry on the wire.

    Raises:
        ProviderSerializationError: two different schemas share a name, or a schema's
            ``parameters`` is not a JSON schema of ``"type": "object"``.
    """
    by_name: dict[str, ToolSchema] = {}
    for k, declared in enumerate(request.tools):
        where = f"tools[{k}]"
        tool = declared if IDENTIFIER_PATTERN.match(declared.name) else dataclasses.replace(declared, name=safe_identifier(declared.name))
        if tool.parameters.get("type") != "object":
            raise ProviderSerializationError(
                f"{where}: parameters of {tool.name!r} must be a JSON schema of type 'object'"
            )
        known = by_name.get(tool.name)
        if known is not None and known != tool:
            raise ProviderSerializationError(
                f"{where}: tool {tool.name!r} is declared twice with different schemas"
            )
        by_name[tool.name] = tool
    for message in request.messages:
        for part in message.parts:
            if not isinstance(part, ToolCallPart):
                continue
            name = safe_identifier(part.tool_name)
            if name not in by_name:
                by_name[name] = missing_tool_schema(name)
    return [by_name[name] for name in sorted(by_name)]


class CallIdMap:
    """Maps neutral call ids to wire ids with :func:`safe_identifier` (one map per payload).

    Calling the map with a neutral id returns its wire id; the same id always gives the same
    wire id, so a call and its result stay linked.

    Raises:
        ProviderSerializationError: (on call) two different ids map to the same wire id.
    """

    def __init__(self, max_length: int) -> None:
        self._max = max_length
        self._origin: dict[str, str] = {}

    def __call__(self, call_id: str) -> str:
        wire = safe_identifier(call_id, self._max)
        first = self._origin.setdefault(wire, call_id)
        if first != call_id:
            raise ProviderSerializationError(
                f"tool call ids {first!r} and {call_id!r} both map to {wire!r}"
            )
        return wire


def serialize_openai_chat(
    request: NeutralRequest,
    *,
    resolve_blob: BlobResolver | None = None,
    memo: dict[int, Any] | None = None,
) -> dict[str, Any]:
    """The Chat Completions ``messages`` (and ``tools``) fields for ``request``.

    See the module docstring for the exact shapes.  ``memo`` (optional, owned by the
    caller, for one ``resolve_blob``): the wire messages of each neutral message (with
    its results) and each tool definition are kept by object identity and reused when
    the same objects are serialized again — for callers that serialize many requests
    sharing most messages (budget selection).  The result is the same as without it;
    reused dicts are shared between payloads, so callers must not mutate them.

    Raises:
        ProviderSerializationError: empty request, broken tool pairing, thinking parts,
            invalid tool names or schemas, colliding ids (see :func:`pair_tool_results`
            and :func:`declared_tools`).
    """
    turns = pair_tool_results(request)
    tools = declared_tools(request)
    ids = CallIdMap(OPENAI_CALL_ID_MAX_LENGTH)
    messages: list[dict[str, Any]] = []
    system = "\n\n".join(block for block in request.system if block.strip())
    if system:
        messages.append({"role": "system", "content": system})
    for turn in turns:
        if memo is not None and replay_memo_turn(memo, turn, ids, messages):
            continue
        start = len(messages)
        if turn.message.role == "user":
            messages.append(_user_message(turn.message, resolve_blob))
        else:
            messages.append(_assistant_message(turn.message, ids))
            for result in turn.results:
                texts = [result.text] if result.text else []
                texts.extend(image_placeholder(image) for image in result.images)
                if result.is_error:
                    texts.insert(0, TOOL_ERROR_MARK)
                messages.append(
                    {"role": "tool", "tool_call_id": ids(result.call_id), "content": "\n".join(texts)}
                )
        if memo is not None:
            memo[id(turn.message)] = (turn.message, turn.results, messages[start:])
    if not messages:
        raise ProviderSerializationError("request has no system text and no messages")
    payload: dict[str, Any] = {"messages": messages}
    if tools:
        payload["tools"] = memo_tools(memo, tools, _tool)
    return payload


def turn_call_ids(turn: NeutralTurn) -> list[str]:
    """The neutral call ids a turn maps to wire ids, in serialization order (its calls,
    then its results)."""
    return [p.call_id for p in turn.message.parts if isinstance(p, ToolCallPart)] + [r.call_id for r in turn.results]


def replay_memo_turn(memo: dict[int, Any], turn: NeutralTurn, ids: CallIdMap, out: list[dict[str, Any]]) -> bool:
    """Append the memoised wire dicts of ``turn`` to ``out`` and return ``True`` when
    ``memo`` holds them for the same message and result objects (the entry
    ``memo[id(message)] = (message, results, wire_dicts)`` a serializer stores), mapping
    its call ids again so collisions are still detected; else return ``False``."""
    hit = memo.get(id(turn.message))
    if hit is None or hit[0] is not turn.message or len(hit[1]) != len(turn.results) or any(a is not b for a, b in zip(hit[1], turn.results, strict=True)):
        return False
    for call_id in turn_call_ids(turn):
        ids(call_id)
    out.extend(hit[2])
    return True


def memo_tools(memo: dict[int, Any] | None, tools: list[ToolSchema], make: Callable[[ToolSchema], dict[str, Any]]) -> list[dict[str, Any]]:
    """``[make(tool) for tool in tools]``, each kept in ``memo`` (when given) by the
    identity of its ToolSchema (the ``memo`` of the serializers)."""
    if memo is None:
        return [make(tool) for tool in tools]
    out: list[dict[str, Any]] = []
    for tool in tools:
        hit = memo.get(id(tool))
        if hit is None or hit[0] is not tool:
            hit = memo[id(tool)] = (tool, make(tool))
        out.append(hit[1])
    return out


def _head(message: WireMessage) -> dict[str, Any]:
    head: dict[str, Any] = {"role": message.role}
    if message.name:
        head["name"] = safe_identifier(message.name)
    return head


def _user_message(message: WireMessage, resolve_blob: BlobResolver | None) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            data = image_bytes(part, resolve_blob)
            if data is not None:
                url = f"data:{part.media_type};base64,{base64.b64encode(data).decode('ascii')}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
            elif part.url and part.media_type in IMAGE_MEDIA_TYPES:
                parts.append({"type": "image_url", "image_url": {"url": part.url}})
            else:
                parts.append({"type": "text", "text": image_placeholder(part)})
        elif isinstance(part, BinaryPart):
            parts.append({"type": "text", "text": binary_placeholder(part)})
    label_first_text(parts, message.name)
    out = _head(message)
    if all(p["type"] == "text" for p in parts):
        out["content"] = "\n".join(p["text"] for p in parts)
    else:
        out["content"] = [p for p in parts if p["type"] != "text" or p["text"]]
    return out


def _assistant_message(message: WireMessage, ids: CallIdMap) -> dict[str, Any]:
    texts = [t for t in map(text_of, message.parts) if t is not None]
    calls: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ToolCallPart):
            calls.append(
                {
                    "id": ids(part.call_id),
                    "type": "function",
                    "function": {"name": safe_identifier(part.tool_name), "arguments": part.arguments_json},
                }
            )
    out = _head(message)
    text = speaker_labelled("\n".join(texts), message.name)
    out["content"] = text if text or not calls else None
    if calls:
        out["tool_calls"] = calls
    return out


def _tool(tool: ToolSchema) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name}
    if tool.description:
        function["description"] = tool.description
    function["parameters"] = clean_schema(tool.parameters)
    return {"type": "function", "function": function}
