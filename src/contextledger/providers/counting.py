"""Token counts of serialized provider payloads (o200k_base, offline).

Every string piece of the payload is counted with the shared tokenizer's memoised
:meth:`~contextledger.tokens.Tokenizer.count`, so re-counting a payload whose messages were
counted before costs dictionary look-ups, not tokenisation.  Only tool definitions and
``tool_use`` inputs are turned into JSON (compact, ``ensure_ascii=False``), one object at a
time; the whole payload is never dumped.

OpenAI Chat Completions (the OpenAI cookbook rule for the gpt-4o family, "How to count
tokens with tiktoken")::

    total = 3                                       # reply priming <|start|>assistant<|message|>
          + Σ messages ( 3                          # per-message framing
                        + n(role) + n(content text)
                        + [n(name) + 1]             # when "name" is present
                        + n(tool_call_id)           # tool messages
                        + Σ tool_calls (n(id) + n(function.name) + n(function.arguments) + 3) )
          + [12 + Σ tools (n(json(tool["function"])) + 7)]   # when "tools" is present

Image content parts count :data:`OPENAI_IMAGE_TOKENS` each (the documented high-detail
cost of a 1024×1024 image: 85 + 4 tiles × 170), since the payload does not say the size.

OpenAI Responses (o200k, the same framing as Chat Completions, so one neutral request
counts alike in both OpenAI formats)::

    total = 3
          + [3 + n("system") + n(instructions)]       # when "instructions" is present
          + Σ items                                     # "input" (a string: one user message)
          + [12 + Σ tools (n(json({name, description, parameters})) + 7)]

    message               3 + n(role) + n(content text)    (input_image parts as above)
    function_call         3 + n(call_id) + n(name) + n(arguments)
    function_call_output  3 + n(call_id) + n(output text)
    reasoning             3 + n(summary and content texts)
    other item types      their compact JSON
    a tool of another type (web_search …): its compact JSON + 7

Anthropic Messages has no offline tokenizer; o200k is used as a *labelled proxy*
(:data:`ANTHROPIC_TOKENIZER_LABEL`) with the same framing::

    total = 3
          + [3 + n(system text)]                              # when "system" is present
          + Σ messages (3 + n(role) + Σ blocks)
          + [346 + Σ tools (n(json(tool)) + 7)]               # when "tools" is present

    text block        n(text)                 thinking block   n(thinking)
    tool_use block    n(id) + n(name) + n(json(input)) + 3
    tool_result block n(tool_use_id) + n(content text) + 3     (images inside as below)
    image block       ANTHROPIC_IMAGE_TOKENS (1024×1024 / 750 = 1398, Anthropic's documented rule)

346 is Anthropic's documented size of the tool-use system prompt it adds when tools are
present (``tool_choice`` auto, current Claude models; older models list other sizes).
Constants are tokens; the formulas estimate, they do not reproduce a provider's billing.  Block types not listed count their compact JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from contextledger.tokens import get_tokenizer

__all__ = [
    "ANTHROPIC_IMAGE_TOKENS",
    "ANTHROPIC_TOKENIZER_LABEL",
    "ANTHROPIC_TOOL_SYSTEM_PROMPT_TOKENS",
    "OPENAI_IMAGE_TOKENS",
    "OPENAI_TOKENIZER_LABEL",
    "REPLY_PRIMING_TOKENS",
    "TOKENS_PER_MESSAGE",
    "TOKENS_PER_NAME",
    "TOKENS_PER_TOOL",
    "TOKENS_PER_TOOL_CALL",
    "TOOLS_BLOCK_TOKENS",
    "count_anthropic_tokens",
    "count_openai_chat_tokens",
    "count_openai_responses_tokens",
]

TOKENS_PER_MESSAGE = 3
"""Framing tokens of every message (cookbook ``tokens_per_message``)."""
TOKENS_PER_NAME = 1
"""Extra token when a message has a ``name`` (cookbook ``tokens_per_name``)."""
REPLY_PRIMING_TOKENS = 3
"""Tokens priming the reply, added once per request."""
TOKENS_PER_TOOL_CALL = 3
"""Framing of one tool call / tool_use / tool_result (type and wrapper keys)."""
TOKENS_PER_TOOL = 7
"""Framing of one tool definition (cookbook ``func_init`` for gpt-4o)."""
TOOLS_BLOCK_TOKENS = 12
"""Framing of the OpenAI tools section, once (cookbook ``func_end`` for gpt-4o)."""
OPENAI_IMAGE_TOKENS = 765
"""One image content part: high detail 1024×1024 = 85 base + 4 tiles × 170."""
ANTHROPIC_IMAGE_TOKENS = 1398
"""One image block: (1024 × 1024) / 750 rounded down, Anthropic's documented estimate."""
ANTHROPIC_TOOL_SYSTEM_PROMPT_TOKENS = 346
"""Tool-use system prompt Anthropic adds when tools are present (tool_choice auto)."""
OPENAI_TOKENIZER_LABEL = "o200k_base"
"""Tokenizer used for OpenAI payloads."""
ANTHROPIC_TOKENIZER_LABEL = "o200k_base (proxy for anthropic)"
"""Label recorded for Anthropic counts: o200k stands in for Anthropic's tokenizer."""


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _memoised(memo: dict[int, Any] | None, obj: Any, count: Callable[[Any], int]) -> int:
    """``count(obj)``, kept in ``memo`` by the identity of ``obj`` (see the ``memo``
    argument of the count functions)."""
    if memo is None:
        return count(obj)
    hit = memo.get(id(obj))
    if hit is None or hit[0] is not obj:
        hit = memo[id(obj)] = (obj, count(obj))
    return int(hit[1])


