"""Garbage collection (``contextledger gc``): retention rules, sampled assembly logs,
unreferenced blobs (seed 000 §4.15, §8 R2).

:func:`collect` runs three passes over the whole ledger (every tenant):

1. retention — each artifact old enough for the first matching rule of the retention
   policy gets that rule's action (:mod:`~contextledger.security.retention`);
2. assembly logs — those a ``sample`` / ``delete`` rule covers are deleted with their
   decisions, except the sampled ones;
3. blobs — every stored blob no row references and older than the grace period (an
   import or a recorder writes its blobs just before the rows that reference them) is
   deleted: what a killed import left behind, payloads retention released.

With ``dry_run`` nothing changes and the report says what would.  A real run appends one
``deletion_audit`` row (counts only).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from contextledger.ids import new_id
from contextledger.records.enums import PolicyFamily, PrivacyClass
from contextledger.records.models import PolicyDecision, ToolArtifact
from contextledger.security.references import (
    delete_blob,
    iter_stored_blobs,
    record_deletion,
    referenced_blob_keys,
)
from contextledger.security.retention import (
    RetentionPolicy,
    RetentionRule,
    default_retention,
    keep_sampled,
)
from contextledger.store import schema as S
from contextledger.store.base import Scope

if TYPE_CHECKING:
    from contextledger.runtime import HasRuntime

__all__ = ["DEFAULT_GRACE", "GcReport", "collect"]

DEFAULT_GRACE = timedelta(hours=1)
"""Unreferenced blobs younger than this are spared (a write in progress)."""


@dataclass(kw_only=True)
class GcReport:
    """What :func:`collect` did (or would do, with ``dry_run``)."""

    dry_run: bool
    retention: Counter[str] = field(default_factory=Counter)
    assemblies_deleted: int = 0
    assemblies_kept: int = 0
    decisions_deleted: int = 0
    blobs_deleted: int = 0
    blob_bytes_freed: int = 0
    blobs_spared_young: int = 0
    audit_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "dry_run": self.dry_run, "retention": dict(self.retention), "assemblies_deleted": self.assemblies_deleted,
            "assemblies_kept": self.assemblies_kept, "decisions_deleted": self.decisions_deleted, "blobs_deleted": self.blobs_deleted,
            "blob_bytes_freed": self.blob_bytes_freed, "blobs_spared_young": self.blobs_spared_young, "audit_id": self.audit_id,
        }


def _artifacts(ledger: HasRuntime) -> list[ToolArtifact]:
    t = S.tool_artifacts
    with ledger.runtime.store.reader() as conn:
        return [ToolArtifact.model_validate_json(str(b)) for (b,) in conn.execute(sa.select(sa.cast(t.c.body, sa.Text)).order_by(t.c.tenant_id, t.c.id))]


def _decision(art: ToolArtifact, action: str, index: int, rule: RetentionRule, now: datetime) -> PolicyDecision:
    return PolicyDecision(
        id=new_id("dec"), tenant_id=art.tenant_id, conversation_id=art.conversation_id, family=PolicyFamily.RETENTION,
        decision=f"{action}_payload", record_id=art.id, reason=f"retention rule {index + 1}: {action} after {rule.after}",
        actor="gc", detail={"rule": index + 1, "on": now.date().isoformat()}, created_at=now,
    )


def _apply(ledger: HasRuntime, art: ToolArtifact, action: str, index: int, rule: RetentionRule, now: datetime) -> None:
    scope = Scope(tenant_id=art.tenant_id)
    if action == "delete":
        from contextledger.graph.retention import apply_retention

        apply_retention(ledger, scope, art.id, reason=f"retention rule {index + 1}: delete after {rule.after}", actor="gc", now=now)
        return
    data = ledger.runtime.store.read_artifact_bytes(scope, art)
    update: dict[str, Any] = {"retention_class": action}
    if action == "archive":
        update |= {"blob_key": ledger.runtime.put_restricted_blob(data), "inline_text": None}
    elif action == "redact":
        from contextledger.security.secrets import screen_text
        from contextledger.store.blobs import sha256_key

        text = screen_text(data.decode("utf-8", "replace")).text.encode()
        update |= {"blob_key": ledger.runtime.store.blobs.put(text), "inline_text": None, "sha256": sha256_key(text), "size_bytes": len(text),
                   "provider_metadata": {**art.provider_metadata, "retention": {"action": "redact", "on": now.date().isoformat(), "original_sha256": art.sha256}}}
        if art.privacy_class is PrivacyClass.SECRET_LIKE:
            update["privacy_class"] = PrivacyClass.INTERNAL
    elif action == "hash":
        update |= {"blob_key": None, "inline_text": None, "deleted_at": now}
    t = S.tool_artifacts
    with ledger.runtime.store.writer(scope) as w:
        w.update_artifact(art.model_copy(update=update))
        w.conn.execute(t.update().where(t.c.id == art.id, t.c.tenant_id == art.tenant_id).values(blob_key=update.get("blob_key"), inline_text=None))
        w.add_decision(_decision(art, action, index, rule, now))


def _retention(ledger: HasRuntime, policy: RetentionPolicy, now: datetime, report: GcReport) -> None:
    for art in _artifacts(ledger):
        if art.deleted_at is not None or art.retention_class != "standard":
            continue
        hit = policy.first("artifact", art.privacy_class, art.tool_name)
        if hit is None or hit[1].action == "keep" or art.created_at > now - hit[1].age:
            continue
        index, rule = hit
        report.retention[rule.action] += 1
        if not report.dry_run:
            _apply(ledger, art, rule.action, index, rule, now)


def _assemblies(ledger: HasRuntime, policy: RetentionPolicy, now: datetime, report: GcReport) -> None:
    hit = policy.first("assembly")
    if hit is None or hit[1].action not in ("sample", "delete"):
        return
    rule = hit[1]
    ledger.runtime.store.deferred.settle()
    a, d = S.assemblies, S.policy_decisions
    cutoff = (now - rule.age).isoformat()
    with ledger.runtime.store.reader() as conn:
        old = [(str(i), str(t)) for i, t in conn.execute(sa.select(a.c.id, a.c.tenant_id).where(a.c.created_at < cutoff))]
    doomed = [(i, t) for i, t in old if rule.action == "delete" or not keep_sampled(i, rule.sample_every)]
    report.assemblies_kept += len(old) - len(doomed)
    report.assemblies_deleted += len(doomed)
    if report.dry_run or not doomed:
        return
    with ledger.runtime.store.engine.begin() as conn:
        for i, t in doomed:
            report.decisions_deleted += int(conn.execute(d.delete().where(d.c.assembly_id == i, d.c.tenant_id == t)).rowcount)
            conn.execute(a.delete().where(a.c.id == i, a.c.tenant_id == t))


def _blobs(ledger: HasRuntime, now: datetime, grace: timedelta, report: GcReport) -> None:
    with ledger.runtime.store.reader() as conn:
        referenced = referenced_blob_keys(conn)
    for key, written, size in list(iter_stored_blobs(ledger.runtime.store.blobs)):
        if key in referenced:
            continue
        if written is not None and written > now - grace:
            report.blobs_spared_young += 1
            continue
        report.blobs_deleted += 1
        report.blob_bytes_freed += size
        if not report.dry_run:
            delete_blob(ledger.runtime.store.blobs, key)


def collect(ledger: HasRuntime, *, policy: RetentionPolicy | None = None, dry_run: bool = False, now: datetime | None = None, grace: timedelta = DEFAULT_GRACE) -> GcReport:
    """Run the three passes (see the module docstring) and return the report."""
    now = now or datetime.now(UTC)
    policy = policy or default_retention()
    report = GcReport(dry_run=dry_run)
    _retention(ledger, policy, now, report)
    _assemblies(ledger, policy, now, report)
    _blobs(ledger, now, grace, report)
    if not dry_run:
        with ledger.runtime.store.engine.begin() as conn:
            digest = hashlib.sha256(policy.model_dump_json().encode()).hexdigest()[:12]
            report.audit_id = record_deletion(conn, event="gc", tenant_id=None, subject=f"retention sha256:{digest}", actor="gc", counts=report.as_dict())
    return report
