"""``[conflict]`` and ``[promotion]``: how conflicting memories are shown and which
memories are promoted (seed 000 §4.6, §4.8, §8 R11)."""

from __future__ import annotations

from pydantic import StrictBool

from contextledger.policy.fields import Section, Share
from contextledger.records.enums import ContextKind, PromotionPolicy

__all__ = ["ConflictSection", "PromotionByKind", "PromotionSection"]


class ConflictSection(Section):
    """``[conflict]`` (seed 000 §4.8).

    Attributes:
        include_both_when_uncertain: show both sides of an undecided conflict.
        comparable_confidence_delta: confidences closer than this are comparable (0..1).
        omit_superseded: leave superseded memories out.
    """

    include_both_when_uncertain: StrictBool
    comparable_confidence_delta: Share
    omit_superseded: StrictBool


class PromotionByKind(Section):
    """``[promotion.by_context_kind]``: default promotion per context kind (seed 000 §4.6)."""

    conversational: PromotionPolicy
    operational: PromotionPolicy
    knowledge: PromotionPolicy
    provenance: PromotionPolicy
    policy: PromotionPolicy
    recovery: PromotionPolicy
    planning: PromotionPolicy

    def for_kind(self, kind: ContextKind) -> PromotionPolicy:
        """The default promotion policy of ``kind``."""
        value: PromotionPolicy = getattr(self, kind.value)
        return value


class PromotionSection(Section):
    """``[promotion]`` (seed 000 §4.5, §8 R11).

    Attributes:
        auto_min_confidence: memories below this confidence are not auto-promoted (0..1).
        subagent_child: promotion of child-subagent memories.
        by_context_kind: defaults per context kind.
    """

    auto_min_confidence: Share
    subagent_child: PromotionPolicy
    by_context_kind: PromotionByKind
