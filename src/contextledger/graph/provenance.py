"""Provenance verification: re-derive the integrity of every memory's evidence
(seed 000 §8 R4, §9.2)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from contextledger.errors import IntegrityError, NotFoundError
from contextledger.ids import new_id
from contextledger.memory.links import repair_provenance
from contextledger.records.enums import PolicyFamily
from contextledger.records.models import PolicyDecision
from contextledger.store.base import Scope

if TYPE_CHECKING:
    from contextledger.runtime import HasRuntime

__all__ = ["verify_provenance"]


def verify_provenance(source: HasRuntime, scope: Scope, conversation_id: str) -> dict[str, list[str]]:
    """Check every memory of ``conversation_id`` against its source artifacts.

    For each memory whose artifact is missing, retention-deleted or whose bytes no
    longer match the recorded sha256, a repair is attempted from the remaining
    evidence (another artifact with the same call id, tool and sha256); otherwise the
    memory is marked ``unverifiable`` — never given a fabricated substitute id.  Each
    attempt is counted on the memory and recorded as a PolicyDecision (one transaction
    per memory).

    Returns ``{"ok": [...], "repaired": [...], "unverifiable": [...]}`` (memory ids).
    """
    store = source.runtime.store
    arts = {a.id: a for a in store.artifacts(scope, conversation_id)}
    healthy: dict[str, bool] = {}

    def ok(artifact_id: str) -> bool:
        if artifact_id not in healthy:
            art = arts.get(artifact_id)
            try:
                healthy[artifact_id] = art is not None and art.deleted_at is None and bool(store.read_artifact_bytes(scope, art))
            except (IntegrityError, NotFoundError):
                healthy[artifact_id] = False
            healthy[artifact_id] = healthy[artifact_id] or (art is not None and art.size_bytes == 0 and art.deleted_at is None)
        return healthy[artifact_id]

    report: dict[str, list[str]] = {"ok": [], "repaired": [], "unverifiable": []}
    now = datetime.now(UTC)
    for mem in store.memories(scope, conversation_id):
        fixed, outcome = repair_provenance(mem, artifact_exists=lambda a: a in arts, artifact_hash_ok=ok, candidates=list(arts.values()))
        report[outcome].append(mem.id)
        if outcome == "ok":
            continue
        with store.writer(scope) as w:
            w.update_memory(fixed)
            w.add_decision(PolicyDecision(
                id=new_id("dec"), tenant_id=scope.tenant_id, conversation_id=conversation_id, family=PolicyFamily.RETENTION,
                decision=f"provenance_{outcome}", record_id=mem.id, reason=outcome, actor="verify_provenance",
                detail={"repair_attempts": fixed.repair_attempts, "source_artifact_ids": list(fixed.source_artifact_ids)}, created_at=now,
            ))
    return report
