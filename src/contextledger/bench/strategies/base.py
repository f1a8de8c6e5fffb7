"""The peer-strategy protocol and the token arithmetic shared by the strategies.

A *strategy* reduces a whole transcript (a :class:`~contextledger.providers.base.NeutralRequest`
holding every message so far) to what a naive or framework-based agent would send for the
next model call under a token budget.  The benchmark compares these peers with the
assembler side by side: seed 000 § 9.1/§ 9.4 measure assembled context against the legacy
transcript replay; these strategies extend that comparison to the prior art of § 6.

Two kinds of token counts appear:

* ``count_tokens`` — given by the benchmark harness; it serializes a whole request to a
  provider payload and counts it with ``o200k_base``.  Strategies use it for their own
  sizing decisions (the largest window that fits, the keep size that fits, trigger checks
  on the original transcript).  Because peers legitimately produce invalid sequences (a
  window opening on a tool result, an unanswered call), ``count_tokens`` must accept any
  message sequence, not only well-paired ones.
* the *library-side estimate* of this module — what a peer library measures internally
  (LangChain ``token_counter``, autogen ``ChatCompletionClient.count_tokens``).  It follows
  the OpenAI cookbook framing for chat messages ("How to count tokens with tiktoken"), uses
  the shared offline tokenizer (:func:`contextledger.tokens.get_tokenizer`), is additive
  over messages and never raises.  It is close to, but not always equal to, the harness
  count; the harness measures every strategy's final output itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from contextledger.providers.base import NeutralRequest, ToolSchema, WireMessage
from contextledger.records.parts import (
    BinaryPart,
    ImagePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from contextledger.tokens import get_tokenizer

__all__ = [
    "IMAGE_ESTIMATE_TOKENS",
    "PRIMING_TOKENS",
    "TOKENS_PER_MESSAGE",
    "CountTokens",
    "Strategy",
    "estimate_fixed_tokens",
    "estimate_message_tokens",
    "estimate_messages_tokens",
    "estimate_request_tokens",
    "estimate_system_tokens",
    "largest_fitting",
]

CountTokens = Callable[[NeutralRequest], int]
"""The harness's counter: tokens of a whole request once serialized (o200k_base)."""

TOKENS_PER_MESSAGE = 3
"""Framing tokens of every message in the library-side estimate (cookbook rule)."""
PRIMING_TOKENS = 3
"""Reply-priming tokens added once per request in the library-side estimate."""
IMAGE_ESTIMATE_TOKENS = 765
"""Library-side estimate of one image or binary part (OpenAI high-detail 1024×1024)."""
_TOOLS_BLOCK_TOKENS = 12
_TOKENS_PER_TOOL = 7
_TOKENS_PER_CALL = 3


@runtime_checkable
class Strategy(Protocol):
    """A history-reduction strategy of a peer (or a naive baseline).

    ``reduce`` returns the request the peer would send for the next model call.  It keeps
    ``replay.tools`` unchanged, is deterministic (same input ⇒ same output) and never
    repairs what the peer's own semantics break: an orphan tool result or an unanswered
    call stays in the output so the benchmark's validator can count it.
    """

    @property
    def name(self) -> str:
        """Stable strategy name used in benchmark reports (e.g. ``"last_n"``)."""
        ...

    def reduce(
        self,
        replay: NeutralRequest,
        *,
        budget_tokens: int,
        count_tokens: CountTokens,
    ) -> NeutralRequest:
        """Reduce ``replay`` (the whole transcript) under ``budget_tokens`` (tokens)."""
        ...


def _n(text: str | None) -> int:
    return get_tokenizer().count(text) if text else 0


def estimate_message_tokens(message: WireMessage) -> int:
    """Library-side token estimate of one message (tokens, ``o200k_base``).

    ``3 + n(role) + [n(name) + 1] + Σ parts``, where a text or thinking part costs
    ``n(text)``, a tool call ``n(call_id) + n(tool_name) + n(arguments_json) + 3``, a tool
    result ``n(call_id) + n(text)`` plus :data:`IMAGE_ESTIMATE_TOKENS` per image, and an
    image or binary part :data:`IMAGE_ESTIMATE_TOKENS`.  Memoised per string by the shared
    tokenizer, so re-estimating the same message is cheap.
    """
    total = TOKENS_PER_MESSAGE + _n(message.role)
    if message.name:
        total += _n(message.name) + 1
    for part in message.parts:
        if isinstance(part, TextPart | ThinkingPart):
            total += _n(part.text)
        elif isinstance(part, ToolCallPart):
            total += _n(part.call_id) + _n(part.tool_name) + _n(part.arguments_json)
            total += _TOKENS_PER_CALL
        elif isinstance(part, ToolResultPart):
            total += _n(part.call_id) + _n(part.text) + IMAGE_ESTIMATE_TOKENS * len(part.images)
        elif isinstance(part, ImagePart | BinaryPart):
            total += IMAGE_ESTIMATE_TOKENS
    return total


def estimate_messages_tokens(messages: Sequence[WireMessage]) -> int:
    """Sum of :func:`estimate_message_tokens` over ``messages`` (tokens)."""
    return sum(estimate_message_tokens(m) for m in messages)


def estimate_system_tokens(system: Sequence[str]) -> int:
    """Library-side estimate of the system blocks, each framed like one system message."""
    return sum(TOKENS_PER_MESSAGE + _n("system") + _n(block) for block in system)


def estimate_fixed_tokens(tools: Sequence[ToolSchema]) -> int:
    """Library-side estimate of what every request carries besides system and messages.

    :data:`PRIMING_TOKENS`, plus, when tools are offered, ``12 + Σ (n(json(tool)) + 7)``
    where ``json(tool)`` is the compact JSON of ``{name, description, parameters}``.
    """
    total = PRIMING_TOKENS
    if tools:
        total += _TOOLS_BLOCK_TOKENS
        for tool in tools:
            payload = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
            text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
            total += _n(text) + _TOKENS_PER_TOOL
    return total


def estimate_request_tokens(request: NeutralRequest) -> int:
    """Library-side estimate of a whole request: fixed + system + messages (tokens)."""
    return (
        estimate_fixed_tokens(request.tools)
        + estimate_system_tokens(request.system)
        + estimate_messages_tokens(request.messages)
    )


def largest_fitting(low: int, high: int, fits: Callable[[int], bool]) -> int | None:
    """The largest ``n`` in ``[low, high]`` with ``fits(n)``, by binary search.

    Assumes ``fits`` is monotone (``fits(n)`` implies ``fits(n - 1)``), which holds for
    window sizes whose output grows with ``n``.  Returns ``None`` when ``fits(low)`` is
    false or the range is empty.  Calls ``fits`` ``O(log(high - low))`` times.
    """
    if high < low or not fits(low):
        return None
    lo, hi = low, high
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
