"""Validity checker for OpenAI Responses request bodies, written from the documented rules.

Like :mod:`contextledger.providers.validate` (the Chat Completions and Anthropic
checkers), this is the oracle for any Responses payload, whoever built it, and shares no
code with the serializer.  It returns every problem found as ``"<path>: <reason>"``
strings (``input[4].call_id: …``); ``[]`` means valid.

Rules (API reference ``POST /v1/responses``, the function-calling and reasoning guides,
and the errors the API returns for them):

* ``instructions`` is absent, ``null`` or a string.
* ``input`` is a non-empty string or a non-empty list of items.  An item's kind is its
  ``type``; an item without ``type`` but with ``role`` is a message.  Known kinds are the
  input item types of the API (:data:`ITEM_TYPES`); any other kind is a problem.
* messages: ``role`` is ``user``, ``assistant``, ``system`` or ``developer``; ``content``
  is a string or a non-empty list of parts: ``input_text`` / ``input_image`` /
  ``input_file`` (and ``input_audio`` for ``user``) in user, system and developer
  messages, ``output_text`` / ``refusal`` in assistant messages; text parts hold a string;
  an ``input_image`` has an ``image_url`` or ``file_id`` and a ``detail`` of ``low``,
  ``high``, ``auto`` or ``original``.
* item ``id`` values, when present, are non-empty strings of at most 64 characters and
  unique in the request.
* ``function_call``: ``call_id`` is a non-empty string of at most 64 characters
  (``string_above_max_length`` otherwise), unique among the calls; ``name`` matches
  ``^[a-zA-Z0-9_-]{1,64}$`` and, when ``tools`` is present, names a declared function
  tool (a call with a ``namespace`` is not checked against the declarations);
  ``arguments`` is a string.
* ``function_call_output``: ``call_id`` names a ``function_call`` earlier in the input
  ("No tool call found for function call output …"), answered once; ``output`` is a
  string or a list of ``input_text`` / ``input_image`` / ``input_file`` parts.  Every
  ``function_call`` is answered by exactly one output after it ("No tool output found for
  function call …").
* ``custom_tool_call`` (a free-form tool's call): ``call_id`` as for a function call
  (unique among all calls), ``name`` names a declared ``custom`` tool when ``tools`` is
  present, ``input`` is a string; ``custom_tool_call_output`` answers a
  ``custom_tool_call`` earlier in the input, once, with a string or a list of parts.  An
  output answers a call of its own kind only (a ``function_call_output`` for a custom
  call is "No tool call found"); every custom call is answered.
* ``local_shell_call``: ``call_id`` as for a function call, ``status`` ``in_progress`` /
  ``completed`` / ``incomplete``, ``action`` an ``exec`` action whose ``command`` is a
  list of strings; answered once after it by a ``function_call_output`` (as Codex
  answers one) or a ``local_shell_call_output`` (naming the call by ``id``).
* ``reasoning``: ``id`` is a non-empty string, ``summary`` a list of ``summary_text``
  parts (possibly empty); the first item after it that is not itself a reasoning item is
  an item the model produced — an assistant message or a tool call ("Item 'rs_…' of type
  'reasoning' was provided without its required following item").
* ``tools``, when present, is a non-empty list; a ``function`` tool has a valid name,
  unique among the function tools (no ``null`` keyword value or property schema),
  ``parameters`` that is a JSON schema of
  ``"type": "object"`` (or ``null``), and ``strict`` that is a boolean or ``null``; with
  ``strict: true`` every object schema in ``parameters`` must set
  ``"additionalProperties": false`` and list every property in ``required`` (strict mode
  of Structured Outputs).  A ``custom`` tool has a valid name, unique among the custom
  tools.  Tools of other types (``web_search`` …) are not checked.
"""

from __future__ import annotations

import re
from typing import Any

from contextledger.providers.base import schema_null_problems

