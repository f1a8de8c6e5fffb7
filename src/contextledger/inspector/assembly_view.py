"""Data behind the inspector's assembly page: one model request, explained.

Leads with the token bar by budget bucket against the budget and the replay (the one
breakdown peers show), then what peers do not show: every candidate record's decision
and reason (seed 001 §9 ContextPlan ``selected`` / ``compressed`` / ``dropped``), the
omitted records grouped by reason with their ids, the rules and authority decisions in
force, and what changed against the previous request of the same branch and participant
(records entered and left, where the stable prefix first changed and why — seed 000 §5.3).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from contextledger.assembly.decisions import DECISIONS, RecordDecision
from contextledger.inspector.previews import RecordPlace, record_places
from contextledger.inspector.resolve import DecisionSet, assembly_decisions
from contextledger.records.models import ContextAssembly, PolicyDecision
from contextledger.store import schema as S
from contextledger.store.base import Scope
from contextledger.store.codec import iso_utc

if TYPE_CHECKING:
    from contextledger.runtime import HasRuntime
    from contextledger.store.sql import SqlStore

__all__ = ["AssemblyView", "BarSegment", "RequestDiff", "assembly_view", "previous_assembly"]


@dataclass(frozen=True, kw_only=True)
class BarSegment:
    """One bucket of the token bar: ``used`` of ``limit`` tokens."""

    name: str
    used: int
    limit: int

    @property
    def over(self) -> int:
        """Tokens used beyond the bucket's limit (0 when within it or without a limit)."""
        return max(0, self.used - self.limit) if self.limit > 0 else 0


@dataclass(kw_only=True)
class RequestDiff:
    """This request against the previous one of the same branch and participant."""

    previous: ContextAssembly
    entered: list[str]
    left: list[str]
    first_changed_message: int | None
    prefix_changed: bool
    prefix_reason: str
    prefix_detail: dict[str, Any] | None


@dataclass(kw_only=True)
class AssemblyView:
    """Everything the assembly page shows."""

    record: ContextAssembly
    payload: dict[str, Any] | None
    decisions: DecisionSet
    bar: list[BarSegment]
    overhead: int
    counts: dict[str, int]
    groups: dict[str, list[RecordDecision]]
    tokens: dict[str, int]
    rules: list[dict[str, Any]]
    policy_decisions: list[PolicyDecision]
    diff: RequestDiff | None
    reasons: list[str] = field(default_factory=list)
    places: dict[str, RecordPlace] = field(default_factory=dict)


def _stored_tokens(store: SqlStore, scope: Scope, conversation_id: str, ids: list[str]) -> dict[str, int]:
    """The cached o200k count of each record (message, artifact result, memory)."""
    out: dict[str, int] = {}
    tables = {"msg_": (S.messages, S.messages.c.token_count), "art_": (S.tool_artifacts, S.tool_artifacts.c.result_tokens), "mem_": (S.tool_memories, S.tool_memories.c.token_count)}
    with store.reader() as conn:
        for prefix, (t, col) in tables.items():
            wanted = [i for i in ids if i.startswith(prefix)]
            for i in range(0, len(wanted), 500):
                stmt = sa.select(t.c.id, col).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id, t.c.id.in_(wanted[i : i + 500]))
                out.update({str(r[0]): int(r[1] or 0) for r in conn.execute(stmt).all()})
    return out


def previous_assembly(store: SqlStore, scope: Scope, rec: ContextAssembly) -> ContextAssembly | None:
    """The newest assembly of the same conversation, branch and participant made before
    ``rec`` (``None`` for the first)."""
    store.deferred.settle(rec.conversation_id)
    t = S.assemblies
    stmt = (
        sa.select(t.c.body)
        .where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == rec.conversation_id, t.c.branch_id == rec.branch_id)
        .where(t.c.participant_id.is_(None) if rec.participant_id is None else t.c.participant_id == rec.participant_id)
        .where(sa.or_(t.c.created_at < iso_utc(rec.created_at), sa.and_(t.c.created_at == iso_utc(rec.created_at), t.c.id < rec.id)))
        .order_by(t.c.created_at.desc(), t.c.id.desc())
        .limit(1)
    )
    with store.reader() as conn:
        row = conn.execute(stmt).first()
    return ContextAssembly.model_validate(row.body) if row is not None else None


