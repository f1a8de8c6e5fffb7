"""One evaluator per policy family of seed 000 §4.5.

Each evaluator reads only its own section of the :class:`~contextledger.policy.model.Policy`
and answers one question about one record, returning ``None`` (no objection) or a
:class:`Verdict` whose reason comes from the closed
:class:`~contextledger.records.enums.OmissionReason` enumeration.  The
:class:`~contextledger.assembly.evaluate.Evaluator` runs them in the pipeline order of
DESIGN.md (retention → ownership & visibility → privacy & provider routing → freshness →
conflict & supersession → promotion; recovery and rehydration are consulted by the
assembler when it shapes and rehydrates) and records every verdict in the trace.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from contextledger.assembly.units import derived
from contextledger.handles import MEMORY_PREFIX
from contextledger.records.enums import (
    OmissionReason,
    PolicyFamily,
    PrivacyClass,
    PromotionPolicy,
    ResolutionState,
    RuntimeKind,
    ToolCallStatus,
    Visibility,
)
from contextledger.records.models import Participant, ToolArtifact, ToolMemory

if TYPE_CHECKING:
    from contextledger.assembly.units import Unit
    from contextledger.policy.model import Policy

__all__ = [
    "ConflictEvaluator",
    "FreshnessEvaluator",
    "LineageLinks",
    "OwnershipEvaluator",
    "PrivacyEvaluator",
    "PromotionEvaluator",
    "RecoveryEvaluator",
    "RehydrationEvaluator",
    "RetentionEvaluator",
    "Verdict",
    "VisibilityEvaluator",
]


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """An objection: the ``family`` that raised it, its ``reason`` and a short ``detail``."""

    family: PolicyFamily
    reason: OmissionReason
    detail: str


class RetentionEvaluator:
    """Retention (seed 000 §4.15): deleted payloads never reach a model."""

    family = PolicyFamily.RETENTION

    def __init__(self, policy: Policy) -> None:
        self.honour_deleted_at = policy.retention.honour_deleted_at

    def artifact(self, art: ToolArtifact) -> Verdict | None:
        """Objection to sending ``art``'s raw payload, if it was retention-deleted."""
        if art.deleted_at is not None and self.honour_deleted_at:
            return Verdict(family=self.family, reason=OmissionReason.RETENTION_DELETED, detail="payload deleted by retention")
        return None


class VisibilityEvaluator:
    """Visibility (seed 000 §4.5): audit-only records stay out of model context except
    for their owner."""

    family = PolicyFamily.VISIBILITY

    def __init__(self, viewer: Participant | None) -> None:
        self.viewer_id = viewer.id if viewer else None

    def check(self, visibility: Visibility, owner: str | None) -> Verdict | None:
        """Objection to showing a record of ``visibility`` owned by ``owner``."""
        if visibility is Visibility.AUDIT_ONLY and not (self.viewer_id is not None and owner == self.viewer_id):
            return Verdict(family=self.family, reason=OmissionReason.AUDIT_ONLY, detail="audit-only")
        return None


class OwnershipEvaluator:
    """Ownership (seed 000 §4.9): participant-private state reaches only its owner and
    the participants it is shared with; a child subagent's input is narrow (seed 001 §4
    Boundary)."""

    family = PolicyFamily.OWNERSHIP

    def __init__(self, viewer: Participant | None) -> None:
        self.viewer = viewer

    def check(self, visibility: Visibility, owner: str | None, shared: Sequence[str] = ()) -> Verdict | None:
        """Objection to showing a participant-private record to the viewer."""
        if visibility is not Visibility.PARTICIPANT_PRIVATE:
            return None
        vid = self.viewer.id if self.viewer else None
        if vid is not None and (owner == vid or vid in shared):
            return None
        return Verdict(family=self.family, reason=OmissionReason.PARTICIPANT_PRIVATE, detail="private to another participant")

    @property
    def child_view(self) -> bool:
        """Whether the viewer is a child subagent (narrow input)."""
        v = self.viewer
        return v is not None and v.runtime_kind is RuntimeKind.SUBAGENT_CHILD and v.parent_participant_id is not None

    def child_input(self, owner: str | None, promoted_to: Sequence[str]) -> Verdict | None:
        """Objection to showing a child another participant's record not promoted to it."""
        if not self.child_view or self.viewer is None or owner == self.viewer.id or self.viewer.id in promoted_to:
            return None
        return Verdict(family=PolicyFamily.PROMOTION, reason=OmissionReason.NOT_PROMOTED, detail="parent context is not promoted to the child")


