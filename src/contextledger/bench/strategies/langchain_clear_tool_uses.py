"""``langchain_clear_tool_uses``: LangChain's port of Anthropic's ``clear_tool_uses``.

``langchain.agents.middleware.ClearToolUsesEdit(trigger=budget_tokens, keep=3)`` applied
standalone with ``edit.apply(messages, count_tokens=…)``, exactly what
``ContextEditingMiddleware.wrap_model_call`` does to a copy of the request's messages
(PEERS.md § 4).  Semantics, verified on langchain 1.5: when the count is above ``trigger``,
every ``ToolMessage`` except the last ``keep`` whose call is on the nearest preceding
``AIMessage`` gets content ``"[cleared]"``; with ``clear_at_least=0`` (the default) all such
candidates are cleared.  Nothing else shrinks, so the result can stay above the budget.

``count_tokens`` given to the edit is the harness's counter over the whole request (system
blocks + messages + tools), as the middleware's ``token_count_method="model"`` counts the
system message and tools with the messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain.agents.middleware import ClearToolUsesEdit
from langchain_core.messages import BaseMessage

from contextledger.bench.strategies.base import CountTokens
from contextledger.bench.strategies.convert import from_langchain, to_langchain
from contextledger.providers.base import NeutralRequest

__all__ = ["LangChainClearToolUsesStrategy"]


@dataclass(frozen=True)
class LangChainClearToolUsesStrategy:
    """``ClearToolUsesEdit(trigger=budget_tokens, keep=keep)`` on the transcript.

    Attributes:
        keep: most recent tool results never cleared (LangChain's default 3).
    """

    name: str = "langchain_clear_tool_uses"
    keep: int = 3

    def reduce(
        self,
        replay: NeutralRequest,
        *,
        budget_tokens: int,
        count_tokens: CountTokens,
    ) -> NeutralRequest:
        """The transcript with older tool results replaced by ``"[cleared]"`` when over budget."""

        def count(messages: Sequence[BaseMessage]) -> int:
            _, wire = from_langchain(messages)
            return count_tokens(NeutralRequest(system=replay.system, messages=wire, tools=replay.tools))

        messages = to_langchain(replay, include_system=False)
        ClearToolUsesEdit(trigger=budget_tokens, keep=self.keep).apply(messages, count_tokens=count)
        _, wire = from_langchain(messages)
        return NeutralRequest(system=replay.system, messages=wire, tools=replay.tools)