__all__ = ["ITEM_TYPES", "MODEL_ITEM_TYPES", "validate_openai_responses"]

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_ID_MAX = 64
_ROLES = ("user", "assistant", "system", "developer")
_PARTS = {
    "user": ("input_text", "input_image", "input_file", "input_audio"),
    "system": ("input_text", "input_image", "input_file"),
    "developer": ("input_text", "input_image", "input_file"),
    "assistant": ("output_text", "refusal"),
}
_OUTPUT_PARTS = ("input_text", "input_image", "input_file")
_IMAGE_DETAIL = ("low", "high", "auto", "original")

MODEL_ITEM_TYPES = frozenset({
    "function_call", "custom_tool_call", "file_search_call", "web_search_call", "computer_call",
    "code_interpreter_call", "image_generation_call", "local_shell_call", "shell_call", "apply_patch_call",
    "mcp_call", "mcp_list_tools", "mcp_approval_request", "tool_search_call", "program",
})
"""Item types a model produces besides assistant messages (what may follow a reasoning item)."""

ITEM_TYPES = MODEL_ITEM_TYPES | frozenset({
    "message", "reasoning", "function_call_output", "custom_tool_call_output", "computer_call_output",
    "local_shell_call_output", "shell_call_output", "apply_patch_call_output", "mcp_approval_response",
    "tool_search_output", "program_output", "additional_tools", "configuration_update", "compaction",
    "compaction_trigger", "item_reference",
})
"""Input item types of the Responses API (openai 3.57 ``ResponseInputItemParam``)."""


def _kind(item: dict[str, Any]) -> Any:
    return item.get("type", "message" if "role" in item else None)


def validate_openai_responses(payload: dict[str, Any]) -> list[str]:
    """Problems of a Responses body (``instructions``, ``input``, ``tools``); ``[]`` when valid."""
    problems: list[str] = []
    instructions = payload.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        problems.append("instructions: must be a string")
    declared = _tools(payload, problems)
    items = payload.get("input")
    if isinstance(items, str):
        if not items:
            problems.append("input: must not be empty")
        return problems
    if not isinstance(items, list) or not items:
        problems.append("input: must be a non-empty string or a non-empty list of items")
        return problems
    ids: dict[str, int] = {}
    calls: dict[str, tuple[int, str]] = {}
    answered: dict[str, int] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            problems.append(f"input[{i}]: must be an object")
            continue
        _item_id(i, item, ids, problems)
        kind = _kind(item)
        if kind not in ITEM_TYPES:
            problems.append(f"input[{i}].type: unknown item type {kind!r}")
        elif kind == "message":
            _message(i, item, problems)
        elif kind in ("function_call", "custom_tool_call"):
            _call(i, item, declared, calls, problems)
        elif kind == "local_shell_call":
            _local_shell_call(i, item, calls, problems)
        elif kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            _output(i, item, calls, answered, problems)
        elif kind == "reasoning":
            _reasoning(i, item, items, problems)
    for call_id, (i, kind) in calls.items():
        if call_id not in answered:
            problems.append(f"input[{i}]: no {kind}_output answers call {call_id!r}")
    return problems


def _item_id(i: int, item: dict[str, Any], ids: dict[str, int], problems: list[str]) -> None:
    if item.get("id") is None:
        return
    value = item["id"]
    if not isinstance(value, str) or not value:
        problems.append(f"input[{i}].id: must be a non-empty string")
    elif len(value) > _ID_MAX:
        problems.append(f"input[{i}].id: longer than {_ID_MAX} characters")
    elif value in ids:
        problems.append(f"input[{i}].id: duplicate item id {value!r} (first at input[{ids[value]}])")
    else:
        ids[value] = i


def _message(i: int, item: dict[str, Any], problems: list[str]) -> None:
    role = item.get("role")
    if role not in _ROLES:
        problems.append(f"input[{i}].role: illegal role {role!r}")
        return
    content = item.get("content")
    where = f"input[{i}].content"
    if isinstance(content, str):
        return
    if not isinstance(content, list) or not content:
        problems.append(f"{where}: must be a string or a non-empty list of parts")
        return
    for k, part in enumerate(content):
        _part(f"{where}[{k}]", part, _PARTS[role], f"a {role} message", problems)


