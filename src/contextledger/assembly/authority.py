"""Stage 3: authority — the rules in force for this request and their conflicts.

Seed 001 §9 *Authority Resolver*; §4.2 (every conflict needs an arbitration chain) and
§6 problem 4 (rules and constraints).  Pinned user constraints and unscoped rules always
apply; situational (path- or tool-scoped) rules only when a tool call in view touched a
matching path or tool.  Conflicts are decided by the policy's authority chain
(:func:`~contextledger.policy.authority.resolve_authority`); losers are omitted with
reason ``authority_overridden`` and every conflict (winner, losers, reason) is recorded.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contextledger.assembly.units import derived
from contextledger.limits import loads_json
from contextledger.policy.authority import resolve_authority
from contextledger.policy.rules import Rule
from contextledger.records.enums import OmissionReason, Shape

if TYPE_CHECKING:
    from contextledger.assembly.candidates import CandidateSet
    from contextledger.assembly.evaluate import Evaluator
    from contextledger.policy.model import Policy

__all__ = ["RulesInForce", "rules_in_force"]


@dataclass(frozen=True, kw_only=True)
class RulesInForce:
    """The rules of one request: ``rules`` in force (by order, then id) and ``conflicts``
    (``{"key", "winner", "losers", "reason"}`` each, as recorded on the assembly)."""

    rules: list[Rule]
    conflicts: list[dict[str, Any]]


def rules_in_force(cands: CandidateSet, ev: Evaluator, policy: Policy) -> RulesInForce:
    """The rules in force for this request (rules in the module docstring); decisions are
    recorded on ``ev``."""
    from contextledger.policy.constraints import touched_paths

    paths: set[str] = set()
    tools: set[str] = set()
    for c in cands.calls:
        tools.add(c.tool_name)
        # parsed once per call record across requests (a pure function of its arguments)
        paths.update(derived(c, "touched_paths", functools.partial(_call_paths, c.arguments_json, touched_paths)))
    applicable: list[Rule] = []
    for body in cands.rules:
        if not ev.rule_visible(body, cands.branch_id, cands.segments):
            continue
        rule = Rule.model_validate({k: v for k, v in body.items() if not k.startswith("_")})
        if rule.scoped and not rule.pinned and not rule.applies_to(sorted(paths), sorted(tools)):
            ev.omit_record(rule.id, "rule", OmissionReason.SITUATIONAL_NOT_MATCHED, "no path or tool in view matches its scope")
            continue
        applicable.append(rule)
    applicable.sort(key=lambda r: (r.order, r.id))
    res = resolve_authority(applicable, policy.authority.chain)
    for r in res.losers:
        ev.omit_record(r.id, "rule", OmissionReason.AUTHORITY_OVERRIDDEN, res.loser_reason(r.id) or "overridden")
    for r in res.winners:
        ev.include(r.id, "rule", Shape.RAW, "system_rules")
    conflicts = [{"key": c.key, "winner": c.winner_id, "losers": list(c.loser_ids), "reason": c.reason} for c in res.conflicts]
    return RulesInForce(rules=list(res.winners), conflicts=conflicts)


def _call_paths(arguments_json: str, touched: Any) -> tuple[str, ...]:
    """Paths a call's JSON arguments touch (``policy.constraints.touched_paths``), ``()``
    for arguments that are not a JSON object."""
    try:
        args = loads_json(arguments_json)
    except ValueError:
        return ()
    return tuple(touched(args)) if isinstance(args, dict) else ()