def count_openai_chat_tokens(payload: dict[str, Any], *, memo: dict[int, Any] | None = None) -> int:
    """Prompt tokens of a Chat Completions body (``messages`` and ``tools``), in tokens.

    Follows the formula in the module docstring.  Shape errors are not reported here (use
    :func:`contextledger.providers.validate.validate_openai_chat`); missing or ill-typed
    fields count zero.  ``memo`` (optional, owned by the caller): the count of each
    message and tool dict is kept by object identity, for payloads that share dicts
    (see ``memo`` of the serializers); the dicts must not be mutated meanwhile.
    """
    n: Callable[[str], int] = get_tokenizer().count
    total = REPLY_PRIMING_TOKENS
    for message in _list(payload.get("messages")):
        if not isinstance(message, dict):
            continue
        total += _memoised(memo, message, lambda m: _openai_message(n, m))
    tools = _list(payload.get("tools"))
    if tools:
        total += TOOLS_BLOCK_TOKENS
        for tool in tools:
            total += _memoised(memo, tool, lambda t: _openai_tool(n, t))
    return total


def _openai_tool(n: Callable[[str], int], tool: Any) -> int:
    definition = tool.get("function", tool) if isinstance(tool, dict) else tool
    return TOKENS_PER_TOOL + n(_json(definition))


def _openai_message(n: Callable[[str], int], message: dict[str, Any]) -> int:
    total = TOKENS_PER_MESSAGE + _str_tokens(n, message.get("role"))
    name = message.get("name")
    if isinstance(name, str):
        total += n(name) + TOKENS_PER_NAME
    total += _openai_content(n, message.get("content"))
    total += _str_tokens(n, message.get("tool_call_id"))
    for call in _list(message.get("tool_calls")):
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        total += TOKENS_PER_TOOL_CALL + _str_tokens(n, call.get("id"))
        total += _str_tokens(n, function.get("name")) + _str_tokens(
            n, function.get("arguments")
        )
    return total


def _openai_content(n: Callable[[str], int], content: Any) -> int:
    if isinstance(content, str):
        return n(content)
    total = 0
    for part in _list(content):
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            total += _str_tokens(n, part.get("text"))
        elif kind == "refusal":
            total += _str_tokens(n, part.get("refusal"))
        elif kind == "image_url":
            total += OPENAI_IMAGE_TOKENS
        else:
            total += n(_json(part))
    return total


def count_openai_responses_tokens(payload: dict[str, Any], *, memo: dict[int, Any] | None = None) -> int:
    """Input tokens of a Responses body (``instructions``, ``input``, ``tools``), in tokens.

    Follows the formula in the module docstring.  Missing or ill-typed fields count zero.
    ``memo``: as for :func:`count_openai_chat_tokens`, per input item and tool.
    """
    n: Callable[[str], int] = get_tokenizer().count
    total = REPLY_PRIMING_TOKENS
    instructions = payload.get("instructions")
    if isinstance(instructions, str) and instructions:
        total += TOKENS_PER_MESSAGE + n("system") + n(instructions)
    items = payload.get("input")
    if isinstance(items, str):
        total += TOKENS_PER_MESSAGE + n("user") + n(items)
    for item in _list(items):
        if isinstance(item, dict):
            total += _memoised(memo, item, lambda i: _responses_item(n, i))
    tools = _list(payload.get("tools"))
    if tools:
        total += TOOLS_BLOCK_TOKENS
        for tool in tools:
            total += _memoised(memo, tool, lambda t: _responses_tool(n, t))
    return total