def _part(at: str, part: Any, allowed: tuple[str, ...], container: str, problems: list[str]) -> None:
    kind = part.get("type") if isinstance(part, dict) else None
    if not isinstance(part, dict) or kind not in allowed:
        problems.append(f"{at}: part type {kind!r} is not allowed in {container}")
    elif kind in ("input_text", "output_text") and not isinstance(part.get("text"), str):
        problems.append(f"{at}.text: must be a string")
    elif kind == "refusal" and not isinstance(part.get("refusal"), str):
        problems.append(f"{at}.refusal: must be a string")
    elif kind == "input_image":
        url, file_id = part.get("image_url"), part.get("file_id")
        if not (isinstance(url, str) and url) and not (isinstance(file_id, str) and file_id):
            problems.append(f"{at}: an input_image needs an image_url or a file_id")
        if part.get("detail") not in _IMAGE_DETAIL:
            problems.append(f"{at}.detail: must be one of {list(_IMAGE_DETAIL)}")


def _call_id(at: str, value: Any, problems: list[str]) -> str | None:
    if not isinstance(value, str) or not value:
        problems.append(f"{at}.call_id: must be a non-empty string")
        return None
    if len(value) > _ID_MAX:
        problems.append(f"{at}.call_id: longer than {_ID_MAX} characters")
    return value


def _call(i: int, item: dict[str, Any], declared: dict[str, set[str]] | None, calls: dict[str, tuple[int, str]], problems: list[str]) -> None:
    at = f"input[{i}]"
    kind = str(item.get("type", "function_call"))
    call_id = _call_id(at, item.get("call_id"), problems)
    if call_id is not None:
        if call_id in calls:
            problems.append(f"{at}.call_id: duplicate call id {call_id!r} (first at input[{calls[call_id][0]}])")
        else:
            calls[call_id] = (i, kind)
    tool_type = "custom" if kind == "custom_tool_call" else "function"
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        problems.append(f"{at}.name: {name!r} does not match {_NAME.pattern}")
    elif declared is not None and not item.get("namespace") and name not in declared[tool_type]:
        what = "custom tool" if tool_type == "custom" else "tool"
        problems.append(f"{at}.name: {what} {name!r} is not declared in tools")
    field = "input" if kind == "custom_tool_call" else "arguments"
    if not isinstance(item.get(field), str):
        problems.append(f"{at}.{field}: must be a string")


def _local_shell_call(i: int, item: dict[str, Any], calls: dict[str, tuple[int, str]], problems: list[str]) -> None:
    at = f"input[{i}]"
    call_id = _call_id(at, item.get("call_id"), problems)
    if call_id is not None:
        if call_id in calls:
            problems.append(f"{at}.call_id: duplicate call id {call_id!r} (first at input[{calls[call_id][0]}])")
        else:
            calls[call_id] = (i, "local_shell_call")
    action = item.get("action")
    if not isinstance(action, dict) or action.get("type") != "exec" or not isinstance(action.get("command"), list) or not all(isinstance(c, str) for c in action["command"]):
        problems.append(f"{at}.action: must be an exec action with a command list of strings")
    if item.get("status") not in ("in_progress", "completed", "incomplete"):
        problems.append(f"{at}.status: must be in_progress, completed or incomplete")


def _output(i: int, item: dict[str, Any], calls: dict[str, tuple[int, str]], answered: dict[str, int], problems: list[str]) -> None:
    at = f"input[{i}]"
    kind = str(item.get("type"))
    call_kind = kind.removesuffix("_output")
    # a local shell call is answered by a function_call_output (Codex) or its own output
    # item, which names the call by ``id``
    kinds = ("function_call", "local_shell_call") if kind == "function_call_output" else (call_kind,)
    given = item.get("id") if kind == "local_shell_call_output" and item.get("call_id") is None else item.get("call_id")
    call_id = _call_id(at, given, problems)
    if call_id is not None:
        if call_id not in calls or calls[call_id][1] not in kinds:
            problems.append(f"{at}.call_id: {call_id!r} answers no {call_kind} before it")
        elif call_id in answered:
            problems.append(f"{at}.call_id: call {call_id!r} already answered by input[{answered[call_id]}]")
        else:
            answered[call_id] = i
    output = item.get("output")
    if isinstance(output, str):
        return
    if not isinstance(output, list):
        problems.append(f"{at}.output: must be a string or a list of parts")
        return
    for k, part in enumerate(output):
        _part(f"{at}.output[{k}]", part, _OUTPUT_PARTS, f"a {item.get('type')}", problems)


