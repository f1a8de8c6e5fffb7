"""Stage 4: temperature — which units are hot (sent raw) and which are warm (shaped).

Seed 001 §9 *Temperature Manager* and §4.3 (hot / warm / cold / frozen / long-term);
seed 001 §9 budget: keep the recent N turns raw.  Hot: the task statement (the first
user turn that is not a scaffold demonstration nor wholly client-injected text), the
current input, recovery-protected units (unresolved and failed tool state, seed 000
§4.6) and the recent tail — the last
``recent_tail.min_turns`` user turns, but no more raw history than
``recent_tail.max_share`` of the budget (long agent turns).  When the whole history fits
raw within 90 % of the budget, everything is hot.  Older units are warm (shaped by
:mod:`.shape`); older memories are cold (evidence lines, :mod:`.retrieval`).  Freshness
(stale markers and ages at ``now``) is decided per memory by the evaluator
(:class:`~contextledger.assembly.families.FreshnessEvaluator`).

Raw costs are measured by rendering the units raw on scratch traces (*probes*); the
shape stage keeps a probe rendering where the unit ends up raw.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from contextledger.assembly.pieces import PROBE_BUCKET, Piece
from contextledger.assembly.task import states_task

if TYPE_CHECKING:
    from contextledger.assembly.evaluate import Evaluator
    from contextledger.assembly.units import Unit
    from contextledger.policy.model import Policy

__all__ = ["Heat", "Prober", "plan_temperature"]


class Prober(Protocol):
    """What the temperature stage needs of the shape stage
    (:class:`~contextledger.assembly.shape.Shaper`): raw renderings and lower bounds of
    their cost."""

    def render_unit(self, u: Unit, ev: Evaluator, *, raw: bool, bucket: str, mandatory: bool, order: tuple[int, int]) -> Piece: ...

    def raw_lower_bound(self, u: Unit, ev: Evaluator) -> int: ...


@dataclass(frozen=True, kw_only=True)
class Heat:
    """The temperature plan of the visible units (indexes into them).

    Attributes:
        tail_start: units from here on are the raw recent tail.
        first_user: the task statement (``None`` without a user turn).
        current: the current input (the last user turn).
        protected: keys of recovery-protected units (raw wherever they are).
        probed: raw probe renderings with their scratch traces, by index.
    """

    tail_start: int
    first_user: int | None
    current: int | None
    protected: set[str]
    probed: dict[int, tuple[Piece, Evaluator]]


def plan_temperature(units: list[Unit], ev: Evaluator, shaper: Prober, policy: Policy, budget: int) -> Heat:
    """The :class:`Heat` of ``units`` (visible, in history order) for a request of
    ``budget`` tokens (rules in the module docstring).  Probes record on scratch traces
    only."""
    turn_starts = [i for i, u in enumerate(units) if u.is_turn_start]
    k = policy.recent_tail.min_turns
    tail_start = turn_starts[-k] if len(turn_starts) >= k and k > 0 else 0
    # the task statement: the first user turn that is not a scaffold demonstration
    # (SWE-agent's ``is_demo`` example trajectory is older context, not the task) nor
    # wholly client-injected (Codex's ``<environment_context>``, AGENTS.md instructions)
    tasks = [i for i in turn_starts if states_task(units[i].messages[0])]
    first_user = tasks[0] if tasks else (turn_starts[0] if turn_starts else None)
    current = turn_starts[-1] if turn_starts else None
    protected = ev.recovery.protected(units)
    cap = int(policy.recent_tail.max_share * budget)
    probed: dict[int, tuple[Piece, Evaluator]] = {}

    def probe(i: int) -> Piece:
        scratch = ev.quiet()
        probed[i] = (shaper.render_unit(units[i], scratch, raw=True, bucket=PROBE_BUCKET, mandatory=False, order=(0, 0)), scratch)
        return probed[i][0]

    used = 0
    share_start = len(units)
    for i in range(len(units) - 1, -1, -1):
        if i in (first_user, current) or units[i].key in protected:
            share_start = i
            continue
        c = probe(i).cost
        if used + c > cap and share_start < len(units):
            break
        used += c
        share_start = i
    if share_start > 0 and _fits_raw(units, ev, shaper, probe, share_start, used, cap / max(policy.recent_tail.max_share, 1e-9) * 0.9):
        share_start = 0  # the whole history fits raw: nothing to reduce
    return Heat(tail_start=max(tail_start, share_start), first_user=first_user, current=current, protected=protected, probed=probed)


def _fits_raw(units: list[Unit], ev: Evaluator, shaper: Prober, probe: Callable[[int], Piece], share_start: int, used: int, limit: float) -> bool:
    """Whether the units before ``share_start`` fit raw with ``used`` tokens of tail
    within ``limit``.  Summing stops as soon as they cannot (a long history is not
    rendered once more for nothing): first with lower bounds of the raw costs (the raw
    result texts alone) — when they already exceed the limit, so would the renderings —
    then with probe renderings."""
    full = used
    bound = used
    for i in range(share_start - 1, -1, -1):
        bound += shaper.raw_lower_bound(units[i], ev)
        if bound > limit:
            full = bound
            break
    for i in range(share_start - 1 if full <= limit else -1, -1, -1):
        full += probe(i).cost
        if full > limit:
            break
    return full <= limit
