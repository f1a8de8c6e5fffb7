"""``openai_session_limit``: OpenAI Agents SDK session history with ``SessionSettings(limit=N)``.

What ``Runner.run(agent, new_input, session=session, run_config=RunConfig(
session_settings=SessionSettings(limit=N)))`` sends to the model (openai-agents 0.24.0,
PEERS.md § 3): the latest N session items in chronological order (``Session.get_items(
limit=N)``) followed by the new turn's input, passed through the SDK's own input
preparation ``agents.run_internal.session_persistence.prepare_input_with_session``, which
applies ``agents.run_internal.items.drop_orphan_function_calls`` (with the history
indexes as both ``pruning_indexes`` and ``output_pruning_indexes`` when a limit is set):
a ``function_call`` without its ``function_call_output`` is dropped, and so is an output
whose call fell outside the window; then items are normalised and de-duplicated.  The real
``SQLiteSession`` (in memory) holds the history.  The agent's system prompt is its
``instructions``, sent outside the items, so the output always carries the system blocks.

Choices (ours):

* The new turn's input is the run of user messages at the end of the transcript (empty
  when the transcript ends with an assistant or tool message); everything before it is the
  session history, converted by
  :func:`~contextledger.bench.strategies.convert.to_openai_items`.
* N is the largest in ``[0, len(history items)]`` whose output fits ``budget_tokens`` by
  the harness's ``count_tokens`` (binary search: a larger N keeps a superset); N = 0 when
  none fits.  ``reduce`` uses ``asyncio.run`` and must not be called inside a running loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, cast

from agents import SQLiteSession, TResponseInputItem
from agents.memory import SessionSettings
from agents.run_internal.session_persistence import prepare_input_with_session

from contextledger.bench.strategies.base import CountTokens
from contextledger.bench.strategies.convert import from_openai_items, to_openai_items
from contextledger.providers.base import NeutralRequest

__all__ = ["OpenAISessionLimitStrategy", "split_new_input"]


def split_new_input(replay: NeutralRequest) -> int:
    """Index where the trailing run of user messages (the new turn's input) starts."""
    split = len(replay.messages)
    while split > 0 and replay.messages[split - 1].role == "user":
        split -= 1
    return split


@dataclass(frozen=True)
class OpenAISessionLimitStrategy:
    """Session item limit N (largest fitting) plus the SDK's orphan-dropping preparation.

    Attributes:
        limit: a fixed item limit instead of the fitted one (``None``: fit to the budget).
    """

    name: str = "openai_session_limit"
    limit: int | None = None

    def reduce(
        self,
        replay: NeutralRequest,
        *,
        budget_tokens: int,
        count_tokens: CountTokens,
    ) -> NeutralRequest:
        """System blocks + what the SDK prepares from the limited history and the new input."""
        split = split_new_input(replay)
        history = to_openai_items(NeutralRequest(messages=replay.messages[:split]))
        new_input = to_openai_items(NeutralRequest(messages=replay.messages[split:]))
        return asyncio.run(self._search(replay, history, new_input, budget_tokens, count_tokens))

    async def _search(
        self,
        replay: NeutralRequest,
        history: list[dict[str, Any]],
        new_input: list[dict[str, Any]],
        budget_tokens: int,
        count_tokens: CountTokens,
    ) -> NeutralRequest:
        session = SQLiteSession("contextledger-bench", ":memory:")
        try:
            await session.add_items(cast(list[TResponseInputItem], history))

            async def run(limit: int) -> NeutralRequest:
                prepared, _ = await prepare_input_with_session(
                    cast(list[TResponseInputItem], [dict(item) for item in new_input]),
                    session,
                    None,
                    SessionSettings(limit=limit),
                )
                items = [prepared] if isinstance(prepared, str) else prepared
                _, wire = from_openai_items(items)
                return NeutralRequest(system=replay.system, messages=wire, tools=replay.tools)

            if self.limit is not None:
                return await run(self.limit)
            lo, hi = 0, len(history)
            best = await run(0)
            if count_tokens(best) > budget_tokens:
                return best
            while lo < hi:
                mid = (lo + hi + 1) // 2
                candidate = await run(mid)
                if count_tokens(candidate) <= budget_tokens:
                    lo, best = mid, candidate
                else:
                    hi = mid - 1
            return best
        finally:
            session.close()