def _reasoning(i: int, item: dict[str, Any], items: list[Any], problems: list[str]) -> None:
    at = f"input[{i}]"
    if not isinstance(item.get("id"), str) or not item["id"]:
        problems.append(f"{at}.id: a reasoning item needs the id the API gave it")
    summary = item.get("summary")
    if not isinstance(summary, list):
        problems.append(f"{at}.summary: must be a list (empty when there is no summary)")
    else:
        for k, part in enumerate(summary):
            if not isinstance(part, dict) or part.get("type") != "summary_text" or not isinstance(part.get("text"), str):
                problems.append(f"{at}.summary[{k}]: must be a summary_text part with a text string")
    following = next((x for x in items[i + 1 :] if not (isinstance(x, dict) and _kind(x) == "reasoning")), None)
    produced = isinstance(following, dict) and (
        _kind(following) in MODEL_ITEM_TYPES or (_kind(following) == "message" and following.get("role") == "assistant")
    )
    if not produced:
        problems.append(f"{at}: reasoning item without its following item (an assistant message or tool call)")


def _tools(payload: dict[str, Any], problems: list[str]) -> dict[str, set[str]] | None:
    """The declared ``function`` and ``custom`` tool names (``None`` without ``tools``)."""
    if "tools" not in payload:
        return None
    declared: dict[str, set[str]] = {"function": set(), "custom": set()}
    tools = payload["tools"]
    if not isinstance(tools, list) or not tools:
        problems.append("tools: must be a non-empty list when present")
        return declared
    for k, tool in enumerate(tools):
        at = f"tools[{k}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            problems.append(f"{at}: must be an object with a type")
            continue
        if tool["type"] not in declared:
            continue
        names = declared[tool["type"]]
        name = tool.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            problems.append(f"{at}.name: {name!r} does not match {_NAME.pattern}")
            continue
        if name in names:
            problems.append(f"{at}.name: duplicate tool name {name!r}")
        names.add(name)
        if tool["type"] == "custom":
            continue
        if "description" in tool and tool["description"] is not None and not isinstance(tool["description"], str):
            problems.append(f"{at}.description: must be a string")
        params = tool.get("parameters")
        if params is not None and (not isinstance(params, dict) or params.get("type") != "object"):
            problems.append(f"{at}.parameters: must be a JSON schema object of type 'object'")
        problems.extend(f"{at}.parameters{p}" for p in schema_null_problems(params))
        strict = tool.get("strict")
        if strict is not None and not isinstance(strict, bool):
            problems.append(f"{at}.strict: must be a boolean")
        elif strict is True and isinstance(params, dict):
            problems.extend(f"{at}.parameters{path}: {reason}" for path, reason in _strict_problems(params, ""))
    return declared


def _strict_problems(schema: Any, path: str) -> list[tuple[str, str]]:
    """Where a schema breaks strict mode: objects must forbid additional properties and
    require every property (recursing into properties, items, anyOf and $defs)."""
    if not isinstance(schema, dict):
        return []
    out: list[tuple[str, str]] = []
    props = schema.get("properties")
    if schema.get("type") == "object" or isinstance(props, dict):
        if schema.get("additionalProperties") is not False:
            out.append((path, "strict mode needs \"additionalProperties\": false"))
        if isinstance(props, dict):
            missing = sorted(set(props) - set(schema.get("required") or []))
            if missing:
                out.append((path, f"strict mode needs every property in required (missing {missing})"))
            for key in sorted(props):
                out.extend(_strict_problems(props[key], f"{path}.properties.{key}"))
    if "items" in schema:
        out.extend(_strict_problems(schema["items"], f"{path}.items"))
    for key in ("anyOf", "$defs", "definitions"):
        sub = schema.get(key)
        entries = enumerate(sub) if isinstance(sub, list) else (sub.items() if isinstance(sub, dict) else ())
        for name, value in entries:
            out.extend(_strict_problems(value, f"{path}.{key}.{name}"))
    return out
