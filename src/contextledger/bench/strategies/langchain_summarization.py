"""``langchain_summarization``: LangChain v1 ``SummarizationMiddleware`` with a stub summariser.

The middleware is driven directly through its hook, ``before_model({"messages": msgs},
runtime)``, as ``create_agent`` calls it before each model call (PEERS.md § 4).  The model
is ``GenericFakeChatModel`` (never called) and the summary comes from
:func:`stub_summary`, so the run is offline and deterministic.

Library semantics (langchain 1.5): when the message count reaches ``trigger`` the messages
before a cutoff are summarised; the cutoff keeps the longest suffix within ``keep`` tokens
(binary search) and is then moved back to the ``AIMessage`` owning any ``ToolMessage`` at
the boundary, so pairs are not split (the kept part can exceed ``keep``).  The hook returns
``[RemoveMessage(REMOVE_ALL_MESSAGES), HumanMessage("Here is a summary of the conversation
to date:\\n\\n" + summary), *kept]``.  The summariser receives the summarised messages
pre-trimmed by the library to their last ``trim_tokens_to_summarize`` = 4,000 tokens
(default, ``start_on="human"``, partial messages allowed).

Choices (ours):

* As in ``create_agent``, the system prompt and tools are outside the message state; the
  output carries the original system blocks and tools.
* ``token_counter`` is
  :class:`~contextledger.bench.strategies.langchain_trim.LangChainEstimateCounter`.
* ``trigger = ("tokens", allowance + 1)`` where ``allowance = budget_tokens`` minus the
  library-side estimate of system blocks, reply priming and tools — so it fires exactly
  when the estimated request exceeds the budget (the middleware fires at ``>=``).
* ``keep = ("tokens", K)`` with K the largest value in ``[1, allowance]`` whose output fits
  ``budget_tokens`` by the harness's ``count_tokens`` (binary search; K = 1 when none
  fits).  A larger keep summarises less, so the summary shrinks as K grows; the search
  assumes the total still grows with K.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage

from contextledger.bench.strategies.base import (
    CountTokens,
    estimate_fixed_tokens,
    estimate_system_tokens,
    largest_fitting,
)
from contextledger.bench.strategies.convert import decode_parts, from_langchain, to_langchain
from contextledger.bench.strategies.langchain_trim import LangChainEstimateCounter
from contextledger.providers.base import NeutralRequest
from contextledger.records.parts import TextPart

__all__ = ["STUB_CHARS_PER_MESSAGE", "LangChainSummarizationStrategy", "stub_summary"]

STUB_CHARS_PER_MESSAGE = 200
"""Characters the stub summariser keeps from the start of each human message."""


def stub_summary(messages: Sequence[BaseMessage]) -> str:
    """The deterministic stand-in for a summarising model.

    For each ``HumanMessage`` it receives, in order: the message's text parts joined by a
    newline, cut to the first :data:`STUB_CHARS_PER_MESSAGE` characters; the pieces are
    joined by a newline.  Everything else (assistant text, tool calls, tool results) is
    ignored, like a summary that keeps only what the user asked.  The middleware strips the
    result and prefixes it with its own header.
    """
    pieces: list[str] = []
    for message in messages:
        if not isinstance(message, HumanMessage):
            continue
        content = message.content if isinstance(message.content, str) else message.text
        text = "\n".join(p.text for p in decode_parts(content) if isinstance(p, TextPart))
        pieces.append(text[:STUB_CHARS_PER_MESSAGE])
    return "\n".join(pieces)


@dataclass(frozen=True)
class LangChainSummarizationStrategy:
    """``SummarizationMiddleware`` with a token trigger at the budget and a fitted keep.

    Attributes:
        keep_tokens: a fixed ``("tokens", keep_tokens)`` keep instead of the fitted one.
    """

    name: str = "langchain_summarization"
    keep_tokens: int | None = None

    def reduce(
        self,
        replay: NeutralRequest,
        *,
        budget_tokens: int,
        count_tokens: CountTokens,
    ) -> NeutralRequest:
        """Summary message + kept suffix when the transcript is over budget, else unchanged."""
        allowance = max(
            1,
            budget_tokens - estimate_fixed_tokens(replay.tools) - estimate_system_tokens(replay.system),
        )
        messages = to_langchain(replay, include_system=False)
        counter = LangChainEstimateCounter()
        model = GenericFakeChatModel(messages=iter(()))

        def run(keep_tokens: int) -> NeutralRequest:
            middleware: SummarizationMiddleware[Any, Any] = SummarizationMiddleware(
                model,
                trigger=("tokens", allowance + 1),
                keep=("tokens", keep_tokens),
                token_counter=cast(Any, counter),
                summarizer=stub_summary,
            )
            update = middleware.before_model({"messages": list(messages)}, cast(Any, None))
            if update is None:
                return NeutralRequest(system=replay.system, messages=replay.messages, tools=replay.tools)
            new = [m for m in update["messages"] if not isinstance(m, RemoveMessage)]
            _, wire = from_langchain(new)
            return NeutralRequest(system=replay.system, messages=wire, tools=replay.tools)

        if self.keep_tokens is not None:
            return run(self.keep_tokens)
        keep = largest_fitting(1, allowance, lambda k: count_tokens(run(k)) <= budget_tokens)
        return run(keep or 1)
