"""``replay``: the whole transcript, unchanged (the legacy path of seed 000 § 9.1).

Every tool call, raw result, retry and error is sent again on every model call; the budget
is ignored.  This is the baseline every other strategy's token delta is measured against.
"""

from __future__ import annotations

from dataclasses import dataclass

from contextledger.bench.strategies.base import CountTokens
from contextledger.providers.base import NeutralRequest

__all__ = ["ReplayStrategy"]


@dataclass(frozen=True)
class ReplayStrategy:
    """Returns ``replay`` itself (the same object); ``budget_tokens`` is ignored."""

    name: str = "replay"

    def reduce(
        self,
        replay: NeutralRequest,
        *,
        budget_tokens: int,
        count_tokens: CountTokens,
    ) -> NeutralRequest:
        """The input request, unchanged."""
        return replay
