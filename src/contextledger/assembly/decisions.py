"""Per-record decisions of one assembly: what each candidate became in the request and why.

Seed 000 §2.5 asks two questions of every request — why did the model see this, and why
did it *not* see that — and §4.4 makes the ContextAssembly the record that answers them;
seed 001 §9 names the answer a ContextPlan (``selected``, ``compressed``, ``dropped`` with
a reason each).  The assembler's trace is the chain of verdicts a record went through (a
shaping, an inclusion, a later budget drop, a restore …); :func:`reduce_trace` folds each
chain into one :class:`RecordDecision`:

* ``decision`` — ``raw`` (sent as recorded), ``memory`` (a compact form: extract, summary,
  structured, diff), ``stale_marker`` (one line saying it is outdated, with a revalidation
  hint), ``reference`` (an artifact reference instead of the bytes) or ``omitted``;
* ``reason`` — for ``omitted`` and reshaped records a value of the closed
  :class:`~contextledger.records.enums.OmissionReason` enumeration, the last one that
  decided the record (the omission *summary* counts each record under its first reason,
  as the assembler records it); ``selected`` / ``restored`` / ``recovery_protected`` /
  ``exact_evidence_requested`` for records sent whole.

Records the assembler does not load one by one — lineage history older than the candidate
window, records on branches outside the lineage — are listed by id from the store
(:func:`expand_uncounted`), never only counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from contextledger.records.enums import OmissionReason
from contextledger.records.parts import ToolResultPart

if TYPE_CHECKING:
    from contextledger.assembly.pieces import Piece

__all__ = [
    "DECISIONS",
    "REASON_TEXT",
    "SHAPE_DECISION",
    "RecordDecision",
    "compact_decisions",
    "expand_compact",
    "memory_sent",
    "reconcile",
    "reduce_trace",
    "settle_entries",
]

DECISIONS = ("raw", "memory", "stale_marker", "reference", "omitted")
"""The five outcomes of a candidate record, in the order pages list them."""

SHAPE_DECISION: dict[str, str] = {
    "raw": "raw",
    "extract": "memory",
    "summary": "memory",
    "structured": "memory",
    "diff": "memory",
    "stale_marker": "stale_marker",
    "reference": "reference",
}
"""The decision a record's shape in the payload amounts to."""

_OMISSION_VALUES = frozenset(r.value for r in OmissionReason)

REASON_TEXT: dict[str, str] = {
    "out_of_lineage": "on a branch outside the active lineage",
    "participant_private": "private to another participant",
    "audit_only": "audit-only (not promoted to model context)",
    "not_promoted": "memory not promoted",
    "privacy_restricted": "privacy class forbids sending the raw payload",
    "provider_restricted": "provider routing forbids this privacy class",
    "stale": "reduced to a stale marker line, or left out when the policy omits stale records",
    "superseded": "superseded by a newer memory",
    "budget": "did not fit the token budget",
    "outside_window": "older than the candidate window (budget_tokens // 50 messages, at least 40, at most candidates.recent_window); only recalled evidence reaches further back",
    "retention_deleted": "payload deleted by retention",
    "runtime_only": "runtime-only (progress, meta, thinking)",
    "duplicate": "a duplicate of a record already sent",
    "replaced_by_memory": "raw result replaced by its compact memory",
    "compacted": "folded into a compaction summary",
    "low_confidence": "low-confidence evidence dropped first",
    "authority_overridden": "overridden by an instruction of higher authority",
    "situational_not_matched": "a situational rule whose paths or tools this request does not touch",
    "other_participant_tools": "another participant's tool call, shown as narration",
    "rehydration_refused": "raw rehydration refused",
    "unsupported_content": "content the provider format cannot carry",
    "selected": "sent",
    "restored": "dropped for budget, then restored when room was found",
    "recovery_protected": "unresolved or failed tool state: never reduced",
    "exact_evidence_requested": "raw bytes rehydrated: exact evidence was asked for",
    "not_decided": "in the candidate window, but no decision was recorded for it",
}
"""One line per reason (the closed omission enumeration and the reasons for records sent)."""


