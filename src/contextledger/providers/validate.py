"""Validity checkers for provider request bodies, written from the providers' documented rules.

These are the oracle for any payload, whoever built it (the serializers of this package,
other strategies in the benchmark, imported transcripts).  They share no code with the
serializers.  Each returns every problem found, as ``"<path>: <reason>"`` strings where the
path indexes into the payload (``messages[4].tool_calls[1]``); ``[]`` means valid.

OpenAI Chat Completions (API reference, "function calling" guide):

* ``messages`` is a non-empty list of objects with role ``system``, ``developer``, ``user``,
  ``assistant`` or ``tool``.  System/developer messages are allowed anywhere (the API
  accepts them mid-conversation; this package only emits one leading system message).
* content: system/developer/tool — string or list of text parts; user — string or list of
  ``text`` / ``image_url`` / ``input_audio`` / ``file`` parts; assistant — string, list of
  ``text`` / ``refusal`` parts, or ``null`` (absent) only when it has ``tool_calls``.
* ``name``, when present, matches ``^[a-zA-Z0-9_-]{1,64}$``.
* ``tool_calls`` is a non-empty list of ``{"id", "type": "function", "function": {"name",
  "arguments": str}}`` with ids unique in the request and at most 40 characters.
* every call is answered by exactly one tool message in the contiguous block of tool
  messages right after its assistant message; every tool message answers a call of the
  assistant message that block follows; no tool message elsewhere (nor first).
* ``tools``, when present, is a non-empty list of ``{"type": "function", "function":
  {"name", "description"?, "parameters"?}}`` with valid, unique names; every called tool
  name is declared.

Anthropic Messages (API reference, "tool use" guide):

* ``system`` is absent, a string, or a list of non-blank ``text`` blocks.
* ``messages`` is non-empty, starts with ``user`` and alternates ``user`` / ``assistant``.
* content is a non-blank string or a non-empty list of blocks of a type legal for the role
  (user: ``text``, ``image``, ``document``, ``tool_result``; assistant: ``text``,
  ``tool_use``, ``thinking``, ``redacted_thinking``); text blocks are not blank.
* ``tool_use`` ids are unique and match ``^[a-zA-Z0-9_-]+$``; names match
  ``^[a-zA-Z0-9_-]{1,64}$`` and are declared in ``tools``; ``input`` is an object.
* the user message right after an assistant message with ``tool_use`` blocks holds a
  ``tool_result`` for each of them, all ``tool_result`` blocks before any other block; every
  ``tool_result`` answers a ``tool_use`` of the immediately preceding assistant message,
  once.
* ``tools`` entries have a valid unique ``name`` and an ``input_schema`` object of
  ``"type": "object"`` (entries with a non-``custom`` ``type`` are server tools; only their
  name is checked).
* no tool schema holds a ``null`` keyword value or a ``null`` property schema (both APIs
  reject them; :func:`~contextledger.providers.base.schema_null_problems`).
"""

from __future__ import annotations

import re
from typing import Any

from contextledger.providers.base import schema_null_problems

__all__ = ["validate_anthropic", "validate_openai_chat"]

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_TOOL_USE_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool")
_OPENAI_PARTS = {
    "system": ("text",),
    "developer": ("text",),
    "tool": ("text",),
    "user": ("text", "image_url", "input_audio", "file"),
    "assistant": ("text", "refusal"),
}
_OPENAI_CALL_ID_MAX = 40
_ANTHROPIC_BLOCKS = {
    "user": ("text", "image", "document", "tool_result"),
    "assistant": ("text", "tool_use", "thinking", "redacted_thinking"),
}
_ANTHROPIC_IMAGE_TYPES = ("image/gif", "image/jpeg", "image/png", "image/webp")


def _blank(value: Any) -> bool:
    return not isinstance(value, str) or not value.strip()


# --------------------------------------------------------------------------- OpenAI


def validate_openai_chat(payload: dict[str, Any]) -> list[str]:
    """Problems of a Chat Completions body (``messages``, ``tools``); ``[]`` when valid."""
    problems: list[str] = []
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["messages: must be a non-empty list"]
    declared = _openai_tools(payload, problems)
    call_ids: dict[str, str] = {}
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            problems.append(f"messages[{i}]: must be an object")
            continue
        role = message.get("role")
        if role not in _OPENAI_ROLES:
            problems.append(f"messages[{i}].role: illegal role {role!r}")
            continue
        name = message.get("name")
        if name is not None and (not isinstance(name, str) or not _NAME.match(name)):
            problems.append(f"messages[{i}].name: {name!r} does not match {_NAME.pattern}")
        has_calls = role == "assistant" and "tool_calls" in message
        _openai_content(i, role, message.get("content"), has_calls, problems)
        if has_calls:
            _openai_calls(i, message["tool_calls"], declared, call_ids, problems)
        elif "tool_calls" in message:
            problems.append(f"messages[{i}].tool_calls: only assistant messages may call tools")
        if role == "tool" and _blank_id(message.get("tool_call_id")):
            problems.append(f"messages[{i}].tool_call_id: must be a non-empty string")
    _openai_pairing(messages, problems)
    return problems


