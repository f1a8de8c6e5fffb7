"""``[privacy]``: privacy classes and provider routing (seed 000 §4.5, §8 R3)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, StrictStr, model_validator

from contextledger.policy.fields import ClassTuple, KeyedValueError, Section, freeze
from contextledger.records.enums import PrivacyClass

__all__ = ["PrivacySection"]


class PrivacySection(Section):
    """``[privacy]``: privacy classes and provider routing (seed 000 §4.5, §8 R3).

    Attributes:
        raw_denied: classes whose raw payload goes to no provider (safe summary and
            revalidation hint only).
        default_allowed: raw classes for a provider missing from ``routing``.
        when_in_doubt: ``"omit"`` or ``"safe_summary"`` when a class/route is undecidable.
        routing: provider name -> privacy classes whose raw payload it may receive;
            must not name a ``raw_denied`` class.
    """

    raw_denied: ClassTuple
    default_allowed: ClassTuple
    when_in_doubt: Literal["omit", "safe_summary"]
    routing: Annotated[dict[StrictStr, ClassTuple], AfterValidator(freeze)]

    @model_validator(mode="after")
    def _check_routes(self) -> PrivacySection:
        for provider in sorted(self.routing):
            clash = [c.value for c in self.routing[provider] if c in self.raw_denied]
            if clash:
                raise KeyedValueError(
                    f"routing.{provider}", f"classes {clash} are listed in privacy.raw_denied"
                )
        clash = [c.value for c in self.default_allowed if c in self.raw_denied]
        if clash:
            raise KeyedValueError(
                "default_allowed", f"classes {clash} are listed in privacy.raw_denied"
            )
        return self

    def allows_raw(self, provider: str, privacy_class: PrivacyClass) -> bool:
        """True when a raw payload of ``privacy_class`` may be sent to ``provider``."""
        if privacy_class in self.raw_denied:
            return False
        return privacy_class in self.routing.get(provider, self.default_allowed)
