"""The policy model: a frozen, versioned description of how context is assembled.

A policy is data (seed 000 §4.5 policy families, §5.6 determinism, §7 "policies must be
testable, observable, bounded").  Every section is a frozen pydantic model that forbids
unknown keys; tables keyed by provider or tool name are :class:`FrozenMap` instances, so
nothing inside a :class:`Policy` can be changed after validation.

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
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, Literal, NoReturn, TypeVar

from pydantic import (
    AfterValidator,
    BeforeValidator,
    PrivateAttr,
    StrictBool,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from contextledger.policy.fields import NonNegativeInt, PositiveInt, Section
from contextledger.policy.tools import EditsSection, ToolDeclaration
from contextledger.records.enums import (
    AuthorityLevel,
    ContextKind,
    FreshnessClass,
    PrivacyClass,
    PromotionPolicy,
    RuntimeIsolationPolicy,
    ToolCallStatus,
    Visibility,
)

__all__ = [
    "AuthoritySection",
    "BucketShares",
    "BudgetBucket",
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

SHARE_SUM_TOLERANCE = 1e-6
"""How far the bucket shares may sum from 1.0."""

NEVER_STALE = -1
"""``stale_after`` value meaning "never stale" (TOML has no null)."""


class KeyedValueError(ValueError):
    """A validation failure that names its own key path below the validated model.

    ``subpath`` is appended to the location pydantic reports, so a check written on a
    parent model can point at the child key it is about (``"budget.buckets"``).
    """

    def __init__(self, subpath: str, message: str) -> None:
        self.subpath = subpath
        self.message = message
        super().__init__(message)


class BudgetBucket(StrEnum):
    """The budget buckets of seed 001 §9."""

    SYSTEM_RULES = "system_rules"
    CURRENT_INPUT_TASK_STATE = "current_input_task_state"
    RECENT_TAIL = "recent_tail"
    RETRIEVAL = "retrieval"
    TOOL_RESULTS = "tool_results"
    LONG_TERM_MEMORY = "long_term_memory"


class DropStep(StrEnum):
    """The steps of the seed 001 §9 drop order (what is given up under budget pressure)."""

    LOW_CONFIDENCE_RETRIEVAL = "low_confidence_retrieval"
    EXPIRED_MEMORY = "expired_memory"
    LARGE_TOOL_RESULTS_TO_REFS = "large_tool_results_to_refs"
    COMPRESS_OLD_HISTORY = "compress_old_history"
    SHORTEN_RECENT_TAIL = "shorten_recent_tail"


_K = TypeVar("_K")
_V = TypeVar("_V")


class FrozenMap(dict[_K, _V]):
    """A ``dict`` that refuses mutation and hashes by its sorted items.

    Used for the provider- and tool-keyed tables of a policy, so a validated policy is
    immutable all the way down.  Raises ``TypeError`` on any mutating call.
    """

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("policy tables are immutable")

    __setitem__ = _refuse
    __delitem__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse
    __ior__ = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items(), key=lambda kv: str(kv[0]))))

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenMap, (dict(self),))

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenMap[_K, _V]:
        return self

    def __copy__(self) -> FrozenMap[_K, _V]:
        return self


def _freeze(value: dict[Any, Any]) -> FrozenMap[Any, Any]:
    return FrozenMap(value)


def _number(value: object) -> object:
    """Accept TOML integers and floats as numbers, nothing else (no strings, no bools)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, got {_describe(value)}")
    return float(value)


def _describe(value: object) -> str:
    return f"{type(value).__name__} {value!r}"


def _share(value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"must be between 0 and 1, got {_fmt(value)}")
    return value


def _seconds_or_never(value: int) -> int:
    if value < 0 and value != NEVER_STALE:
        raise ValueError(f"must be 0 or more seconds, or -1 for never, got {value}")
    return value