def _blank_id(value: Any) -> bool:
    return not isinstance(value, str) or not value


def _openai_tools(payload: dict[str, Any], problems: list[str]) -> set[str] | None:
    if "tools" not in payload:
        return None
    tools = payload["tools"]
    if not isinstance(tools, list) or not tools:
        problems.append("tools: must be a non-empty list when present")
        return set()
    names: set[str] = set()
    for k, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if (
            not isinstance(tool, dict)
            or tool.get("type") != "function"
            or not isinstance(function, dict)
        ):
            problems.append(f"tools[{k}]: must be {{'type': 'function', 'function': {{...}}}}")
            continue
        name = function.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            problems.append(f"tools[{k}].function.name: {name!r} does not match {_NAME.pattern}")
            continue
        if name in names:
            problems.append(f"tools[{k}].function.name: duplicate tool name {name!r}")
        names.add(name)
        if "description" in function and not isinstance(function["description"], str):
            problems.append(f"tools[{k}].function.description: must be a string")
        if "parameters" in function and not isinstance(function["parameters"], dict):
            problems.append(f"tools[{k}].function.parameters: must be a JSON schema object")
        elif "parameters" in function:
            problems.extend(f"tools[{k}].function.parameters{p}" for p in schema_null_problems(function["parameters"]))
    return names


def _openai_content(i: int, role: str, content: Any, has_calls: bool, problems: list[str]) -> None:
    where = f"messages[{i}].content"
    if content is None:
        if not has_calls:
            problems.append(
                f"{where}: required (null only for an assistant message with tool_calls)"
            )
        return
    if isinstance(content, str):
        return
    if not isinstance(content, list) or not content:
        problems.append(f"{where}: must be a string or a non-empty list of parts")
        return
    allowed = _OPENAI_PARTS[role]
    for k, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in allowed:
            problems.append(f"{where}[{k}]: part type {kind!r} is not allowed in a {role} message")
        elif kind == "text" and not isinstance(part.get("text"), str):
            problems.append(f"{where}[{k}].text: must be a string")
        elif kind == "image_url":
            image = part.get("image_url")
            if not isinstance(image, dict) or _blank(image.get("url")):
                problems.append(f"{where}[{k}].image_url.url: must be a non-empty string")


def _openai_calls(
    i: int, calls: Any, declared: set[str] | None, call_ids: dict[str, str], problems: list[str]
) -> None:
    if not isinstance(calls, list) or not calls:
        problems.append(f"messages[{i}].tool_calls: must be a non-empty list")
        return
    for k, call in enumerate(calls):
        where = f"messages[{i}].tool_calls[{k}]"
        if not isinstance(call, dict):
            problems.append(f"{where}: must be an object")
            continue
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            problems.append(f"{where}.id: must be a non-empty string")
        elif call_id in call_ids:
            problems.append(
                f"{where}.id: duplicate call id {call_id!r} (first at {call_ids[call_id]})"
            )
        else:
            call_ids[call_id] = where
            if len(call_id) > _OPENAI_CALL_ID_MAX:
                problems.append(f"{where}.id: longer than {_OPENAI_CALL_ID_MAX} characters")
        if call.get("type") != "function":
            problems.append(f"{where}.type: must be 'function'")
        function = call.get("function")
        if not isinstance(function, dict):
            problems.append(f"{where}.function: must be an object")
            continue
        name = function.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            problems.append(f"{where}.function.name: {name!r} does not match {_NAME.pattern}")
        elif declared is not None and name not in declared:
            problems.append(f"{where}.function.name: tool {name!r} is not declared in tools")
        if not isinstance(function.get("arguments"), str):
            problems.append(f"{where}.function.arguments: must be a string")


def _call_list(message: Any) -> list[tuple[int, str]]:
    """(index, id) of the well-formed call ids of an assistant message, else []."""
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return []
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [
        (k, c["id"])
        for k, c in enumerate(calls)
        if isinstance(c, dict) and isinstance(c.get("id"), str) and c["id"]
    ]


