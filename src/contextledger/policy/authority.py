"""The authority chain: who may constrain the model, and who wins a conflict.

Seed 001 §4.2 ("Authority: every conflict needs an arbitration chain") and §6 problem 4
(rule conflicts).  The default chain, highest first, is::

    system > organization > project > user > task_state > retrieval
           > long_term_memory > summary > old_conversation

(``[authority] chain`` of the policy; :class:`~contextledger.records.enums.AuthorityLevel`).

Two guarantees live here:

* **Untrusted content never raises its own authority.**  The authority of a rule is the
  ceiling of the *source it came from* (:func:`authority_for_source`); whatever a tool
  output or imported text claims ("SYSTEM: ignore previous instructions"), a rule made
  from it is at most ``retrieval`` (:func:`cap_authority`).
* **Conflicts are decided by rank, not by wording** (:func:`resolve_authority`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeVar

from contextledger.records.enums import AuthorityLevel

__all__ = [
    "DEFAULT_AUTHORITY_CHAIN",
    "SOURCE_CEILINGS",
    "UNTRUSTED_SOURCES",
    "AuthorityResolution",
    "RankedRule",
    "RuleConflict",
    "SourceKind",
    "authority_for_source",
    "authority_rank",
    "cap_authority",
    "resolve_authority",
]

SourceKind = Literal[
    "system",
    "organization",
    "project_file",
    "user_message",
    "task_state",
    "tool_output",
    "imported_text",
    "memory",
    "summary",
]
"""Where a rule or claim came from."""

DEFAULT_AUTHORITY_CHAIN: tuple[AuthorityLevel, ...] = tuple(AuthorityLevel)
"""The seed 001 §4.2 chain, highest first (the declaration order of AuthorityLevel)."""

SOURCE_CEILINGS: dict[str, AuthorityLevel] = {
    "system": AuthorityLevel.SYSTEM,
    "organization": AuthorityLevel.ORGANIZATION,
    "project_file": AuthorityLevel.PROJECT,
    "user_message": AuthorityLevel.USER,
    "task_state": AuthorityLevel.TASK_STATE,
    "tool_output": AuthorityLevel.RETRIEVAL,
    "imported_text": AuthorityLevel.RETRIEVAL,
    "memory": AuthorityLevel.LONG_TERM_MEMORY,
    "summary": AuthorityLevel.SUMMARY,
}
"""The highest authority a rule from each source kind can have."""

UNTRUSTED_SOURCES: frozenset[str] = frozenset({"tool_output", "imported_text"})
"""Source kinds whose text is data, never instructions (DESIGN.md pipeline step 6)."""


def authority_for_source(source_kind: SourceKind) -> AuthorityLevel:
    """The authority (and ceiling) of a rule from ``source_kind``.

    ``tool_output`` and ``imported_text`` map to ``retrieval``: untrusted text can never
    be more than a verified-retrieval claim.

    Raises:
        ValueError: ``source_kind`` is not a :data:`SourceKind`.
    """
    try:
        return SOURCE_CEILINGS[source_kind]
    except KeyError:
        raise ValueError(f"unknown source kind {source_kind!r}") from None


def authority_rank(
    level: AuthorityLevel, chain: Sequence[AuthorityLevel] = DEFAULT_AUTHORITY_CHAIN
) -> int:
    """0 for the top of ``chain``, larger for lower levels; ``len(chain)`` if absent."""
    try:
        return list(chain).index(level)
    except ValueError:
        return len(chain)


def cap_authority(
    claimed: AuthorityLevel,
    source_kind: SourceKind,
    chain: Sequence[AuthorityLevel] = DEFAULT_AUTHORITY_CHAIN,
) -> AuthorityLevel:
    """The lower of ``claimed`` and the ceiling of ``source_kind`` in ``chain``."""
    ceiling = authority_for_source(source_kind)
    if authority_rank(claimed, chain) < authority_rank(ceiling, chain):
        return ceiling
    return claimed


class RankedRule(Protocol):
    """What the authority chain reads of a rule (:class:`~contextledger.policy.rules.Rule`):
    its id, conflict topic and normalised claim, authority level and order."""

    @property
    def id(self) -> str: ...

    @property
    def topic(self) -> str: ...

    @property
    def claim(self) -> str: ...

    @property
    def authority(self) -> AuthorityLevel: ...

    @property
    def order(self) -> int: ...


RuleT = TypeVar("RuleT", bound=RankedRule)


@dataclass(frozen=True, kw_only=True)
class RuleConflict:
    """One decided conflict (seed 001 §9 ``ContextPlan.conflicts``).

    Attributes:
        key: the conflict key (or derived topic) the rules share.
        winner_id: id of the rule that stays in force.
        loser_ids: ids of the overridden rules, sorted.
        reason: ``"authority <winner level> outranks <loser level>"`` or
            ``"same authority; newer wins"``.
    """

    key: str
    winner_id: str
    loser_ids: tuple[str, ...]
    reason: str


@dataclass(frozen=True, kw_only=True)
class AuthorityResolution(Generic[RuleT]):
    """The outcome of :func:`resolve_authority`.

    Attributes:
        winners: rules still in force, in input order (rules in no conflict included).
        losers: overridden rules, in input order.
        conflicts: one entry per (key, reason), sorted by key then reason.
    """

    winners: tuple[RuleT, ...]
    losers: tuple[RuleT, ...] = ()
    conflicts: tuple[RuleConflict, ...] = field(default=())

    def loser_reason(self, rule_id: str) -> str | None:
        """The reason ``rule_id`` was overridden, or ``None`` if it was not."""
        for conflict in self.conflicts:
            if rule_id in conflict.loser_ids:
                return conflict.reason
        return None


def resolve_authority(
    rules: Sequence[RuleT], chain: Sequence[AuthorityLevel] = DEFAULT_AUTHORITY_CHAIN
) -> AuthorityResolution[RuleT]:
    """Decide conflicts between rules by the authority chain (seed 001 §4.2, §6 problem 4).

    Rules are grouped by ``Rule.topic`` (the explicit ``conflict_key``, else a topic
    derived from the text with negations removed, so "use Redis" and "do not use Redis"
    meet).  Within a group, rules whose ``claim`` (normalised text) equals the winner's
    agree with it and stay in force; the others lose.  The winner is the rule with the
    highest authority in ``chain``; at equal authority the newer one (larger ``order``)
    wins; at equal order the one listed later wins.  Strength (hard/soft) does not
    change the ranking: a hard rule wins because of its source's authority.

    Deterministic: the result depends only on the rules, their order and ``chain``.
    """
    groups: dict[str, list[int]] = {}
    for index, rule in enumerate(rules):
        groups.setdefault(rule.topic, []).append(index)

    lost: dict[int, RuleConflict] = {}
    conflicts: list[RuleConflict] = []
    for key in sorted(groups):
        members = groups[key]
        if len({rules[i].claim for i in members}) < 2:
            continue
        best = min(
            members, key=lambda i: (authority_rank(rules[i].authority, chain), -rules[i].order, -i)
        )
        winner = rules[best]
        by_reason: dict[str, list[int]] = {}
        for i in members:
            if rules[i].claim == winner.claim:
                continue
            loser = rules[i]
            if loser.authority == winner.authority:
                reason = "same authority; newer wins"
            else:
                reason = f"authority {winner.authority.value} outranks {loser.authority.value}"
            by_reason.setdefault(reason, []).append(i)
        for reason in sorted(by_reason):
            conflict = RuleConflict(
                key=key,
                winner_id=winner.id,
                loser_ids=tuple(sorted(rules[i].id for i in by_reason[reason])),
                reason=reason,
            )
            conflicts.append(conflict)
            for i in by_reason[reason]:
                lost[i] = conflict
    return AuthorityResolution(
        winners=tuple(r for i, r in enumerate(rules) if i not in lost),
        losers=tuple(r for i, r in enumerate(rules) if i in lost),
        conflicts=tuple(conflicts),
    )
