"""``last_n``: the system blocks plus the last N messages, nothing else.

The naive sliding window.  N is the largest count whose request — system blocks, the last N
messages counted from the end of the transcript, the tools — fits ``budget_tokens`` as
measured by the harness's ``count_tokens`` (binary search; the count grows with N).  When
not even N = 0 fits, N = 0 (system blocks only).  The window is left exactly as cut: it may
open on a tool result whose call fell out, or split a parallel-call exchange.  We score
validity; we do not fix peers.
"""

from __future__ import annotations

from dataclasses import dataclass

from contextledger.bench.strategies.base import CountTokens, largest_fitting
from contextledger.providers.base import NeutralRequest

__all__ = ["LastNStrategy", "last_n_window"]


def last_n_window(replay: NeutralRequest, n: int) -> NeutralRequest:
    """``replay`` with only its last ``n`` messages (system and tools kept).

    ``n`` larger than the transcript keeps every message.

    Raises:
        ValueError: ``n < 0``.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    kept = replay.messages[max(0, len(replay.messages) - n) :] if n else ()
    return NeutralRequest(system=replay.system, messages=kept, tools=replay.tools)


@dataclass(frozen=True)
class LastNStrategy:
    """The largest last-N window that fits the budget (see module docstring).

    Attributes:
        n: a fixed window size instead of the fitted one (``None``: fit to the budget).
    """

    name: str = "last_n"
    n: int | None = None

    def reduce(
        self,
        replay: NeutralRequest,
        *,
        budget_tokens: int,
        count_tokens: CountTokens,
    ) -> NeutralRequest:
        """System + the last N messages, N maximal under ``budget_tokens`` (tokens)."""
        if self.n is not None:
            return last_n_window(replay, self.n)
        n = largest_fitting(
            0,
            len(replay.messages),
            lambda k: count_tokens(last_n_window(replay, k)) <= budget_tokens,
        )
        return last_n_window(replay, n or 0)