class PrivacyEvaluator:
    """Privacy & provider routing (seed 000 §4.5, §8 R3): some classes go raw to no
    provider; the others only to the providers their route lists."""

    family = PolicyFamily.PRIVACY

    def __init__(self, policy: Policy, provider: str) -> None:
        self.denied = set(policy.privacy.raw_denied)
        self.allowed = set(policy.privacy.routing.get(provider, policy.privacy.default_allowed))

    def check(self, privacy_class: PrivacyClass) -> Verdict | None:
        """Objection to sending raw data of ``privacy_class`` to this provider."""
        cls = privacy_class.value
        if cls in self.denied:
            return Verdict(family=self.family, reason=OmissionReason.PRIVACY_RESTRICTED, detail=f"{cls} is never sent raw")
        if cls not in self.allowed:
            return Verdict(family=self.family, reason=OmissionReason.PROVIDER_RESTRICTED, detail=f"{cls} is not routed to this provider")
        return None


class FreshnessEvaluator:
    """Freshness (seed 000 §4.7, §8 R5): a memory is stale when ``now`` ≥ its last
    verification (else observation) + the window of its freshness class or tool, or when
    a later write made it stale — on its own branch (its record says so) or on the
    request's lineage only (:class:`LineageLinks`); stale records are marked or omitted
    per policy."""

    family = PolicyFamily.FRESHNESS

    def __init__(self, policy: Policy, now: datetime, *, lineage: LineageLinks | None = None) -> None:
        self.policy = policy
        self.now = now
        self.lineage = lineage if lineage is not None else LineageLinks()
        self._version = policy.version
        self._stale: dict[str, tuple[ToolMemory, bool]] = {}
        self._modes: dict[str, str] = {}

    def deadline(self, mem: ToolMemory) -> datetime | None:
        """When ``mem`` stops being current under the policy in force (``None``: never)."""
        fr = self.policy.freshness
        tool = fr.tools.get(mem.source_tool)
        seconds = tool.stale_after if tool is not None and tool.stale_after is not None else getattr(fr.stale_after, mem.freshness_class.value)
        basis = mem.verified_at or mem.observed_at
        return None if seconds is None or seconds < 0 else basis + timedelta(seconds=seconds)

    def is_stale(self, mem: ToolMemory) -> bool:
        """Whether ``mem`` is stale at ``now`` (answered once per record and evaluator)."""
        hit = self._stale.get(mem.id)
        if hit is not None and hit[0] is mem:
            return hit[1]
        if mem.resolution_state in (ResolutionState.STALE, ResolutionState.UNVERIFIABLE) or mem.id in self.lineage.stale:
            stale = True
        else:
            d = derived(mem, ("deadline", self._version), lambda: self.deadline(mem))
            stale = d is not None and self.now >= d
        self._stale[mem.id] = (mem, stale)
        return stale

    def mode(self, mem: ToolMemory) -> str:
        """``"mark"`` or ``"omit"`` for a stale ``mem``."""
        mode = self._modes.get(mem.source_tool)
        if mode is None:
            tool = self.policy.freshness.tools.get(mem.source_tool)
            mode = self._modes[mem.source_tool] = tool.stale_mode if tool is not None and tool.stale_mode is not None else self.policy.freshness.stale_mode
        return mode

    def check(self, mem: ToolMemory) -> Verdict | None:
        """Objection (reason ``stale``) when ``mem`` is stale and the policy omits it."""
        if self.is_stale(mem) and self.mode(mem) == "omit":
            return Verdict(family=self.family, reason=OmissionReason.STALE, detail="stale; policy omits stale records")
        return None


