"""``[budget]``, ``[recent_tail]``, ``[working_set]`` and ``[candidates]``: how much of a
request each part may take and how many records are considered (seed 001 §9; seed 000 §8 R8)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import StrictBool, field_validator, model_validator

from contextledger.policy.fields import (
    SHARE_SUM_TOLERANCE,
    NonNegativeInt,
    PositiveInt,
    Section,
    Share,
    no_duplicates,
    permutation_of,
)

__all__ = [
    "BucketShares",
    "BudgetBucket",
    "BudgetSection",
    "CandidatesSection",
    "DropStep",
    "RecentTailSection",
    "WorkingSetSection",
]


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
        no_duplicates(value)
        permutation_of(value, tuple(BudgetBucket), "budget bucket")
        return value

    @field_validator("drop_order")
    @classmethod
    def _check_drop(cls, value: tuple[DropStep, ...]) -> tuple[DropStep, ...]:
        no_duplicates(value)
        permutation_of(value, tuple(DropStep), "drop step")
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
        when_needed: list only when the request does not already show each file's newest
            exchange raw (``false``: list whenever there are files in play).
    """

    max_files: NonNegativeInt = 100
    max_share: Share = 0.3
    when_needed: StrictBool = True


class CandidatesSection(Section):
    """``[candidates]`` (seed 000 §8 R8: a bounded candidate set).

    Attributes:
        max_candidates: most graph records considered for one request.
        recent_window: most recent lineage messages read as candidates.
    """

    max_candidates: PositiveInt
    recent_window: PositiveInt
