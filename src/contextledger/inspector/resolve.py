"""Every record's decision in one stored assembly, wherever it can be read from.

In order of preference (the page and ``explain --json`` say which one answered):

1. ``stored`` — the compact per-record list the assembler keeps on every
   :class:`~contextledger.records.models.ContextAssembly` (``record_decisions``);
2. ``trace`` — the full trace of an assembly made with ``--trace`` (or under a policy that
   keeps traces), folded by :func:`~contextledger.assembly.decisions.reduce_trace`;
3. ``recomputed`` — the assembly made again from the ledger with the same conversation,
   branch, participant, provider, budget, policy version and ``now`` (seed 000 §5.6:
   same graph + policy version + ``now`` ⇒ same selection), accepted only when the new
   payload's sha256 and selected records equal the stored ones — proof the graph the
   request saw is unchanged;
4. ``summary_only`` — none of the above (older assembly, graph changed since): the
   omission counts by reason only.

Records the assembler never loads one by one are then listed from the store: lineage
messages older than the candidate window (``outside_window``) and records on branches
outside the lineage (``out_of_lineage``), both bounded by the newest ``seq`` the request
could see.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from contextledger.assembly.decisions import RecordDecision, expand_compact, reduce_trace
from contextledger.records.enums import OmissionReason
from contextledger.records.models import ContextAssembly
from contextledger.store import schema as S
from contextledger.store.base import LineageSegment, Scope

if TYPE_CHECKING:
    from contextledger.runtime import HasRuntime
    from contextledger.store.sql import SqlStore

__all__ = ["SOURCES", "DecisionSet", "assembly_decisions", "in_lineage"]

SOURCES: dict[str, str] = {
    "stored": "stored with the assembly (compact per-record decision list)",
    "trace": "stored with the assembly (full trace: made with --trace)",
    "recomputed": "recomputed from the ledger with the same policy version and now; verified: the payload sha256 and selected records equal the stored ones",
    "summary_only": "not available: this assembly kept no per-record list and the graph changed since (or the policy version differs), so only the omission counts by reason are known",
}
"""What each decision source means (shown on the page and in ``explain --json``)."""


@dataclass(kw_only=True)
class DecisionSet:
    """The per-record decisions of one assembly.

    Attributes:
        assembly: the stored record.
        source: a key of :data:`SOURCES`.
        records: candidates first (in decision order), then the listed
            ``outside_window`` and ``out_of_lineage`` records.
        watermark: the newest message ``seq`` the request could see (``None``: unknown).
        counted: ``{reason: n}`` the assembly counted for reasons listed from the store,
            to show beside the listed number when they differ.
    """

    assembly: ContextAssembly
    source: str
    records: list[RecordDecision] = field(default_factory=list)
    watermark: int | None = None
    counted: dict[str, int] = field(default_factory=dict)

    def by_id(self) -> dict[str, RecordDecision]:
        """Decisions keyed by record id."""
        return {d.record_id: d for d in self.records}


def in_lineage(branch_id: str, seq: int, segments: Iterable[LineageSegment]) -> bool:
    """Whether a record on ``branch_id`` at ``seq`` belongs to the lineage ``segments``."""
    return any(s.branch_id == branch_id and (s.max_seq is None or seq <= s.max_seq) for s in segments)


def _recompute(source: HasRuntime, scope: Scope, rec: ContextAssembly) -> list[dict[str, Any]] | None:
    """The trace of the same request made again, or ``None`` when it cannot be shown to
    be the same request (other policy version, different payload)."""
    from contextledger.assembly.assembler import Assembler

    policy = source.runtime.policy
    if policy.version != rec.policy_version or rec.payload_sha256 is None:
        return None
    try:
        res = Assembler(source.runtime, policy).assemble(
            scope, rec.conversation_id, branch_id=rec.branch_id, participant_id=rec.participant_id, provider=rec.provider,
            budget_tokens=rec.budget_tokens, now=rec.now, runtime_kind=rec.runtime_kind, persist=False, replay="estimate",
        )
    except Exception:  # a graph that no longer assembles (records forgotten …): not the same request
        return None
    same = res.record.payload_sha256 == rec.payload_sha256 and tuple(res.record.selected_refs) == tuple(rec.selected_refs)
    return res.trace if same else None


def _message_seqs(store: SqlStore, scope: Scope, conversation_id: str, ids: Iterable[str]) -> list[int]:
    ids = [i for i in ids if i.startswith("msg_")]
    if not ids:
        return []
    t = S.messages
    with store.reader() as conn:
        rows = conn.execute(sa.select(t.c.seq).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id, t.c.id.in_(ids))).all()
    return [int(r.seq) for r in rows]


def _result_sources(store: SqlStore, scope: Scope, conversation_id: str, decided: dict[str, RecordDecision]) -> dict[str, RecordDecision]:
    """``{result message id: decision}``: the decision of each result message's artifact,
    or of the memory derived from it when the artifact itself has none."""
    t, tm = S.tool_artifacts, S.tool_memories
    mems = [k for k, d in decided.items() if d.kind == "memory"]
    with store.reader() as conn:
        by_art = {str(r.artifact_id): decided[str(r.id)] for r in conn.execute(
            sa.select(tm.c.id, tm.c.artifact_id).where(tm.c.tenant_id == scope.tenant_id, tm.c.conversation_id == conversation_id, tm.c.id.in_(mems))
        ).all() if r.artifact_id}
        by_art.update({k: d for k, d in decided.items() if d.kind == "artifact"})
        rows = conn.execute(sa.select(t.c.id, t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id, t.c.id.in_(list(by_art)))).all()
    out = {}
    for r in rows:
        body = r.body if isinstance(r.body, dict) else {}
        if body.get("message_id"):
            out[str(body["message_id"])] = by_art[str(r.id)]
    return out


_RUNTIME_KINDS = frozenset({"progress", "meta"})


def _in_window(rid: str, kind: str, results: dict[str, RecordDecision]) -> RecordDecision:
    """A lineage message inside the candidate window with no decision of its own."""
    src = results.get(rid)
    if src is not None:
        return RecordDecision(record_id=rid, kind="message", decision=src.decision, reason=src.reason, family=src.family, shape=src.shape,
                              bucket=src.bucket, detail=f"the result message of {src.record_id} (decided with it)")
    if kind in _RUNTIME_KINDS:
        return RecordDecision(record_id=rid, kind="message", decision="omitted", reason=OmissionReason.RUNTIME_ONLY.value, family="visibility",
                              detail="progress/meta records are runtime-only")
    return RecordDecision(record_id=rid, kind="message", decision="omitted", reason="not_decided", family="budget",
                          detail="in the candidate window, but the assembly recorded no decision for it")


def _uncounted(store: SqlStore, scope: Scope, rec: ContextAssembly, decided: dict[str, RecordDecision], watermark: int | None) -> list[RecordDecision]:
    """Lineage messages the assembler did not decide one by one, and records outside the
    lineage.  Of the undecided lineage messages the oldest ``omitted["outside_window"]``
    are the ones older than the candidate window; the rest were candidates."""
    segments = store.lineage(scope, rec.branch_id)
    outside: list[RecordDecision] = []
    undecided: list[tuple[str, str]] = []
    with store.reader() as conn:
        for kind, t in (("message", S.messages), ("artifact", S.tool_artifacts), ("memory", S.tool_memories)):
            cols = [t.c.id, t.c.branch_id, t.c.seq, t.c.kind if kind == "message" else sa.literal("")]
            stmt = sa.select(*cols).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == rec.conversation_id)
            if watermark is not None:
                stmt = stmt.where(t.c.seq <= watermark)
            for r in conn.execute(stmt.order_by(t.c.seq, t.c.id)).all():
                rid = str(r[0])
                if rid in decided:
                    continue
                if not in_lineage(str(r.branch_id), int(r.seq), segments):
                    outside.append(RecordDecision(record_id=rid, kind=kind, decision="omitted", reason=OmissionReason.OUT_OF_LINEAGE.value,
                                                  family="visibility", detail=f"on branch {r.branch_id}, outside the request's lineage"))
                elif kind == "message":
                    undecided.append((rid, str(r[3])))
    # the count covers the records traced with that reason too (history recalled, then
    # dropped as outside the window); the rest were never loaded
    traced = sum(1 for d in decided.values() if d.reason == OmissionReason.OUTSIDE_WINDOW.value)
    older = max(0, rec.omitted.get(OmissionReason.OUTSIDE_WINDOW.value, 0) - traced)
    out = [RecordDecision(record_id=rid, kind="message", decision="omitted", reason=OmissionReason.OUTSIDE_WINDOW.value, family="budget",
                          detail="older than the candidate window: not loaded for this request") for rid, _ in undecided[:older]]
    results = _result_sources(store, scope, rec.conversation_id, decided) if undecided[older:] else {}
    out.extend(_in_window(rid, kind, results) for rid, kind in undecided[older:])
    return out + outside


def assembly_decisions(source: HasRuntime, scope: Scope, assembly: str | ContextAssembly, *, recompute: bool = True) -> DecisionSet:
    """The per-record decisions of a stored assembly (see the module docstring).

    Args:
        assembly: an assembly id or its record.
        recompute: allow source 3 (assembling again without recording; costs one
            assembly).

    Raises:
        NotFoundError: unknown assembly in the scope's tenant.
    """
    store = source.runtime.store
    rec = store.get_assembly(scope, assembly)[0] if isinstance(assembly, str) else assembly
    trace: list[dict[str, Any]] | None = None
    if rec.record_decisions is not None:
        kind, records = "stored", expand_compact(rec.record_decisions)
    elif rec.trace is not None:
        kind, records = "trace", reduce_trace(rec.trace)
    else:
        trace = _recompute(source, scope, rec) if recompute else None
        if trace is None:
            return DecisionSet(assembly=rec, source="summary_only")
        kind, records = "recomputed", reduce_trace(trace)
    decided = {d.record_id: d for d in records}
    watermark = rec.lineage_max_seq
    if watermark is None:
        seqs = _message_seqs(store, scope, rec.conversation_id, [*decided, *rec.selected_refs])
        watermark = max(seqs) if seqs else None
    extra = _uncounted(store, scope, rec, decided, watermark)
    counted = {r: rec.omitted.get(r, 0) for r in (OmissionReason.OUTSIDE_WINDOW.value, OmissionReason.OUT_OF_LINEAGE.value)}
    return DecisionSet(assembly=rec, source=kind, records=[*records, *extra], watermark=watermark, counted=counted)
