"""Peer history-reduction strategies for the benchmark ("Prove it": side by side).

Each strategy reduces a whole transcript to what a naive or framework-based agent would
send for the next model call under the same token budget, running the real peer libraries
offline (LangChain, autogen-core, the OpenAI Agents SDK's session limit and its
``ToolOutputTrimmer``) or, for Anthropic's server-side edit,
a local re-implementation (seed 000 § 6 prior art, measured as in § 9.1).
contextledger's own assembler is not listed here; the benchmark harness adds it.
"""

from __future__ import annotations

from contextledger.bench.strategies.anthropic_clear_tool_uses import AnthropicClearToolUsesStrategy
from contextledger.bench.strategies.autogen_contexts import (
    AutogenBufferedStrategy,
    AutogenHeadAndTailStrategy,
    AutogenTokenLimitedStrategy,
)
from contextledger.bench.strategies.base import CountTokens, Strategy
from contextledger.bench.strategies.langchain_clear_tool_uses import LangChainClearToolUsesStrategy
from contextledger.bench.strategies.langchain_summarization import LangChainSummarizationStrategy
from contextledger.bench.strategies.langchain_trim import LangChainTrimStrategy
from contextledger.bench.strategies.last_n import LastNStrategy
from contextledger.bench.strategies.openai_session_limit import OpenAISessionLimitStrategy
from contextledger.bench.strategies.openai_tool_output_trimmer import (
    OpenAIToolOutputTrimmerStrategy,
)
from contextledger.bench.strategies.replay import ReplayStrategy

__all__ = [
    "AnthropicClearToolUsesStrategy",
    "AutogenBufferedStrategy",
    "AutogenHeadAndTailStrategy",
    "AutogenTokenLimitedStrategy",
    "CountTokens",
    "LangChainClearToolUsesStrategy",
    "LangChainSummarizationStrategy",
    "LangChainTrimStrategy",
    "LastNStrategy",
    "OpenAISessionLimitStrategy",
    "OpenAIToolOutputTrimmerStrategy",
    "ReplayStrategy",
    "Strategy",
    "all_strategies",
]


def all_strategies() -> list[Strategy]:
    """Every peer strategy with default settings, in a fixed order.

    ``replay``, ``last_n``, ``langchain_trim``, ``langchain_summarization``,
    ``langchain_clear_tool_uses``, ``autogen_buffered``, ``autogen_head_and_tail``,
    ``autogen_token_limited``, ``anthropic_clear_tool_uses``, ``openai_session_limit``,
    ``openai_tool_output_trimmer``.
    """
    return [
        ReplayStrategy(),
        LastNStrategy(),
        LangChainTrimStrategy(),
        LangChainSummarizationStrategy(),
        LangChainClearToolUsesStrategy(),
        AutogenBufferedStrategy(),
        AutogenHeadAndTailStrategy(),
        AutogenTokenLimitedStrategy(),
        AnthropicClearToolUsesStrategy(),
        OpenAISessionLimitStrategy(),
        OpenAIToolOutputTrimmerStrategy(),
    ]
