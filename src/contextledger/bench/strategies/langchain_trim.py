"""``langchain_trim``: LangChain's ``trim_messages`` as an agent would call it.

``langchain_core.messages.trim_messages(messages, max_tokens=…, token_counter=…,
strategy="last", start_on="human", include_system=True)`` — the recipe LangChain documents
for keeping chat history under a limit (PEERS.md § 4).  Semantics, verified on
langchain-core 1.8: the leading ``SystemMessage`` is set aside and its tokens subtracted; a
binary search finds the longest suffix that fits; leading messages are then dropped until
the first ``HumanMessage``.  There is no call/result pairing logic, and when no human
message fits, only the system message is left.

Choices (ours):

* The system blocks are passed as one ``SystemMessage`` (their texts joined by a blank
  line) so ``include_system`` protects all of them; the output carries the original blocks.
* ``token_counter`` is :class:`LangChainEstimateCounter` — the library-side estimate of
  :mod:`contextledger.bench.strategies.base` over converted messages (a list counter).
* ``max_tokens`` is ``budget_tokens`` minus the estimate of what the message list does not
  hold (reply priming and tool schemas), so the whole request targets the budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, SystemMessage, trim_messages

from contextledger.bench.strategies.base import (
    CountTokens,
    estimate_fixed_tokens,
    estimate_messages_tokens,
    estimate_system_tokens,
)
from contextledger.bench.strategies.convert import from_langchain, to_langchain
from contextledger.providers.base import NeutralRequest

__all__ = ["LangChainEstimateCounter", "LangChainTrimStrategy"]


class LangChainEstimateCounter:
    """A LangChain list token counter: the library-side estimate of converted messages.

    ``counter(messages) -> int`` (tokens).  A ``SystemMessage`` costs
    :func:`~contextledger.bench.strategies.base.estimate_system_tokens` of its text; any
    other message the estimate of its neutral conversion.  Costs of message objects seen
    before are memoised by identity (LangChain keeps passing the same objects).
    """

    def __init__(self) -> None:
        self._memo: dict[int, tuple[BaseMessage, int]] = {}

    def _cost(self, message: BaseMessage) -> int:
        hit = self._memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        system, wire = from_langchain([message])
        cost = estimate_system_tokens(system) + estimate_messages_tokens(wire)
        self._memo[id(message)] = (message, cost)
        return cost

    def __call__(self, messages: Sequence[BaseMessage]) -> int:
        """Estimated tokens of ``messages``."""
        return sum(self._cost(m) for m in messages)


@dataclass(frozen=True)
class LangChainTrimStrategy:
    """``trim_messages(strategy="last", start_on="human", include_system=True)``."""

    name: str = "langchain_trim"

    def reduce(
        self,
        replay: NeutralRequest,
        *,
        budget_tokens: int,
        count_tokens: CountTokens,
    ) -> NeutralRequest:
        """System blocks + the suffix ``trim_messages`` keeps (see module docstring)."""
        body = to_langchain(replay, include_system=False)
        messages: list[BaseMessage] = list(body)
        if replay.system:
            messages.insert(0, SystemMessage(content="\n\n".join(replay.system), id="system"))
        kept = trim_messages(
            messages,
            max_tokens=max(0, budget_tokens - estimate_fixed_tokens(replay.tools)),
            token_counter=LangChainEstimateCounter(),
            strategy="last",
            start_on="human",
            include_system=True,
        )
        rest = [m for m in kept if not isinstance(m, SystemMessage)]
        _, wire = from_langchain(rest)
        return NeutralRequest(system=replay.system, messages=wire, tools=replay.tools)