def _responses_tool(n: Callable[[str], int], tool: Any) -> int:
    if isinstance(tool, dict) and tool.get("type") == "function":
        tool = {k: tool[k] for k in ("name", "description", "parameters") if k in tool}
    return TOKENS_PER_TOOL + n(_json(tool))


def _responses_item(n: Callable[[str], int], item: dict[str, Any]) -> int:
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        return TOKENS_PER_MESSAGE + _str_tokens(n, item.get("role")) + _responses_content(n, item.get("content"))
    if kind == "function_call":
        return TOKENS_PER_TOOL_CALL + sum(_str_tokens(n, item.get(k)) for k in ("call_id", "name", "arguments"))
    if kind == "function_call_output":
        return TOKENS_PER_MESSAGE + _str_tokens(n, item.get("call_id")) + _responses_content(n, item.get("output"))
    if kind == "reasoning":
        texts = [p.get("text") for key in ("summary", "content") for p in _list(item.get(key)) if isinstance(p, dict)]
        return TOKENS_PER_MESSAGE + sum(_str_tokens(n, t) for t in texts)
    return n(_json(item))


def _responses_content(n: Callable[[str], int], content: Any) -> int:
    if isinstance(content, str):
        return n(content)
    total = 0
    for part in _list(content):
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("input_text", "output_text"):
            total += _str_tokens(n, part.get("text"))
        elif kind == "refusal":
            total += _str_tokens(n, part.get("refusal"))
        elif kind == "input_image":
            total += OPENAI_IMAGE_TOKENS
        else:
            total += n(_json(part))
    return total


def count_anthropic_tokens(payload: dict[str, Any], *, memo: dict[int, Any] | None = None) -> int:
    """Input tokens of a Messages body (``system``, ``messages``, ``tools``), o200k proxy.

    Follows the formula in the module docstring; record the count with
    :data:`ANTHROPIC_TOKENIZER_LABEL`.  Missing or ill-typed fields count zero.
    ``memo``: as for :func:`count_openai_chat_tokens`, per content block and tool.
    """
    n: Callable[[str], int] = get_tokenizer().count
    total = REPLY_PRIMING_TOKENS
    system = payload.get("system")
    if isinstance(system, str) and system:
        total += TOKENS_PER_MESSAGE + n(system)
    elif isinstance(system, list) and system:
        total += TOKENS_PER_MESSAGE + _anthropic_blocks(n, system)
    for message in _list(payload.get("messages")):
        if not isinstance(message, dict):
            continue
        total += TOKENS_PER_MESSAGE + _str_tokens(n, message.get("role"))
        content = message.get("content")
        if isinstance(content, str):
            total += n(content)
        elif memo is None:
            total += _anthropic_blocks(n, _list(content))
        else:
            for block in _list(content):
                total += _memoised(memo, block, lambda b: _anthropic_blocks(n, [b]))
    tools = _list(payload.get("tools"))
    if tools:
        total += ANTHROPIC_TOOL_SYSTEM_PROMPT_TOKENS
        total += sum(_memoised(memo, tool, lambda t: TOKENS_PER_TOOL + n(_json(t))) for tool in tools)
    return total


def _anthropic_blocks(n: Callable[[str], int], blocks: list[Any]) -> int:
    total = 0
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            total += _str_tokens(n, block.get("text"))
        elif kind == "thinking":
            total += _str_tokens(n, block.get("thinking"))
        elif kind == "image":
            total += ANTHROPIC_IMAGE_TOKENS
        elif kind == "tool_use":
            total += (
                TOKENS_PER_TOOL_CALL
                + _str_tokens(n, block.get("id"))
                + _str_tokens(n, block.get("name"))
            )
            total += n(_json(block.get("input", {})))
        elif kind == "tool_result":
            total += TOKENS_PER_TOOL_CALL + _str_tokens(n, block.get("tool_use_id"))
            content = block.get("content")
            total += (
                n(content) if isinstance(content, str) else _anthropic_blocks(n, _list(content))
            )
        else:
            total += n(_json(block))
    return total


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str_tokens(n: Callable[[str], int], value: Any) -> int:
    return n(value) if isinstance(value, str) else 0
