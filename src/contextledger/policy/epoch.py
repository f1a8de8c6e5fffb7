"""Policy section ``[epoch]``: append-stable assembly (issue "Pay less, not just send less").

Between two requests of one conversation (same branch lineage, viewer, provider and
policy version) the assembled request is the previous one byte for byte plus the new
records rendered raw, as long as that fits under the *high-water mark*; otherwise the
context is re-planned once, targeting the *low-water mark*, so the next epoch has room to
grow (seed 000 §5.3: the assembly is the cache boundary — a stable prefix is what a
provider's prompt cache reuses)::

    [epoch]
    enabled = true        # false: every request is planned on its own (no epochs)
    high_water = 0.9      # extend while fixed + tail ≤ fixed + high_water × (budget − fixed)
    low_water = 0.6       # a re-plan targets fixed + low_water × (budget − fixed)

``fixed`` is what every request of the epoch sends whatever its history: the system
blocks and tool declarations (tokens of the payload without messages).  Both marks are
shares of the room beside it, so a client with a large fixed prefix (Claude Code's ~16k
tokens of tools) still gets history room after a re-plan.  ``0 < low_water < high_water
≤ 1``; an error names ``epoch.<key>``.
"""

from __future__ import annotations

from pydantic import StrictBool, StrictFloat, model_validator

from contextledger.policy.fields import Section

__all__ = ["EpochSection"]


class EpochSection(Section):
    """``[epoch]`` (see the module docstring)."""

    enabled: StrictBool = True
    high_water: StrictFloat = 0.9
    low_water: StrictFloat = 0.6

    @model_validator(mode="after")
    def _marks(self) -> EpochSection:
        if not 0.0 < self.high_water <= 1.0:
            raise ValueError(f"high_water must be in (0, 1], got {self.high_water}")
        if not 0.0 < self.low_water < self.high_water:
            raise ValueError(f"low_water must be above 0 and below epoch.high_water ({self.high_water}), got {self.low_water}")
        return self

    def mark(self, share: float, budget: int, fixed: int) -> int:
        """``fixed + share × (budget − fixed)`` tokens (``budget`` when ``fixed`` alone
        exceeds it)."""
        room = max(0, budget - fixed)
        return min(budget, fixed + int(share * room)) if room else budget
