"""``[recovery]``: what failed or unresolved work stays protected (seed 000 §4.5, §4.6)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, StrictBool

from contextledger.policy.fields import NonNegativeInt, Section, no_duplicates
from contextledger.records.enums import ToolCallStatus

__all__ = ["RecoverySection"]


class RecoverySection(Section):
    """``[recovery]`` (seed 000 §4.5, §4.6 recovery context).

    Attributes:
        protect_statuses: tool-call statuses never reduced while unresolved.
        keep_failed_until_resolved: a failed call stays raw-visible until resolved.
        max_failed_kept: most unresolved failures kept protected (newest first).
    """

    protect_statuses: Annotated[tuple[ToolCallStatus, ...], AfterValidator(no_duplicates)]
    keep_failed_until_resolved: StrictBool
    max_failed_kept: NonNegativeInt
