"""``[visibility]``, ``[ownership]`` and ``[authority]``: who sees what and whose word wins
(seed 000 §4.5, §4.9, §4.14; seed 001 §4.2)."""

from __future__ import annotations

from pydantic import field_validator

from contextledger.policy.fields import Section, no_duplicates, permutation_of
from contextledger.records.enums import AuthorityLevel, RuntimeIsolationPolicy, Visibility

__all__ = ["AuthoritySection", "OwnershipSection", "VisibilitySection"]


class VisibilitySection(Section):
    """``[visibility]`` defaults (seed 000 §4.5, §4.9, §4.14)."""

    model_run_state: Visibility
    assistant_output: Visibility
    child_subagent_artifacts: Visibility


class OwnershipSection(Section):
    """``[ownership]`` defaults (seed 000 §4.9)."""

    default_isolation: RuntimeIsolationPolicy
    subagent_child_isolation: RuntimeIsolationPolicy


class AuthoritySection(Section):
    """``[authority]``: the authority chain, highest first (seed 001 §4.2).

    ``chain`` is a permutation of :class:`AuthorityLevel`.
    """

    chain: tuple[AuthorityLevel, ...]

    @field_validator("chain")
    @classmethod
    def _check_chain(cls, value: tuple[AuthorityLevel, ...]) -> tuple[AuthorityLevel, ...]:
        no_duplicates(value)
        permutation_of(value, tuple(AuthorityLevel), "authority level")
        return value

    def rank(self, level: AuthorityLevel) -> int:
        """0 for the highest authority, larger for lower ones."""
        return self.chain.index(level)
