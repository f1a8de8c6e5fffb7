"""The cost figures of a ContextAssembly record (issue 23, "cost is a first-class figure";
seed 000 §5.3, the assembly record as the cache and audit boundary).

Estimated when the assembly is made, from the previous assembled payload of the same
branch and viewer and this one (:class:`~contextledger.providers.cost.CacheSimulator`
fed the two payloads: the cache state the provider holds after the previous request),
and, for the plain replay of the same turn, from the two replay token counts the records
already hold (a replay request extends the previous one, so its cached prefix is the
previous request — nothing is re-tokenised):

* Anthropic replay: the client's breakpoint on the last block (Claude Code's placement)
  reads the previous replay request and writes the new tail; a prefix below the model's
  minimum is uncached.
* OpenAI replay: the previous request, rounded down to the 128-token increments from
  1,024 tokens, is cached input; the rest is input.

A payload that carries no ``cache_control`` (the assembler's own Anthropic payload) is
priced as if sent with automatic caching (one breakpoint on its last block); a payload
with breakpoints (the proxy's upstream body) as it is.

Shape of ``ContextAssembly.cost``::

    {"basis": "estimate", "prices": "<table version>", "price": "<row matched>",
     "model": <name or None>, "previous_assembly_id": <id or None>,
     "assembled": {"total_tokens", "cache_read_tokens", "cache_write_tokens",
                   "cache_write_1h_tokens", "uncached_tokens", "output_tokens", "usd", ...},
     "replay": {... same keys ...}}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextledger.providers.cost import (
    OPENAI_CACHE_INCREMENT,
    OPENAI_MIN_CACHED,
    CacheSimulator,
    request_blocks,
)
from contextledger.providers.prices import ModelPrice, PriceTable, load_prices, price_family

__all__ = ["assembly_cost", "replay_split"]


def _with_breakpoint(provider: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    body = dict(payload)
    if provider == "anthropic" and not any(b.breakpoint for b in request_blocks(provider, body)):
        body["cache_control"] = {"type": "ephemeral"}
    return body


def replay_split(price: ModelPrice, replay_tokens: int, previous_replay_tokens: int | None) -> dict[str, int]:
    """Cached / written / uncached tokens of a plain replay request of ``replay_tokens``
    after one of ``previous_replay_tokens`` (``None``: the first request), by the rules in
    the module docstring."""
    prev = min(previous_replay_tokens or 0, replay_tokens)
    if price_family(price.provider) == "anthropic":
        read = prev if prev >= price.min_cacheable else 0
        write = replay_tokens - read if replay_tokens >= price.min_cacheable else 0
        return {"cache_read_tokens": read, "cache_write_tokens": write, "uncached_tokens": replay_tokens - read - write}
    read = OPENAI_MIN_CACHED + (prev - OPENAI_MIN_CACHED) // OPENAI_CACHE_INCREMENT * OPENAI_CACHE_INCREMENT if prev >= OPENAI_MIN_CACHED else 0
    return {"cache_read_tokens": read, "cache_write_tokens": 0, "uncached_tokens": replay_tokens - read}


def _usd(price: ModelPrice, split: Mapping[str, int]) -> float:
    return (split["uncached_tokens"] * price.input + split["cache_read_tokens"] * price.cache_read + split["cache_write_tokens"] * price.cache_write_5m) / 1_000_000


def assembly_cost(
    provider: str,
    model: str | None,
    payload: Mapping[str, Any],
    replay_tokens: int,
    *,
    previous: tuple[str, Mapping[str, Any] | None, int] | None = None,
    prices: PriceTable | None = None,
) -> dict[str, Any]:
    """The ``cost`` field of an assembly record (shape in the module docstring).

    ``previous``: ``(assembly id, its stored payload or None, its replay_tokens)`` of the
    previous assembly of the same branch and viewer, ``None`` for the first.
    """
    table = prices or load_prices()
    simulator = CacheSimulator(provider, model, table)
    prev_id, prev_payload, prev_replay = previous if previous is not None else (None, None, None)
    if prev_payload:
        simulator.add(_with_breakpoint(provider, prev_payload))
    assembled = simulator.add(_with_breakpoint(provider, payload)).as_dict()
    split = replay_split(simulator.price, replay_tokens, prev_replay)
    replay = {"total_tokens": replay_tokens, **split, "cache_write_1h_tokens": 0, "output_tokens": 0, "usd": round(_usd(simulator.price, split), 9)}
    return {
        "basis": "estimate", "prices": table.version, "price": simulator.price.matched, "model": model,
        "previous_assembly_id": prev_id, "assembled": assembled, "replay": replay,
    }
