"""Each policy-family evaluator answers its one question with a reason from the closed
enumeration (seed 000 §4.5)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from contextledger.assembly.families import (
    ConflictEvaluator,
    FreshnessEvaluator,
    OwnershipEvaluator,
    PrivacyEvaluator,
    PromotionEvaluator,
    RehydrationEvaluator,
    RetentionEvaluator,
    VisibilityEvaluator,
)
from contextledger.policy.loader import default_policy
from contextledger.records.enums import (
    FreshnessClass,
    OmissionReason,
    PrivacyClass,
    PromotionPolicy,
    ResolutionState,
    RuntimeKind,
    ToolCallStatus,
    Visibility,
)
from contextledger.records.models import Participant, ToolArtifact, ToolMemory

T = datetime(2026, 1, 1, tzinfo=UTC)
POL = default_policy()


def part(pid: str, kind: RuntimeKind = RuntimeKind.CHAT, parent: str | None = None) -> Participant:
    return Participant(id=pid, tenant_id="t", conversation_id="c", name=pid, runtime_kind=kind, parent_participant_id=parent, created_at=T)


def mem(**kw: object) -> ToolMemory:
    base: dict[str, object] = dict(id="m1", tenant_id="t", conversation_id="c", branch_id="b", seq=1, source_artifact_ids=("a1",), source_tool="Bash", summary="s", observed_at=T, created_at=T)
    base.update(kw)
    return ToolMemory.model_validate(base)


def art(**kw: object) -> ToolArtifact:
    base: dict[str, object] = dict(id="a1", tenant_id="t", conversation_id="c", branch_id="b", call_id="c1", tool_name="Bash", status=ToolCallStatus.SUCCEEDED, sha256="sha256:" + "0" * 64, size_bytes=10, seq=1, observed_at=T, created_at=T)
    base.update(kw)
    return ToolArtifact.model_validate(base)


def test_retention() -> None:
    assert RetentionEvaluator(POL).artifact(art()) is None
    v = RetentionEvaluator(POL).artifact(art(deleted_at=T))
    assert v is not None and v.reason is OmissionReason.RETENTION_DELETED and v.family.value == "retention"


def test_visibility_and_ownership() -> None:
    a, b = part("a"), part("b")
    assert VisibilityEvaluator(b).check(Visibility.AUDIT_ONLY, "a").reason is OmissionReason.AUDIT_ONLY  # type: ignore[union-attr]
    assert VisibilityEvaluator(a).check(Visibility.AUDIT_ONLY, "a") is None
    assert OwnershipEvaluator(b).check(Visibility.PARTICIPANT_PRIVATE, "a").reason is OmissionReason.PARTICIPANT_PRIVATE  # type: ignore[union-attr]
    assert OwnershipEvaluator(b).check(Visibility.PARTICIPANT_PRIVATE, "a", ["b"]) is None
    assert OwnershipEvaluator(None).check(Visibility.BRANCH, "a") is None
    child = OwnershipEvaluator(part("k", RuntimeKind.SUBAGENT_CHILD, parent="a"))
    assert child.child_input("a", ()).reason is OmissionReason.NOT_PROMOTED  # type: ignore[union-attr]
    assert child.child_input("a", ("k",)) is None and child.child_input("k", ()) is None


def test_privacy_routing() -> None:
    ev = PrivacyEvaluator(POL, "anthropic")
    assert ev.check(PrivacyClass.INTERNAL) is None
    assert ev.check(PrivacyClass.SECRET_LIKE).reason is OmissionReason.PRIVACY_RESTRICTED  # type: ignore[union-attr]
    assert PrivacyEvaluator(POL, "some-other-provider").check(PrivacyClass.INTERNAL).reason is OmissionReason.PROVIDER_RESTRICTED  # type: ignore[union-attr]


def test_freshness_windows_and_verification() -> None:
    m = mem(freshness_class=FreshnessClass.TIME_BOUNDED)
    day = timedelta(seconds=86400)
    assert not FreshnessEvaluator(POL, T + day - timedelta(microseconds=1)).is_stale(m)
    assert FreshnessEvaluator(POL, T + day).is_stale(m)
    assert not FreshnessEvaluator(POL, T + day).is_stale(m.model_copy(update={"verified_at": T + timedelta(hours=1)}))
    assert FreshnessEvaluator(POL, T).is_stale(m.model_copy(update={"resolution_state": ResolutionState.STALE}))
    assert not FreshnessEvaluator(POL, T + timedelta(days=10000)).is_stale(mem(freshness_class=FreshnessClass.PERMANENT))
    assert FreshnessEvaluator(POL, T + day).check(m) is None  # default mode marks, never omits


def test_conflict_and_promotion() -> None:
    assert ConflictEvaluator(POL).check(mem(superseded_by="m2")).reason is OmissionReason.SUPERSEDED  # type: ignore[union-attr]
    assert ConflictEvaluator(POL).check(mem(supersedes=("m0",))) is None  # the successor stays
    assert ConflictEvaluator.conflicts(mem(conflicts_with=("z", "y"))) == ["y", "z"]
    assert PromotionEvaluator(part("b")).check(mem(promotion_policy=PromotionPolicy.NOT_PROMOTED, owner_participant_id="a")).reason is OmissionReason.NOT_PROMOTED  # type: ignore[union-attr]
    assert PromotionEvaluator(part("a")).check(mem(promotion_policy=PromotionPolicy.NOT_PROMOTED, owner_participant_id="a")) is None


def test_rehydration_budget_and_classes() -> None:
    ev = RehydrationEvaluator(POL)
    assert ev.requested("please use the EXACT csv") and not ev.requested("summarise it")
    assert ev.check(art(size_bytes=1000), None) is None
    assert ev.check(art(size_bytes=10**6), None).reason is OmissionReason.BUDGET  # type: ignore[union-attr]
    assert ev.check(art(privacy_class=PrivacyClass.GOOGLE_USER_DATA), None).reason is OmissionReason.PRIVACY_RESTRICTED  # type: ignore[union-attr]
    ev.spend(POL.rehydration.byte_budget - 5)
    assert ev.check(art(size_bytes=10), None).reason is OmissionReason.BUDGET  # type: ignore[union-attr]
