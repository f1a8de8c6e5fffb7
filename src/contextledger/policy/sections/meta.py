"""``[policy]``: the identity of a policy (seed 000 §4.5)."""

from __future__ import annotations

import re

from pydantic import StrictStr, field_validator

from contextledger.policy.fields import Section

__all__ = ["PolicyMeta"]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SEMVER_RE = re.compile(r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$")


class PolicyMeta(Section):
    """``[policy]``: identity of the policy.

    Attributes:
        name: ``[A-Za-z0-9][A-Za-z0-9_.-]*``.
        semver: ``MAJOR.MINOR.PATCH`` with an optional ``-prerelease``.
        description: free text.
    """

    name: StrictStr
    semver: StrictStr
    description: StrictStr

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _NAME_RE.match(value):
            raise ValueError(f"must match {_NAME_RE.pattern}, got {value!r}")
        return value

    @field_validator("semver")
    @classmethod
    def _check_semver(cls, value: str) -> str:
        if not _SEMVER_RE.match(value):
            raise ValueError(f"must be a semantic version like 1.2.3, got {value!r}")
        return value
