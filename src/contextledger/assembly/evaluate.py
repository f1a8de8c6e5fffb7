"""The evaluation context of one request: it runs the per-family evaluators of
:mod:`contextledger.assembly.families` over each candidate in the order of seed 000 §4.5
/ DESIGN.md — retention → ownership & visibility → privacy & provider routing →
freshness → conflict & supersession → promotion — while recovery and rehydration are
consulted by the assembler.

Every decision is appended to a trace with its family and a reason from the closed
:class:`~contextledger.records.enums.OmissionReason` enumeration; the assembly stores the
counts and, on request, the trace.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from contextledger.assembly.families import (
    ConflictEvaluator,
    FreshnessEvaluator,
    LineageLinks,
    OwnershipEvaluator,
    PrivacyEvaluator,
    PromotionEvaluator,
    RecoveryEvaluator,
    RehydrationEvaluator,
    RetentionEvaluator,
    VisibilityEvaluator,
)
from contextledger.assembly.units import derived
from contextledger.ids import new_id
from contextledger.memory.derive import (
    render_memory_text,
    stale_marker_body,
    stale_marker_header_at,
)
from contextledger.memory.freshness import memory_times_us
from contextledger.records.enums import (
    DecisionKind,
    OmissionReason,
    PolicyFamily,
    RuntimeKind,
    Shape,
    Visibility,
)
from contextledger.records.models import (
    Message,
    Participant,
    PolicyDecision,
    ToolArtifact,
    ToolMemory,
)
from contextledger.store.base import LineageSegment, SubjectEntry
from contextledger.textcut import cut_prefix

if TYPE_CHECKING:
    from contextledger.assembly.units import Unit
    from contextledger.policy.model import Policy

__all__ = ["REASON_FAMILY", "Evaluator", "MemoryView"]

_SETS_OMISSION = frozenset({DecisionKind.OMIT.value, DecisionKind.SHAPE.value})
"""Decisions whose recording also sets the record's omission reason (first one wins)."""

REASON_FAMILY: dict[OmissionReason, PolicyFamily] = {
    OmissionReason.OUT_OF_LINEAGE: PolicyFamily.VISIBILITY,
    OmissionReason.PARTICIPANT_PRIVATE: PolicyFamily.OWNERSHIP,
    OmissionReason.AUDIT_ONLY: PolicyFamily.VISIBILITY,
    OmissionReason.NOT_PROMOTED: PolicyFamily.PROMOTION,
    OmissionReason.PRIVACY_RESTRICTED: PolicyFamily.PRIVACY,
    OmissionReason.PROVIDER_RESTRICTED: PolicyFamily.PRIVACY,
    OmissionReason.STALE: PolicyFamily.FRESHNESS,
    OmissionReason.SUPERSEDED: PolicyFamily.CONFLICT,
    OmissionReason.BUDGET: PolicyFamily.BUDGET,
    OmissionReason.RETENTION_DELETED: PolicyFamily.RETENTION,
    OmissionReason.RUNTIME_ONLY: PolicyFamily.VISIBILITY,
    OmissionReason.DUPLICATE: PolicyFamily.CONFLICT,
    OmissionReason.REPLACED_BY_MEMORY: PolicyFamily.REHYDRATION,
    OmissionReason.COMPACTED: PolicyFamily.BUDGET,
    OmissionReason.LOW_CONFIDENCE: PolicyFamily.BUDGET,
    OmissionReason.AUTHORITY_OVERRIDDEN: PolicyFamily.AUTHORITY,
    OmissionReason.SITUATIONAL_NOT_MATCHED: PolicyFamily.AUTHORITY,
    OmissionReason.REHYDRATION_REFUSED: PolicyFamily.REHYDRATION,
    OmissionReason.OTHER_PARTICIPANT_TOOLS: PolicyFamily.OWNERSHIP,
    OmissionReason.UNSUPPORTED_CONTENT: PolicyFamily.VISIBILITY,
    OmissionReason.OUTSIDE_WINDOW: PolicyFamily.BUDGET,
}
"""Which policy family owns each omission reason."""


