"""Cost of a conversation's requests after the providers' prompt caching (issue 23; seed 001
problem 7, "prompt cache": the stable system prompt and tool descriptions cached).

Pure functions over request bodies in a provider's wire format.  A body is cut into
*blocks* — the units a provider caches at — each with an identity (its canonical JSON
without ``cache_control``, plus its role and whether it opens a message) and its token
count (the shared memoised o200k tokenizer, with the framing of
:mod:`contextledger.providers.counting`, so the blocks of a body add up to
:func:`~contextledger.providers.registry.count_payload_tokens`).  Two requests share a
prefix of ``k`` blocks when their first ``k`` identities are equal; the cached part is
measured in whole blocks (a provider may match a few tokens more inside the first block
that differs; this model does not).

Anthropic Messages ("Prompt caching", platform.claude.com/docs/en/build-with-claude/prompt-caching):

* The prefix is ``tools`` → ``system`` → ``messages``, in that order.
* A ``cache_control`` breakpoint (on a tool, a system block or a message content block;
  a top-level ``cache_control`` puts it on the last block — "automatic caching") writes
  the prefix up to and including its block, if that prefix has at least the model's
  minimum cacheable length (``min_cacheable`` of the price table: 1,024 / 2,048 /
  4,096 tokens by model).  Shorter prefixes are processed uncached, without error.
* A later request reads the longest previously written prefix it repeats exactly: the
  system checks the block boundary at each breakpoint and the 19 before it (the 20-block
  lookback window); a written prefix ending further back is not found.
* Billing: ``cache_read`` tokens (the hit) at the cache-read price; the tokens after the
  hit up to the last cacheable breakpoint are written, at the 5-minute price (1.25×
  input) or, for a breakpoint with ``"ttl": "1h"``, the 1-hour price (2× input); the rest
  is uncached input.  Entries are assumed alive (the model ignores the 5-minute / 1-hour
  expiry: requests of a conversation are taken to follow each other within it).

OpenAI Chat Completions and Responses ("Prompt caching",
developers.openai.com/api/docs/guides/prompt-caching):

* Caching is automatic for prompts of 1,024 tokens or more, on the exact prefix of an
  earlier request; hits come in increments of 128 tokens, so a matched prefix of ``m ≥
  1024`` tokens is billed ``1024 + 128·⌊(m − 1024)/128⌋`` tokens as cached input.  Tools
  are taken to precede the messages (a changed tool list breaks the prefix).
* No write premium: the rest is billed as input.

Units: tokens (int) and USD (float).  Output tokens are given by the caller (default 0:
an estimate from request bodies prices the input side only).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from contextledger.errors import InputError
from contextledger.providers import counting as _c
from contextledger.providers.prices import ModelPrice, PriceTable, load_prices, price_family
from contextledger.tokens import get_tokenizer

__all__ = [
    "ANTHROPIC_LOOKBACK_BLOCKS",
    "OPENAI_CACHE_INCREMENT",
    "OPENAI_MIN_CACHED",
    "Block",
    "CacheSimulator",
    "RequestCost",
    "conversation_cost",
    "request_blocks",
    "total_cost",
    "usage_cost",
]

ANTHROPIC_LOOKBACK_BLOCKS = 20
"""Block boundaries checked for a hit at each breakpoint (the breakpoint's own and 19 before)."""
OPENAI_MIN_CACHED = 1024
"""Shortest prompt OpenAI caches, tokens."""
OPENAI_CACHE_INCREMENT = 128
"""OpenAI cache hits grow in steps of this many tokens past :data:`OPENAI_MIN_CACHED`."""
_TTLS = ("5m", "1h")


@dataclass(frozen=True, slots=True)
class Block:
    """One cacheable unit of a request: ``key`` (sha256 hex of its identity), ``tokens``,
    and ``breakpoint`` — ``None``, ``"5m"`` or ``"1h"`` (an Anthropic ``cache_control``)."""

    key: str
    tokens: int
    breakpoint: str | None = None


@dataclass(frozen=True, slots=True)
class RequestCost:
    """One request's input split by caching, and its cost.

    ``total_tokens`` = ``cache_read_tokens`` + ``cache_write_tokens`` + ``uncached_tokens``;
    ``cache_write_1h_tokens`` is the 1-hour part of ``cache_write_tokens``.  ``usd`` is
    the input side plus ``output_tokens`` at the output price; ``price`` the table key
    that priced the model; ``source`` ``"estimate"`` (from bodies) or ``"usage"``.
    """

    total_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cache_write_1h_tokens: int
    uncached_tokens: int
    output_tokens: int
    usd: float
    price: str
    source: str = "estimate"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the fields (``usd`` rounded to 1e-9)."""
        data = asdict(self)
        data["usd"] = round(self.usd, 9)
        return data


def _identity(*parts: Any) -> str:
    text = json.dumps(parts, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _strip(block: Any) -> tuple[Any, str | None]:
    """``block`` without its ``cache_control``, and the breakpoint TTL it carried."""
    if not isinstance(block, dict) or "cache_control" not in block:
        return block, None
    control = block["cache_control"]
    ttl = control.get("ttl") if isinstance(control, dict) else None
    rest = {k: v for k, v in block.items() if k != "cache_control"}
    return rest, ttl if ttl in _TTLS else "5m"


def _anthropic_blocks(body: Mapping[str, Any]) -> list[Block]:
    n: Callable[[str], int] = get_tokenizer().count
    out: list[Block] = []
    for i, tool in enumerate(_list(body.get("tools"))):
        plain, ttl = _strip(tool)
        tokens = _c.TOKENS_PER_TOOL + n(_c._json(tool))
        tokens += _c.ANTHROPIC_TOOL_SYSTEM_PROMPT_TOKENS if i == 0 else 0
        out.append(Block(_identity("tool", plain), tokens, ttl))
    system = body.get("system")
    system_blocks = [{"type": "text", "text": system}] if isinstance(system, str) and system else _list(system)
    for i, block in enumerate(system_blocks):
        plain, ttl = _strip(block)
        tokens = _c._anthropic_blocks(n, [block]) + (_c.TOKENS_PER_MESSAGE if i == 0 else 0)
        out.append(Block(_identity("system", plain), tokens, ttl))
    for message in _list(body.get("messages")):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else _list(content)
        opening = _c.TOKENS_PER_MESSAGE + (n(role) if isinstance(role, str) else 0)
        if not blocks:
            out.append(Block(_identity("message", role, None), opening))
        for i, block in enumerate(blocks):
            plain, ttl = _strip(block)
            tokens = _c._anthropic_blocks(n, [block]) + (opening if i == 0 else 0)
            out.append(Block(_identity("message", role, i == 0, plain), tokens, ttl))
    if body.get("cache_control") is not None and out:
        _, ttl = _strip({"cache_control": body["cache_control"]})
        last = out[-1]
        out[-1] = Block(last.key, last.tokens, last.breakpoint or ttl)
    return _primed(out)


def _openai_blocks(body: Mapping[str, Any], responses: bool) -> list[Block]:
    n: Callable[[str], int] = get_tokenizer().count
    out: list[Block] = []
    tools = _list(body.get("tools"))
    for i, tool in enumerate(tools):
        count = _c._responses_tool(n, tool) if responses else _c._openai_tool(n, tool)
        out.append(Block(_identity("tool", tool), count + (_c.TOOLS_BLOCK_TOKENS if i == 0 else 0)))
    if responses:
        instructions = body.get("instructions")
        if isinstance(instructions, str) and instructions:
            tokens = _c.TOKENS_PER_MESSAGE + n("system") + n(instructions)
            out.append(Block(_identity("instructions", instructions), tokens))
        items = body.get("input")
        if isinstance(items, str):
            out.append(Block(_identity("input", items), _c.TOKENS_PER_MESSAGE + n("user") + n(items)))
        for item in _list(items):
            if isinstance(item, dict):
                out.append(Block(_identity("item", item), _c._responses_item(n, item)))
    else:
        for message in _list(body.get("messages")):
            if isinstance(message, dict):
                out.append(Block(_identity("message", message), _c._openai_message(n, message)))
    return _primed(out)


def _primed(blocks: list[Block]) -> list[Block]:
    """Add the once-per-request reply priming to the first block (so the blocks add up
    to the payload count)."""
    if blocks:
        first = blocks[0]
        blocks[0] = Block(first.key, first.tokens + _c.REPLY_PRIMING_TOKENS, first.breakpoint)
    return blocks


def request_blocks(provider: str, body: Mapping[str, Any]) -> list[Block]:
    """The cacheable blocks of ``body`` in prefix order (see the module docstring).

    ``provider``: ``"anthropic"``, ``"openai-chat"`` or ``"openai-responses"``; raises
    :class:`~contextledger.errors.InputError` for another name.  Ill-typed fields count zero.
    """
    if provider == "anthropic":
        return _anthropic_blocks(body)
    if provider in ("openai-chat", "openai-responses"):
        return _openai_blocks(body, responses=provider == "openai-responses")
    raise InputError(f"cost model: unknown provider {provider!r}; expected anthropic, openai-chat or openai-responses")


def _chain(blocks: Sequence[Block]) -> tuple[list[str], list[int]]:
    """Prefix hashes and cumulative token counts: entry ``i`` covers blocks ``0..i``."""
    hashes: list[str] = []
    cumulative: list[int] = []
    digest, total = "", 0
    for block in blocks:
        digest = hashlib.sha256(f"{digest}|{block.key}".encode()).hexdigest()
        total += block.tokens
        hashes.append(digest)
        cumulative.append(total)
    return hashes, cumulative


class CacheSimulator:
    """The provider cache of one conversation, fed its requests in order.

    ``provider`` a wire format name; ``model`` the model name (priced by longest prefix);
    ``prices`` the table (default :func:`~contextledger.providers.prices.load_prices`).
    Deterministic: the same requests in the same order give the same costs.
    """

    def __init__(self, provider: str, model: str | None, prices: PriceTable | None = None) -> None:
        self.provider = provider
        self.price: ModelPrice = (prices or load_prices()).price(provider, model)
        self._written: dict[str, int] = {}

    def add(self, body: Mapping[str, Any], *, output_tokens: int = 0) -> RequestCost:
        """Cost of the next request ``body``; records what it writes to the cache."""
        return self.add_blocks(request_blocks(self.provider, body), output_tokens=output_tokens)

    def add_blocks(self, blocks: Sequence[Block], *, output_tokens: int = 0) -> RequestCost:
        """As :meth:`add`, for blocks already cut with :func:`request_blocks`."""
        hashes, cumulative = _chain(blocks)
        total = cumulative[-1] if cumulative else 0
        if price_family(self.provider) == "anthropic":
            read, write, write_1h = self._anthropic(blocks, hashes, cumulative)
        else:
            read, write, write_1h = self._openai(hashes, cumulative), 0, 0
        return _priced(self.price, total, read, write, write_1h, output_tokens, "estimate")

    def _anthropic(self, blocks: Sequence[Block], hashes: list[str], cumulative: list[int]) -> tuple[int, int, int]:
        points = [i for i, block in enumerate(blocks) if block.breakpoint]
        hit = -1
        for point in points:
            for j in range(point, max(-1, point - ANTHROPIC_LOOKBACK_BLOCKS), -1):
                if hashes[j] in self._written:
                    hit = max(hit, j)
                    break
        read = cumulative[hit] if hit >= 0 else 0
        write = write_1h = 0
        floor = read
        for point in points:
            size = cumulative[point]
            if size < self.price.min_cacheable:
                continue
            self._written[hashes[point]] = size
            if point > hit:
                segment = size - floor
                write += segment
                write_1h += segment if blocks[point].breakpoint == "1h" else 0
                floor = size
        return read, write, write_1h

    def _openai(self, hashes: list[str], cumulative: list[int]) -> int:
        matched = 0
        for j in range(len(hashes) - 1, -1, -1):
            if hashes[j] in self._written:
                matched = cumulative[j]
                break
        for digest, size in zip(hashes, cumulative, strict=True):
            self._written[digest] = size
        if matched < OPENAI_MIN_CACHED:
            return 0
        return OPENAI_MIN_CACHED + (matched - OPENAI_MIN_CACHED) // OPENAI_CACHE_INCREMENT * OPENAI_CACHE_INCREMENT


def _priced(price: ModelPrice, total: int, read: int, write: int, write_1h: int, output: int, source: str) -> RequestCost:
    uncached = total - read - write
    usd = (
        uncached * price.input
        + read * price.cache_read
        + (write - write_1h) * price.cache_write_5m
        + write_1h * price.cache_write_1h
        + output * price.output
    ) / 1_000_000
    return RequestCost(total, read, write, write_1h, uncached, output, usd, price.matched, source)


def conversation_cost(
    provider: str,
    bodies: Iterable[Mapping[str, Any]],
    *,
    model: str | None = None,
    prices: PriceTable | None = None,
) -> list[RequestCost]:
    """Per-request cost of one conversation's bodies, in order (one :class:`CacheSimulator`).

    ``model`` defaults to the first body's ``"model"`` field.  Replay cost is this function
    over the client's own bodies (its own breakpoints); contextledger's over the assembled
    bodies.
    """
    items = list(bodies)
    name = model if model is not None else (str(items[0].get("model")) if items and items[0].get("model") else None)
    simulator = CacheSimulator(provider, name, prices)
    return [simulator.add(body) for body in items]


def total_cost(costs: Iterable[RequestCost]) -> dict[str, Any]:
    """Sums of a sequence of :class:`RequestCost`: token fields and ``usd`` (rounded to 1e-9),
    ``requests`` the count."""
    keys = ("total_tokens", "cache_read_tokens", "cache_write_tokens", "cache_write_1h_tokens", "uncached_tokens", "output_tokens")
    sums: dict[str, Any] = dict.fromkeys(keys, 0)
    usd = 0.0
    count = 0
    for cost in costs:
        count += 1
        usd += cost.usd
        for key in keys:
            sums[key] += getattr(cost, key)
    sums["usd"] = round(usd, 9)
    sums["requests"] = count
    return sums


def usage_cost(
    provider: str,
    usage: Mapping[str, Any],
    *,
    model: str | None = None,
    prices: PriceTable | None = None,
) -> RequestCost:
    """Cost from a provider-reported ``usage`` object.

    Anthropic: ``input_tokens`` (uncached), ``cache_read_input_tokens``,
    ``cache_creation_input_tokens`` (with ``cache_creation.ephemeral_1h_input_tokens`` the
    1-hour part), ``output_tokens``.  OpenAI Chat: ``prompt_tokens`` (cached included),
    ``prompt_tokens_details.cached_tokens``, ``completion_tokens``; Responses:
    ``input_tokens`` (cached included), ``input_tokens_details.cached_tokens``,
    ``output_tokens``.  Missing fields count zero; raises
    :class:`~contextledger.errors.InputError` when a count is negative or not an integer.
    """
    price = (prices or load_prices()).price(provider, model)
    if price_family(provider) == "anthropic":
        read = _count(usage, "cache_read_input_tokens")
        write = _count(usage, "cache_creation_input_tokens")
        creation = usage.get("cache_creation")
        write_1h = _count(creation, "ephemeral_1h_input_tokens") if isinstance(creation, Mapping) else 0
        total = _count(usage, "input_tokens") + read + write
        return _priced(price, total, read, write, min(write_1h, write), _count(usage, "output_tokens"), "usage")
    if "prompt_tokens" in usage:
        details = usage.get("prompt_tokens_details")
        total, output = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
    else:
        details = usage.get("input_tokens_details")
        total, output = _count(usage, "input_tokens"), _count(usage, "output_tokens")
    read = _count(details, "cached_tokens") if isinstance(details, Mapping) else 0
    return _priced(price, total, min(read, total), 0, 0, output, "usage")


def _count(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key, 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"usage: {key} must be a whole number ≥ 0, got {value!r}")
    return value


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