class LineageLinks:
    """Links that hold on one request's lineage and for its viewer (seed 000 §4.9–4.10),
    learnt from the memories of the request's units before any of them is rendered
    (:meth:`note`; the assembly's ownership check of each unit notes its memories).

    A link between memories of different branches is stored on the newer memory only
    (:func:`contextledger.memory.links.plan_links`): a memory the viewer sees on this
    lineage that lists an older one in ``supersedes`` or under ``payload["makes_stale"]``
    supersedes it, or makes it stale, in this request — whatever the older record says.
    The ids the request holds, split by whether the viewer may see them, also decide
    whether a successor or conflict partner named on a record may be shown.

    Attributes:
        visible: ids of the request's memories the viewer may see.
        hidden: ids of the request's memories the viewer may not see.
        superseded: old memory id → id of a visible memory listing it in ``supersedes``
            (the first noted).
        stale: old memory id → id of a visible memory listing it under
            ``payload["makes_stale"]`` (the first noted).
        seqs: memory id → ``seq`` of every memory noted (its handle, :meth:`handle`).
    """

    __slots__ = ("hidden", "seqs", "stale", "superseded", "visible")

    def __init__(self) -> None:
        self.visible: set[str] = set()
        self.hidden: set[str] = set()
        self.superseded: dict[str, str] = {}
        self.stale: dict[str, str] = {}
        self.seqs: dict[str, int] = {}

    def handle(self, memory_id: str) -> str | None:
        """The handle (``m12``, :mod:`contextledger.handles`) of a memory noted in this
        request, else ``None`` — a payload names a linked memory by handle, never by its
        random id."""
        seq = self.seqs.get(memory_id)
        return None if seq is None else f"{MEMORY_PREFIX}{seq}"

    def handles(self, memory_ids: Iterable[str]) -> list[str]:
        """The handles of the noted memories among ``memory_ids``, in ``seq`` order."""
        return [f"{MEMORY_PREFIX}{s}" for s in sorted(self.seqs[i] for i in set(memory_ids) if i in self.seqs)]

    def note(self, mem: ToolMemory, *, visible: bool) -> None:
        """Record that the request holds ``mem`` and whether the viewer may see it; the
        links a visible memory carries apply to this request."""
        self.seqs[mem.id] = mem.seq
        if not visible:
            if mem.id not in self.visible:
                self.hidden.add(mem.id)
            return
        self.visible.add(mem.id)
        self.hidden.discard(mem.id)
        for old in mem.supersedes:
            self.superseded.setdefault(old, mem.id)
        made_stale = mem.payload.get("makes_stale")
        if isinstance(made_stale, list):
            for old in made_stale:
                if isinstance(old, str):
                    self.stale.setdefault(old, mem.id)

    def successor(self, mem: ToolMemory) -> str | None:
        """The id of ``mem``'s successor when the viewer sees it in this request (its
        recorded ``superseded_by``, else a successor on this lineage), else ``None`` —
        an id the viewer may not know is never returned."""
        if mem.superseded_by is not None and mem.superseded_by in self.visible:
            return mem.superseded_by
        return self.superseded.get(mem.id)

    def key(self, mem: ToolMemory) -> tuple[object, ...] | None:
        """What a memory's view takes from this request's links (``None``: nothing) —
        part of the key under which the view is reused across requests."""
        if mem.superseded_by is None and not mem.conflicts_with and mem.id not in self.superseded:
            return None
        succ = mem.superseded_by
        return (
            succ is not None and succ in self.hidden,
            succ is not None and succ in self.visible,
            self.superseded.get(mem.id),
            tuple(c for c in mem.conflicts_with if c in self.hidden),
            tuple(self.seqs.get(c) for c in (succ, self.superseded.get(mem.id), *mem.conflicts_with) if c is not None),
        )


class ConflictEvaluator:
    """Conflict & supersession (seed 000 §4.8): a superseded memory is omitted and its
    successor stays selectable; conflicting memories are both kept and marked.

    A successor the viewer may not see (a link recorded before links respected
    audiences) does not hide the memory from that viewer; a successor on the request's
    lineage only (:class:`LineageLinks`) does."""

    family = PolicyFamily.CONFLICT

    def __init__(self, policy: Policy, *, lineage: LineageLinks | None = None) -> None:
        self.omit_superseded = policy.conflict.omit_superseded
        self.lineage = lineage if lineage is not None else LineageLinks()

    def check(self, mem: ToolMemory) -> Verdict | None:
        """Objection (reason ``superseded``) to an old memory that has a successor."""
        if not self.omit_superseded:
            return None
        succ = mem.superseded_by
        if (succ or mem.resolution_state is ResolutionState.SUPERSEDED) and succ not in self.lineage.hidden:
            return Verdict(family=self.family, reason=OmissionReason.SUPERSEDED, detail=f"superseded by {succ}")
        here = self.lineage.superseded.get(mem.id)
        if here is not None:
            return Verdict(family=self.family, reason=OmissionReason.SUPERSEDED, detail=f"superseded by {here} on this branch")
        return None

    @staticmethod
    def conflicts(mem: ToolMemory) -> list[str]:
        """Ids of the memories ``mem`` conflicts with (to mark both sides)."""
        return sorted(mem.conflicts_with)


