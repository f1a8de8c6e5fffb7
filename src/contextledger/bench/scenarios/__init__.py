"""The benchmark scenario suite (issue "Prove it").

The six scenarios of seed 000 §9.1 (``seed-1`` … ``seed-6``), the behaviour cases of seed
000 §9.2 and the coding-agent walk-through of seed 001 §5, one module per family.  Each
:class:`~contextledger.bench.scenarios.base.Scenario` is built through the public
recording API into a ledger at a history multiplier and carries its own probes.
"""

from __future__ import annotations

from contextledger.bench.scenarios.base import T0, BuiltCase, Scenario, Script, filler_tokens
from contextledger.bench.scenarios.branches import BRANCH_ISOLATION, BRANCH_SEND
from contextledger.bench.scenarios.coding import CODING_WALKTHROUGH
from contextledger.bench.scenarios.conflicts import SEED_6
from contextledger.bench.scenarios.connected_apps import PRIVACY_OMISSION, SEED_3
from contextledger.bench.scenarios.documents import SEED_1
from contextledger.bench.scenarios.files import CSV_REHYDRATION, PROVENANCE_REPAIR, SEED_2
from contextledger.bench.scenarios.participants import (
    CHILD_ARTIFACTS,
    DEBATE,
    PARENT_RESUME,
    SEED_5,
    SUBAGENT_CONTINUATION,
)
from contextledger.bench.scenarios.recovery import RETRY_CRITICAL, SCHEDULED_JOB
from contextledger.bench.scenarios.skills import SEED_4

__all__ = ["T0", "BuiltCase", "Scenario", "Script", "all_scenarios", "filler_tokens", "get_scenario"]

_ALL: tuple[Scenario, ...] = (
    SEED_1, SEED_2, SEED_3, SEED_4, SEED_5, SEED_6,
    PROVENANCE_REPAIR, CSV_REHYDRATION, BRANCH_ISOLATION, RETRY_CRITICAL, PRIVACY_OMISSION,
    SUBAGENT_CONTINUATION, DEBATE, CHILD_ARTIFACTS, PARENT_RESUME, SCHEDULED_JOB, BRANCH_SEND,
    CODING_WALKTHROUGH,
)


def all_scenarios() -> tuple[Scenario, ...]:
    """Every scenario in report order: ``seed-1`` … ``seed-6``, the §9.2 cases, then the
    seed 001 §5 walk-through."""
    return _ALL


def get_scenario(name: str) -> Scenario:
    """The scenario called ``name``.

    Raises:
        KeyError: no such scenario.
    """
    for s in _ALL:
        if s.name == name:
            return s
    raise KeyError(name)