class MemoryView(NamedTuple):
    """How a memory appears in a request: ``text``, its ``shape``, whether it is shown as
    stale, and the prefix to put before a raw rendering of its artifact (stale or
    superseded warnings; empty when current).  Immutable."""

    text: str
    shape: Shape
    stale: bool = False
    raw_prefix: str = ""


_FAMILY_VALUE: dict[PolicyFamily, str] = {f: f.value for f in PolicyFamily}
_DECISION_VALUE: dict[DecisionKind, str] = {d: d.value for d in DecisionKind}


_ID_KEY = re.compile(r"\b(?:[a-z]+_)*id=")
"""``id=`` / ``thread_id=`` keys before entity ids: a stale one-liner keeps the ids
(they are self-describing) without the keys."""
_NOISE = re.compile(r"JSON (?:object|array) · [\d,]+ (?:keys|items)(?: · )?|status 2\d\d(?: · )?|\b[a-z_]+\.\d+\.(?=[a-z_]*id=)")


def tight_summary(summary: str) -> str:
    """The first line of a memory summary without descriptive filler (``JSON object · 3
    keys``), for one-line evidence."""
    first = summary.strip().split("\n", 1)[0]
    return _NOISE.sub("", first).replace(" succeeded: ", ": ").rstrip(" ·")


def short_age(then: datetime, now: datetime) -> str:
    """``"3d"``, ``"5h"``, ``"12m"``: the age of an observation, compactly."""
    return _short_seconds(int((now - then).total_seconds()))


def _safe_refs(mem: ToolMemory) -> list[str]:
    """Entity ids a restricted memory may still show (references, not content): the
    ids its extractor recorded, at most three (seed 000 §4.4: a safe summary and a
    revalidation hint stay available)."""
    out: list[str] = []
    for item in mem.payload.get("ids") or []:
        value = item.get("value") if isinstance(item, dict) else None
        if isinstance(value, (str, int)) and len(str(value)) <= 40:
            out.append(str(value))
        if len(out) == 3:
            break
    return out


def compact_stale_line(mem: ToolMemory, now: datetime) -> str:
    """One evidence line for a stale memory: what it said (first summary line, entity
    ids without their ``id=`` keys), its age, how to revalidate (seed 000 §4.7: a stale
    record is shown as stale with a revalidation hint), e.g. ``stale 2d:
    mail_get_thread: thr_93b1 (call again to revalidate)``."""
    return _stale_line(mem, _epoch_us(now))


def _stale_line(mem: ToolMemory, now_us: int) -> str:
    seconds = (now_us - derived(mem, "basis_us", lambda: _epoch_us(mem.verified_at or mem.observed_at))) // 1_000_000
    return f"stale {_short_seconds(seconds)}: {derived(mem, 'stale_line', lambda: _stale_line_tail(mem))}"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _epoch_us(at: datetime) -> int:
    """Microseconds since the epoch (exact integer arithmetic)."""
    return (at - _EPOCH) // _MICROSECOND


def _short_seconds(seconds: int) -> str:
    seconds = max(0, seconds)
    if seconds >= 86400:
        return f"{seconds // 86400}d"
    if seconds >= 3600:
        return f"{seconds // 3600}h"
    return f"{seconds // 60}m"


def _stale_line_tail(mem: ToolMemory) -> str:
    """The part of :func:`compact_stale_line` that does not depend on ``now``."""
    if mem.revalidation_tool == mem.source_tool:
        hint = "call again to revalidate"
    elif mem.revalidation_tool:
        hint = f"revalidate with {mem.revalidation_tool}"
    else:
        hint = "re-run before relying on it"
    return f"{_ID_KEY.sub('', tight_summary(mem.summary))} ({hint})"


