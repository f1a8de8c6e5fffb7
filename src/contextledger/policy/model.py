"""The policy model: a frozen, versioned description of how context is assembled.

A policy is data (seed 000 §4.5 policy families, §5.6 determinism, §7 "policies must be
testable, observable, bounded").  Every section is a frozen pydantic model that forbids
unknown keys; tables keyed by provider or tool name are :class:`FrozenMap` instances, so
nothing inside a :class:`Policy` can be changed after validation.

The sections are defined one module per section in :mod:`contextledger.policy.sections`
(shared field types in :mod:`contextledger.policy.fields`); :class:`Policy` puts them
together here, and this module re-exports every section name.

``Policy.version`` is computed from the content, never written in a file::

    "<name>@<semver>+sha256:<first 12 hex of sha256(canonical JSON of the content)>"

Canonical JSON is ``model_dump(mode="json")`` encoded with sorted keys, ``(",", ":")``
separators and ``ensure_ascii=False`` (UTF-8).  Any content change changes the version.

Validation errors raised here carry the dotted key path of the offending value; the
loader (:mod:`contextledger.policy.loader`) turns them into
:class:`~contextledger.errors.PolicyError`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, PrivateAttr, StrictStr, model_validator

from contextledger.policy.epoch import EpochSection
from contextledger.policy.fields import (
    FrozenMap,
    KeyedValueError,
    Section,
    fmt_number,
    freeze,
)
from contextledger.policy.sections.budget import (
    BucketShares,
    BudgetBucket,
    BudgetSection,
    CandidatesSection,
    DropStep,
    RecentTailSection,
    WorkingSetSection,
)
from contextledger.policy.sections.freshness import (
    FreshnessSection,
    FreshnessWindows,
    ToolFreshnessOverride,
)
from contextledger.policy.sections.memory import ConflictSection, PromotionByKind, PromotionSection
from contextledger.policy.sections.meta import PolicyMeta
from contextledger.policy.sections.privacy import PrivacySection
from contextledger.policy.sections.recovery import RecoverySection
from contextledger.policy.sections.rehydration import RehydrationSection, RehydrationTriggers
from contextledger.policy.sections.retention import RetentionSection, TraceSection
from contextledger.policy.sections.scope import (
    AuthoritySection,
    OwnershipSection,
    VisibilitySection,
)
from contextledger.policy.sections.tool_output import ToolOutputOverride, ToolOutputSection
from contextledger.policy.tools import EditsSection, ToolDeclaration

__all__ = [
    "AuthoritySection", "BucketShares", "BudgetBucket",
    "BudgetSection",
    "CandidatesSection",
    "ConflictSection",
    "DropStep",
    "FreshnessSection",
    "FreshnessWindows",
    "FrozenMap",
    "KeyedValueError",
    "OwnershipSection",
    "Policy",
    "PolicyMeta",
    "PrivacySection",
    "PromotionByKind",
    "PromotionSection",
    "RecentTailSection",
    "RecoverySection",
    "RehydrationSection",
    "RehydrationTriggers",
    "RetentionSection",
    "ToolFreshnessOverride",
    "ToolOutputOverride",
    "ToolOutputSection",
    "TraceSection",
    "VisibilitySection",
    "WorkingSetSection",
    "canonical_json",
]


class Policy(Section):
    """A complete context-assembly policy (seed 000 §4.5, §5.6; seed 001 §4.2, §9).

    Build one with :mod:`contextledger.policy.loader`; ``version`` is computed from the
    content.  Policies are frozen and hashable; two policies are equal iff their content is.
    """

    policy: PolicyMeta
    budget: BudgetSection
    recent_tail: RecentTailSection
    working_set: WorkingSetSection = WorkingSetSection()
    freshness: FreshnessSection
    privacy: PrivacySection
    rehydration: RehydrationSection
    conflict: ConflictSection
    recovery: RecoverySection
    visibility: VisibilitySection
    ownership: OwnershipSection
    promotion: PromotionSection
    retention: RetentionSection
    authority: AuthoritySection
    tool_output: ToolOutputSection
    candidates: CandidatesSection
    trace: TraceSection
    edits: EditsSection = EditsSection()
    epoch: EpochSection = EpochSection()
    tools: Annotated[dict[StrictStr, ToolDeclaration], AfterValidator(freeze)] = FrozenMap()

    _version: str = PrivateAttr(default="")

    @model_validator(mode="after")
    def _cross_checks(self) -> Policy:
        if self.recent_tail.max_share < self.budget.buckets.recent_tail:
            raise KeyedValueError(
                "recent_tail.max_share",
                f"must be at least budget.buckets.recent_tail "
                f"({fmt_number(self.budget.buckets.recent_tail)}), got {fmt_number(self.recent_tail.max_share)}",
            )
        return self

    def model_post_init(self, context: Any, /) -> None:
        digest = hashlib.sha256(canonical_json(self).encode("utf-8")).hexdigest()
        self._version = f"{self.policy.name}@{self.policy.semver}+sha256:{digest[:12]}"

    @property
    def version(self) -> str:
        """``"<name>@<semver>+sha256:<12 hex>"``, derived from the content."""
        return self._version

    @property
    def name(self) -> str:
        """The policy name (``[policy] name``)."""
        return self.policy.name

    def content(self) -> dict[str, Any]:
        """The policy as plain JSON-compatible data (section -> key -> value)."""
        data: dict[str, Any] = self.model_dump(mode="json")
        return data


def canonical_json(policy: Policy | Mapping[str, Any]) -> str:
    """Canonical JSON of a policy's content: sorted keys, compact separators, UTF-8."""
    data = policy.model_dump(mode="json") if isinstance(policy, Policy) else dict(policy)
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