@dataclass(kw_only=True)
class RecordDecision:
    """The outcome of one record in one request.

    Attributes:
        record_id: the record (``msg_…``, ``art_…``, ``mem_…``, ``call_…``, a rule id, or
            ``msg_…#part`` for a part of a message such as model reasoning).
        kind: ``message``, ``artifact``, ``memory``, ``tool_call``, ``rule``, ``system``,
            ``part``.
        decision: one of :data:`DECISIONS`.
        reason: see the module docstring.
        family: the policy family that decided (``budget``, ``freshness`` …).
        shape: the shape sent (``None`` when omitted).
        bucket: the budget bucket its tokens were counted in (``None`` when omitted).
        detail: the assembler's one-line explanation, if any.
        notes: further verdicts on the way (``recovery_protected``, ``rehydrated``,
            ``rehydration_refused: stale``, ``shaped: replaced_by_memory``).
    """

    record_id: str
    kind: str
    decision: str
    reason: str
    family: str = "budget"
    shape: str | None = None
    bucket: str | None = None
    detail: str | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON form (``record_id``, ``kind``, ``decision``, ``reason``, ``family``,
        ``shape``, ``bucket``, ``detail``, ``notes``)."""
        return {
            "record_id": self.record_id, "kind": self.kind, "decision": self.decision, "reason": self.reason, "family": self.family,
            "shape": self.shape, "bucket": self.bucket, "detail": self.detail, "notes": list(self.notes),
        }


def _apply(d: RecordDecision, e: dict[str, Any]) -> None:
    """Fold one trace entry ``e`` into ``d`` (see :func:`reduce_trace`)."""
    verdict, reason, shape = str(e.get("decision")), str(e.get("reason")), e.get("shape")
    detail = e.get("detail")
    if verdict == "settle":  # the request as built decided it (see :func:`settle_entries`)
        o = e["outcome"]
        d.decision, d.reason, d.family, d.shape, d.bucket, d.detail = o["decision"], o["reason"], o["family"], o["shape"], o["bucket"], o["detail"]
        d.notes = list(o["notes"])
        return
    if verdict == "include":
        if reason == "restored":
            d.decision = SHAPE_DECISION.get(d.shape or "", "memory" if d.kind == "memory" else "raw")
            d.reason, d.family, d.detail = "restored", "budget", detail if isinstance(detail, str) else None
            return
        shaped = d.reason in _OMISSION_VALUES and d.decision not in ("omitted", "raw")
        d.decision, d.shape = SHAPE_DECISION.get(str(shape), "raw"), str(shape) if shape else None
        d.bucket = e.get("bucket") if isinstance(e.get("bucket"), str) else d.bucket
        if d.decision == "raw" or not shaped:
            if shaped:
                d.notes.append(f"shaped: {d.reason}" + (f" ({d.detail})" if d.detail else ""))
            d.reason, d.family, d.detail = "restored" if d.reason == "restored" else "selected", "budget", None
        return
    if verdict == "shape":
        d.decision, d.shape = SHAPE_DECISION.get(str(shape), "memory"), str(shape) if shape else d.shape
    elif verdict == "omit":
        d.decision, d.shape, d.bucket = "omitted", None, None
    elif verdict == "mark_stale":
        d.decision, d.shape = "stale_marker", "stale_marker"
        reason = OmissionReason.STALE.value
    elif verdict == "protect":
        d.notes.append("recovery_protected")
        if d.decision == "":
            d.decision, d.reason, d.family = "raw", reason, str(e.get("family"))
        return
    elif verdict == "rehydrate":
        d.notes.append("rehydrated")
        d.decision, d.shape, d.reason, d.family = "raw", "raw", reason, "rehydration"
        return
    elif verdict == "refuse":
        cause = e.get("cause")
        d.notes.append(f"rehydration_refused: {cause}" if cause else "rehydration_refused")
        if d.reason == "exact_evidence_requested":  # a rehydration taken back: the memory stays
            d.decision, d.shape, d.reason, d.family = "memory", "extract", OmissionReason.REPLACED_BY_MEMORY.value, "rehydration"
        elif d.decision == "":
            d.decision, d.reason, d.family = "omitted", reason, "rehydration"
        return
    else:  # mark_conflict and decisions added later: a note, not an outcome
        d.notes.append(f"{verdict}: {reason}")
        return
    d.reason, d.family = reason, str(e.get("family"))
    d.detail = detail if isinstance(detail, str) else None


def reduce_trace(trace: Iterable[dict[str, Any]]) -> list[RecordDecision]:
    """Fold an assembly trace into one :class:`RecordDecision` per record, in the order
    records first appear.

    Rules: an inclusion sets the decision from its shape (a non-raw shape keeps the
    shaping reason that preceded it, a raw one is ``selected`` and keeps the shaping as a
    note); a later omission wins over an inclusion; ``restored`` takes an omission back;
    ``mark_stale`` makes a stale marker; a rehydration makes the record raw and a refused
    one after it takes that back; recovery protection is a note.  Entries counting
    records not loaded one by one (``count`` set) are skipped: see
    :func:`expand_uncounted`.  Pure and deterministic (no store access).
    """
    out: dict[str, RecordDecision] = {}
    for e in trace:
        if "count" in e:
            continue
        rid = str(e["record_id"])
        d = out.get(rid)
        if d is None:
            d = out[rid] = RecordDecision(record_id=rid, kind=str(e.get("record_kind", "")), decision="", reason="")
        _apply(d, e)
    for d in out.values():
        if not d.decision:  # only notes: nothing decided its inclusion (never expected)
            d.decision, d.reason = "omitted", d.reason or "not_decided"
    return list(out.values())


_SENT = frozenset(("raw", "memory", "stale_marker", "reference"))


def _shown(sent: Sequence[Piece]) -> dict[str, RecordDecision]:
    """``{record id: decision}`` for every memory and artifact the sent pieces carry."""
    out: dict[str, RecordDecision] = {}
    for p in sent:
        head = p.unit.messages[0].id if p.unit is not None else None
        where = f"shown in the exchange of {head}" if head else ("in the working-set list" if p.working_set else ("an evidence line" if p.line is not None else "in the task state"))
        shape = p.shape.value
        for a in p.raw_artifacts:
            out.setdefault(a, RecordDecision(record_id=a, kind="artifact", decision="raw", reason="selected", shape="raw", bucket=p.bucket, detail=where))
        refs = [(m, "memory", shape if shape != "raw" else "extract") for m in p.memory_ids]
        refs += [(r, "memory" if r.startswith("mem_") else "state", "structured") for r in p.extra_refs]
        for rid, kind, s in refs:
            out.setdefault(rid, RecordDecision(record_id=rid, kind=kind, decision=SHAPE_DECISION.get(s, "memory"), reason="selected", shape=s, bucket=p.bucket, detail=where))
        if p.unit is not None:
            _result_messages(p, out)
    return out


def _result_messages(p: Piece, out: dict[str, RecordDecision]) -> None:
    """The messages after a sent unit's head (its results): decided with the result they
    carry — raw when its artifact went raw, else as its memory was shown."""
    assert p.unit is not None
    by_call = p.unit.artifacts
    for m in p.unit.messages[1:]:
        arts = [by_call[x.call_id] for x in m.parts if isinstance(x, ToolResultPart) and x.call_id in by_call]
        decision, shape, detail = SHAPE_DECISION.get(p.shape.value, "raw"), p.shape.value, f"a message of the exchange of {p.unit.messages[0].id}"
        if arts:
            art = arts[0]
            mem = p.unit.memories.get(art.id)
            if art.id in p.raw_artifacts:
                decision, shape = "raw", "raw"
            elif mem is not None and mem.id in out:
                decision, shape = out[mem.id].decision, out[mem.id].shape or shape
            detail = f"the result message of {art.id} (decided with it)"
        out.setdefault(m.id, RecordDecision(record_id=m.id, kind="message", decision=decision, reason="selected", shape=shape, bucket=p.bucket, detail=detail))


def reconcile(decisions: Sequence[RecordDecision], sent: Sequence[Piece], considered: Sequence[Piece]) -> list[RecordDecision]:
    """Make the folded decisions agree with the request actually built.

    The trace records a unit's inclusion on its head message only, and a later drop of
    the unit on its messages; so a memory shown inside a sent exchange (or in the
    working-set list) had no decision, a memory shown as a ``[superseded by …]`` line
    kept its ``omit``, and an artifact included raw in a unit dropped later kept
    ``raw``.  Rules, applied to the memories and artifacts of ``sent`` (the pieces of the
    request) and ``considered`` (every piece before the budget):

    * a record a sent piece carries gets a sent decision (its own if it has one, else
      the piece's shape); an omission reason that shaped it (``superseded``, ``stale``)
      is kept as its reason;
    * an artifact not carried whose memory is carried is ``memory`` /
      ``replaced_by_memory``;
    * any other memory or artifact with a sent decision is ``omitted`` with the reason
      its unit's head message was dropped for (``budget`` when unknown).

    Returns the decisions in their order, records that had none appended.  Pure.
    """
    out = list(decisions)
    by_id = {d.record_id: d for d in out}
    shown = _shown(sent)
    for rid, s in shown.items():
        d = by_id.get(rid)
        if d is None:
            out.append(s)
            by_id[rid] = s
        elif d.decision not in _SENT:
            d.decision, d.shape, d.bucket = s.decision, s.shape, s.bucket
            if d.reason not in _OMISSION_VALUES or d.reason in ("budget", "outside_window"):
                d.reason, d.family, d.detail = "selected", "budget", s.detail
    heads: dict[str, str] = {}
    memory_of: dict[str, str] = {}
    for p in considered:
        if p.unit is not None:
            for aid, mem in p.unit.memories.items():
                memory_of[aid] = mem.id
                heads[aid] = heads[mem.id] = p.unit.messages[0].id
            for art in p.unit.artifacts.values():
                heads.setdefault(art.id, p.unit.messages[0].id)
    for d in out:
        if d.kind not in ("artifact", "memory") or d.decision not in _SENT or d.record_id in shown:
            continue
        mid = memory_of.get(d.record_id)
        if d.kind == "artifact" and mid is not None and mid in shown:
            if d.decision == "raw":
                d.decision, d.shape, d.reason, d.detail = "memory", shown[mid].shape, OmissionReason.REPLACED_BY_MEMORY.value, f"its memory {mid} was sent instead"
            continue
        head = by_id.get(heads.get(d.record_id, ""))
        dropped = head is not None and head.decision == "omitted"
        d.notes.append(f"was {d.decision}" + (f" ({d.reason})" if d.reason not in ("selected", "") else ""))
        d.decision, d.shape, d.bucket = "omitted", None, None
        d.reason = head.reason if dropped and head is not None else OmissionReason.BUDGET.value
        d.family = head.family if dropped and head is not None else "budget"
        d.detail = f"its exchange ({head.record_id}) was left out: {head.detail or head.reason}" if dropped and head is not None else "not in the request built"
    return out


def settle_entries(trace: Sequence[dict[str, Any]], sent: Sequence[Piece], considered: Sequence[Piece]) -> list[dict[str, Any]]:
    """Trace entries (``decision: "settle"``, the final outcome under ``outcome``) for
    every record :func:`reconcile` changes or adds, so that :func:`reduce_trace` of the
    trace with them appended equals the reconciled decisions (a kept trace, a
    recomputation and the stored list then agree)."""
    before = {d.record_id: d.as_dict() for d in reduce_trace(trace)}
    out = []
    for d in reconcile(reduce_trace(trace), sent, considered):
        now = d.as_dict()
        if before.get(d.record_id) != now:
            out.append({"record_id": d.record_id, "record_kind": d.kind, "family": "budget", "decision": "settle", "reason": d.reason, "shape": d.shape, "detail": d.detail, "outcome": now})
    return out


_COMPACT_FIELDS = ("record_id", "kind", "decision", "reason", "family", "shape", "bucket", "detail", "notes")


def compact_decisions(decisions: Sequence[RecordDecision]) -> list[list[Any]]:
    """The stored form of a decision list: one short array per record, in
    :data:`_COMPACT_FIELDS` order, trailing empty fields left out (≈ 60–120 bytes a
    record; the candidate set is bounded, so is the list)."""
    rows: list[list[Any]] = []
    for d in decisions:
        row: list[Any] = [d.record_id, d.kind, d.decision, d.reason, d.family, d.shape, d.bucket, d.detail, list(d.notes) or None]
        while row and row[-1] is None:
            row.pop()
        rows.append(row)
    return rows


def expand_compact(rows: Iterable[Sequence[Any]]) -> list[RecordDecision]:
    """Inverse of :func:`compact_decisions`."""
    out = []
    for row in rows:
        vals = dict(zip(_COMPACT_FIELDS, row, strict=False))
        out.append(RecordDecision(
            record_id=str(vals["record_id"]), kind=str(vals.get("kind") or ""), decision=str(vals.get("decision") or "omitted"),
            reason=str(vals.get("reason") or ""), family=str(vals.get("family") or "budget"), shape=vals.get("shape"),
            bucket=vals.get("bucket"), detail=vals.get("detail"), notes=list(vals.get("notes") or []),
        ))
    return out


def memory_sent(memory_id: str, artifact_ids: Iterable[str], refs: Iterable[str]) -> bool:
    """Whether a memory reached the payload whose sent record ids are ``refs``: itself (a
    line, a shaped unit) or one of its source artifacts (its raw result).  The one rule of
    a retrieval hit's ``sent`` and of ``explain --record``'s "in the payload"."""
    sent = set(refs)
    return memory_id in sent or any(a in sent for a in artifact_ids)