def _fmt(value: float) -> str:
    return repr(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(value)


Share = Annotated[float, BeforeValidator(_number), AfterValidator(_share)]
StaleSeconds = Annotated[StrictInt, AfterValidator(_seconds_or_never)]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SEMVER_RE = re.compile(r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$")


def _no_duplicates(values: tuple[Any, ...]) -> tuple[Any, ...]:
    seen: set[Any] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"duplicate entry {str(value)!r}")
        seen.add(value)
    return values


def _permutation_of(values: tuple[Any, ...], members: tuple[Any, ...], what: str) -> None:
    missing = [str(m) for m in members if m not in values]
    if len(values) != len(members) or missing:
        raise ValueError(f"must list each {what} exactly once" + (f"; missing {missing}" if missing else ""))




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


class BucketShares(Section):
    """``[budget.buckets]``: fraction of the budget per bucket (seed 001 §9).

    Each share is in [0, 1]; the six shares sum to 1.0 ± 1e-6.
    """

    system_rules: Share
    current_input_task_state: Share
    recent_tail: Share
    retrieval: Share
    tool_results: Share
    long_term_memory: Share

    @model_validator(mode="after")
    def _check_sum(self) -> BucketShares:
        total = sum(self.as_mapping().values())
        if abs(total - 1.0) > SHARE_SUM_TOLERANCE:
            raise ValueError(f"shares must sum to 1.0, got {total:.6f}")
        return self

    def share(self, bucket: BudgetBucket) -> float:
        """Return the share (0..1) of ``bucket``."""
        value: float = getattr(self, bucket.value)
        return value

    def as_mapping(self) -> dict[BudgetBucket, float]:
        """Return ``{bucket: share}`` in :class:`BudgetBucket` order."""
        return {bucket: self.share(bucket) for bucket in BudgetBucket}


class BudgetSection(Section):
    """``[budget]``: token budget, bucket shares, flow order and drop order (seed 001 §9).

    Attributes:
        default_budget_tokens: budget of a request when the caller gives none (tokens).
        buckets: share of the budget per bucket.
        flow_order: unused tokens of ``flow_order[i]`` flow to ``flow_order[i + 1]``;
            the last bucket's unused tokens stay unspent.  A permutation of
            :class:`BudgetBucket`.
        drop_order: what is given up first under budget pressure; a permutation of
            :class:`DropStep`.
        reserve_pinned_constraints_first: reserve pinned constraints before any bucket.
    """

    default_budget_tokens: PositiveInt
    buckets: BucketShares
    flow_order: tuple[BudgetBucket, ...]
    drop_order: tuple[DropStep, ...]
    reserve_pinned_constraints_first: StrictBool

    @field_validator("flow_order")
    @classmethod
    def _check_flow(cls, value: tuple[BudgetBucket, ...]) -> tuple[BudgetBucket, ...]:
        _no_duplicates(value)
        _permutation_of(value, tuple(BudgetBucket), "budget bucket")
        return value

    @field_validator("drop_order")
    @classmethod
    def _check_drop(cls, value: tuple[DropStep, ...]) -> tuple[DropStep, ...]:
        _no_duplicates(value)
        _permutation_of(value, tuple(DropStep), "drop step")
        return value

    def bucket_tokens(self, budget_tokens: int) -> dict[BudgetBucket, int]:
        """Split ``budget_tokens`` into whole tokens per bucket (floor of each share).

        The remainder of the flooring goes to the last bucket of ``flow_order``, so the
        values always sum to ``budget_tokens``.
        """
        tokens = {b: int(budget_tokens * s) for b, s in self.buckets.as_mapping().items()}
        tokens[self.flow_order[-1]] += budget_tokens - sum(tokens.values())
        return tokens


class RecentTailSection(Section):
    """``[recent_tail]``: the raw recent tail (seed 001 §9 step 6).

    Attributes:
        min_turns: whole user turns always kept raw.
        max_share: most of the budget the tail may take after leftovers flowed into it;
            at least ``budget.buckets.recent_tail``.
    """

    min_turns: NonNegativeInt
    max_share: Share


class WorkingSetSection(Section):
    """``[working_set]``: the files read or edited on the lineage, listed as task state
    (seed 001 §3: the files being edited are *hot*; seed 001 §5: after an edit the earlier
    read is stale).  One line per file, newest first, with its state (``edited``,
    ``read``, ``read, changed since``); paths only, never content.

    Attributes:
        max_files: most files listed (0 turns the list off).
        max_share: most of the budget the list may take; files beyond it are counted.
    """

    max_files: NonNegativeInt = 100
    max_share: Share = 0.3


class FreshnessWindows(Section):
    """``[freshness.stale_after]``: seconds until stale per freshness class; -1 = never."""

    volatile: StaleSeconds
    session: StaleSeconds
    time_bounded: StaleSeconds
    durable: StaleSeconds
    permanent: StaleSeconds

    def seconds(self, freshness_class: FreshnessClass) -> int | None:
        """Seconds after ``observed_at`` at which ``freshness_class`` is stale, or ``None``."""
        value: int = getattr(self, freshness_class.value)
        return None if value == NEVER_STALE else value


class ToolFreshnessOverride(Section):
    """``[freshness.tools.<tool>]``: a tool's own staleness window and/or mode."""

    stale_after: StaleSeconds | None = None
    stale_mode: Literal["mark", "omit"] | None = None


class FreshnessSection(Section):
    """``[freshness]`` (seed 000 §4.7, §8 R5).

    Attributes:
        stale_mode: ``"mark"`` shows a stale marker + revalidation hint; ``"omit"`` leaves
            the record out.
        stale_after: windows per freshness class (seconds; -1 = never).
        tools: per-tool overrides; a tool override wins over the class window.
    """

    stale_mode: Literal["mark", "omit"]
    stale_after: FreshnessWindows
    tools: Annotated[dict[StrictStr, ToolFreshnessOverride], AfterValidator(_freeze)]

    def stale_after_seconds(
        self, freshness_class: FreshnessClass, tool_name: str | None = None
    ) -> int | None:
        """Window in seconds for a record of ``freshness_class`` made by ``tool_name``.

        Returns ``None`` when the record never goes stale.
        """
        override = self.tools.get(tool_name) if tool_name is not None else None
        if override is not None and override.stale_after is not None:
            return None if override.stale_after == NEVER_STALE else override.stale_after
        return self.stale_after.seconds(freshness_class)

    def mode_for(self, tool_name: str | None = None) -> Literal["mark", "omit"]:
        """The stale mode for a record made by ``tool_name``."""
        override = self.tools.get(tool_name) if tool_name is not None else None
        if override is not None and override.stale_mode is not None:
            return override.stale_mode
        return self.stale_mode


ClassTuple = Annotated[tuple[PrivacyClass, ...], AfterValidator(_no_duplicates)]


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
    routing: Annotated[dict[StrictStr, ClassTuple], AfterValidator(_freeze)]

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


class RecoverySection(Section):
    """``[recovery]`` (seed 000 §4.5, §4.6 recovery context).

    Attributes:
        protect_statuses: tool-call statuses never reduced while unresolved.
        keep_failed_until_resolved: a failed call stays raw-visible until resolved.
        max_failed_kept: most unresolved failures kept protected (newest first).
    """

    protect_statuses: Annotated[tuple[ToolCallStatus, ...], AfterValidator(_no_duplicates)]
    keep_failed_until_resolved: StrictBool
    max_failed_kept: NonNegativeInt


class VisibilitySection(Section):
    """``[visibility]`` defaults (seed 000 §4.5, §4.9, §4.14)."""

    model_run_state: Visibility
    assistant_output: Visibility
    child_subagent_artifacts: Visibility


class OwnershipSection(Section):
    """``[ownership]`` defaults (seed 000 §4.9)."""

    default_isolation: RuntimeIsolationPolicy
    subagent_child_isolation: RuntimeIsolationPolicy


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


class RetentionSection(Section):
    """``[retention]`` (seed 000 §4.5, §4.15).

    Attributes:
        honour_deleted_at: records with ``deleted_at`` never reach model context.
        audit_only_in_model_context: must be ``false``: audit-only records never reach
            model context.
    """

    honour_deleted_at: StrictBool
    audit_only_in_model_context: StrictBool

    @field_validator("audit_only_in_model_context")
    @classmethod
    def _audit_only_stays_out(cls, value: bool) -> bool:
        if value:
            raise ValueError("must be false: audit_only records never reach model context")
        return value


class AuthoritySection(Section):
    """``[authority]``: the authority chain, highest first (seed 001 §4.2).

    ``chain`` is a permutation of :class:`AuthorityLevel`.
    """

    chain: tuple[AuthorityLevel, ...]

    @field_validator("chain")
    @classmethod
    def _check_chain(cls, value: tuple[AuthorityLevel, ...]) -> tuple[AuthorityLevel, ...]:
        _no_duplicates(value)
        _permutation_of(value, tuple(AuthorityLevel), "authority level")
        return value

    def rank(self, level: AuthorityLevel) -> int:
        """0 for the highest authority, larger for lower ones."""
        return self.chain.index(level)


class ToolOutputOverride(Section):
    """``[tool_output.tools.<tool>]``: a tool's own output limits."""

    max_bytes: PositiveInt | None = None
    max_tokens: PositiveInt | None = None


class ToolOutputSection(Section):
    """``[tool_output]`` (seed 001 §6 problem 2: outputs over 4 KB become artifacts).

    Attributes:
        max_bytes: raw results larger than this are shown as a reference + preview.
        max_tokens: token cap of the preview/extract of one result.
        tools: per-tool overrides.
    """

    max_bytes: PositiveInt
    max_tokens: PositiveInt
    tools: Annotated[dict[StrictStr, ToolOutputOverride], AfterValidator(_freeze)]

    def limits_for(self, tool_name: str) -> tuple[int, int]:
        """``(max_bytes, max_tokens)`` for ``tool_name``, overrides applied."""
        override = self.tools.get(tool_name)
        max_bytes = self.max_bytes
        max_tokens = self.max_tokens
        if override is not None:
            max_bytes = override.max_bytes if override.max_bytes is not None else max_bytes
            max_tokens = override.max_tokens if override.max_tokens is not None else max_tokens
        return max_bytes, max_tokens


class CandidatesSection(Section):
    """``[candidates]`` (seed 000 §8 R8: a bounded candidate set).

    Attributes:
        max_candidates: most graph records considered for one request.
        recent_window: most recent lineage messages read as candidates.
    """

    max_candidates: PositiveInt
    recent_window: PositiveInt


class TraceSection(Section):
    """``[trace]``: keep per-record traces (seed 000 §4.5: only for tests and audits)."""

    keep_trace: StrictBool


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
    tools: Annotated[dict[StrictStr, ToolDeclaration], AfterValidator(_freeze)] = FrozenMap()

    _version: str = PrivateAttr(default="")

    @model_validator(mode="after")
    def _cross_checks(self) -> Policy:
        if self.recent_tail.max_share < self.budget.buckets.recent_tail:
            raise KeyedValueError(
                "recent_tail.max_share",
                f"must be at least budget.buckets.recent_tail "
                f"({_fmt(self.budget.buckets.recent_tail)}), got {_fmt(self.recent_tail.max_share)}",
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
