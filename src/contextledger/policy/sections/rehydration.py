"""``[rehydration]``: when and how much exact raw evidence is brought back (seed 000 §4.11,
§8 R12)."""

from __future__ import annotations

from pydantic import StrictBool, StrictStr, model_validator

from contextledger.policy.fields import ClassTuple, KeyedValueError, NonNegativeInt, Section

__all__ = ["RehydrationSection", "RehydrationTriggers"]


class RehydrationTriggers(Section):
    """``[rehydration.triggers]``: what makes a selected record a rehydration candidate.

    Attributes:
        explicit_user_request: words in the current input asking for exact evidence
            (case-insensitive substring match).
        recovery_critical: unresolved/failed/retry-critical records qualify.
        not_promoted: artifacts whose memory was not promoted qualify.
    """

    explicit_user_request: tuple[StrictStr, ...]
    recovery_critical: StrictBool
    not_promoted: StrictBool


class RehydrationSection(Section):
    """``[rehydration]`` (seed 000 §4.11, §8 R12).

    Attributes:
        byte_budget: total raw bytes rehydrated for one request.
        per_record_max_bytes: largest raw payload rehydrated for one record;
            at most ``byte_budget``.
        triggers: see :class:`RehydrationTriggers`.
        denied_privacy_classes: classes never rehydrated.
    """

    byte_budget: NonNegativeInt
    per_record_max_bytes: NonNegativeInt
    triggers: RehydrationTriggers
    denied_privacy_classes: ClassTuple

    @model_validator(mode="after")
    def _check_bytes(self) -> RehydrationSection:
        if self.per_record_max_bytes > self.byte_budget:
            raise KeyedValueError(
                "per_record_max_bytes",
                f"must not exceed rehydration.byte_budget ({self.byte_budget}), "
                f"got {self.per_record_max_bytes}",
            )
        return self

    def requested_exact(self, user_text: str) -> bool:
        """True when ``user_text`` contains one of the explicit-request words."""
        lowered = user_text.casefold()
        return any(word.casefold() in lowered for word in self.triggers.explicit_user_request)
