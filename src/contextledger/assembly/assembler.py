"""The assembler: one model request's context as a policy evaluation (seed 000 §3, §4.4–4.11).

:meth:`Assembler.assemble` composes the stages of the pipeline (DESIGN.md "The assembly
pipeline"; seed 001 §9's minimal Context Manager), one module each:

0. :mod:`.request` — the policy and the generation boundary (conversation, branch,
   participant, provider, budget, ``now``);
1. :mod:`.candidates` — a bounded candidate set from the active lineage, older memories
   recalled by the retrieval router (:mod:`.retrieval`);
2. :mod:`.visibility` — visibility filter and boundary controller: which units and tools
   the viewer may see (ownership, privacy and the other policy families are evaluated
   per record by :mod:`.evaluate` / :mod:`.families`);
3. :mod:`.authority` — the rules in force and their conflicts (authority resolver);
4. :mod:`.temperature` — hot (raw recent tail, task statement, current input,
   recovery) and warm units (temperature manager); :mod:`.working_set` — the files in play;
5. :mod:`.retrieval` — cold memories as evidence lines (retrieval router);
6. :mod:`.shape` — each unit raw or reduced (compression engine);
7. :mod:`.budget` — the budget by bucket and the drop order (context budgeter;
   :mod:`.drop_order`, :mod:`.last_resort`);
8. :mod:`.rehydrate` — stage-2 rehydration of selected records; :mod:`.citations` —
   each handle cited is labelled in the request or marked as not shown;
9. :mod:`.serialize` — the provider payload, its exact count, the replay baseline;
10. :mod:`.record` — the ContextAssembly with its omission summary (and the trace when
    asked), persisted.

Same graph + same policy version + same ``now`` ⇒ the same selection: every list is
sorted by ``seq`` / call index / id, never by dict order or wall clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from contextledger.assembly.authority import RulesInForce, rules_in_force
from contextledger.assembly.budget import Budgeter
from contextledger.assembly.candidates import collect_candidates
from contextledger.assembly.citations import settle_request
from contextledger.assembly.epoch import EpochState, find_state, remember
from contextledger.assembly.epoch_extend import Extended, Extending, extend, fixed_of, plan_epoch
from contextledger.assembly.evaluate import Evaluator
from contextledger.assembly.listing import without_redundant_listing
from contextledger.assembly.pins import constraints_shown
from contextledger.assembly.record import (
    ASSEMBLER_VERSION,
    Assembled,
    AssemblyResult,
    persist,
    provisional_record,
    record_assembly,
    retrieval_record,
)
from contextledger.assembly.rehydrate import excerpt_newest_result, rehydrate
from contextledger.assembly.render import system_blocks
from contextledger.assembly.request import (
    AUTO_EXACT_MAX_MESSAGES,
    AssemblyRequest,
    Boundary,
    candidate_limits,
    check_request,
    fix_boundary,
)
from contextledger.assembly.retrieval import (
    DEFAULT_ROUTER,
    RetrievalRouter,
    evidence_lines,
    message_lines,
)
from contextledger.assembly.serialize import measure_replay, serialize_request, stable_prefix_hash
from contextledger.assembly.shape import Shaper, shape_pieces
from contextledger.assembly.temperature import plan_temperature
from contextledger.assembly.units import build_units
from contextledger.assembly.visibility import VisibleUnits, tool_schemas, visible_units
from contextledger.assembly.working_set import (
    WORKING_SET_SCAN,
    read_file_memories,
    working_set_piece,
)
from contextledger.providers.base import NeutralRequest, ToolSchema
from contextledger.records.enums import RuntimeKind
from contextledger.records.models import ContextAssembly
from contextledger.store.base import Scope
from contextledger.store.deferred import PendingAssembly

if TYPE_CHECKING:
    from contextledger.assembly.candidates import CandidateSet
    from contextledger.policy.model import Policy
    from contextledger.runtime import HasRuntime

__all__ = ["ASSEMBLER_VERSION", "AUTO_EXACT_MAX_MESSAGES", "WORKING_SET_SCAN", "Assembler", "AssemblyResult", "candidate_limits"]


def _ms(start: float, end: float) -> float:
    return round((end - start) * 1000, 3)


class Assembler:
    """Assembles requests from one runtime's store under one policy (see module docstring).

    Args:
        router: the retrieval stage (default: every assembly route of the retrieval
            router; :mod:`.retrieval`).
    """

    def __init__(self, source: HasRuntime, policy: Policy, *, router: RetrievalRouter = DEFAULT_ROUTER) -> None:
        self.runtime = source.runtime
        self.store = self.runtime.store
        self.policy = policy
        self.router = router
        self.tok = self.runtime.tokenizer

    def assemble(
        self,
        scope: Scope,
        conversation_id: str,
        *,
        branch_id: str | None = None,
        participant_id: str | None = None,
        provider: str = "openai-chat",
        budget_tokens: int | None = None,
        now: datetime | None = None,
        trace: bool = False,
        runtime_kind: RuntimeKind | None = None,
        persist: bool = True,
        replay: str = "auto",
        replaces: str | None = None,
        defer: bool = False,
    ) -> AssemblyResult:
        """Assemble, serialize, count and (by default) persist one request.

        ``replaces``: the id of an assembly of this same request that was not sent (it
        never becomes the epoch state, :mod:`.epoch`).  ``defer`` (with ``persist``): the
        result carries a provisional record and the full record is a pending job of
        ``store.deferred`` (:mod:`contextledger.store.deferred`).

        ``replay`` is how the naive full-transcript request is measured for the record:
        ``"exact"`` serializes and counts it (work grows with the history),
        ``"estimate"`` sums the stored per-record counts (constant work), ``"auto"``
        is exact up to :data:`AUTO_EXACT_MAX_MESSAGES` lineage messages and an estimate
        beyond; the record says which (``replay_mode``).

        Raises:
            NotFoundError: unknown conversation/branch/participant.
            InputError: unknown provider or replay mode, non-positive budget or naive
                ``now``.
        """
        req = AssemblyRequest(
            scope=scope, conversation_id=conversation_id, branch_id=branch_id, participant_id=participant_id, provider=provider,
            budget_tokens=budget_tokens, now=now, trace=trace, runtime_kind=runtime_kind, persist=persist, replay=replay,
            replaces=replaces, defer=defer,
        )
        return self.run(req)

    def run(self, req: AssemblyRequest) -> AssemblyResult:
        """:meth:`assemble` for a prepared :class:`~contextledger.assembly.request.AssemblyRequest`:
        the previous request extended when the epoch rule allows (:mod:`.epoch`), else
        a plan (at the full budget for a lineage's first request, else re-planned to the
        low-water mark)."""
        from contextledger.providers.registry import PROVIDERS

        policy, store = self.policy, self.store
        budget = check_request(req, policy, PROVIDERS)
        t0 = time.perf_counter()
        recent_window, max_candidates, recovery_window = candidate_limits(policy, budget)
        cands = collect_candidates(
            store, req.scope, req.conversation_id, req.branch_id, recent_window=recent_window,
            max_candidates=max_candidates, recovery_window=recovery_window, router=self.router,
        )
        bound = fix_boundary(req, budget, cands)
        t1 = time.perf_counter()
        ev = Evaluator(policy, provider=bound.provider, now=bound.now, viewer=bound.viewer, participants=cands.participants)
        units = build_units(cands.messages, cands.calls_by_message, cands.artifacts, cands.memories)
        visible = visible_units(cands, units, ev)
        tools = tool_schemas(cands, bound.viewer)
        shaper = Shaper(self.tok)
        rules = rules_in_force(cands, ev, policy)
        system = system_blocks(cands.messages, rules.rules)
        state = find_state(store, bound, cands, policy, replaces=req.replaces) if req.persist and policy.epoch.enabled else None
        reason = state.reason if state is not None else ""
        if state is not None and state.extendable:
            x = Extending(store=store, policy=policy, bound=bound, cands=cands, ev=ev, shaper=shaper, visible=visible, tools=tools, state=state, system=system,
                          rules=tuple(rules.rules))
            ext = extend(x)
            if not isinstance(ext, str):
                return self._finish(req, bound, cands, ev, ext, timings=(t0, t1, cands.retrieval_ms))
            reason = ext
        return self._plan(req, bound, cands, ev, (visible, rules, system, tools), shaper, state, reason, (t0, t1))

    def _plan(
        self, req: AssemblyRequest, bound: Boundary, cands: CandidateSet, ev: Evaluator,
        view: tuple[VisibleUnits, RulesInForce, tuple[str, ...], tuple[ToolSchema, ...]], shaper: Shaper, state: EpochState | None, reason: str,
        t: tuple[float, float],
    ) -> AssemblyResult:
        """The normal assembly (stages 3–10): at the full budget, or at the low-water
        mark for a re-plan of an epoch boundary."""
        from contextledger.providers.registry import count_payload_tokens, serialize

        policy, store = self.policy, self.store
        t0, t1 = t
        visible, rules, system, tools = view
        target = bound.budget
        fixed = 0
        if state is not None:
            fixed = fixed_of(bound.provider, system, tools)
            if state.replan:
                target = policy.epoch.mark(policy.epoch.low_water, bound.budget, fixed)
        files = read_file_memories(store, req.scope, cands, ev, policy)
        heat = plan_temperature(visible.units, ev, shaper, policy, target)
        shaped = shape_pieces(visible, heat, ev, shaper, cands, bound.now)
        working_set = working_set_piece(files, ev, policy, self.tok, target)
        pieces = shaped.pieces + ([working_set] if working_set is not None else [])
        lines = evidence_lines(cands.memories, shaped.in_view, visible.covered_to, ev, self.tok) + message_lines(cands.recalled_messages, ev, self.tok)
        budgeter = Budgeter(
            policy=policy, shaper=shaper, ev=ev, budget=target, provider=bound.provider, tools=tools, count=count_payload_tokens, serialize=serialize,
            recalled=cands.relevance,
        )
        selection, rehydrated = rehydrate(budgeter.select(system, pieces, lines), budgeter, store, req.scope)
        selection = budgeter.fill_format_room(excerpt_newest_result(selection, budgeter, store, req.scope))
        if policy.working_set.when_needed:
            selection = without_redundant_listing(selection)
        shown = constraints_shown(selection.request, rules.rules) if selection.system == system else ()
        if shown:  # sent once, in the user's own message: no restatement in the system blocks
            system = system_blocks(cands.messages, [r for r in rules.rules if r.id not in shown])
            selection = replace(selection, system=system, request=replace(selection.request, system=system))
        selection = replace(selection, request=settle_request(selection.request))
        t2 = time.perf_counter()
        out = serialize_request(store, bound.provider, selection.request)
        t3 = time.perf_counter()
        replay_tokens, legacy_count = measure_replay(store, bound, cands)
        assembled = Assembled(
            boundary=bound, system=system, tools=tools, rule_conflicts=rules.conflicts, selected=selection.chosen + selection.notes,
            rehydrated=rehydrated, payload=out.payload, tokens=out.tokens, replay_tokens=replay_tokens, legacy_count=legacy_count,
            prefix_hash=stable_prefix_hash(system, tools), considered=pieces, timings_ms={"query": round(_ms(t0, t1) - cands.retrieval_ms, 3), "retrieval": round(cands.retrieval_ms, 3), "policy_eval": _ms(t1, t2), "serialization": _ms(t2, t3)},
        )
        provisional = provisional_record(assembled, policy, epoch=None)
        epoch = None
        if state is not None:
            epoch = plan_epoch(provisional, state, reason, cands, selection, (system, tools), fixed=fixed, target=target, policy=policy, ev=ev, in_tail=shown)
        return self._record(req, (assembled, cands, ev), provisional, selection.request, lambda r: r if epoch is None else r.model_copy(update={"epoch": epoch}), epoch)

    def _record(
        self, req: AssemblyRequest, made: tuple[Assembled, CandidateSet, Evaluator], provisional: ContextAssembly, request: NeutralRequest,
        finish: Callable[[ContextAssembly], ContextAssembly], epoch: dict[str, Any] | None,
    ) -> AssemblyResult:
        """Stage 10: the record of the request (``finish`` adds the epoch fields), persisted
        now, or — with ``req.defer`` — a pending job of ``store.deferred`` writing the
        record under ``provisional``'s id, the result carrying ``provisional`` with
        ``epoch``."""
        assembled, cands, ev = made
        store, policy, payload = self.store, self.policy, assembled.payload

        def full() -> ContextAssembly:
            record = record_assembly(assembled, cands, ev, policy, self.tok, store=store, keep_trace=req.trace, compare_prefix=req.persist,
                                     assembly_id=provisional.id, created_at=provisional.created_at)
            return finish(record)

        if req.persist and req.defer:
            def work(fields: dict[str, Any]) -> None:
                record = full()
                persist(store, req.scope, ContextAssembly.model_validate({**record.model_dump(), **fields}) if fields else record, payload, ev)

            store.deferred.add(PendingAssembly(assembly_id=provisional.id, conversation_id=provisional.conversation_id, work=work))
            remember(provisional.id, request.messages)
            return AssemblyResult(record=provisional.model_copy(update={"epoch": epoch}), payload=payload, request=request, trace=ev.decisions)
        record = full()
        if req.persist:
            persist(store, req.scope, record, payload, ev)
            remember(record.id, request.messages)
        return AssemblyResult(record=record, payload=payload, request=request, trace=record.trace if record.trace is not None else ev.decisions)

    def _finish(self, req: AssemblyRequest, bound: Boundary, cands: CandidateSet, ev: Evaluator, ext: Extended, *, timings: tuple[float, float, float]) -> AssemblyResult:
        """Record and persist an extension (stages 9–10 for the new records only)."""
        t0, t1, retrieval_ms = timings
        t2 = time.perf_counter()
        replay_tokens, legacy_count = measure_replay(self.store, bound, cands)
        assembled = Assembled(
            boundary=bound, system=ext.request.system, tools=ext.request.tools, rule_conflicts=[], selected=ext.pieces, rehydrated=[],
            payload=ext.payload, tokens=ext.tokens, replay_tokens=replay_tokens, legacy_count=legacy_count, prefix_hash=ext.prefix_hash,
            considered=ext.pieces, timings_ms={"query": round(_ms(t0, t1) - retrieval_ms, 3), "retrieval": round(retrieval_ms, 3), "policy_eval": _ms(t1, t2), "serialization": 0.0},
        )
        provisional = provisional_record(assembled, self.policy, epoch=None)

        def finish(r: ContextAssembly) -> ContextAssembly:
            r = r.model_copy(update=ext.record_update(r))
            return r.model_copy(update={"retrieval": retrieval_record(cands, list(r.selected_refs))})  # sent: of the whole request

        return self._record(req, (assembled, cands, ev), provisional, ext.request, finish, ext.epoch)
