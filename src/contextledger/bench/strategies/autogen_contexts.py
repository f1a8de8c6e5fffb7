"""autogen-core model contexts: Buffered, HeadAndTail and TokenLimited (PEERS.md § 5).

Each strategy loads the transcript into the real ``autogen_core.model_context`` class as
``initial_messages`` and returns what its async ``get_messages()`` gives (run with
``asyncio.run``, so ``reduce`` must not be called from inside a running event loop).  As
autogen's ``AssistantAgent`` does, the system blocks stay outside the model context and are
prepended to every call, so the output always carries them; tools are passed through.

Library semantics (autogen-core 0.7.5, verified):

* ``BufferedChatCompletionContext(buffer_size=N)``: the last N messages; if the first of
  them is a ``FunctionExecutionResultMessage`` it is dropped (N - 1 returned).
* ``HeadAndTailChatCompletionContext(head_size, tail_size)``: the first ``head_size``
  messages (dropping the head's last message if it is an all-``FunctionCall`` assistant
  message), then ``UserMessage("Skipped {n} messages.", source="System")`` with
  ``n = len - head_size - tail_size`` (it ignores the extra drops), then the last
  ``tail_size`` messages minus a leading result message; everything when
  ``len <= head_size + tail_size``.
* ``TokenLimitedChatCompletionContext(model_client, token_limit=L)``: while
  ``model_client.count_tokens(messages) > L`` it pops the *middle* message (``len // 2``),
  then drops a leading result message.  This orphans calls and results.

Parallel results of one assistant turn form one ``FunctionExecutionResultMessage`` (see
:func:`~contextledger.bench.strategies.convert.to_autogen`), as autogen stores them.

Sizes (ours): Buffered N is the largest in ``[1, len]`` whose output fits
``budget_tokens`` by the harness's ``count_tokens`` (N = 1 when none fits).  HeadAndTail's
head is the messages up to and including the first user message (the task statement;
1 when there is no user message), its tail the largest in ``[1, max(1, len - head)]`` that
fits (1 when none fits); the binary search assumes the count grows with the tail, true up
to the placeholder's digit count.  TokenLimited's ``token_limit`` is ``budget_tokens``
minus the library-side estimate of system blocks, reply priming and tools (at least 1), and
its client counts with :class:`EstimateCountingClient`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

from autogen_core import CancellationToken
from autogen_core.model_context import (
    BufferedChatCompletionContext,
    ChatCompletionContext,
    HeadAndTailChatCompletionContext,
    TokenLimitedChatCompletionContext,
)
from autogen_core.models import (
    ChatCompletionClient,
    CreateResult,
    LLMMessage,
    ModelCapabilities,
    ModelInfo,
    RequestUsage,
    UserMessage,
)
from autogen_core.tools import Tool, ToolSchema
from pydantic import BaseModel

from contextledger.bench.strategies.base import (
    CountTokens,
    estimate_fixed_tokens,
    estimate_messages_tokens,
    estimate_system_tokens,
    largest_fitting,
)
from contextledger.bench.strategies.convert import from_autogen, to_autogen
from contextledger.providers.base import NeutralRequest

__all__ = [
    "AutogenBufferedStrategy",
    "AutogenHeadAndTailStrategy",
    "AutogenTokenLimitedStrategy",
    "EstimateCountingClient",
    "context_messages",
]


def context_messages(context: ChatCompletionContext) -> list[LLMMessage]:
    """``await context.get_messages()`` run to completion with ``asyncio.run``."""
    return asyncio.run(context.get_messages())


def _request(replay: NeutralRequest, messages: Sequence[LLMMessage]) -> NeutralRequest:
    _, wire = from_autogen(messages)
    return NeutralRequest(system=replay.system, messages=wire, tools=replay.tools)


class EstimateCountingClient(ChatCompletionClient):
    """A counting-only ``ChatCompletionClient`` for ``TokenLimitedChatCompletionContext``.

    ``count_tokens(messages, tools=…)`` is the library-side estimate
    (:func:`~contextledger.bench.strategies.base.estimate_messages_tokens`) of the messages'
    neutral conversion, memoised per message object; ``tools`` are not counted (the
    contexts here pass none).  ``remaining_tokens`` is ``max_tokens - count_tokens``.
    Every other member raises ``NotImplementedError``: no model is ever called.
    """

    def __init__(self, max_tokens: int = 128_000) -> None:
        self._max_tokens = max_tokens
        self._memo: dict[int, tuple[LLMMessage, int]] = {}

    def _cost(self, message: LLMMessage) -> int:
        hit = self._memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        system, wire = from_autogen([message])
        cost = estimate_system_tokens(system) + estimate_messages_tokens(wire)
        self._memo[id(message)] = (message, cost)
        return cost

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = ()) -> int:
        """Estimated tokens of ``messages``."""
        return sum(self._cost(m) for m in messages)

    def remaining_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = ()) -> int:
        """``max_tokens`` minus :meth:`count_tokens` (may be negative)."""
        return self._max_tokens - self.count_tokens(messages, tools=tools)

    def _no_model(self) -> NoReturn:
        raise NotImplementedError("EstimateCountingClient only counts tokens; it calls no model")

    async def create(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = (),
        tool_choice: Tool | Literal["auto", "required", "none"] = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> CreateResult:
        """Not supported: raises ``NotImplementedError``."""
        self._no_model()

    def create_stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = (),
        tool_choice: Tool | Literal["auto", "required", "none"] = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncGenerator[str | CreateResult, None]:
        """Not supported: raises ``NotImplementedError``."""
        self._no_model()

    async def close(self) -> None:
        """Nothing to release."""

    def actual_usage(self) -> RequestUsage:
        """Not supported: raises ``NotImplementedError``."""
        self._no_model()

    def total_usage(self) -> RequestUsage:
        """Not supported: raises ``NotImplementedError``."""
        self._no_model()

    @property
    def capabilities(self) -> ModelCapabilities:
        """Not supported: raises ``NotImplementedError``."""
        self._no_model()

    @property
    def model_info(self) -> ModelInfo:
        """Not supported: raises ``NotImplementedError``."""
        self._no_model()


@dataclass(frozen=True)
class AutogenBufferedStrategy:
    """``BufferedChatCompletionContext`` with the largest fitting ``buffer_size``.

    Attributes:
        buffer_size: a fixed size instead of the fitted one (``None``: fit to the budget).
    """

    name: str = "autogen_buffered"
    buffer_size: int | None = None

    def reduce(
        self,
        replay: NeutralRequest,
        *,
        budget_tokens: int,
        count_tokens: CountTokens,
    ) -> NeutralRequest:
        """System blocks + the buffered view (see module docstring)."""
        messages = to_autogen(replay)
        if not messages:
            return _request(replay, messages)

        def run(size: int) -> NeutralRequest:
            context = BufferedChatCompletionContext(buffer_size=size, initial_messages=messages)
            return _request(replay, context_messages(context))

        if self.buffer_size is not None:
            return run(self.buffer_size)
        size = largest_fitting(1, len(messages), lambda n: count_tokens(run(n)) <= budget_tokens)
        return run(size or 1)


@dataclass(frozen=True)
class AutogenHeadAndTailStrategy:
    """``HeadAndTailChatCompletionContext``: head = through the first user message, tail fitted.

    Attributes:
        head_size: a fixed head instead of "through the first user message".
        tail_size: a fixed tail instead of the fitted one.
    """

    name: str = "autogen_head_and_tail"
    head_size: int | None = None
    tail_size: int | None = None

    def reduce(
        self,
        replay: NeutralRequest,
        *,
        budget_tokens: int,
        count_tokens: CountTokens,
    ) -> NeutralRequest:
        """System blocks + head + ``"Skipped n messages."`` + tail (see module docstring)."""
        messages = to_autogen(replay)
        if not messages:
            return _request(replay, messages)
        head = self.head_size or next((i + 1 for i, m in enumerate(messages) if isinstance(m, UserMessage)), 1)

        def run(tail: int) -> NeutralRequest:
            context = HeadAndTailChatCompletionContext(head_size=head, tail_size=tail, initial_messages=messages)
            return _request(replay, context_messages(context))

        if self.tail_size is not None:
            return run(self.tail_size)
        tail = largest_fitting(1, max(1, len(messages) - head), lambda n: count_tokens(run(n)) <= budget_tokens)
        return run(tail or 1)


@dataclass(frozen=True)
class AutogenTokenLimitedStrategy:
    """``TokenLimitedChatCompletionContext`` with ``token_limit`` derived from the budget.

    Attributes:
        token_limit: a fixed limit (tokens, library-side estimate) instead of the derived one.
    """

    name: str = "autogen_token_limited"
    token_limit: int | None = None

    def reduce(
        self,
        replay: NeutralRequest,
        *,
        budget_tokens: int,
        count_tokens: CountTokens,
    ) -> NeutralRequest:
        """System blocks + what survives the middle-popping loop (see module docstring)."""
        messages = to_autogen(replay)
        limit = budget_tokens - estimate_fixed_tokens(replay.tools) - estimate_system_tokens(replay.system)
        if self.token_limit is not None:
            limit = self.token_limit
        context = TokenLimitedChatCompletionContext(
            EstimateCountingClient(),
            token_limit=max(1, limit),
            initial_messages=messages,
        )
        return _request(replay, context_messages(context))
