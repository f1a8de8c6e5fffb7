"""``anthropic_clear_tool_uses``: Anthropic's ``clear_tool_uses_20250919``, re-implemented locally.

The server-side context edit (beta ``context-management-2025-06-27``; PEERS.md § 6, from
platform.claude.com "Context editing") applied to the transcript before the call, with its
documented parameters:

* ``trigger`` ``{type: "input_tokens", value}`` — applies once the prompt *exceeds* the
  value; here ``trigger_tokens`` (default ``budget_tokens``), measured with the harness's
  ``count_tokens``.
* ``keep`` ``{type: "tool_uses", value: 3}`` — the most recent tool use/result pairs kept;
  the oldest are cleared first, in chronological order.
* ``clear_at_least`` — a *precondition*: if the edit cannot clear at least this many
  tokens it is not applied at all (unlike LangChain's port, which stops once reached).
* ``exclude_tools`` — tool names whose uses and results are never cleared.
* ``clear_tool_inputs`` — ``True`` (all) or a list of tool names whose call inputs are
  cleared too; by default the call stays visible.

What the documentation leaves open is an explicit option here:

* ``clear_mode``: ``"all_but_keep"`` (default; clear every candidate, as LangChain's port
  does) or ``"until_below_trigger"`` (clear oldest-first only until the prompt is at or
  below the trigger; the smallest such count is found by binary search, assuming the
  count falls as more results are cleared).
* ``excluded_count_toward_keep``: whether uses of excluded tools take ``keep`` slots
  (default ``False``: ``keep`` counts clearable uses only).
* ``placeholder``: the text a cleared result becomes.  Anthropic's real text is
  undocumented; :data:`DEFAULT_PLACEHOLDER` is ours.
* A cleared input becomes ``"{}"`` (an empty JSON object), also our choice.

A cleared result keeps its call id and ``is_error`` and loses ``artifact_id`` and images.
A call without a result still counts as a tool use (only its input can be cleared).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from contextledger.bench.strategies.base import CountTokens
from contextledger.providers.base import NeutralRequest, WireMessage
from contextledger.records.parts import Part, ToolCallPart, ToolResultPart

__all__ = ["DEFAULT_PLACEHOLDER", "AnthropicClearToolUsesStrategy", "AppliedClear", "ToolUse"]

DEFAULT_PLACEHOLDER = "[tool result cleared to save context]"
"""Our stand-in for Anthropic's undocumented placeholder text."""


@dataclass(frozen=True)
class ToolUse:
    """One tool use of the transcript: the call's position and its result's message index."""

    message_index: int
    part_index: int
    call: ToolCallPart
    result_index: int | None


@dataclass(frozen=True)
class AppliedClear:
    """What the edit did, shaped like the API's ``context_management.applied_edits`` entry.

    Attributes:
        cleared_tool_uses: number of tool uses cleared.
        cleared_input_tokens: tokens saved (harness count before minus after).
    """

    cleared_tool_uses: int
    cleared_input_tokens: int


def tool_uses(messages: Sequence[WireMessage]) -> list[ToolUse]:
    """Every tool call of ``messages`` in chronological order, with its result's index.

    The result is the first tool message after the call with the same call id.
    """
    uses: list[ToolUse] = []
    for m_index, message in enumerate(messages):
        if message.role != "assistant":
            continue
        for p_index, part in enumerate(message.parts):
            if not isinstance(part, ToolCallPart):
                continue
            result_index = next(
                (
                    r
                    for r in range(m_index + 1, len(messages))
                    if messages[r].role == "tool"
                    and any(isinstance(p, ToolResultPart) and p.call_id == part.call_id for p in messages[r].parts)
                ),
                None,
            )
            uses.append(ToolUse(m_index, p_index, part, result_index))
    return uses


