"""The cost model after prompt caching: Anthropic breakpoints, OpenAI automatic caching,
provider-reported usage, and the price table with its override.

Texts are runs of ``" w"``: o200k counts ``" w" * k`` as exactly ``k`` tokens, so every
block size below is known by construction (a message block adds 3 framing tokens + 1 for
its role, a system block 3, the first block of a request 3 for the reply priming).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextledger.errors import InputError
from contextledger.providers.cost import (
    CacheSimulator,
    RequestCost,
    conversation_cost,
    request_blocks,
    total_cost,
    usage_cost,
)
from contextledger.providers.prices import UNKNOWN_MODEL_LABEL, load_prices
from contextledger.providers.registry import count_payload_tokens

EPHEMERAL = {"type": "ephemeral"}


def words(k: int) -> str:
    return " w" * k


def text(k: int, *, mark: dict[str, Any] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": words(k)}
    if mark is not None:
        block["cache_control"] = mark
    return block


def anthropic(model: str, system: list[dict[str, Any]], *messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": model, "max_tokens": 64, "system": system, "messages": list(messages)}


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(k: int) -> dict[str, Any]:
    return {"role": "assistant", "content": [text(k)]}


SONNET = "claude-sonnet-4-5-20250929"


def test_blocks_add_up_to_the_payload_count() -> None:
    body = anthropic(SONNET, [text(2000, mark=EPHEMERAL)], user(text(100, mark=EPHEMERAL)), assistant(50))
    body["tools"] = [{"name": "Read", "description": "read a file", "input_schema": {"type": "object"}, "cache_control": EPHEMERAL}]
    blocks = request_blocks("anthropic", body)
    assert sum(b.tokens for b in blocks) == count_payload_tokens("anthropic", body)
    assert [b.breakpoint for b in blocks] == ["5m", "5m", "5m", None]


def test_anthropic_breakpoint_moved_to_the_newest_message_reads_the_previous_prefix() -> None:
    first = anthropic(SONNET, [text(2000, mark=EPHEMERAL)], user(text(100, mark=EPHEMERAL)))
    second = anthropic(SONNET, [text(2000, mark=EPHEMERAL)], user(text(100)), assistant(50), user(text(100, mark=EPHEMERAL)))
    one, two = conversation_cost("anthropic", [first, second])
    # system 2000 + 3 framing + 3 priming = 2006; user 100 + 4 = 104; assistant 54.
    assert one == RequestCost(2110, 0, 2110, 0, 0, 0, 2110 * 3.75 / 1e6, "claude-sonnet-4-5")
    assert two == RequestCost(2268, 2110, 158, 0, 0, 0, (2110 * 0.3 + 158 * 3.75) / 1e6, "claude-sonnet-4-5")


def test_anthropic_prefix_broken_at_block_1_falls_back_to_the_system_entry() -> None:
    first = anthropic(SONNET, [text(2000, mark=EPHEMERAL)], user(text(100, mark=EPHEMERAL)))
    changed = anthropic(SONNET, [text(2000, mark=EPHEMERAL)], user(text(101, mark=EPHEMERAL)))
    _, two = conversation_cost("anthropic", [first, changed])
    assert (two.cache_read_tokens, two.cache_write_tokens, two.uncached_tokens) == (2006, 105, 0)


def test_anthropic_tokens_after_the_last_breakpoint_are_uncached() -> None:
    body = anthropic(SONNET, [text(2000, mark=EPHEMERAL)], user(text(100)))
    one, two = conversation_cost("anthropic", [body, body])
    assert (one.cache_read_tokens, one.cache_write_tokens, one.uncached_tokens) == (0, 2006, 104)
    assert (two.cache_read_tokens, two.cache_write_tokens, two.uncached_tokens) == (2006, 0, 104)


def test_anthropic_prefix_below_the_model_minimum_is_not_cached() -> None:
    haiku = "claude-haiku-4-5-20251001"  # minimum 4,096 tokens
    body = anthropic(haiku, [text(2000, mark=EPHEMERAL)], user(text(100, mark=EPHEMERAL)))
    one, two = conversation_cost("anthropic", [body, body])
    assert one == two == RequestCost(2110, 0, 0, 0, 2110, 0, 2110 * 1.0 / 1e6, "claude-haiku-4-5")


def test_anthropic_lookback_of_20_blocks() -> None:
    first = anthropic(SONNET, [text(2000, mark=EPHEMERAL)], user(text(100, mark=EPHEMERAL)))
    tail = [user(text(10)) if i % 2 else assistant(10) for i in range(19)]
    near = anthropic(SONNET, [text(2000)], user(text(100)), *tail[:-1], user(text(10, mark=EPHEMERAL)))
    far = anthropic(SONNET, [text(2000)], user(text(100)), *tail, user(text(10, mark=EPHEMERAL)))
    # near: the breakpoint is block 20; its window 20..1 holds the written block 1.
    _, hit = conversation_cost("anthropic", [first, near])
    assert hit.cache_read_tokens == 2110
    # far: the breakpoint is block 21; its window 21..2 misses both written entries.
    _, miss = conversation_cost("anthropic", [first, far])
    assert (miss.cache_read_tokens, miss.cache_write_tokens) == (0, miss.total_tokens)


def test_anthropic_one_hour_breakpoint_and_automatic_caching() -> None:
    body = anthropic(SONNET, [text(2000, mark={"type": "ephemeral", "ttl": "1h"})], user(text(100)))
    body["cache_control"] = EPHEMERAL  # automatic: a breakpoint on the last block
    (one,) = conversation_cost("anthropic", [body])
    assert (one.cache_write_tokens, one.cache_write_1h_tokens, one.uncached_tokens) == (2110, 2006, 0)
    assert one.usd == pytest.approx((2006 * 6.0 + 104 * 3.75) / 1e6, abs=1e-15)


def chat(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "gpt-4.1-2025-04-14", "messages": list(messages)}


def test_openai_chat_automatic_caching_in_128_token_increments() -> None:
    system = {"role": "system", "content": words(1500)}  # 1500 + 4 + 3 priming = 1507
    question = {"role": "user", "content": words(100)}  # 104
    answer = {"role": "assistant", "content": words(50)}  # 54
    one, two = conversation_cost("openai-chat", [chat(system, question), chat(system, question, answer, question)])
    assert (one.total_tokens, one.cache_read_tokens) == (1611, 0)
    # matched 1611 → 1024 + 128·⌊587/128⌋ = 1536 cached; no write premium.
    assert two == RequestCost(1769, 1536, 0, 0, 233, 0, (233 * 2.0 + 1536 * 0.5) / 1e6, "gpt-4.1")


def test_openai_prefix_below_1024_tokens_is_not_cached() -> None:
    system = {"role": "system", "content": words(500)}
    question = {"role": "user", "content": words(100)}
    _, two = conversation_cost("openai-chat", [chat(system, question), chat(system, question, question)])
    assert (two.cache_read_tokens, two.uncached_tokens) == (0, 715)


def test_openai_responses_instructions_and_items() -> None:
    first = {"model": "gpt-5", "instructions": words(1200), "input": [{"role": "user", "content": words(100)}]}
    second = {**first, "input": [*first["input"], {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]}
    one, two = conversation_cost("openai-responses", [first, second])
    # instructions 1200 + 3 + 1 ("system") + 3 priming = 1207; item 104 → 1311 matched.
    assert (one.total_tokens, two.cache_read_tokens) == (1311, 1280)
    assert two.price == "gpt-5"


def test_usage_objects_to_cost() -> None:
    anthropic_usage = {"input_tokens": 50, "cache_read_input_tokens": 2000, "cache_creation_input_tokens": 300,
                       "cache_creation": {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 100}, "output_tokens": 20}
    cost = usage_cost("anthropic", anthropic_usage, model="claude-opus-4-6")
    assert cost == RequestCost(2350, 2000, 300, 100, 50, 20, pytest.approx(0.004), "claude-opus-4-6", "usage")  # type: ignore[arg-type]
    chat_usage = {"prompt_tokens": 2000, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 1536}}
    assert usage_cost("openai-chat", chat_usage, model="gpt-4.1").usd == pytest.approx(0.001776)
    responses_usage = {"input_tokens": 2000, "output_tokens": 10, "input_tokens_details": {"cached_tokens": 1536}}
    assert usage_cost("openai-responses", responses_usage, model="gpt-4.1").uncached_tokens == 464
    with pytest.raises(InputError, match=r"^usage: input_tokens must be a whole number ≥ 0, got -1$"):
        usage_cost("anthropic", {"input_tokens": -1})


def test_totals_and_simulator_state() -> None:
    body = anthropic(SONNET, [text(2000, mark=EPHEMERAL)], user(text(100)))
    simulator = CacheSimulator("anthropic", SONNET)
    costs = [simulator.add(body), simulator.add(body)]
    sums = total_cost(costs)
    assert sums == {"total_tokens": 4220, "cache_read_tokens": 2006, "cache_write_tokens": 2006, "cache_write_1h_tokens": 0,
                    "uncached_tokens": 208, "output_tokens": 0, "usd": round(sum(c.usd for c in costs), 9), "requests": 2}


def test_unknown_model_gets_the_labelled_default() -> None:
    prices = load_prices()
    row = prices.price("anthropic", "sonnet")
    assert (row.matched, row.input) == (UNKNOWN_MODEL_LABEL, 3.0)
    assert prices.price("openai-chat", "gpt-5.5").matched == "gpt-5"  # the longest prefix
    assert prices.price("anthropic", "claude-opus-4-20250514").input == 15.0
    assert prices.price("anthropic", "claude-opus-4-5-20251101").input == 5.0
    assert prices.version == "2026-12-02"
    assert "platform.claude.com" in prices.source("anthropic")
    with pytest.raises(InputError, match="no prices for provider 'gemini'"):
        prices.price("gemini", "x")


def test_price_override_file_merges_over_the_shipped_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    override = tmp_path / "prices.toml"
    override.write_text('version = "team-1"\n[providers.anthropic.models."claude-sonnet-4-5"]\ninput = 4.0\n'
                        '[providers.anthropic.models."claude-new"]\ninput = 1.0\ncache_read = 0.1\ncache_write_5m = 1.25\n'
                        'cache_write_1h = 2.0\noutput = 5.0\nmin_cacheable = 2048\n', encoding="utf-8")
    monkeypatch.setenv("CONTEXTLEDGER_PRICES", str(override))
    prices = load_prices()
    assert prices.version == "2026-12-02+team-1"
    sonnet = prices.price("anthropic", SONNET)
    assert (sonnet.input, sonnet.cache_read, sonnet.output) == (4.0, 0.3, 15.0)
    assert prices.price("anthropic", "claude-new-1").min_cacheable == 2048
    assert prices.price("openai-chat", "gpt-4o").input == 2.5


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("version = \n", "not valid TOML"),
        ('[providers.anthropic.models."claude-sonnet-4-5"]\ninput = -1\n', "providers.anthropic.models.claude-sonnet-4-5.input must be a number ≥ 0, got -1"),
        ('[providers.anthropic.models."x"]\ninput = 1.0\n', "providers.anthropic.models.x.cache_read must be a number ≥ 0, got None"),
        ("[providers.mistral]\nsource = 'x'\n", "providers.mistral has no [default] row"),
    ],
)
def test_bad_price_file_is_one_clear_line(tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_prices(bad)
    assert str(caught.value).startswith(f"price file {bad}: ") and message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_missing_price_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"cannot read"):
        load_prices(tmp_path / "absent.toml")