class Evaluator:
    """Evaluates records for one request and keeps the decision trace.

    Args:
        viewer: the participant the request is assembled for (``None``: the
            conversation's main view — participant-private state of anyone is omitted).
    """

    def __init__(self, policy: Policy, *, provider: str, now: datetime, viewer: Participant | None, participants: list[Participant]) -> None:
        self.policy = policy
        self.provider = provider
        self.now = now
        self.viewer = viewer
        self.participants = {p.id: p for p in participants}
        self.retention = RetentionEvaluator(policy)
        self.visibility = VisibilityEvaluator(viewer)
        self.ownership = OwnershipEvaluator(viewer)
        self.privacy = PrivacyEvaluator(policy, provider)
        # links that hold on this request's lineage and for its viewer, learnt from the
        # units' memories in ``unit_visible`` (memory/linking.py stores links between
        # branches on the newer memory only)
        self.lineage = LineageLinks()
        self.freshness = FreshnessEvaluator(policy, now, lineage=self.lineage)
        self.conflict = ConflictEvaluator(policy, lineage=self.lineage)
        self.promotion = PromotionEvaluator(viewer)
        self.recovery = RecoveryEvaluator(policy)
        self.rehydration = RehydrationEvaluator(policy)
        self.decisions: list[dict[str, Any]] = []
        self._omitted: dict[str, str] = {}
        self._bulk: Counter[str] = Counter()
        # memory views of this request, shared with the quiet copies (the view depends
        # only on the record, the policy, the provider, the viewer and ``now``): the
        # result and the trace entries it recorded, replayed on a repeat
        self._views: dict[tuple[str, bool], tuple[ToolMemory, MemoryView | None, list[dict[str, Any]]]] = {}
        self._view_key = (policy.version, provider, viewer.id if viewer is not None else None)
        self._now_us = _epoch_us(now)
        self._max_bytes: dict[str, int] = {}
        labelled = {p.id for p in participants if p.runtime_kind is not RuntimeKind.SUBAGENT_CHILD}
        self.multi_party = len(labelled) > 1

    def quiet(self) -> Evaluator:
        """A copy whose decisions go to a scratch trace (for cost probes)."""
        import copy

        q = copy.copy(self)
        q.decisions = []
        q._omitted = {}
        q._bulk = Counter()
        return q

    def absorb(self, scratch: Evaluator, *, bucket: tuple[str, str] | None = None) -> bool:
        """Record in this trace what ``scratch`` (a :meth:`quiet` copy) recorded, as if it
        had been recorded here — so a rendering made for a cost probe can be kept instead
        of being made again.  ``bucket`` = ``(placeholder, bucket)`` renames the budget
        bucket of the scratch's inclusions.  Returns ``False`` and records nothing when
        the result could differ from recording here: a record the scratch omitted was
        already omitted in this trace (its first reason wins and may be read back), or
        the scratch counted bulk omissions."""
        if scratch._bulk or any(k in self._omitted for k in scratch._omitted):
            return False
        for d in scratch.decisions:
            e = dict(d)
            if bucket is not None and e.get("bucket") == bucket[0]:
                e["bucket"] = bucket[1]
            self.decisions.append(e)
        for k, v in scratch._omitted.items():
            self._omitted.setdefault(k, v)
        return True

    # -- trace -----------------------------------------------------------------------------
    def _add(self, record_id: str, kind: str, family: PolicyFamily, decision: DecisionKind, reason: str, **detail: Any) -> None:
        self.decisions.append({"record_id": record_id, "record_kind": kind, "family": _FAMILY_VALUE[family], "decision": _DECISION_VALUE[decision], "reason": reason, **detail})

    def include(self, record_id: str, kind: str, shape: Shape, bucket: str) -> None:
        """Record an inclusion with its shape and budget bucket."""
        self._add(record_id, kind, PolicyFamily.BUDGET, DecisionKind.INCLUDE, "selected", shape=shape.value, bucket=bucket)

    def omit_record(self, record_id: str, kind: str, reason: OmissionReason, why: str) -> None:
        """Record an omission (counted once per record, first reason wins)."""
        self._add(record_id, kind, REASON_FAMILY[reason], DecisionKind.OMIT, reason.value, detail=why)
        self._omitted.setdefault(record_id, reason.value)

    def shape_record(self, record_id: str, kind: str, shape: Shape, reason: OmissionReason, why: str) -> None:
        """Record that a record's raw form was replaced (counted under ``reason``)."""
        self._add(record_id, kind, REASON_FAMILY[reason], DecisionKind.SHAPE, reason.value, shape=shape.value, detail=why)
        self._omitted.setdefault(record_id, reason.value)

    def omit_unit(self, unit: Unit, reason: OmissionReason, why: str) -> None:
        """Omit every message of a unit."""
        for m in unit.messages:
            self.omit_record(m.id, "message", reason, why)

    def omit_part(self, msg: Message, reason: OmissionReason, why: str) -> None:
        """Record that a part of a message is not sent (e.g. thinking)."""
        key = f"{msg.id}#part"
        self._add(key, "part", REASON_FAMILY[reason], DecisionKind.OMIT, reason.value, detail=why)
        self._omitted.setdefault(key, reason.value)

    def protect(self, record_id: str, kind: str, why: str) -> None:
        """Record recovery protection of unresolved/failed state."""
        self._add(record_id, kind, PolicyFamily.RECOVERY, DecisionKind.PROTECT, "recovery_protected", detail=why)

    def refuse_rehydration(self, record_id: str, reason: OmissionReason) -> None:
        """Record a refused stage-2 rehydration."""
        self._add(record_id, "artifact", PolicyFamily.REHYDRATION, DecisionKind.REFUSE, OmissionReason.REHYDRATION_REFUSED.value, cause=reason.value)
        self._bulk[OmissionReason.REHYDRATION_REFUSED.value] += 1

    def rehydrated(self, record_id: str) -> None:
        """Record a stage-2 rehydration."""
        self._add(record_id, "artifact", PolicyFamily.REHYDRATION, DecisionKind.REHYDRATE, "exact_evidence_requested")

    def note_bulk(self, kind: str, reason: OmissionReason, count: int, why: str) -> None:
        """Record a counted omission of records not loaded individually."""
        self._add(f"{count} {kind}(s)", kind, REASON_FAMILY[reason], DecisionKind.OMIT, reason.value, detail=why, count=count)

    def restore(self, record_id: str, kind: str, why: str) -> None:
        """Take back an omission (the record found room after all); the trace keeps both."""
        self._omitted.pop(record_id, None)
        self._add(record_id, kind, PolicyFamily.BUDGET, DecisionKind.INCLUDE, "restored", detail=why)

    def is_omitted(self, record_id: str) -> bool:
        """Whether an omission was already recorded for ``record_id``."""
        return record_id in self._omitted

    def last_reason(self, record_id: str) -> str:
        """The recorded omission reason of ``record_id`` (or ``"omitted"``)."""
        return self._omitted.get(record_id, "omitted")

    def omission_counts(self) -> dict[str, int]:
        """Omission counts by reason (each record counted once)."""
        c: Counter[str] = Counter(self._omitted.values())
        c.update(self._bulk)
        return dict(c)

    def decision_counts(self) -> dict[str, int]:
        """Decision counts by ``family:decision``."""
        return dict(sorted(Counter(f"{d['family']}:{d['decision']}" for d in self.decisions).items()))

    def persistent_decisions(self, assembly_id: str, conversation_id: str, tenant_id: str) -> list[PolicyDecision]:
        """PolicyDecision rows for decisions that constrained the request in ways an audit
        asks about: privacy / provider routing, rehydration, recovery, supersession."""
        keep = {PolicyFamily.PRIVACY.value, PolicyFamily.REHYDRATION.value, PolicyFamily.RECOVERY.value, PolicyFamily.CONFLICT.value}
        out = []
        now = datetime.now(UTC)
        for d in self.decisions:
            if d["family"] not in keep or d["reason"] == OmissionReason.REPLACED_BY_MEMORY.value:
                continue
            out.append(
                PolicyDecision(
                    id=new_id("dec"), tenant_id=tenant_id, conversation_id=conversation_id, assembly_id=assembly_id,
                    family=PolicyFamily(d["family"]), decision=d["decision"], record_id=d["record_id"], reason=d["reason"],
                    detail={k: v for k, v in d.items() if k not in ("record_id", "family", "decision", "reason")}, created_at=now,
                )
            )
        return out

    # -- visibility / ownership -------------------------------------------------------
    def label_of(self, participant_id: str | None) -> str | None:
        """Speaker label of a participant (role label, else name)."""
        p = self.participants.get(participant_id or "")
        if p is None:
            return None
        return p.role_label or p.name

    def _visible(self, visibility: Visibility, owner: str | None, shared: tuple[str, ...] = ()) -> OmissionReason | None:
        verdict = self.visibility.check(visibility, owner) or self.ownership.check(visibility, owner, shared)
        return verdict.reason if verdict else None

    def memory_visible(self, mem: ToolMemory) -> bool:
        """Whether the viewer may see ``mem`` (visibility scope and ownership); nothing
        is recorded."""
        return self._visible(mem.visibility_scope, mem.owner_participant_id, mem.shared_with_participants) is None

    def entry_visible(self, entry: SubjectEntry) -> bool:
        """Whether the viewer may see the memory of ``entry`` by its indexed columns
        alone (visibility scope and owner; sharing, in the body, can only widen this):
        ``True`` means :meth:`memory_visible` is ``True`` for the record.  Nothing is
        recorded."""
        return self._visible(Visibility(entry.visibility), entry.owner_participant_id) is None

    @property
    def child_view(self) -> bool:
        """Assembling for a child subagent (narrow input, seed 001 §4 Boundary)."""
        return self.ownership.child_view

    def unit_visible(self, unit: Unit) -> bool:
        """Ownership & visibility of a unit (its first message decides); a child
        subagent sees only its own records unless others were promoted to it.

        Also notes the unit's memories in :attr:`lineage` (seen by the viewer or not):
        every unit of the request passes here before any memory view is made, and the
        links the noted memories carry decide supersession and staleness on this
        lineage (:class:`~contextledger.assembly.families.LineageLinks`)."""
        head = unit.messages[0]
        reason = self._visible(head.visibility, head.participant_id)
        if reason is not None:
            self.omit_unit(unit, reason, f"visibility {head.visibility.value}")
            self._note_memories(unit, shown=False)
            return False
        narrow = self.ownership.child_input(head.participant_id, head.metadata.get("promoted_to", ()))
        if narrow is not None:
            self.omit_unit(unit, narrow.reason, narrow.detail)
            self._note_memories(unit, shown=False)
            return False
        self._note_memories(unit, shown=True)
        return True

    # -- lineage links (memory/linking.py) ---------------------------------------------
    def _note_memories(self, unit: Unit, *, shown: bool) -> None:
        for mem in unit.memories.values():
            self.lineage.note(mem, visible=shown and self.memory_visible(mem) and self.promotion.check(mem) is None)

    def artifact_hidden(self, art: ToolArtifact) -> OmissionReason | None:
        """Why a result under a visible turn must not be shown to the viewer, if so."""
        return self._visible(art.visibility_scope, art.owner_participant_id, art.shared_with_participants)

    def visible_state(self, records: list[Any], kind: str) -> Any:
        """The newest SkillState / ContinuationCheckpoint the viewer may see; newer
        invisible ones are counted (participant_private / audit_only)."""
        for rec in reversed(records):
            owner = getattr(rec, "owner_participant_id", None) or getattr(rec, "participant_id", None)
            if owner is None:
                return rec
            reason = self._visible(rec.visibility_scope, owner)
            if reason is None:
                return rec
            self.omit_record(rec.id, kind, reason, f"{kind} of another participant")
        return None

    def foreign(self, unit: Unit) -> bool:
        """Whether a unit's tool calls belong to another participant than the viewer."""
        return self.viewer is not None and unit.participant_id is not None and unit.participant_id != self.viewer.id

    def rule_visible(self, rule: dict[str, Any], branch_id: str, segments: list[LineageSegment]) -> bool:
        """A pinned rule applies when recorded on the active lineage (or conversation-wide)."""
        b = rule.get("_branch_id")
        if b is None:
            return True
        for s in segments:
            if s.branch_id == b and (s.max_seq is None or int(rule.get("_seq", 0)) <= s.max_seq):
                return True
        self.omit_record(str(rule.get("id")), "rule", OmissionReason.OUT_OF_LINEAGE, "rule pinned on another branch")
        return False

    # -- privacy & provider routing ----------------------------------------------------
    def raw_allowed(self, art: ToolArtifact) -> tuple[bool, OmissionReason]:
        """Whether ``art``'s raw payload may go to the provider (retention, then privacy
        and provider routing; seed 000 §8 R3, R12)."""
        verdict = self.retention.artifact(art) or self.privacy.check(art.privacy_class)
        if verdict is not None:
            return False, verdict.reason
        return True, OmissionReason.PRIVACY_RESTRICTED

    def withhold_raw(self, art: ToolArtifact, mem: ToolMemory | None, limit: int, reason: OmissionReason) -> str | None:
        """Withhold ``art``'s raw payload: the redacted text that stands for a secret-like
        result (recorded as shaped; see :func:`contextledger.security.screen.redacted_form`),
        else ``None`` with the omission recorded (the safe summary is shown)."""
        from contextledger.security.screen import redacted_form

        redacted = redacted_form(art, mem, limit, self, reason)
        if redacted is None:
            self.omit_record(art.id, "artifact", reason, "raw payload withheld; safe summary shown")
        return redacted

    def tool_max_bytes(self, tool_name: str) -> int:
        """The raw tool-output limit in bytes for ``tool_name`` (seed 001 §6 problem 2)."""
        limit = self._max_bytes.get(tool_name)
        if limit is None:
            o = self.policy.tool_output.tools.get(tool_name)
            limit = self._max_bytes[tool_name] = o.max_bytes if o is not None and o.max_bytes is not None else self.policy.tool_output.max_bytes
        return limit

    # -- freshness ---------------------------------------------------------------------
    def is_stale(self, mem: ToolMemory) -> bool:
        """See :meth:`FreshnessEvaluator.is_stale`."""
        return self.freshness.is_stale(mem)

    # -- memory views ------------------------------------------------------------------
    def memory_view(self, mem: ToolMemory | None, *, in_exchange: bool = False) -> MemoryView | None:
        """How ``mem`` appears, or ``None`` when it must be omitted (reason recorded).

        ``in_exchange``: the view stands for a result inside its own exchange (a marker
        with the full revalidation hint, or the memory block, and a ``raw_prefix`` for a
        raw rendering); otherwise it is an evidence line (``raw_prefix`` is empty: a
        line is never followed by the raw payload).  Views are computed once per
        request: a repeat returns the same view and records the same trace entries."""
        if mem is None:
            return None
        key = (mem.id, in_exchange)
        hit = self._views.get(key)
        if hit is not None and hit[0] is mem:
            for d in hit[2]:
                self.decisions.append(dict(d))
                if d["decision"] in _SETS_OMISSION:
                    self._omitted.setdefault(d["record_id"], d["reason"])
            return hit[1]
        start = len(self.decisions)
        view = self._memory_view(mem, in_exchange)
        self._views[key] = (mem, view, [dict(d) for d in self.decisions[start:]])
        return view

    def _memory_view(self, mem: ToolMemory, in_exchange: bool) -> MemoryView | None:
        # what does not depend on ``now`` (visibility, promotion, supersession, privacy,
        # conflict marks) is decided once per record and request configuration, across
        # requests; freshness and ages are decided here, at ``now``
        final, view, decisions, conflict = derived(mem, ("view", self._view_key, in_exchange, self.lineage.key(mem)), lambda: self._static_view(mem, in_exchange))
        for d in decisions:
            self.decisions.append(dict(d))
            if d["decision"] in _SETS_OMISSION:
                self._omitted.setdefault(d["record_id"], d["reason"])
        if final:
            return view
        if self.freshness.is_stale(mem):
            omit = self.freshness.check(mem) if self.freshness.mode(mem) == "omit" else None
            if omit is not None:
                self.omit_record(mem.id, "memory", omit.reason, omit.detail)
                if in_exchange:
                    return MemoryView(text="[stale result omitted by policy]", shape=Shape.STALE_MARKER, stale=True)
                return None
            self._add(mem.id, "memory", PolicyFamily.FRESHNESS, DecisionKind.MARK_STALE, "stale_marked")
            if not in_exchange:
                return MemoryView(_stale_line(mem, self._now_us) + conflict, Shape.STALE_MARKER, True)
            marker = stale_marker_header_at(mem, derived(mem, "times_us", lambda: memory_times_us(mem)), self._now_us) + "\n" + derived(mem, "stale_marker_body", lambda: stale_marker_body(mem))
            return MemoryView(text=marker + conflict, shape=Shape.STALE_MARKER, stale=True, raw_prefix=marker + "\n")
        if not in_exchange:
            return MemoryView(text=derived(mem, "summary", lambda: mem.summary.strip()) + conflict, shape=mem.shape)
        return MemoryView(text=derived(mem, "memory_text", lambda: render_memory_text(mem)) + conflict, shape=mem.shape, raw_prefix=(conflict.strip() + "\n") if conflict else "")

    def _static_view(self, mem: ToolMemory, in_exchange: bool) -> tuple[bool, MemoryView | None, tuple[dict[str, Any], ...], str]:
        """The part of a memory view that does not depend on ``now``: ``(final, view,
        trace entries, conflict suffix)``; ``final`` when the view is decided (omitted,
        superseded, withheld), else freshness decides with the conflict suffix."""
        q = self.quiet()
        view: MemoryView | None = None
        final = True
        conflict = ""
        if not in_exchange and (reason := q._visible(mem.visibility_scope, mem.owner_participant_id, mem.shared_with_participants)) is not None:
            q.omit_record(mem.id, "memory", reason, f"visibility {mem.visibility_scope.value}")
        elif not in_exchange and (promo := q.promotion.check(mem)) is not None:
            q.omit_record(mem.id, "memory", promo.reason, promo.detail)
        elif (superseded := q.conflict.check(mem)) is not None:
            q.omit_record(mem.id, "memory", superseded.reason, superseded.detail)
            if in_exchange:
                # a superseded failure keeps its one-line outcome (the error line): why
                # the earlier attempt failed is history the retry builds on
                outcome = ""
                if mem.status.value == "failed":
                    lines = [ln.strip() for ln in mem.summary.strip().splitlines()[:2] if ln.strip()]
                    outcome = " " + cut_prefix(" — ".join([tight_summary(lines[0]), *lines[1:]]), 240) if lines else ""
                # the successor is named only when the viewer sees it in this request
                succ_id = self.lineage.successor(mem)
                succ = self.lineage.handle(succ_id) if succ_id is not None else None
                head = f"superseded by {succ}: see the newer result" if succ is not None else "superseded by a newer result"
                view = MemoryView(text=f"[{head}]{outcome}", shape=Shape.REFERENCE, raw_prefix=f"[superseded by {succ or 'a newer result'}]\n")
        elif (private := q.privacy.check(mem.privacy_class)) is not None:
            q.shape_record(mem.id, "memory", Shape.SUMMARY, private.reason, "only a safe summary may be shown")
            hint = f"; revalidate with {mem.revalidation_tool}" if mem.revalidation_tool else ""
            refs = _safe_refs(mem)
            ref_text = f"; refs {', '.join(refs)}" if refs else ""
            view = MemoryView(text=f"[{mem.privacy_class.value} data withheld by policy: {mem.source_tool} {mem.status.value}{ref_text}{hint}]", shape=Shape.SUMMARY)
        else:
            final = False
            others = [o for o in q.conflict.conflicts(mem) if o not in self.lineage.hidden]
            if others:
                # named by handle, in seq order; a partner outside this request has none
                named = self.lineage.handles(others)
                conflict = " [conflicts with " + (", ".join(named) if named else "another memory") + "]"
                q._add(mem.id, "memory", PolicyFamily.CONFLICT, DecisionKind.MARK_CONFLICT, "conflict_marked", others=others)
        return final, view, tuple(q.decisions), conflict