def _payload_messages(payload: dict[str, Any] | None) -> list[Any]:
    if not payload:
        return []
    head = [payload.get(k) for k in ("system", "instructions") if k in payload]
    return [*head, *(payload.get("messages") or payload.get("input") or [])]


def _diff(store: SqlStore, scope: Scope, rec: ContextAssembly, payload: dict[str, Any] | None) -> RequestDiff | None:
    prev = previous_assembly(store, scope, rec)
    if prev is None:
        return None
    _, prev_payload = store.get_assembly(scope, prev.id)
    before, now = set(prev.selected_refs), set(rec.selected_refs)
    old, new = _payload_messages(prev_payload), _payload_messages(payload)
    first = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), None)
    if first is None and len(old) != len(new):
        first = min(len(old), len(new))
    changed = prev.stable_prefix_hash != rec.stable_prefix_hash
    reason = str((rec.prefix_change or {}).get("reason") or ("stable prefix changed" if changed else "stable prefix unchanged: the provider's prompt cache can reuse it"))
    return RequestDiff(previous=prev, entered=[r for r in rec.selected_refs if r not in before], left=[r for r in prev.selected_refs if r not in now],
                       first_changed_message=first, prefix_changed=changed, prefix_reason=reason, prefix_detail=rec.prefix_change)


def _rules(store: SqlStore, scope: Scope, rec: ContextAssembly, decided: dict[str, RecordDecision]) -> list[dict[str, Any]]:
    """Rule records of the conversation with their decision in this request."""
    out = []
    for body in store.rule_bodies(scope, rec.conversation_id):
        rid = str(body.get("id") or body.get("rule_id") or "")
        d = decided.get(rid)
        text = body.get("text") or body.get("body") or body.get("statement") or ""
        out.append({"id": rid, "text": str(text), "kind": body.get("kind") or body.get("hardness"), "authority": body.get("authority"),
                    "scope": body.get("scope") or body.get("paths"), "decision": d.decision if d else None, "reason": d.reason if d else None})
    return out


def _bar(rec: ContextAssembly) -> tuple[list[BarSegment], int]:
    segs = [BarSegment(name=k, used=int(v.get("used", 0)), limit=int(v.get("limit", 0))) for k, v in rec.buckets.items()]
    overhead = max(0, rec.assembled_tokens - sum(s.used for s in segs))
    return segs, overhead


def assembly_view(source: HasRuntime, scope: Scope, assembly_id: str) -> AssemblyView:
    """The assembly page's data.

    Raises:
        NotFoundError: unknown assembly in the scope's tenant.
    """
    store = source.runtime.store
    rec, payload = store.get_assembly(scope, assembly_id)
    ds = assembly_decisions(source, scope, rec)
    counts = Counter(d.decision for d in ds.records)
    groups: dict[str, list[RecordDecision]] = defaultdict(list)
    for d in ds.records:
        if d.decision == "omitted":
            groups[d.reason].append(d)
    bar, overhead = _bar(rec)
    tokens = _stored_tokens(store, scope, rec.conversation_id, [d.record_id for d in ds.records])
    return AssemblyView(
        record=rec, payload=payload, decisions=ds, bar=bar, overhead=overhead,
        counts={k: counts.get(k, 0) for k in DECISIONS},
        groups=dict(sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))),
        tokens=tokens, rules=_rules(store, scope, rec, ds.by_id()),
        policy_decisions=store.decisions(scope, assembly_id=rec.id),
        diff=_diff(store, scope, rec, payload),
        reasons=sorted({d.reason for d in ds.records}),
        places=record_places(store, scope, rec.conversation_id, [d.record_id for d in ds.records]),
    )
