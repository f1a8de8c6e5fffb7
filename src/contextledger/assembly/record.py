"""Stage 10: record — the ContextAssembly of one request, persisted with its decisions.

DESIGN.md pipeline step 7; seed 000 §4.4 (ContextAssembly: legacy and assembled counts,
token estimates and delta, raw artifact, selected memory and rehydrated counts, policy and
assembler versions, selected refs, omission summary by reason, timings), §4.5
(PolicyDecision), §5.3 (the assembly as cache and audit boundary: the stable-prefix hash
and where it changed); seed 001 §9 ContextPlan (budget buckets, conflicts).  Branch
exclusions are counted apart from budget omissions; history older than the candidate
window is counted, not listed.  The per-record trace is kept only when asked.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from contextledger.assembly.decisions import compact_decisions, reduce_trace, settle_entries
from contextledger.assembly.pieces import Piece
from contextledger.ids import new_id
from contextledger.providers.base import NeutralRequest, ToolSchema
from contextledger.records.enums import OmissionReason
from contextledger.records.models import ContextAssembly

if TYPE_CHECKING:
    from contextledger.assembly.candidates import CandidateSet
    from contextledger.assembly.evaluate import Evaluator
    from contextledger.assembly.request import Boundary
    from contextledger.policy.model import Policy
    from contextledger.store.base import Scope
    from contextledger.store.sql import SqlStore
    from contextledger.tokens import Tokenizer

__all__ = ["ASSEMBLER_VERSION", "Assembled", "AssemblyResult", "persist", "provisional_record", "record_assembly", "retrieval_record"]

ASSEMBLER_VERSION = "contextledger-assembler/0.1.0"
"""Recorded on every assembly; bumped whenever selection logic changes."""


@dataclass(kw_only=True)
class AssemblyResult:
    """The outcome of one assembly.

    Attributes:
        record: the persisted :class:`ContextAssembly`.
        payload: the provider request-body fields (``{"messages", "tools"}`` for OpenAI
            Chat Completions, ``{"system", "messages", "tools"}`` for Anthropic,
            ``{"instructions", "input", "tools"}`` for OpenAI Responses).
        request: the provider-neutral request before serialization.
        trace: per-record decisions (always computed; persisted only with ``trace``).
    """

    record: ContextAssembly
    payload: dict[str, Any]
    request: NeutralRequest
    trace: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON form used by ``contextledger assemble --json``."""
        r = self.record
        return {
            "assembly_id": r.id,
            "conversation_id": r.conversation_id,
            "branch_id": r.branch_id,
            "participant_id": r.participant_id,
            "provider": r.provider,
            "policy_version": r.policy_version,
            "assembler_version": r.assembler_version,
            "budget_tokens": r.budget_tokens,
            "now": r.now.isoformat(),
            "replay_tokens": r.replay_tokens,
            "assembled_tokens": r.assembled_tokens,
            "reduction": round(1 - r.assembled_tokens / r.replay_tokens, 4) if r.replay_tokens else 0.0,
            "legacy_message_count": r.legacy_message_count,
            "assembled_message_count": r.assembled_message_count,
            "raw_artifact_count": r.raw_artifact_count,
            "selected_memory_count": r.selected_memory_count,
            "rehydrated_count": r.rehydrated_count,
            "selected": list(r.selected_refs),
            "omitted": dict(r.omitted),
            "branch_excluded": r.branch_excluded,
            "buckets": r.buckets,
            "stable_prefix_hash": r.stable_prefix_hash,
            "prefix_change": r.prefix_change,
            "rule_conflicts": r.rule_conflicts,
            "over_budget": r.over_budget,
            "timings_ms": r.timings_ms,
            "retrieval": r.retrieval,
            "cost": r.cost,
            "payload": self.payload,
            **({"trace": r.trace} if r.trace is not None else {}),
        }


