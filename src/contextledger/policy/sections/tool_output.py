"""``[tool_output]``: when a tool result is shown as a reference + preview (seed 001 §6
problem 2)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, StrictStr

from contextledger.policy.fields import PositiveInt, Section, freeze

__all__ = ["ToolOutputOverride", "ToolOutputSection"]


class ToolOutputOverride(Section):
    """``[tool_output.tools.<tool>]``: a tool's own output limits."""

    max_bytes: PositiveInt | None = None
    max_tokens: PositiveInt | None = None


class ToolOutputSection(Section):
    """``[tool_output]`` (seed 001 §6 problem 2: outputs over 4 KB become artifacts).

    Attributes:
        max_bytes: raw results larger than this are shown as a reference + preview.
        max_tokens: token cap of the preview/extract of one result.
        tools: per-tool overrides.
    """

    max_bytes: PositiveInt
    max_tokens: PositiveInt
    tools: Annotated[dict[StrictStr, ToolOutputOverride], AfterValidator(freeze)]

    def limits_for(self, tool_name: str) -> tuple[int, int]:
        """``(max_bytes, max_tokens)`` for ``tool_name``, overrides applied."""
        override = self.tools.get(tool_name)
        max_bytes = self.max_bytes
        max_tokens = self.max_tokens
        if override is not None:
            max_bytes = override.max_bytes if override.max_bytes is not None else max_bytes
            max_tokens = override.max_tokens if override.max_tokens is not None else max_tokens
        return max_bytes, max_tokens