class PromotionEvaluator:
    """Promotion (seed 000 §4.5, §8 R11): memories not promoted to model context are
    offered only to their owner."""

    family = PolicyFamily.PROMOTION

    def __init__(self, viewer: Participant | None) -> None:
        self.viewer_id = viewer.id if viewer else None

    def check(self, mem: ToolMemory) -> Verdict | None:
        """Objection (reason ``not_promoted``) to a memory not promoted for the viewer."""
        if mem.promotion_policy in (PromotionPolicy.NOT_PROMOTED, PromotionPolicy.AUDIT_ONLY) and mem.owner_participant_id != self.viewer_id:
            return Verdict(family=self.family, reason=OmissionReason.NOT_PROMOTED, detail=f"promotion {mem.promotion_policy.value}")
        return None


class RecoveryEvaluator:
    """Recovery (seed 000 §4.5–4.6): unresolved calls and unresolved failures are never
    reduced while unresolved; at most ``max_failed_kept`` failures (newest) stay raw."""

    family = PolicyFamily.RECOVERY

    def __init__(self, policy: Policy) -> None:
        self.rec = policy.recovery

    def protected(self, units: Sequence[Unit]) -> set[str]:
        """Keys of the units to protect (see class docstring).  A failure is resolved
        when a later call of the same tool with the same arguments succeeded."""
        statuses = set(self.rec.protect_statuses)
        succeeded: dict[tuple[str, str], int] = {}
        for u in units:
            for c in u.calls:
                if c.status is ToolCallStatus.SUCCEEDED:
                    k = (c.tool_name, c.arguments_json)
                    succeeded[k] = max(succeeded.get(k, -1), c.seq)
        keys: set[str] = set()
        failed: list[Unit] = []
        for u in units:
            if any(c.status in statuses and c.status.unresolved for c in u.calls):
                keys.add(u.key)
            elif ToolCallStatus.FAILED in statuses and u.failed_calls:
                resolved = self.rec.keep_failed_until_resolved and all(succeeded.get((c.tool_name, c.arguments_json), -1) > c.seq for c in u.failed_calls)
                if not resolved:
                    failed.append(u)
        if self.rec.max_failed_kept:
            keys.update(u.key for u in failed[-self.rec.max_failed_kept :])
        return keys


class RehydrationEvaluator:
    """Rehydration (seed 000 §4.11, §8 R12): raw payloads are read back only for selected
    records, when asked for, within a byte budget and never for denied classes."""

    family = PolicyFamily.REHYDRATION

    def __init__(self, policy: Policy) -> None:
        self.reh = policy.rehydration
        self.remaining_bytes = policy.rehydration.byte_budget

    def requested(self, current_input: str) -> bool:
        """Whether the current user input asks for exact evidence."""
        low = current_input.lower()
        return any(w.lower() in low for w in self.reh.triggers.explicit_user_request)

    def check(self, art: ToolArtifact, privacy: Verdict | None) -> Verdict | None:
        """Objection to rehydrating ``art`` (privacy first, then the byte budgets)."""
        if privacy is not None:
            return privacy
        if art.privacy_class.value in self.reh.denied_privacy_classes:
            return Verdict(family=self.family, reason=OmissionReason.PRIVACY_RESTRICTED, detail="class never rehydrated")
        if art.size_bytes > self.reh.per_record_max_bytes or art.size_bytes > self.remaining_bytes:
            return Verdict(family=self.family, reason=OmissionReason.BUDGET, detail="over the rehydration byte budget")
        return None

    def spend(self, size_bytes: int) -> None:
        """Charge a rehydrated payload to the byte budget."""
        self.remaining_bytes -= size_bytes