def _openai_pairing(messages: list[Any], problems: list[str]) -> None:
    i = 0
    while i < len(messages):
        message = messages[i]
        role = message.get("role") if isinstance(message, dict) else None
        if role == "tool":
            if i == 0:
                problems.append("messages[0]: a tool message cannot be first")
            else:
                problems.append(
                    f"messages[{i}]: tool message does not follow an assistant message with tool_calls"
                )
            i += 1
            continue
        calls = _call_list(message)
        j = i + 1
        if calls:
            wanted = {call_id for _, call_id in calls}
            answered: dict[str, int] = {}
            while (
                j < len(messages)
                and isinstance(messages[j], dict)
                and messages[j].get("role") == "tool"
            ):
                call_id = messages[j].get("tool_call_id")
                if call_id not in wanted:
                    problems.append(
                        f"messages[{j}].tool_call_id: {call_id!r} answers no call of messages[{i}]"
                    )
                elif call_id in answered:
                    problems.append(
                        f"messages[{j}].tool_call_id: call {call_id!r} already answered by messages[{answered[call_id]}]"
                    )
                else:
                    answered[call_id] = j
                j += 1
            for k, call_id in calls:
                if call_id not in answered:
                    problems.append(
                        f"messages[{i}].tool_calls[{k}]: no tool message answers call {call_id!r}"
                    )
        i = j


# --------------------------------------------------------------------------- Anthropic


def validate_anthropic(payload: dict[str, Any]) -> list[str]:
    """Problems of a Messages body (``system``, ``messages``, ``tools``); ``[]`` when valid."""
    problems: list[str] = []
    _anthropic_system(payload, problems)
    declared = _anthropic_tools(payload, problems)
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        problems.append("messages: must be a non-empty list")
        return problems
    use_ids: dict[str, str] = {}
    previous_role: Any = None
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in _ANTHROPIC_BLOCKS:
            problems.append(f"messages[{i}].role: illegal role {role!r}")
        elif i == 0 and role != "user":
            problems.append("messages[0].role: the first message must be 'user'")
        elif role == previous_role:
            problems.append(f"messages[{i}].role: {role!r} follows {role!r} (roles must alternate)")
        previous_role = role
        if role in _ANTHROPIC_BLOCKS:
            _anthropic_content(i, role, message.get("content"), declared, use_ids, problems)
    _anthropic_pairing(messages, problems)
    return problems


def _anthropic_system(payload: dict[str, Any], problems: list[str]) -> None:
    if "system" not in payload:
        return
    system = payload["system"]
    if isinstance(system, str):
        return
    if not isinstance(system, list):
        problems.append("system: must be a string or a list of text blocks")
        return
    for k, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            problems.append(f"system[{k}]: must be a text block")
        elif _blank(block.get("text")):
            problems.append(f"system[{k}].text: text blocks must contain non-whitespace text")


def _anthropic_tools(payload: dict[str, Any], problems: list[str]) -> set[str]:
    names: set[str] = set()
    tools = payload.get("tools")
    if tools is None:
        return names
    if not isinstance(tools, list):
        problems.append("tools: must be a list")
        return names
    for k, tool in enumerate(tools):
        if not isinstance(tool, dict):
            problems.append(f"tools[{k}]: must be an object")
            continue
        name = tool.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            problems.append(f"tools[{k}].name: {name!r} does not match {_NAME.pattern}")
            continue
        if name in names:
            problems.append(f"tools[{k}].name: duplicate tool name {name!r}")
        names.add(name)
        if tool.get("type", "custom") != "custom":
            continue
        schema = tool.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            problems.append(
                f"tools[{k}].input_schema: must be a JSON schema object of type 'object'"
            )
        problems.extend(f"tools[{k}].input_schema{p}" for p in schema_null_problems(schema))
        if "description" in tool and not isinstance(tool["description"], str):
            problems.append(f"tools[{k}].description: must be a string")
    return names


def _anthropic_content(
    i: int,
    role: str,
    content: Any,
    declared: set[str],
    use_ids: dict[str, str],
    problems: list[str],
) -> None:
    where = f"messages[{i}].content"
    if isinstance(content, str):
        if not content.strip():
            problems.append(f"{where}: must not be blank")
        return
    if not isinstance(content, list) or not content:
        problems.append(f"{where}: must be a non-blank string or a non-empty list of blocks")
        return
    for k, block in enumerate(content):
        at = f"{where}[{k}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if not isinstance(block, dict) or kind not in _ANTHROPIC_BLOCKS[role]:
            problems.append(f"{at}: block type {kind!r} is not allowed in a {role} message")
            continue
        if kind == "text":
            if _blank(block.get("text")):
                problems.append(f"{at}.text: text blocks must contain non-whitespace text")
        elif kind == "image":
            _anthropic_image(at, block, problems)
        elif kind == "tool_use":
            _anthropic_tool_use(at, block, declared, use_ids, problems)
        elif kind == "tool_result":
            _anthropic_tool_result(at, block, problems)