@dataclass(frozen=True)
class AnthropicClearToolUsesStrategy:
    """Local ``clear_tool_uses_20250919`` (see module docstring for every parameter)."""

    name: str = "anthropic_clear_tool_uses"
    trigger_tokens: int | None = None
    keep_tool_uses: int = 3
    clear_at_least: int | None = None
    exclude_tools: tuple[str, ...] = ()
    clear_tool_inputs: bool | tuple[str, ...] = False
    clear_mode: Literal["all_but_keep", "until_below_trigger"] = "all_but_keep"
    excluded_count_toward_keep: bool = False
    placeholder: str = DEFAULT_PLACEHOLDER

    def __post_init__(self) -> None:
        if self.keep_tool_uses < 0:
            raise ValueError(f"keep_tool_uses must be >= 0, got {self.keep_tool_uses}")
        if self.clear_mode not in ("all_but_keep", "until_below_trigger"):
            raise ValueError(f"unknown clear_mode {self.clear_mode!r}")

    def candidates(self, messages: Sequence[WireMessage]) -> list[ToolUse]:
        """The tool uses that may be cleared, oldest first (``keep`` and exclusions applied)."""
        uses = tool_uses(messages)
        excluded = set(self.exclude_tools)
        if self.excluded_count_toward_keep:
            older = uses[: len(uses) - self.keep_tool_uses] if self.keep_tool_uses else uses
            return [u for u in older if u.call.tool_name not in excluded]
        clearable = [u for u in uses if u.call.tool_name not in excluded]
        return clearable[: len(clearable) - self.keep_tool_uses] if self.keep_tool_uses else clearable

    def _clears_input(self, tool_name: str) -> bool:
        if isinstance(self.clear_tool_inputs, bool):
            return self.clear_tool_inputs
        return tool_name in self.clear_tool_inputs

    def cleared(self, replay: NeutralRequest, uses: Sequence[ToolUse]) -> NeutralRequest:
        """``replay`` with the results (and inputs, if configured) of ``uses`` cleared."""
        parts: list[list[Part]] = [list(m.parts) for m in replay.messages]
        for use in uses:
            if use.result_index is not None:
                result_parts = parts[use.result_index]
                for i, part in enumerate(result_parts):
                    if isinstance(part, ToolResultPart) and part.call_id == use.call.call_id:
                        result_parts[i] = ToolResultPart(
                            call_id=part.call_id, text=self.placeholder, is_error=part.is_error
                        )
            if self._clears_input(use.call.tool_name):
                parts[use.message_index][use.part_index] = use.call.model_copy(update={"arguments_json": "{}"})
        messages = tuple(
            m if list(m.parts) == new else WireMessage(role=m.role, parts=tuple(new), name=m.name, ref=m.ref)
            for m, new in zip(replay.messages, parts, strict=True)
        )
        return NeutralRequest(system=replay.system, messages=messages, tools=replay.tools)

    def edit(
        self,
        replay: NeutralRequest,
        *,
        budget_tokens: int,
        count_tokens: CountTokens,
    ) -> tuple[NeutralRequest, AppliedClear | None]:
        """The edited request and what was applied (``None`` when the edit did not apply).

        Not applied when the prompt does not exceed the trigger, when there is nothing to
        clear, or when fewer than ``clear_at_least`` tokens would be cleared.
        """
        trigger = budget_tokens if self.trigger_tokens is None else self.trigger_tokens
        before = count_tokens(replay)
        if before <= trigger:
            return replay, None
        candidates = self.candidates(replay.messages)
        if not candidates:
            return replay, None
        count = len(candidates)
        if self.clear_mode == "until_below_trigger":
            lo, hi = 1, len(candidates)
            if count_tokens(self.cleared(replay, candidates)) <= trigger:
                while lo < hi:
                    mid = (lo + hi) // 2
                    if count_tokens(self.cleared(replay, candidates[:mid])) <= trigger:
                        hi = mid
                    else:
                        lo = mid + 1
                count = lo
        result = self.cleared(replay, candidates[:count])
        saved = before - count_tokens(result)
        if self.clear_at_least is not None and saved < self.clear_at_least:
            return replay, None
        return result, AppliedClear(cleared_tool_uses=count, cleared_input_tokens=saved)

    def reduce(
        self,
        replay: NeutralRequest,
        *,
        budget_tokens: int,
        count_tokens: CountTokens,
    ) -> NeutralRequest:
        """The request the API would pass to the model after the edit."""
        return self.edit(replay, budget_tokens=budget_tokens, count_tokens=count_tokens)[0]
