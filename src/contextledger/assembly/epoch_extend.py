"""Epochs, the two outcomes: extending the previous request, and the record of a plan
(rules in :mod:`contextledger.assembly.epoch`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contextledger.assembly.citations import labelled_handles, message_texts, settle_messages
from contextledger.assembly.epoch import (
    EpochState,
    extension_messages,
    fixed_tokens,
    head_of,
    messages_key,
    neutral_request,
    outdated_note,
    remembered,
    split_new_units,
    system_sha,
    tools_sha,
)
from contextledger.assembly.pieces import Piece, outdated
from contextledger.providers.base import NeutralRequest, ToolSchema, WireMessage
from contextledger.records.enums import Shape
from contextledger.records.parts import TextPart

if TYPE_CHECKING:
    from contextledger.assembly.budget import Selection
    from contextledger.assembly.candidates import CandidateSet
    from contextledger.assembly.evaluate import Evaluator
    from contextledger.assembly.request import Boundary
    from contextledger.assembly.shape import Shaper
    from contextledger.assembly.units import Unit
    from contextledger.assembly.visibility import VisibleUnits
    from contextledger.policy.model import Policy
    from contextledger.policy.rules import Rule
    from contextledger.records.models import ContextAssembly
    from contextledger.store.sql import SqlStore

__all__ = ["Extended", "Extending", "extend", "fixed_of", "plan_epoch"]


@dataclass(frozen=True, kw_only=True)
class Extending:
    """What an extension is computed from (one request's stages 0–2 and its state)."""

    store: SqlStore
    policy: Policy
    bound: Boundary
    cands: CandidateSet
    ev: Evaluator
    shaper: Shaper
    visible: VisibleUnits
    tools: tuple[ToolSchema, ...]
    state: EpochState
    system: tuple[str, ...]
    rules: tuple[Rule, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Extended:
    """An extension: the payload (the previous one plus the new records), its exact
    ``tokens``, the pieces of the new records and the record fields it sets."""

    payload: dict[str, Any]
    tokens: int
    pieces: list[Piece]
    request: NeutralRequest
    prefix_hash: str
    previous: ContextAssembly
    epoch: dict[str, Any]

    def record_update(self, record: ContextAssembly) -> dict[str, Any]:
        """The fields of ``record`` an extension sets, describing the request as sent —
        the previous request, then the new records: every record id sent, the buckets
        (the previous request's plus the new pieces' tokens), the per-record decisions
        (the previous request's, those of the new records in their place), the omission
        and decision counts (per reason, the larger of the two) and the epoch."""
        prev = self.previous
        refs = tuple(dict.fromkeys((*prev.selected_refs, *record.selected_refs)))
        buckets = {k: dict(v) for k, v in prev.buckets.items()}
        for p in self.pieces:
            if p.bucket in buckets:
                buckets[p.bucket]["used"] += p.cost
        new = {m.id for p in self.pieces if p.unit is not None for m in p.unit.messages} | {i for p in self.pieces for i in (*p.memory_ids, *p.raw_artifacts, *p.extra_refs)}
        rows = [r for r in prev.record_decisions or [] if r and r[0] not in new] + [r for r in record.record_decisions or [] if r and r[0] in new]
        trace = record.trace
        if trace is not None and prev.trace is not None:
            trace = [d for d in prev.trace if d.get("record_id") not in new] + [d for d in trace if d.get("record_id") in new]
        return {
            "trace": trace,
            "selected_refs": refs, "buckets": buckets, "epoch": self.epoch, "over_budget": self.tokens > record.budget_tokens,
            "omitted": _larger(prev.omitted, record.omitted), "decisions_summary": _larger(prev.decisions_summary, record.decisions_summary),
            "record_decisions": rows if prev.record_decisions is not None else record.record_decisions,
            "raw_artifact_count": prev.raw_artifact_count + record.raw_artifact_count,
            "selected_memory_count": len({*(r for r in refs if r.startswith("mem_"))}) or record.selected_memory_count,
        }


def _larger(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """Per key, the larger count (sorted keys)."""
    return {k: max(a.get(k, 0), b.get(k, 0)) for k in sorted({*a, *b})}


_VISIBILITY_REASONS = ("participant_private", "not_promoted", "audit_only", "privacy_restricted", "provider_restricted")
"""Omission reasons whose count falls when an earlier record becomes visible (a promotion,
a changed privacy class): the frozen prefix would miss it, so the request re-plans."""


def fixed_of(provider: str, system: tuple[str, ...], tools: tuple[ToolSchema, ...]) -> int:
    """Tokens of ``system`` and ``tools`` as ``provider`` sends them (the fixed prefix)."""
    from contextledger.providers.registry import serialize

    probe = NeutralRequest(system=system, messages=(WireMessage(role="user", parts=(TextPart(text="."),)),), tools=tools)
    return fixed_tokens(provider, serialize(provider, probe, resolve_blob=None))


def _serialize_new(x: Extending, msgs: list[WireMessage], prev_part: list[Any], noted: bool) -> list[Any] | str:
    """The provider form of the new messages, or why they cannot follow ``prev_part``.
    ``noted``: ``msgs`` starts with the junction note, which for the Messages API joins
    the previous last user message (``prev_part`` is changed in place: one block added)."""
    from contextledger.providers.anthropic import CONTINUATION_TEXT
    from contextledger.providers.registry import serialize

    provider = x.bound.provider
    out = serialize(provider, NeutralRequest(messages=tuple(msgs), tools=x.tools), resolve_blob=lambda k: _blob(x.store, k))
    declared = {t.get("name") for t in x.state.payload.get("tools", []) if isinstance(t, dict)} if x.state.payload else set()
    if any(t.get("name") not in declared for t in out.get("tools", []) if isinstance(t, dict)):
        return "tool declarations changed"
    part = list(out[messages_key(out)])
    if provider == "anthropic":
        if msgs and msgs[0].role == "assistant" and part and part[0].get("content") == [{"type": "text", "text": CONTINUATION_TEXT}]:
            part = part[1:]
        if noted and part and prev_part and part[0].get("role") == prev_part[-1].get("role") == "user":
            note_blocks = part[0]["content"][:1]
            last = prev_part[-1]
            prev_part[-1] = {**last, "content": [*last["content"], *note_blocks]}
            rest = part[0]["content"][1:]
            part = ([{**part[0], "content": rest}] if rest else []) + part[1:]
        if part and prev_part and part[0].get("role") == prev_part[-1].get("role"):
            return "the new records continue the previous request's last turn"
    return part


def _blob(store: SqlStore, key: str) -> bytes | None:
    try:
        return store.blobs.get(key)
    except Exception:
        return None


SYSTEM_CHANGED = "system blocks changed (system prompt, rules or pinned constraints)"


def constraints_in_tail(x: Extending, ep: dict[str, Any], head_seq: int) -> list[str] | None:
    """The ids of the pinned constraints the request sends in its tail rather than in the
    frozen system blocks — those already sent that way earlier in the epoch
    (``ep["constraints_in_tail"]``) and those stated by a message after the epoch's head —
    when the system blocks without them are the frozen ones; ``None`` when the system
    blocks changed otherwise (system prompt, rules, a frozen constraint overridden)."""
    from contextledger.assembly.render import system_blocks

    later = {m.id for m in x.cands.messages if m.seq > head_seq}
    carried = set(ep.get("constraints_in_tail") or ())
    tail = [r.id for r in x.rules if r.id in carried or (r.pinned and r.source_message_id in later)]
    system = x.system if not tail else system_blocks(x.cands.messages, [r for r in x.rules if r.id not in tail])
    return tail if system_sha(system) == ep.get("system_sha") else None


def _stated_in(tail: list[str], rules: tuple[Rule, ...], carried: set[str], units: list[Unit]) -> bool:
    """Whether every constraint newly sent in the tail is stated by a message of the new
    records (sent raw, so the model reads it verbatim)."""
    sent = {m.id for u in units for m in u.messages}
    by_id = {r.id: r for r in rules}
    return all(r in carried or by_id[r].source_message_id in sent for r in tail)


def extend(x: Extending) -> Extended | str:
    """The previous request plus the new records (raw), or the reason to re-plan."""
    from contextledger.providers.registry import count_payload_tokens

    prev, payload = x.state.previous, x.state.payload
    assert prev is not None and payload is not None and prev.epoch is not None
    ep = prev.epoch
    if tools_sha(x.tools) != ep.get("tools_sha"):
        return "tool declarations changed"
    head_seq = int(ep["head"]["seq"])
    in_tail = constraints_in_tail(x, ep, head_seq)
    if in_tail is None:
        return SYSTEM_CHANGED
    comp = x.visible.compaction
    if comp is not None and comp.seq > head_seq:
        return "history compacted"
    now = x.ev.omission_counts()
    if any(now.get(r, 0) < prev.omitted.get(r, 0) for r in _VISIBILITY_REASONS):
        return "an earlier record became visible"
    if x.cands.window_start_seq > head_seq + 1:
        return "tail outside the candidate window"
    units = split_new_units(x.visible.units, head_seq)
    if isinstance(units, str):
        return units
    if not _stated_in(in_tail, x.rules, set(ep.get("constraints_in_tail") or ()), units):
        return SYSTEM_CHANGED
    pieces = [x.shaper.render_unit(u, x.ev, raw=True, bucket="recent_tail", mandatory=False, order=(u.seq, i)) for i, u in enumerate(units)]
    new = [m for p in pieces for m in p.messages]
    announced = set(ep.get("announced") or [])
    memories = {m.id: m for m in x.cands.memories} | {m.id: m for u in x.visible.units for m in u.memories.values()}
    note, done = outdated_note(list(memories.values()), x.ev, payload, prev.selected_refs, announced)
    key = messages_key(payload)
    prev_part = list(payload.get(key, []))
    # the new records cite handles as a re-plan's do: labelled in the request, or settled
    msgs = extension_messages(new, note)
    msgs = settle_messages(msgs, labelled_handles([json.dumps(prev_part, ensure_ascii=False), *message_texts(msgs)]))
    part = _serialize_new(x, msgs, prev_part, note is not None) if msgs else []
    if isinstance(part, str):
        return part
    out = {**payload, key: prev_part + part}
    tokens = int(count_payload_tokens(x.bound.provider, out))
    fixed = fixed_tokens(x.bound.provider, out)
    high = x.policy.epoch.mark(x.policy.epoch.high_water, x.bound.budget, fixed)
    # nothing new (an identical retry): the same request, while it fits the budget at all
    if tokens > (high if msgs else x.bound.budget):
        return f"re-planned: tail over high water ({tokens:,} > {high:,} tokens)"
    if note is not None:
        pieces.append(Piece(unit=None, messages=[note], cost=x.shaper.cost([note]), bucket="current_input_task_state", shape=Shape.STRUCTURED, order=(10**12, 2), extra_refs=tuple(done)))
    system = tuple(ep.get("system") or ())
    epoch: dict[str, Any] = {
        **{k: ep[k] for k in ("id", "number", "target_tokens", "planned_budget_tokens", "system", "system_sha", "tools_sha") if k in ep},
        "first": False, "reason": "extends epoch", "extends": prev.id, "head": head_of(x.cands) or ep["head"], "reused_messages": len(prev_part) - int(bool(prev_part) and prev_part[-1] is not payload[key][-1]),
        "fixed_tokens": fixed, "high_water_tokens": high, "announced": sorted(announced | set(done)), "constraints_in_tail": in_tail,
    }
    request = neutral_request(system, remembered(prev.id), msgs, x.tools)
    return Extended(payload=out, tokens=tokens, pieces=pieces, request=request, prefix_hash=prev.stable_prefix_hash or "", previous=prev, epoch=epoch)


def plan_epoch(
    record: ContextAssembly, state: EpochState, reason: str, cands: CandidateSet, selection: Selection, view: tuple[tuple[str, ...], tuple[ToolSchema, ...]], *,
    fixed: int, target: int, policy: Policy, ev: Evaluator, in_tail: tuple[str, ...] = (),
) -> dict[str, Any]:
    """``record.epoch`` of a plan: the first assembly of a new epoch.  ``view``: the
    system blocks (before any cut) and tools it was planned with; ``in_tail``: the pinned
    constraints sent only in the message that stated them (:mod:`.pins`), carried as
    ``constraints_in_tail`` so the epoch's extensions keep its system blocks."""
    system, tools = view
    prev = state.previous
    number = int((prev.epoch or {}).get("number", 0)) + 1 if prev is not None else 1
    shown = {m.id for p in selection.chosen + selection.notes for m in ([p.memory] if p.memory else [])} | {mid for p in selection.chosen if p.unit for mid in (m.id for m in p.unit.memories.values())}
    announced = sorted(m.id for m in cands.memories if m.id in shown and outdated(m, ev))
    return {
        "id": record.id, "number": number, "first": True, "reason": reason or "first request", "extends": None,
        "previous_assembly_id": prev.id if prev is not None else None, "head": head_of(cands), "reused_messages": 0,
        "fixed_tokens": fixed, "high_water_tokens": policy.epoch.mark(policy.epoch.high_water, record.budget_tokens, fixed), "target_tokens": target,
        "planned_budget_tokens": record.budget_tokens,
        "system": list(selection.system), "system_sha": system_sha(system), "tools_sha": tools_sha(tools), "announced": announced,
        "constraints_in_tail": list(in_tail),
    }
