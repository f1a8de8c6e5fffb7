"""Per-tool output budgets: results above the budget are referenced, not inlined.

Seed 001 §6 problem 2: "ツールの種類ごとに出力バジェットを設定する" and the production fix
"単一ツールの出力が 4KB を超えたら自動的にアーティファクト化するハードリミット".  The
default budget is therefore 4,096 bytes; a tool may get its own budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from contextledger.memory.extractors.base import ToolInput
from contextledger.tokens import get_tokenizer

__all__ = ["DEFAULT_MAX_BYTES", "ToolOutputBudget", "needs_artifact_ref"]

DEFAULT_MAX_BYTES = 4096
"""The 4 KB hard limit of seed 001 §6 problem 2, in bytes."""


@dataclass(frozen=True, kw_only=True)
class ToolOutputBudget:
    """How much of one tool's raw output may be inlined into a model request.

    Attributes:
        max_bytes: largest raw result (UTF-8 bytes) that is inlined.
        max_tokens: optional second limit in o200k tokens (checked only when the byte
            limit is met, so large payloads are never tokenised).
        per_tool: budgets that replace this one for the named tools.
    """

    max_bytes: int = DEFAULT_MAX_BYTES
    max_tokens: int | None = None
    per_tool: Mapping[str, ToolOutputBudget] = field(default_factory=dict)

    def for_tool(self, tool_name: str) -> ToolOutputBudget:
        """The budget that applies to ``tool_name``."""
        return self.per_tool.get(tool_name, self)


def needs_artifact_ref(item: ToolInput, budget: ToolOutputBudget | None = None) -> bool:
    """True when ``item``'s raw result exceeds its tool's budget and must be shown as an
    artifact reference plus extract rather than inline.

    The byte check uses ``item.size_bytes``; the token check (when configured) counts the
    result text with the o200k tokenizer.
    """
    effective = (budget or ToolOutputBudget()).for_tool(item.tool_name)
    if item.size_bytes > effective.max_bytes:
        return True
    if effective.max_tokens is not None:
        return get_tokenizer().count(item.result_text) > effective.max_tokens
    return False
