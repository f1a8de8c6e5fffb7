"""``[freshness]``: when a record goes stale and how a stale record is shown (seed 000 §4.7,
§8 R5)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, StrictStr

from contextledger.policy.fields import NEVER_STALE, Section, StaleSeconds, freeze
from contextledger.records.enums import FreshnessClass

__all__ = ["FreshnessSection", "FreshnessWindows", "ToolFreshnessOverride"]


class FreshnessWindows(Section):
    """``[freshness.stale_after]``: seconds until stale per freshness class; -1 = never."""

    volatile: StaleSeconds
    session: StaleSeconds
    time_bounded: StaleSeconds
    durable: StaleSeconds
    permanent: StaleSeconds

    def seconds(self, freshness_class: FreshnessClass) -> int | None:
        """Seconds after ``observed_at`` at which ``freshness_class`` is stale, or ``None``."""
        value: int = getattr(self, freshness_class.value)
        return None if value == NEVER_STALE else value


class ToolFreshnessOverride(Section):
    """``[freshness.tools.<tool>]``: a tool's own staleness window and/or mode."""

    stale_after: StaleSeconds | None = None
    stale_mode: Literal["mark", "omit"] | None = None


class FreshnessSection(Section):
    """``[freshness]`` (seed 000 §4.7, §8 R5).

    Attributes:
        stale_mode: ``"mark"`` shows a stale marker + revalidation hint; ``"omit"`` leaves
            the record out.
        stale_after: windows per freshness class (seconds; -1 = never).
        tools: per-tool overrides; a tool override wins over the class window.
    """

    stale_mode: Literal["mark", "omit"]
    stale_after: FreshnessWindows
    tools: Annotated[dict[StrictStr, ToolFreshnessOverride], AfterValidator(freeze)]

    def stale_after_seconds(
        self, freshness_class: FreshnessClass, tool_name: str | None = None
    ) -> int | None:
        """Window in seconds for a record of ``freshness_class`` made by ``tool_name``.

        Returns ``None`` when the record never goes stale.
        """
        override = self.tools.get(tool_name) if tool_name is not None else None
        if override is not None and override.stale_after is not None:
            return None if override.stale_after == NEVER_STALE else override.stale_after
        return self.stale_after.seconds(freshness_class)

    def mode_for(self, tool_name: str | None = None) -> Literal["mark", "omit"]:
        """The stale mode for a record made by ``tool_name``."""
        override = self.tools.get(tool_name) if tool_name is not None else None
        if override is not None and override.stale_mode is not None:
            return override.stale_mode
        return self.stale_mode