@dataclass(frozen=True, kw_only=True)
class Assembled:
    """What the record of one request is made of.

    Attributes:
        system / tools: the system blocks (before any budget cut) and tool schemas.
        selected: the pieces sent (units, state, evidence lines).
        rehydrated: artifact ids read back raw in stage 2.
        payload / tokens: the serialized request and its exact count.
        replay_tokens / legacy_count: the naive replay's tokens and message count.
        prefix_hash: :func:`~contextledger.assembly.serialize.stable_prefix_hash`.
        considered: every piece before the budget (to tell what a dropped unit held).
        timings_ms: ``query`` (candidate collection but the routes), ``retrieval``
            (the retrieval router's routes), ``policy_eval`` and ``serialization``
            milliseconds (disjoint: their sum is the assembly's time).
    """

    boundary: Boundary
    system: tuple[str, ...]
    tools: tuple[ToolSchema, ...]
    rule_conflicts: list[dict[str, Any]]
    selected: list[Piece]
    rehydrated: list[str]
    payload: dict[str, Any]
    tokens: int
    replay_tokens: int
    legacy_count: int
    prefix_hash: str
    timings_ms: dict[str, float]
    considered: list[Piece] = field(default_factory=list)


def record_assembly(
    a: Assembled, cands: CandidateSet, ev: Evaluator, policy: Policy, tok: Tokenizer, *, store: SqlStore, keep_trace: bool, compare_prefix: bool,
    assembly_id: str | None = None, created_at: datetime | None = None,
) -> ContextAssembly:
    """The :class:`ContextAssembly` of ``a`` (not yet persisted).  ``compare_prefix``: look
    up the previous assembly of the same branch and viewer and say where the stable
    prefix changed.  ``assembly_id`` / ``created_at``: those of a :func:`provisional_record`
    made earlier (default: a new id, the current time)."""
    b = a.boundary
    omitted, outside = _omissions(ev, cands)
    viewer_id = b.viewer.id if b.viewer else None
    prev = store.latest_assembly(b.scope, b.conversation_id, b.branch_id, viewer_id) if compare_prefix else None
    prefix_change = None
    refs = _selected_refs(a.selected)
    summary = ev.decision_counts()
    # the trace then folds to the decisions of the request as built (kept trace = stored list)
    ev.decisions.extend(settle_entries(ev.decisions, a.selected, a.considered))
    prev_payload = store.get_assembly(b.scope, prev.id)[1] if prev is not None else None
    if prev is not None and prev.stable_prefix_hash != a.prefix_hash:
        prefix_change = _prefix_change(prev, prev_payload, a.system)
    return ContextAssembly(
        id=assembly_id or new_id("asm"),
        tenant_id=b.scope.tenant_id,
        conversation_id=b.conversation_id,
        branch_id=b.branch_id,
        participant_id=viewer_id,
        runtime_kind=b.runtime_kind,
        provider=b.provider,
        budget_tokens=b.budget,
        now=b.now,
        policy_version=policy.version,
        assembler_version=ASSEMBLER_VERSION,
        legacy_message_count=a.legacy_count,
        assembled_message_count=len(a.payload.get("messages", a.payload.get("input", []))),
        replay_tokens=a.replay_tokens,
        replay_mode=b.replay,
        assembled_tokens=a.tokens,
        token_delta=a.tokens - a.replay_tokens,
        raw_artifact_count=sum(len(p.raw_artifacts) for p in a.selected),
        selected_memory_count=len({m for p in a.selected for m in p.memory_ids}),
        rehydrated_count=len(a.rehydrated),
        selected_refs=tuple(refs),
        omitted=dict(sorted(omitted.items())),
        branch_excluded=outside,
        buckets=_bucket_report(policy, tok, b.budget, a.system, a.tools, a.selected),
        decisions_summary=summary,
        stable_prefix_hash=a.prefix_hash,
        prefix_change=prefix_change,
        rule_conflicts=a.rule_conflicts,
        over_budget=a.tokens > b.budget,
        timings_ms=a.timings_ms,
        trace=ev.decisions if (keep_trace or policy.trace.keep_trace) else None,
        record_decisions=compact_decisions(reduce_trace(ev.decisions)),
        lineage_max_seq=max((m.seq for m in cands.messages), default=None),
        retrieval=retrieval_record(cands, refs),
        cost=_cost(b.provider, a, prev, prev_payload),
        payload_sha256="sha256:" + hashlib.sha256(json.dumps(a.payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest(),
        created_at=created_at or datetime.now(UTC),
    )


def provisional_record(a: Assembled, policy: Policy, *, epoch: dict[str, Any] | None) -> ContextAssembly:
    """The record of ``a`` as the request path needs it before the full record is made
    (issue "Incremental assembly"; :mod:`contextledger.store.deferred`): a new id, the
    counts of what is sent (tokens, messages, budget, timings, prefix hash) and
    ``epoch``; the decision list, omissions, buckets, retrieval report, cost and prefix
    comparison are left empty — :func:`record_assembly` with this record's id and
    ``created_at`` fills them in."""
    b = a.boundary
    return ContextAssembly(
        id=new_id("asm"), tenant_id=b.scope.tenant_id, conversation_id=b.conversation_id, branch_id=b.branch_id, participant_id=b.viewer.id if b.viewer else None,
        runtime_kind=b.runtime_kind, provider=b.provider, budget_tokens=b.budget, now=b.now, policy_version=policy.version, assembler_version=ASSEMBLER_VERSION,
        legacy_message_count=a.legacy_count, assembled_message_count=len(a.payload.get("messages", a.payload.get("input", []))), replay_tokens=a.replay_tokens,
        replay_mode=b.replay, assembled_tokens=a.tokens, token_delta=a.tokens - a.replay_tokens, raw_artifact_count=sum(len(p.raw_artifacts) for p in a.selected),
        selected_memory_count=len({m for p in a.selected for m in p.memory_ids}), rehydrated_count=len(a.rehydrated), selected_refs=tuple(_selected_refs(a.selected)),
        stable_prefix_hash=a.prefix_hash, rule_conflicts=a.rule_conflicts, over_budget=a.tokens > b.budget, timings_ms=a.timings_ms, epoch=epoch,
        created_at=datetime.now(UTC),
    )


def persist(store: SqlStore, scope: Scope, record: ContextAssembly, payload: dict[str, Any], ev: Evaluator) -> None:
    """Write the assembly, its payload and the decisions an audit asks about (privacy,
    rehydration, recovery, supersession) in one transaction."""
    with store.writer(scope) as w:
        w.add_assembly(record, payload)
        for d in ev.persistent_decisions(record.id, record.conversation_id, scope.tenant_id):
            w.add_decision(d)


def _omissions(ev: Evaluator, cands: CandidateSet) -> tuple[dict[str, int], int]:
    """Omission counts by reason (records outside the lineage and history older than the
    candidate window included, the latter noted in the trace) and the out-of-lineage
    count."""
    omitted = ev.omission_counts()
    outside = sum(cands.out_of_lineage.values())
    if outside:
        omitted[OmissionReason.OUT_OF_LINEAGE.value] = omitted.get(OmissionReason.OUT_OF_LINEAGE.value, 0) + outside
    older = max(0, cands.lineage_message_count - len(cands.messages))
    if older:
        omitted[OmissionReason.OUTSIDE_WINDOW.value] = omitted.get(OmissionReason.OUTSIDE_WINDOW.value, 0) + older
        ev.note_bulk("message", OmissionReason.OUTSIDE_WINDOW, older, "older than the candidate window")
    return omitted, outside


def _cost(provider: str, a: Assembled, prev: ContextAssembly | None, prev_payload: dict[str, Any] | None) -> dict[str, Any]:
    """The record's cost figures; a price table that cannot be loaded is named in
    ``error`` (the assembly itself never fails on it)."""
    from contextledger.assembly.cost_record import assembly_cost
    from contextledger.errors import InputError

    # a provider's prompt cache holds only what was sent to it: another provider's request is no previous one
    previous = (prev.id, prev_payload, prev.replay_tokens) if prev is not None and prev.provider == provider else None
    try:
        return assembly_cost(provider, None, a.payload, a.replay_tokens, previous=previous)
    except InputError as exc:
        return {"basis": "estimate", "error": str(exc)}


def _prefix_change(prev: ContextAssembly, payload: dict[str, Any] | None, system: tuple[str, ...]) -> dict[str, Any]:
    """Where the stable prefix first differs from the previous assembly's, and why."""
    old = ""
    if payload:
        sysval = payload.get("system", payload.get("instructions"))
        if isinstance(sysval, str):
            old = sysval
        else:
            msgs = payload.get("messages") or []
            if msgs and msgs[0].get("role") == "system":
                old = str(msgs[0].get("content") or "")
    new = "\n\n".join(system)
    base = {"previous_assembly_id": prev.id, "previous_hash": prev.stable_prefix_hash}
    if old == new:
        return {**base, "first_difference_char": None, "block_index": None, "reason": "tool schemas changed"}
    pos = next((i for i, (x, y) in enumerate(zip(old, new, strict=False)) if x != y), min(len(old), len(new)))
    near = new[max(0, pos - 200) : pos + 200]
    reason = "pinned constraints changed" if "Constraints stated by the user" in near else ("rules changed" if "Rules:" in near else "system prompt changed")
    return {**base, "first_difference_char": pos, "block_index": new[:pos].count("\n\n"), "reason": reason}


def retrieval_record(cands: CandidateSet, refs: list[str]) -> dict[str, Any] | None:
    """The retrieval router's report with ``sent`` per hit: the memory reached the payload
    (as a line or a shaped unit, or its raw result: :func:`~.decisions.memory_sent`);
    ``refs``: every record id the request sends (an extension's: the previous request's too)."""
    if cands.retrieval is None:
        return None
    from contextledger.assembly.decisions import memory_sent

    sent = set(refs)
    arts = {m.id: m.source_artifact_ids for m in cands.memories}
    hits = [{**h, "sent": memory_sent(h["record_id"], arts.get(h["record_id"], ()), sent)} for h in cands.retrieval.get("hits", [])]
    return {**cands.retrieval, "hits": hits}


def _selected_refs(selected: list[Piece]) -> list[str]:
    """Ids of every record sent, in request order, without repeats."""
    refs: list[str] = []
    for p in sorted(selected, key=lambda p: p.order):
        if p.unit is not None:
            refs.extend(m.id for m in p.unit.messages)
        elif not p.memory_ids:
            refs.extend(m.ref for m in p.messages if m.ref)
        refs.extend(p.extra_refs)
        refs.extend(p.memory_ids)
        refs.extend(p.raw_artifacts)
    return list(dict.fromkeys(refs))


def _bucket_report(policy: Policy, tok: Tokenizer, budget: int, system: tuple[str, ...], tools: tuple[ToolSchema, ...], selected: list[Piece]) -> dict[str, dict[str, int]]:
    """Used and limit per bucket (tokens).  Limits: share × budget, and a bucket's
    unused tokens flow to the next bucket in ``budget.flow_order``."""
    shares = policy.budget.buckets
    used: dict[str, int] = {name: 0 for name in type(shares).model_fields}
    used["system_rules"] += sum(tok.count(s) for s in system) + sum(tok.count(json.dumps(t.parameters, sort_keys=True)) + tok.count(t.name) for t in tools)
    for p in selected:
        used[p.bucket] = used.get(p.bucket, 0) + p.cost
    report: dict[str, dict[str, int]] = {}
    carry = 0
    for bucket in policy.budget.flow_order:
        name = bucket.value
        limit = int(getattr(shares, name) * budget) + carry
        u = used.get(name, 0)
        carry = max(0, limit - u)
        report[name] = {"used": u, "limit": limit}
    return report