def _anthropic_image(at: str, block: dict[str, Any], problems: list[str]) -> None:
    source = block.get("source")
    if not isinstance(source, dict) or source.get("type") not in ("base64", "url", "file"):
        problems.append(f"{at}.source: must be a base64, url or file source")
    elif source["type"] == "base64":
        if source.get("media_type") not in _ANTHROPIC_IMAGE_TYPES:
            problems.append(
                f"{at}.source.media_type: {source.get('media_type')!r} is not a supported image type"
            )
        if _blank(source.get("data")):
            problems.append(f"{at}.source.data: must be non-empty base64 text")
    elif source["type"] == "url" and _blank(source.get("url")):
        problems.append(f"{at}.source.url: must be a non-empty string")


def _anthropic_tool_use(
    at: str, block: dict[str, Any], declared: set[str], use_ids: dict[str, str], problems: list[str]
) -> None:
    use_id = block.get("id")
    if not isinstance(use_id, str) or not _TOOL_USE_ID.match(use_id):
        problems.append(f"{at}.id: {use_id!r} does not match {_TOOL_USE_ID.pattern}")
    elif use_id in use_ids:
        problems.append(f"{at}.id: duplicate tool_use id {use_id!r} (first at {use_ids[use_id]})")
    else:
        use_ids[use_id] = at
    name = block.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        problems.append(f"{at}.name: {name!r} does not match {_NAME.pattern}")
    elif name not in declared:
        problems.append(f"{at}.name: tool {name!r} is not declared in tools")
    if not isinstance(block.get("input"), dict):
        problems.append(f"{at}.input: must be an object")


def _anthropic_tool_result(at: str, block: dict[str, Any], problems: list[str]) -> None:
    if _blank_id(block.get("tool_use_id")):
        problems.append(f"{at}.tool_use_id: must be a non-empty string")
    if "is_error" in block and not isinstance(block["is_error"], bool):
        problems.append(f"{at}.is_error: must be a boolean")
    content = block.get("content")
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        problems.append(f"{at}.content: must be a string or a list of text/image blocks")
        return
    for k, inner in enumerate(content):
        kind = inner.get("type") if isinstance(inner, dict) else None
        if not isinstance(inner, dict) or kind not in (
            "text",
            "image",
            "document",
            "search_result",
        ):
            problems.append(
                f"{at}.content[{k}]: block type {kind!r} is not allowed in a tool_result"
            )
        elif kind == "text" and _blank(inner.get("text")):
            problems.append(f"{at}.content[{k}].text: text blocks must contain non-whitespace text")
        elif kind == "image":
            _anthropic_image(f"{at}.content[{k}]", inner, problems)


def _blocks_of(message: Any) -> list[Any]:
    if not isinstance(message, dict):
        return []
    content = message.get("content")
    return content if isinstance(content, list) else []


def _anthropic_pairing(messages: list[Any], problems: list[str]) -> None:
    for i, message in enumerate(messages):
        blocks = _blocks_of(message)
        role = message.get("role") if isinstance(message, dict) else None
        if role == "assistant":
            uses = [
                (k, b.get("id"))
                for k, b in enumerate(blocks)
                if isinstance(b, dict)
                and b.get("type") == "tool_use"
                and isinstance(b.get("id"), str)
            ]
            if not uses:
                continue
            following = messages[i + 1] if i + 1 < len(messages) else None
            is_user = isinstance(following, dict) and following.get("role") == "user"
            answered = {
                b.get("tool_use_id")
                for b in _blocks_of(following)
                if is_user and isinstance(b, dict) and b.get("type") == "tool_result"
            }
            for k, use_id in uses:
                if use_id not in answered:
                    problems.append(
                        f"messages[{i}].content[{k}]: no tool_result answers tool_use {use_id!r} in messages[{i + 1}]"
                    )
        elif role == "user":
            previous = messages[i - 1] if i > 0 else None
            offered = {
                b.get("id")
                for b in _blocks_of(previous)
                if isinstance(previous, dict)
                and previous.get("role") == "assistant"
                and isinstance(b, dict)
                and b.get("type") == "tool_use"
            }
            seen: dict[Any, int] = {}
            other_before: int | None = None
            for k, b in enumerate(blocks):
                if not isinstance(b, dict):
                    continue
                if b.get("type") != "tool_result":
                    if other_before is None:
                        other_before = k
                    continue
                use_id = b.get("tool_use_id")
                at = f"messages[{i}].content[{k}]"
                if other_before is not None:
                    problems.append(
                        f"{at}: tool_result must come before any other block (content[{other_before}])"
                    )
                if use_id not in offered:
                    source = f"messages[{i - 1}]" if i > 0 else "a preceding assistant message"
                    problems.append(f"{at}: tool_result {use_id!r} answers no tool_use of {source}")
                elif use_id in seen:
                    problems.append(
                        f"{at}: tool_result {use_id!r} already given at content[{seen[use_id]}]"
                    )
                else:
                    seen[use_id] = k
