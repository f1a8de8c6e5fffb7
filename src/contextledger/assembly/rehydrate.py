"""Stage 8: rehydration — raw payloads read back for records already selected.

Seed 000 §4.11 (stage-2 rehydration), §8 R11–R12; seed 001 §9 *Compression Engine*
(rehydrate).  Only for pieces the budget kept, after the privacy / provider check and
within the policy's byte budget.  Triggers (policy ``rehydration.triggers``): the current
user input asks for exact evidence (the shaped exchange it is about); a
recovery-critical exchange (unresolved or failed) was shaped; an exchange's memory was
not promoted (its raw evidence stands in for it).  The exact evidence outranks older
context: room is made for it with the drop steps on copies.  A format's tool framing
never displaces it: when the raw results do not fit as tool results (Anthropic's
tool-use prompt alone is 346 tokens), the rehydrated exchange is sent as data text
instead — its calls named by id, each result in a user-role data block — so no tool
declarations are needed for it.  Only when that does not fit either is the rehydration
refused (reason ``budget``) and the memories stay.  Every refusal is recorded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from contextledger.assembly.drop_order import drop_once
from contextledger.assembly.families import Verdict
from contextledger.assembly.pieces import Piece, outdated
from contextledger.assembly.render import DATA_BANNER, observation_text
from contextledger.memory.terms import memory_terms, query_terms
from contextledger.providers.base import WireMessage
from contextledger.records.enums import OmissionReason, PolicyFamily, PromotionPolicy, Shape
from contextledger.records.parts import Part, TextPart, ToolCallPart, ToolResultPart

if TYPE_CHECKING:
    from contextledger.assembly.budget import Budgeter, Selection
    from contextledger.assembly.evaluate import Evaluator
    from contextledger.policy.model import Policy
    from contextledger.store.base import Scope
    from contextledger.store.sql import SqlStore

__all__ = ["rehydrate", "rehydration_targets"]


def rehydrate(sel: Selection, budgeter: Budgeter, store: SqlStore, scope: Scope) -> tuple[Selection, list[str]]:
    """``sel`` with raw payloads swapped in where triggered and allowed, and the ids of the
    rehydrated artifacts; when they cannot fit, ``sel`` unchanged and ``[]`` (refusals
    recorded)."""
    ev = budgeter.ev
    with_raw = list(sel.chosen)
    done = _swap_in_raw(with_raw, ev, budgeter.policy, store, scope, budgeter.shaper.cost)
    if not done:
        return sel, []
    # the exact evidence outranks older context: make room for it with the same drop
    # steps (on copies), or give it up
    for i, p in enumerate(with_raw):
        if set(p.raw_artifacts) & set(done):
            with_raw[i] = dataclasses.replace(p, mandatory=True)
    trial = _make_room(budgeter, with_raw, sel)
    if trial is None:
        # a format's tool framing (Anthropic's tool-use prompt alone is 346 tokens) never
        # displaces the exact evidence: the rehydrated exchanges go as data text instead
        trial = _make_room(budgeter, [_unframed(p) if set(p.raw_artifacts) & set(done) else p for p in with_raw], sel)
        if trial is not None:
            for p in trial[0]:
                if set(p.raw_artifacts) & set(done) and p.unit is not None:
                    ev.shape_record(p.unit.key, "message", Shape.RAW, OmissionReason.BUDGET, UNFRAMED_DETAIL)
    if trial is None:
        for art_id in done:  # the raw payloads do not fit: the memories stay
            ev.refuse_rehydration(art_id, OmissionReason.BUDGET)
        return sel, []
    with_raw, room_notes, quiet = trial
    for d in quiet.decisions:
        if d["decision"] == "omit":
            ev.omit_record(d["record_id"], d["record_kind"], OmissionReason.BUDGET, "dropped to make room for rehydrated evidence")
    request = budgeter.build(with_raw, room_notes, sel.system)
    return dataclasses.replace(sel, request=request, chosen=with_raw, notes=room_notes), done


UNFRAMED_DETAIL = "rehydrated exchange sent as data text (calls named by id): the format's tool framing does not fit the budget beside the raw evidence"
"""Trace detail of a rehydrated exchange sent without tool framing (:func:`_unframed`)."""


def _make_room(budgeter: Budgeter, chosen: list[Piece], sel: Selection) -> tuple[list[Piece], list[Piece], Evaluator] | None:
    """``(chosen, notes, quiet evaluator)`` after the drop steps made room for the
    mandatory rehydrated pieces of ``chosen`` (on copies, the budgeter's drop state
    untouched), or ``None`` when they do not fit."""
    chosen, notes, quiet = list(chosen), list(sel.notes), budgeter.ev.quiet()
    st = dataclasses.replace(budgeter.drop, reshaped=set(budgeter.drop.reshaped), evicted=list(budgeter.drop.evicted), dropped_chat=list(budgeter.drop.dropped_chat), stale_queue=None, evict_queue=None)
    fits = budgeter.exact(budgeter.build(chosen, notes, sel.system))
    for step in ("compress_old_history", "shorten_recent_tail"):
        while fits > budgeter.budget and drop_once(st, step, chosen, notes, quiet, lambda p: None) is not None:
            fits = budgeter.exact(budgeter.build(chosen, notes, sel.system))
    if fits > budgeter.budget:
        return None
    budgeter.drop = st
    return chosen, notes, quiet


def _unframed(p: Piece) -> Piece:
    """``p`` with its tool framing taken out: each call becomes the assistant text
    ``[called <tool>(<arguments>) · call <id>]`` and each result a user-role data block
    (:data:`~contextledger.assembly.render.DATA_BANNER`, then ``result of call <id>``
    and the result text, then its images), so no format needs tool declarations for it."""
    msgs: list[WireMessage] = []
    for m in p.messages:
        if m.role == "tool":
            parts: list[Part] = []
            for x in m.parts:
                if isinstance(x, ToolResultPart):
                    parts.append(TextPart(text=f"{DATA_BANNER}\nresult of call {x.call_id}{' (failed)' if x.is_error else ''}:\n{x.text or ''}"))
                    parts.extend(x.images)
            msgs.append(WireMessage(role="user", parts=tuple(parts), ref=m.ref))
        elif any(isinstance(x, ToolCallPart) for x in m.parts):
            said = tuple(x if not isinstance(x, ToolCallPart) else TextPart(text=f"[called {x.tool_name}({x.arguments_json}) · call {x.call_id}]") for x in m.parts)
            msgs.append(WireMessage(role=m.role, parts=said, name=m.name, ref=m.ref))
        else:
            msgs.append(m)
    return dataclasses.replace(p, messages=msgs)


def rehydration_targets(chosen: list[Piece], ev: Evaluator, policy: Policy) -> list[Piece]:
    """The shaped exchanges to rehydrate, in order: the one the current input asks about
    (most content words shared, then newest), then recovery-critical and not-promoted
    ones, newest first."""
    trig = policy.rehydration.triggers
    newest_first = sorted(chosen, key=lambda p: p.order, reverse=True)
    current = next((p for p in newest_first if p.unit is not None and p.unit.is_turn_start), None)
    asked_text = " ".join(getattr(part, "text", "") for m in current.messages for part in m.parts) if current is not None else ""
    asked = current is not None and ev.rehydration.requested(asked_text)
    shaped = [p for p in newest_first if p.unit is not None and p.memory_ids and p.unit.kind in ("exchange", "observation")]
    targets: list[Piece] = []
    current_ones = [p for p in shaped if p.unit is not None and any(not outdated(m, ev) for m in p.unit.memories.values())]
    if asked and current_ones:
        terms = query_terms(asked_text)
        best = max(current_ones, key=lambda p: (max((len(terms.intersection(memory_terms(m))) for m in p.unit.memories.values()), default=0) if p.unit is not None else 0, p.order))
        targets.append(best)
    for p in shaped:
        u = p.unit
        assert u is not None
        critical = trig.recovery_critical and p.mandatory and bool(u.failed_calls)
        not_promoted = trig.not_promoted and any(m.promotion_policy is PromotionPolicy.NOT_PROMOTED for m in u.memories.values())
        if (critical or not_promoted) and p not in targets:
            targets.append(p)
    return targets


def _swap_in_raw(chosen: list[Piece], ev: Evaluator, policy: Policy, store: SqlStore, scope: Scope, cost: Callable[[list[WireMessage]], int]) -> list[str]:
    """Read the raw payloads of the targets' shaped results (checks and byte budget
    first) and swap them into ``chosen``; returns the rehydrated artifact ids."""
    done: list[str] = []
    for p in rehydration_targets(chosen, ev, policy):
        i = chosen.index(p)
        assert p.unit is not None
        for c in p.unit.calls:
            art = p.unit.artifacts.get(c.call_id)
            if art is None or art.id in p.raw_artifacts:
                continue
            mem = p.unit.memories.get(art.id)
            if mem is not None and outdated(mem, ev):
                # the exact bytes of an outdated observation are outdated too
                ev.refuse_rehydration(art.id, OmissionReason.SUPERSEDED if mem.superseded_by else OmissionReason.STALE)
                continue
            ok, reason = ev.raw_allowed(art)
            refusal = ev.rehydration.check(art, None if ok else Verdict(family=PolicyFamily.PRIVACY, reason=reason, detail="raw payload not allowed"))
            if refusal is not None:
                ev.refuse_rehydration(art.id, refusal.reason)
                continue
            try:
                raw = store.read_artifact_bytes(scope, art).decode("utf-8")
            except Exception:
                ev.refuse_rehydration(art.id, OmissionReason.RETENTION_DELETED)
                continue
            ev.rehydration.spend(art.size_bytes)
            new_msgs = []
            for m in chosen[i].messages:
                if m.ref == art.id and m.role == "tool":
                    new_msgs.append(WireMessage(role="tool", parts=(m.parts[0].model_copy(update={"text": raw}),), ref=m.ref))
                elif m.ref == art.id:
                    new_msgs.append(WireMessage(role=m.role, parts=(TextPart(text=observation_text(c, raw)),), ref=m.ref))
                else:
                    new_msgs.append(m)
            old = chosen[i]
            chosen[i] = Piece(unit=old.unit, messages=new_msgs, cost=cost(new_msgs), bucket=old.bucket, shape=Shape.RAW, mandatory=old.mandatory, order=old.order, memory_ids=old.memory_ids, raw_artifacts=(*old.raw_artifacts, art.id))
            ev.rehydrated(art.id)
            done.append(art.id)
    return done


def excerpt_newest_result(sel: Selection, budgeter: Budgeter, store: SqlStore, scope: Scope) -> Selection:
    """``sel`` with the newest tool result (the one the current turn just received)
    shown as its raw text, cut by lines to the budget left, where the selection shows
    only its memory: in a tool loop the next step depends on the result the model just
    asked for, so older context yields first (the budget stage already did) and the
    room left goes to it.  Head, error lines and tail are kept
    (:func:`~contextledger.assembly.last_resort.cut_lines`), the marker names the
    artifact's handle so the full text can be rehydrated.  Unchanged when there is no
    such result, it is outdated, private or not allowed raw, or no room is left
    (recorded on the trace when swapped)."""
    from contextledger.assembly.last_resort import cut_lines
    from contextledger.handles import artifact_handle

    ev = budgeter.ev
    i = next((k for k, p in enumerate(sel.chosen) if p.newest_result and p.memory_ids and p.unit is not None), None)
    if i is None:
        return sel
    piece = sel.chosen[i]
    assert piece.unit is not None
    total = budgeter.exact(sel.request)
    room = budgeter.budget - total
    if room < 48:
        return sel
    raws: dict[str, str] = {}
    for c in piece.unit.calls:
        art = piece.unit.artifacts.get(c.call_id)
        mem = piece.unit.memories.get(art.id) if art is not None else None
        if art is None or mem is None or art.id in piece.raw_artifacts or outdated(mem, ev) or not ev.raw_allowed(art)[0] or ev.artifact_hidden(art) is not None:
            continue
        try:
            raws[art.id] = store.read_artifact_bytes(scope, art).decode("utf-8", "replace")
        except Exception:
            continue
    if not raws:
        return sel
    tok = budgeter.shaper.tok
    handles = {a.id: f"artifact {artifact_handle(a)}" for a in piece.unit.artifacts.values()}
    shown = [m for m in piece.messages if m.ref in raws]
    share = (room + sum(budgeter.shaper.cost([m]) for m in shown)) // max(1, len(shown))
    for _ in range(3):
        msgs = [_excerpt_message(m, raws[m.ref], tok, share - 16, handles.get(m.ref), cut_lines) if m.ref in raws else m for m in piece.messages]
        chosen = [*sel.chosen[:i], dataclasses.replace(piece, messages=msgs, cost=budgeter.shaper.cost(msgs)), *sel.chosen[i + 1:]]
        request = budgeter.build(chosen, sel.notes, sel.system)
        over = budgeter.exact(request) - budgeter.budget
        if over <= 0:
            for art_id in raws:
                ev.shape_record(art_id, "artifact", Shape.EXTRACT, OmissionReason.BUDGET, "newest result: its lines (head, errors, tail) in the budget left")
            return dataclasses.replace(sel, request=request, chosen=chosen)
        share -= over // max(1, len(shown)) + 16
        if share < 48:
            break
    return sel


def _excerpt_message(m: WireMessage, raw: str, tok: object, max_tokens: int, ref: str | None, cut: Callable[..., str]) -> WireMessage:
    text = cut(tok, raw, max_tokens, ref)
    first = m.parts[0]
    if m.role == "tool":
        return WireMessage(role="tool", parts=(first.model_copy(update={"text": text}), *m.parts[1:]), name=m.name, ref=m.ref)
    return WireMessage(role=m.role, parts=(TextPart(text=text),), name=m.name, ref=m.ref)
