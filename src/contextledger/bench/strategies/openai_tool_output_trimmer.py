"""``openai_tool_output_trimmer``: the OpenAI Agents SDK's own ``ToolOutputTrimmer``.

``agents.extensions.ToolOutputTrimmer`` (openai-agents 0.24.0, INTEGRATIONS.md § 1) is a
``RunConfig.call_model_input_filter``: the items at or after the ``recent_turns``-th user
message from the end stay untouched; every older ``function_call_output`` longer than
``max_output_chars`` becomes ``"[Trimmed: <tool> output — N chars → <preview_chars> char
preview]\\n<preview>..."``.  Nothing is dropped, so the request keeps every call and its
output (always paired) and can stay above the budget: the trimmer has no budget of its
own.

Choices (ours):

* The whole transcript is the model input (the session of an agent that never trims
  history otherwise), converted by :func:`~contextledger.bench.strategies.convert.to_openai_items`;
  the system blocks are the agent's ``instructions`` and pass unchanged.
* Like every peer, it acts when the history does not fit the budget (a replay that fits
  is sent unchanged).  Then the SDK's defaults (``recent_turns=2``,
  ``max_output_chars=500``, ``preview_chars=200``, every tool trimmable); when that does
  not fit either, ``recent_turns=1`` (its smallest allowed value) — the trimmer's own
  tightest setting, nothing invented on top.
* Result extras the neutral conversion carries after the output text (artifact id, error
  flag) are set aside before trimming and put back after, so the trimmer sees exactly the
  text a model would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from agents import Agent
from agents.extensions import ToolOutputTrimmer
from agents.run_config import CallModelData, ModelInputData

from contextledger.bench.strategies.base import CountTokens
from contextledger.bench.strategies.convert import PARTS_MARKER, from_openai_items, to_openai_items
from contextledger.providers.base import NeutralRequest

__all__ = ["OpenAIToolOutputTrimmerStrategy"]


@dataclass(frozen=True)
class OpenAIToolOutputTrimmerStrategy:
    """The SDK's ``ToolOutputTrimmer`` over the whole history (module docstring)."""

    name: str = "openai_tool_output_trimmer"

    def reduce(self, replay: NeutralRequest, *, budget_tokens: int, count_tokens: CountTokens) -> NeutralRequest:
        """``replay`` when it fits ``budget_tokens``; else the history trimmed with the SDK's
        defaults, or with ``recent_turns=1`` when the defaults do not fit."""
        if count_tokens(replay) <= budget_tokens:
            return replay
        out = self._trim(replay, 2)
        return out if count_tokens(out) <= budget_tokens else self._trim(replay, 1)

    @staticmethod
    def _trim(replay: NeutralRequest, recent_turns: int) -> NeutralRequest:
        items = to_openai_items(NeutralRequest(messages=replay.messages))
        extras: dict[str, str] = {}
        for item in items:
            if item["type"] == "function_call_output":
                body, marker, raw = item["output"].partition(PARTS_MARKER)
                item["output"], extras[item["call_id"]] = body, marker + raw
        data = CallModelData(model_data=ModelInputData(input=cast(Any, items), instructions=None), agent=Agent(name="bench"), context=None)
        trimmed = [dict(cast(dict[str, Any], i)) for i in ToolOutputTrimmer(recent_turns=recent_turns)(data).input]
        for item in trimmed:
            if item.get("type") == "function_call_output":
                item["output"] = str(item["output"]) + extras.get(str(item["call_id"]), "")
        _, wire = from_openai_items(trimmed)
        return NeutralRequest(system=replay.system, messages=wire, tools=replay.tools)
