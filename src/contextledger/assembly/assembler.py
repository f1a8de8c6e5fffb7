"""The assembler: one model request's context as a policy evaluation (seed 000 §3, §4.4–4.11).

Pipeline (DESIGN.md "The assembly pipeline"):

1. resolve the policy and the generation boundary (conversation, branch, participant,
   provider, budget, ``now``);
2. collect a bounded candidate set from the active lineage (:mod:`.candidates`);
3. evaluate each candidate through the policy families (:mod:`.evaluate`): retention,
   ownership & visibility, privacy & provider routing, freshness, conflict &
   supersession, promotion, recovery protection;
4. choose a shape per unit (raw / memory extract / stale marker / reference), allocate the
   budget by bucket and apply the drop order of seed 001 §9;
5. stage-2 rehydration of raw payloads for selected records only;
6. serialize with the provider's invariants and count tokens exactly;
7. persist the ContextAssembly with its omission summary (and the trace when asked).

Same graph + same policy version + same ``now`` ⇒ the same selection: every list is
sorted by ``seq`` / call index / id, never by dict order or wall clock.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from contextledger.assembly.candidates import CandidateSet, collect_candidates
from contextledger.assembly.evaluate import Evaluator, MemoryView
from contextledger.assembly.families import Verdict
from contextledger.assembly.render import (
    DATA_BANNER,
    artifact_ref,
    assistant_turn,
    call_narration,
    memory_line,
    observation_text,
    pending_call_text,
    render_content_parts,
    result_message,
    retrieval_block,
    runtime_state_text,
    stale_line_parts,
    system_blocks,
)
from contextledger.assembly.units import Unit, build_units, derived
from contextledger.errors import InputError, NotFoundError
from contextledger.ids import new_id
from contextledger.limits import loads_json
from contextledger.memory.terms import memory_terms, query_terms
from contextledger.policy.authority import resolve_authority
from contextledger.policy.rules import Rule
from contextledger.providers.base import NeutralRequest, ToolSchema, WireMessage
from contextledger.providers.openai_chat import missing_tool_schema
from contextledger.records.enums import (
    MessageKind,
    OmissionReason,
    PolicyFamily,
    PromotionPolicy,
    ResolutionState,
    Role,
    RuntimeKind,
    Shape,
)
from contextledger.records.models import (
    ContextAssembly,
    Participant,
    ToolArtifact,
    ToolCall,
    ToolMemory,
)
from contextledger.records.parts import (
    BinaryPart,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from contextledger.store.base import Scope

if TYPE_CHECKING:
    from contextledger.policy.model import Policy
    from contextledger.runtime import HasRuntime

__all__ = ["ASSEMBLER_VERSION", "Assembler", "AssemblyResult", "candidate_limits"]

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
            "payload": self.payload,
            **({"trace": r.trace} if r.trace is not None else {}),
        }


_PROBE_BUCKET = "\x00probe"
"""Bucket name of cost-probe renderings (renamed when a probe rendering is kept)."""


@dataclass(kw_only=True, slots=True, eq=False)
class _Piece:
    """A rendered unit with its selection-time cost (pieces compare by identity)."""

    unit: Unit | None
    messages: list[WireMessage]
    cost: int
    bucket: str
    shape: Shape
    mandatory: bool = False
    order: tuple[int, int] = (0, 0)
    memory_ids: tuple[str, ...] = ()
    raw_artifacts: tuple[str, ...] = ()
    confidence: float = 1.0
    stale: bool = False
    extra_refs: tuple[str, ...] = ()
    memory: ToolMemory | None = None
    task_statement: bool = False
    working_set: bool = False
    evict: tuple[int, int, int, tuple[int, int]] | None = None
    """The eviction key of an evidence line, once computed (see ``_eviction_key``)."""
    line: str | None = None
    """The text of an evidence line (``unit`` is ``None``, ``messages`` empty): lines are
    sent together in one retrieval block."""


WORKING_SET_SCAN = 600
"""The working set lists the files among the newest this-many memories of each lineage
segment (bounded work per assembly)."""

AUTO_EXACT_MAX_MESSAGES = 1000
"""``replay="auto"`` counts the replay exactly up to this many lineage messages."""


def candidate_limits(policy: Policy, budget: int) -> tuple[int, int, int]:
    """``(recent_window, max_candidates, recovery_window)`` of the candidate set of a
    request of ``budget`` tokens: the newest ``budget // 50`` messages (at least 40, at
    most ``candidates.recent_window``) — a shaped exchange costs ~100 tokens for its two
    messages, so about that many recent messages could be shown at all; older history
    reaches the request as evidence lines (newest memories, term recall, recovery) —
    the newest ``budget // 25`` memories (at least 50, at most
    ``candidates.max_candidates``: more lines cannot fit), and the newest
    ``max(16, 4 × recovery.max_failed_kept)`` failed calls."""
    return (
        min(policy.candidates.recent_window, max(40, budget // 50)),
        min(policy.candidates.max_candidates, max(50, budget // 25)),
        max(16, 4 * policy.recovery.max_failed_kept),
    )


def _called_tools(p: _Piece) -> tuple[str, ...]:
    """Tool names of the calls ``p`` sends (one entry per call)."""
    if p.unit is None or not p.unit.calls:
        return ()
    return tuple(x.tool_name for m in p.messages for x in m.parts if isinstance(x, ToolCallPart))


class Assembler:
    """Assembles requests from one runtime's store under one policy (see module docstring)."""

    def __init__(self, source: HasRuntime, policy: Policy) -> None:
        self.runtime = source.runtime
        self.store = self.runtime.store
        self.policy = policy
        self.tok = self.runtime.tokenizer

    # ------------------------------------------------------------------------------------
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
    ) -> AssemblyResult:
        """Assemble, serialize, count and (by default) persist one request.

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
        from contextledger.providers.registry import PROVIDERS, count_payload_tokens, serialize

        if replay not in ("auto", "exact", "estimate"):
            raise InputError(f"unknown replay mode {replay!r}; expected auto, exact or estimate")
        if provider not in PROVIDERS:
            raise InputError(f"unknown provider {provider!r}; expected one of {', '.join(PROVIDERS)}")
        budget = budget_tokens if budget_tokens is not None else self.policy.budget.default_budget_tokens
        if budget <= 0:
            raise InputError(f"budget must be a positive number of tokens, got {budget}")
        if now is not None and now.tzinfo is None:
            raise InputError("now must be timezone-aware (e.g. 2026-01-01T00:00:00Z)")
        t0 = time.perf_counter()
        recent_window, max_candidates, recovery_window = candidate_limits(self.policy, budget)
        cands = collect_candidates(
            self.store, scope, conversation_id, branch_id,
            recent_window=recent_window, max_candidates=max_candidates, recovery_window=recovery_window,
        )
        if now is None:
            now = self._default_now(cands)
        viewer = self._viewer(cands, participant_id)
        t1 = time.perf_counter()

        ev = Evaluator(self.policy, provider=provider, now=now, viewer=viewer, participants=cands.participants)
        units = build_units(cands.messages, cands.calls_by_message, cands.artifacts, cands.memories)
        rules, rule_conflicts = self._rules(cands, ev)
        system = system_blocks(cands.messages, rules)
        tools = self._tool_schemas(cands, viewer)
        ws = self.policy.working_set
        # the working set shows each file's newest memory the viewer may see: only those
        # records (and newer ones hidden by their columns) are read in full
        files = self.store.recent_subject_memories(scope, conversation_id, cands.segments, "file:", scan=WORKING_SET_SCAN, limit=4 * ws.max_files, settled=ev.entry_visible) if ws.max_files and ws.max_share else []
        pieces, retrieval = self._pieces(cands, units, ev, now, budget, files)
        request, selected, rehydrated = self._select(system, tools, pieces, retrieval, ev, budget, provider, scope, count_payload_tokens, serialize)
        t2 = time.perf_counter()
        payload = serialize(provider, request, resolve_blob=self._resolve_blob)
        assembled_tokens = count_payload_tokens(provider, payload)
        t3 = time.perf_counter()

        if replay == "auto":
            replay = "exact" if cands.lineage_message_count <= AUTO_EXACT_MAX_MESSAGES else "estimate"
        replay_tokens, legacy_count = self._replay(scope, cands, provider, replay, serialize, count_payload_tokens)
        decisions = ev.decisions
        omitted = ev.omission_counts()
        outside = sum(cands.out_of_lineage.values())
        if outside:
            omitted[OmissionReason.OUT_OF_LINEAGE.value] = omitted.get(OmissionReason.OUT_OF_LINEAGE.value, 0) + outside
        older = max(0, cands.lineage_message_count - len([m for m in cands.messages]))
        if older:
            omitted[OmissionReason.OUTSIDE_WINDOW.value] = omitted.get(OmissionReason.OUTSIDE_WINDOW.value, 0) + older
            ev.note_bulk("message", OmissionReason.OUTSIDE_WINDOW, older, "older than the candidate window")
        # the stable prefix: system text, rules, pinned constraints and the tool schemas
        # (sorted by name) — what a provider's prompt cache can reuse between turns
        tool_sig = json.dumps([[t.name, t.description, t.parameters] for t in tools], sort_keys=True, ensure_ascii=False)
        prefix_hash = "sha256:" + hashlib.sha256(("\x1e".join(system) + "\x1d" + tool_sig).encode()).hexdigest()
        prev = self.store.latest_assembly(scope, conversation_id, cands.branch_id, viewer.id if viewer else None) if persist else None
        prefix_change = None
        if prev is not None and prev.stable_prefix_hash != prefix_hash:
            prefix_change = self._prefix_change(scope, prev, system)
        record = ContextAssembly(
            id=new_id("asm"),
            tenant_id=scope.tenant_id,
            conversation_id=conversation_id,
            branch_id=cands.branch_id,
            participant_id=viewer.id if viewer else None,
            runtime_kind=runtime_kind or (viewer.runtime_kind if viewer else RuntimeKind.CHAT),
            provider=provider,
            budget_tokens=budget,
            now=now,
            policy_version=self.policy.version,
            assembler_version=ASSEMBLER_VERSION,
            legacy_message_count=legacy_count,
            assembled_message_count=len(payload.get("messages", payload.get("input", []))),
            replay_tokens=replay_tokens,
            replay_mode=replay,
            assembled_tokens=assembled_tokens,
            token_delta=assembled_tokens - replay_tokens,
            raw_artifact_count=sum(len(p.raw_artifacts) for p in selected),
            selected_memory_count=len({m for p in selected for m in p.memory_ids}),
            rehydrated_count=len(rehydrated),
            selected_refs=tuple(self._selected_refs(selected)),
            omitted=dict(sorted(omitted.items())),
            branch_excluded=outside,
            buckets=self._bucket_report(budget, system, tools, selected),
            decisions_summary=ev.decision_counts(),
            stable_prefix_hash=prefix_hash,
            prefix_change=prefix_change,
            rule_conflicts=rule_conflicts,
            over_budget=assembled_tokens > budget,
            timings_ms={
                "query": round((t1 - t0) * 1000, 3),
                "policy_eval": round((t2 - t1) * 1000, 3),
                "serialization": round((t3 - t2) * 1000, 3),
            },
            trace=decisions if (trace or self.policy.trace.keep_trace) else None,
            payload_sha256="sha256:" + hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest(),
            created_at=datetime.now(UTC),
        )
        if persist:
            with self.store.writer(scope) as w:
                w.add_assembly(record, payload)
                for d in ev.persistent_decisions(record.id, conversation_id, scope.tenant_id):
                    w.add_decision(d)
        return AssemblyResult(record=record, payload=payload, request=request, trace=decisions)

    # ------------------------------------------------------------------------------------
    def _rules(self, cands: CandidateSet, ev: Evaluator) -> tuple[list[Rule], list[dict[str, Any]]]:
        """Rules in force for this request (seed 001 §4.2, §6 problem 4).

        Pinned user constraints and unscoped rules always apply; situational (scoped)
        rules only when a tool call in view touched a matching path or tool.  Conflicts
        are resolved by the policy's authority chain; losers are omitted with reason
        ``authority_overridden`` and every conflict (winner, losers, reason) is recorded.
        """
        from contextledger.policy.constraints import touched_paths

        paths: set[str] = set()
        tools: set[str] = set()
        for c in cands.calls:
            tools.add(c.tool_name)
            # parsed once per call record across requests (a pure function of its arguments)
            paths.update(derived(c, "touched_paths", functools.partial(_call_paths, c.arguments_json, touched_paths)))
        applicable: list[Rule] = []
        for body in cands.rules:
            if not ev.rule_visible(body, cands.branch_id, cands.segments):
                continue
            rule = Rule.model_validate({k: v for k, v in body.items() if not k.startswith("_")})
            if rule.scoped and not rule.pinned and not rule.applies_to(sorted(paths), sorted(tools)):
                ev.omit_record(rule.id, "rule", OmissionReason.SITUATIONAL_NOT_MATCHED, "no path or tool in view matches its scope")
                continue
            applicable.append(rule)
        applicable.sort(key=lambda r: (r.order, r.id))
        res = resolve_authority(applicable, self.policy.authority.chain)
        for r in res.losers:
            ev.omit_record(r.id, "rule", OmissionReason.AUTHORITY_OVERRIDDEN, res.loser_reason(r.id) or "overridden")
        for r in res.winners:
            ev.include(r.id, "rule", Shape.RAW, "system_rules")
        conflicts = [{"key": c.key, "winner": c.winner_id, "losers": list(c.loser_ids), "reason": c.reason} for c in res.conflicts]
        return list(res.winners), conflicts

    def _prefix_change(self, scope: Scope, prev: ContextAssembly, system: tuple[str, ...]) -> dict[str, Any]:
        """Where the stable prefix first differs from the previous assembly's, and why."""
        _, payload = self.store.get_assembly(scope, prev.id)
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
        pos = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new)))
        before = new[:pos]
        block = before.count("\n\n")
        if old == new:
            return {"previous_assembly_id": prev.id, "previous_hash": prev.stable_prefix_hash, "first_difference_char": None, "block_index": None, "reason": "tool schemas changed"}
        reason = "pinned constraints changed" if "Constraints stated by the user" in new[max(0, pos - 200) : pos + 200] else ("rules changed" if "Rules:" in new[max(0, pos - 200) : pos + 200] else "system prompt changed")
        return {"previous_assembly_id": prev.id, "previous_hash": prev.stable_prefix_hash, "first_difference_char": pos, "block_index": block, "reason": reason}

    def _viewer(self, cands: CandidateSet, participant_id: str | None) -> Participant | None:
        """The participant to assemble for.  Default: the conversation's only root
        participant (the main agent, or the child of a subagent-only transcript); with
        several root participants (multi-model, debate), the shared view (``None``)."""
        if participant_id is None:
            roots = [p for p in cands.participants if p.parent_participant_id is None]
            return roots[0] if len(roots) == 1 else None
        for p in cands.participants:
            if p.id == participant_id or p.name == participant_id:
                return p
        raise NotFoundError("participant", participant_id)

    @staticmethod
    def _default_now(cands: CandidateSet) -> datetime:
        """``now`` when the caller gives none: for an imported conversation, the time of
        its newest record (the moment its next request would have been made — and
        deterministic); for a live one, the wall clock."""
        if cands.conversation.source.startswith("import") and cands.messages:
            return max(m.created_at for m in cands.messages)
        return datetime.now(UTC)

    def _resolve_blob(self, key: str) -> bytes | None:
        try:
            return self.store.blobs.get(key)
        except Exception:
            return None

    def _tool_schemas(self, cands: CandidateSet, viewer: Participant | None) -> tuple[ToolSchema, ...]:
        raw = cands.conversation.metadata.get("tools") or []
        schemas: dict[str, ToolSchema] = {}
        for t in raw:
            fn = t.get("function", t) if isinstance(t, dict) else {}
            name = fn.get("name")
            if isinstance(name, str) and name:
                schemas[name] = ToolSchema(name=name, description=str(fn.get("description") or ""), parameters=fn.get("parameters") or fn.get("input_schema") or {"type": "object", "properties": {}})
        if viewer is not None and viewer.tool_names:
            allowed = set(viewer.tool_names)
            schemas = {k: v for k, v in schemas.items() if k in allowed}
            for name in viewer.tool_names:
                schemas.setdefault(name, ToolSchema(name=name))
        return tuple(schemas[k] for k in sorted(schemas))

    # ------------------------------------------------------------------------------------
    def _pieces(self, cands: CandidateSet, units: list[Unit], ev: Evaluator, now: datetime, budget: int, files: list[ToolMemory]) -> tuple[list[_Piece], list[_Piece]]:
        """Render every unit (raw for the tail, shaped before it) and the retrieval notes."""
        visible_units: list[Unit] = []
        comp = cands.compaction
        covered_to = int(comp.metadata["covers"]["to_seq"]) if comp is not None else -1
        protected_keys = ev.recovery.protected(units)
        first_turn_seq = min((x.seq for x in units if x.is_turn_start), default=-1)
        for u in units:
            if u.kind == "system":
                continue
            head = u.messages[0]
            if head.kind == MessageKind.COMPACTION and head.metadata.get("handoff_format"):
                if comp is None or head.id != comp.id:
                    ev.omit_unit(u, OmissionReason.COMPACTED, "an older compaction, replaced by the newest one")
                continue
            if u.seq <= covered_to and u.key not in protected_keys and not (u.seq == first_turn_seq and _goal_truncated(comp)):
                ev.omit_unit(u, OmissionReason.COMPACTED, f"covered by compaction {comp.id if comp else ''}")
                continue
            if u.kind == "runtime":
                ev.omit_unit(u, OmissionReason.RUNTIME_ONLY, "progress/meta records are runtime-only")
                continue
            if u.kind == "cut":
                ev.omit_unit(u, OmissionReason.OUTSIDE_WINDOW, "its turn is older than the candidate window")
                continue
            if not ev.unit_visible(u):
                continue
            visible_units.append(u)
        visible_units = self._drop_duplicates(visible_units, ev, protected_keys)
        # the recent tail: the last ``min_turns`` user turns, but no more raw history than
        # ``max_share`` of the budget (long agent turns); older units are shaped
        turn_starts = [i for i, u in enumerate(visible_units) if u.is_turn_start]
        k = self.policy.recent_tail.min_turns
        tail_start = turn_starts[-k] if len(turn_starts) >= k and k > 0 else 0
        # the task statement: the first user turn that is not a scaffold demonstration
        # (SWE-agent's ``is_demo`` example trajectory is older context, not the task)
        tasks = [i for i in turn_starts if not visible_units[i].messages[0].metadata.get("is_demo")]
        first_user = tasks[0] if tasks else (turn_starts[0] if turn_starts else None)
        current = turn_starts[-1] if turn_starts else None
        protected = ev.recovery.protected(visible_units)
        cap = int(self.policy.recent_tail.max_share * budget)
        used = 0
        share_start = len(visible_units)
        # raw renderings made for the cost probe, with their scratch traces: a unit that
        # ends up raw in the tail keeps its probe rendering (same text, same decisions)
        probed: dict[int, tuple[_Piece, Evaluator]] = {}
        for i in range(len(visible_units) - 1, -1, -1):
            if i in (first_user, current) or visible_units[i].key in protected:
                share_start = i
                continue
            scratch = ev.quiet()
            probe = self._render_unit(visible_units[i], scratch, raw=True, bucket=_PROBE_BUCKET, mandatory=False, order=(0, 0))
            probed[i] = (probe, scratch)
            c = probe.cost
            if used + c > cap and share_start < len(visible_units):
                break
            used += c
            share_start = i
        if share_start > 0:
            # does the whole history fit raw?  Stop summing as soon as it cannot (the
            # answer is the same; a long history is not rendered once more for nothing)
            limit = cap / max(self.policy.recent_tail.max_share, 1e-9) * 0.9
            full = used
            # first with lower bounds of the raw costs (the raw result texts alone): when
            # they already exceed the limit, so would the renderings
            bound = used
            for i in range(share_start - 1, -1, -1):
                bound += self._raw_lower_bound(visible_units[i], ev)
                if bound > limit:
                    full = bound
                    break
            for i in range(share_start - 1 if full <= limit else -1, -1, -1):
                scratch = ev.quiet()
                probed[i] = (self._render_unit(visible_units[i], scratch, raw=True, bucket=_PROBE_BUCKET, mandatory=False, order=(0, 0)), scratch)
                full += probed[i][0].cost
                if full > limit:
                    break
            if full <= limit:
                share_start = 0  # the whole history fits raw: nothing to reduce
        tail_start = max(tail_start, share_start)
        pieces: list[_Piece] = []
        in_view_memories: set[str] = set()
        for i, u in enumerate(visible_units):
            in_tail = i >= tail_start
            mandatory = i in (first_user, current) or u.key in protected or u.messages[0].kind == MessageKind.MODERATOR
            bucket = "current_input_task_state" if i in (first_user, current) else ("recent_tail" if in_tail else ("tool_results" if u.calls else "retrieval"))
            if u.key in protected and not in_tail:
                bucket = "current_input_task_state"
            raw = in_tail or u.key in protected
            kept = probed.get(i) if raw else None
            if kept is not None and ev.absorb(kept[1], bucket=(_PROBE_BUCKET, bucket)):
                piece = kept[0]
                piece.bucket, piece.mandatory, piece.order = bucket, mandatory, (u.seq, i)
            else:
                piece = self._render_unit(u, ev, raw=raw, bucket=bucket, mandatory=mandatory, order=(u.seq, i))
            piece.task_statement = i == first_user and first_user != current
            in_view_memories.update(m.id for m in u.memories.values())
            pieces.append(piece)
        if comp is not None:
            msg = WireMessage(role="user", parts=(TextPart(text=DATA_BANNER + "\n" + _first_text_of(comp)),), ref=comp.id)
            ev.include(comp.id, "message", Shape.SUMMARY, "current_input_task_state")
            pieces.append(_Piece(unit=None, messages=[msg], cost=self._cost([msg]), bucket="current_input_task_state", shape=Shape.SUMMARY, mandatory=True, order=(covered_to, -1)))
        skill = ev.visible_state(cands.skill_states, "skill_state")
        ckpt = ev.visible_state(cands.checkpoints, "checkpoint")
        state = runtime_state_text(skill, ckpt, now)
        if state:
            refs = tuple(x.id for x in (ckpt, skill) if x is not None)
            msg = WireMessage(role="user", parts=(TextPart(text=state),), ref=refs[0])
            pieces.append(_Piece(unit=None, messages=[msg], cost=self._cost([msg]), bucket="current_input_task_state", shape=Shape.STRUCTURED, mandatory=True, order=(10**12, 0), extra_refs=refs))
        working_set = self._working_set(files, ev, budget)
        if working_set is not None:
            pieces.append(working_set)
        retrieval: list[_Piece] = []
        for mem in cands.memories:
            if mem.id in in_view_memories or ev.is_omitted(mem.id):
                continue
            if mem.seq <= covered_to:
                ev.omit_record(mem.id, "memory", OmissionReason.COMPACTED, "summarised by the compaction")
                continue
            view = ev.memory_view(mem)
            if view is None:
                continue
            msg_line = memory_line(mem, view.text)
            retrieval.append(_Piece(unit=None, messages=[], cost=self.tok.count(msg_line) + 2, bucket="retrieval", shape=view.shape, order=(mem.seq, 0), memory_ids=(mem.id,), confidence=mem.confidence, stale=view.stale, memory=mem, line=msg_line))
        return pieces, retrieval

    def _working_set(self, files: list[ToolMemory], ev: Evaluator, budget: int) -> _Piece | None:
        """The working-set block (policy ``[working_set]``): one line per file read or
        edited on the lineage, newest first, ``- <path> (edited | read | searched | read,
        changed since)``, within ``max_files`` and ``max_share × budget`` tokens; files beyond
        are counted in a last line.  ``files`` are file memories (``subject_key``
        ``file:<path>``); memories the viewer may not see are skipped.  Paths come from
        tool calls, so the block is ledger data (opened by the data banner).  ``None``
        when there is nothing to list."""
        cfg = self.policy.working_set
        latest: dict[str, tuple[str, str, datetime]] = {}
        for m in sorted(files, key=lambda m: (m.seq, m.id), reverse=True):
            if not m.subject_key or not m.subject_key.startswith("file:") or not ev.memory_visible(m):
                continue
            path = m.subject_key[5:]
            if not path or path in latest:
                continue
            kind = str(m.payload.get("kind") or m.payload.get("extractor") or "")
            verb = "searched" if kind == "file_search" else "read"
            if kind in ("file_write", "generated_file"):
                state = "edited"
            elif m.resolution_state is ResolutionState.STALE or m.id in ev.lineage.stale:
                state = f"{verb}, changed since"
            else:
                state = verb
            latest[path] = (state, m.id, m.observed_at)
        if not latest:
            return None
        # newest observation first, then path: parallel results that completed in another
        # order (same observation time) list the same way (seed 000 §5.6 determinism)
        ordered = sorted(latest.items(), key=lambda kv: (-kv[1][2].timestamp(), kv[0]))
        head = DATA_BANNER + "\nfiles read or edited on this branch (newest first):"
        cap = int(cfg.max_share * budget)
        used = self.tok.count(head) + 4
        lines: list[str] = []
        refs: list[str] = []
        for path, (state, mem_id, _) in ordered:
            line = f"- {path} ({state})"
            cost = self.tok.count(line) + 1
            if len(lines) >= cfg.max_files or used + cost > cap:
                break
            lines.append(line)
            refs.append(mem_id)
            used += cost
        if not lines:
            return None
        if len(latest) > len(lines):
            lines.append(f"- … {len(latest) - len(lines)} older files in the ledger")
        msg = WireMessage(role="user", parts=(TextPart(text=head + "\n" + "\n".join(lines)),), ref=refs[0])
        piece = _Piece(unit=None, messages=[msg], cost=self._cost([msg]), bucket="current_input_task_state", shape=Shape.STRUCTURED, mandatory=True, order=(10**12, 1), extra_refs=tuple(refs))
        piece.working_set = True
        return piece

    def _drop_working_set(self, chosen: list[_Piece], ev: Evaluator) -> bool:
        """Last resort: the working-set list gives way (recorded on its first memory)."""
        for p in chosen:
            if p.working_set:
                chosen.remove(p)
                if p.extra_refs:
                    ev.omit_record(p.extra_refs[0], "memory", OmissionReason.BUDGET, "mandatory content alone exceeds the budget: the working-set list gives way")
                return True
        return False

    def _drop_duplicates(self, units: list[Unit], ev: Evaluator, protected: set[str]) -> list[Unit]:
        """An exchange repeated verbatim later (same tools, arguments and result bytes)
        adds nothing: the earlier copy is omitted with reason ``duplicate``."""
        seen: set[tuple[tuple[str, str, str], ...]] = set()
        keep: list[Unit] = []
        for u in reversed(units):
            if u.kind in ("exchange", "observation") and u.calls and len(u.artifacts) == len(u.calls) and u.key not in protected:
                sig = tuple((c.tool_name, c.arguments_json, u.artifacts[c.call_id].sha256) for c in u.calls)
                if sig in seen:
                    ev.omit_unit(u, OmissionReason.DUPLICATE, "the same calls returned the same bytes later")
                    for mem in u.memories.values():
                        ev.omit_record(mem.id, "memory", OmissionReason.DUPLICATE, "memory of a duplicated exchange")
                    continue
                seen.add(sig)
            keep.append(u)
        return list(reversed(keep))

    def _label(self, ev: Evaluator, pid: str | None, fallback: str | None) -> str | None:
        return fallback or ev.label_of(pid)

    def _render_unit(self, u: Unit, ev: Evaluator, *, raw: bool, bucket: str, mandatory: bool, order: tuple[int, int]) -> _Piece:
        head = u.messages[0]
        name = self._label(ev, head.participant_id, head.speaker_label) if ev.multi_party else head.speaker_label
        msgs: list[WireMessage] = []
        memory_ids: list[str] = []
        raw_arts: list[str] = []
        shape = Shape.RAW
        confidence = 1.0
        stale = False
        for p in head.parts:
            if isinstance(p, ThinkingPart):
                ev.omit_part(head, OmissionReason.RUNTIME_ONLY, "thinking is kept in the ledger, not sent")
        if any(isinstance(p, BinaryPart) for p in head.parts):
            ev.shape_record(head.id, "message", Shape.REFERENCE, OmissionReason.UNSUPPORTED_CONTENT, "binary part sent as a placeholder with its reference")
        if u.kind == "user":
            parts = render_content_parts(head)
            if parts:
                msgs.append(WireMessage(role="user", parts=parts, name=name, ref=head.id))
            ev.include(head.id, "message", Shape.RAW, bucket)
        elif u.kind == "assistant":
            parts = render_content_parts(head)
            if parts:
                msgs.append(WireMessage(role="assistant", parts=parts, name=name, ref=head.id))
            ev.include(head.id, "message", Shape.RAW, bucket)
        elif u.kind in ("exchange", "observation"):
            foreign = ev.foreign(u)
            callable_calls: list[ToolCall] = []
            extra: list[str] = []
            results: list[WireMessage] = []
            for c in u.calls:
                art = u.artifacts.get(c.call_id)
                mem = u.memories.get(art.id) if art else None
                if c.status.unresolved or art is None:
                    extra.append(pending_call_text(c))
                    ev.protect(c.id, "tool_call", "unresolved call rendered as recovery state")
                    continue
                hidden = ev.artifact_hidden(art)
                if hidden is not None:
                    # the turn is visible but this result is not (seed 000 §4.9): no raw
                    # payload, no memory text, only the fact that a result exists
                    ev.omit_record(art.id, "artifact", hidden, "result private to its owner")
                    if mem is not None:
                        ev.omit_record(mem.id, "memory", hidden, "derived from a private result")
                    label = ev.label_of(art.owner_participant_id) or "another participant"
                    if foreign:
                        extra.append(call_narration(c, ev.label_of(c.participant_id) or "another participant", None))
                        ev.omit_record(c.id, "tool_call", OmissionReason.OTHER_PARTICIPANT_TOOLS, "rendered as non-callable narration")
                        continue
                    text = f"[result withheld: private to {label}]"
                    if u.kind == "observation":
                        results.append(WireMessage(role="user", parts=(TextPart(text=observation_text(c, text)),), ref=None))
                    else:
                        callable_calls.append(c)
                        results.append(result_message(c, text, is_error=art.is_error, ref=None))
                    continue
                text, s, used_raw, mv = self._result_text(c, art, mem, ev, raw=raw)
                if mv is not None:
                    confidence = min(confidence, mem.confidence if mem else 1.0)
                    stale = stale or mv.stale
                if s is not Shape.RAW:
                    shape = s
                if mem is not None and not used_raw:
                    memory_ids.append(mem.id)
                if used_raw:
                    raw_arts.append(art.id)
                if foreign:
                    extra.append(call_narration(c, ev.label_of(c.participant_id) or "another participant", text if not used_raw else None))
                    ev.omit_record(c.id, "tool_call", OmissionReason.OTHER_PARTICIPANT_TOOLS, "rendered as non-callable narration")
                    continue
                if u.kind == "observation":
                    results.append(WireMessage(role="user", parts=(TextPart(text=observation_text(c, text)),), ref=art.id))
                else:
                    callable_calls.append(c)
                    results.append(result_message(c, text, is_error=art.is_error, images=self._images(u, c), ref=art.id))
            if u.kind == "observation":
                if head.role is Role.ASSISTANT:
                    msgs.append(assistant_turn(head, [], extra, name))
                else:
                    msgs.extend(WireMessage(role="user", parts=(TextPart(text=e),), ref=head.id) for e in extra)
                msgs.extend(results)
            else:
                big_args = any(len(c.arguments_json) > ev.tool_max_bytes(c.tool_name) for c in callable_calls)
                compact = (not raw) or big_args
                if compact and any(len(c.arguments_json) > 160 for c in callable_calls):
                    ev.shape_record(head.id, "message", Shape.EXTRACT, OmissionReason.REPLACED_BY_MEMORY, "long tool-call arguments cut; the exact call is in the ledger")
                # the assistant turn depends only on its records and texts: made once
                # per message record and arguments across requests
                msgs.append(derived(head, ("turn", tuple(c.id for c in callable_calls), tuple(extra), name, compact), lambda: assistant_turn(head, callable_calls, extra, name, compact=compact)))
                msgs.extend(results)
            ev.include(head.id, "message", shape, bucket)
        return _Piece(unit=u, messages=msgs, cost=self._cost(msgs), bucket=bucket, shape=shape, mandatory=mandatory, order=order, memory_ids=tuple(memory_ids), raw_artifacts=tuple(raw_arts), confidence=confidence, stale=stale)

    def _raw_lower_bound(self, u: Unit, ev: Evaluator) -> int:
        """A lower bound of the cost of ``u`` rendered raw (tokens): the raw result texts
        :meth:`_result_text` would send, less 2 tokens each for a prefix joined before
        them; 0 for units whose results would not be sent raw as tool results.  Reads no
        trace state and records nothing."""
        if u.kind != "exchange" or ev.foreign(u):
            return 0
        total = 0
        for c in u.calls:
            art = u.artifacts.get(c.call_id)
            if art is None or art.inline_text is None or c.status.unresolved or art.size_bytes > ev.tool_max_bytes(c.tool_name):
                continue
            mem = u.memories.get(art.id)
            if mem is not None and (ev.conflict.check(mem) is not None or mem.resolution_state is ResolutionState.STALE or mem.id in ev.lineage.stale):
                continue
            if ev.artifact_hidden(art) is not None or not ev.raw_allowed(art)[0]:
                continue
            total += max(0, self.tok.count(art.inline_text) - 2)
        return total

    def _images(self, u: Unit, c: ToolCall) -> tuple[Any, ...]:
        for m in u.messages[1:]:
            for p in m.parts:
                if isinstance(p, ToolResultPart) and p.call_id == c.call_id:
                    return tuple(p.images)
                if isinstance(p, ToolCallPart) and p.call_id == c.call_id:
                    return ()
        return ()

    def _result_text(self, c: ToolCall, art: ToolArtifact, mem: Any, ev: Evaluator, *, raw: bool) -> tuple[str, Shape, bool, MemoryView | None]:
        """The text standing for one result: raw when allowed and small, else the memory
        view (extract / stale marker / restricted summary / reference)."""
        limit = ev.tool_max_bytes(c.tool_name)
        raw_ok, reason = ev.raw_allowed(art)
        # a superseded result, or a file read whose file was written later, is never
        # shown raw, not even in the recent tail: the model would read an outdated
        # observation as current (seed 000 §4.7-4.8; seed 001 §5: the pre-edit read is
        # stale after the edit); the exchange keeps the marker and its successor
        superseded = mem is not None and (ev.conflict.check(mem) is not None or mem.resolution_state is ResolutionState.STALE or mem.id in ev.lineage.stale)
        raw = raw and not superseded
        if not raw and not superseded and raw_ok and mem is not None and art.inline_text is not None and art.size_bytes <= limit:
            # a memory is a reduction: never send one that costs more than the raw result
            # (memory views read no trace state, so one scratch copy of the assembly's
            # evaluator serves every probe; its quiet copies share ``freshness``)
            hit: tuple[object, Evaluator] | None = self.__dict__.get("_probe_evaluator")
            if hit is None or hit[0] is not ev.freshness:
                hit = self.__dict__["_probe_evaluator"] = (ev.freshness, ev.quiet())
            probe = hit[1].memory_view(mem, in_exchange=True)
            if probe is not None and not probe.stale and self.tok.count(art.inline_text) <= self.tok.count(probe.text):
                raw = True
        if raw and raw_ok and art.size_bytes <= limit and art.inline_text is not None:
            view = ev.memory_view(mem, in_exchange=True) if mem is not None else None
            prefix = view.raw_prefix if view is not None else ""
            ev.include(art.id, "artifact", Shape.RAW, "raw")
            return prefix + art.inline_text, Shape.RAW, True, view
        if superseded and mem is not None:
            why = f"superseded by {mem.superseded_by}" if mem.superseded_by else "the file changed later"
            ev.shape_record(art.id, "artifact", Shape.REFERENCE, OmissionReason.SUPERSEDED if mem.superseded_by else OmissionReason.STALE, f"{why}: the raw result is outdated")
        elif raw and not raw_ok:
            if (redacted := ev.withhold_raw(art, mem, limit, reason)) is not None:
                return redacted, Shape.EXTRACT, False, None
        elif raw and art.size_bytes > limit:
            ev.shape_record(art.id, "artifact", Shape.REFERENCE, OmissionReason.REPLACED_BY_MEMORY, f"{art.size_bytes} bytes above the {limit}-byte tool output limit")
        else:
            ev.shape_record(art.id, "artifact", Shape.EXTRACT, OmissionReason.REPLACED_BY_MEMORY, "older than the recent tail")
        if mem is None:
            return f"{artifact_ref(art)} (no memory derived)", Shape.REFERENCE, False, None
        view = ev.memory_view(mem, in_exchange=True)
        if view is None:
            return f"[result omitted: {ev.last_reason(mem.id)}] {artifact_ref(art)}", Shape.REFERENCE, False, None
        return view.text, view.shape, False, view

    # ------------------------------------------------------------------------------------
    def _cost(self, msgs: list[WireMessage]) -> int:
        total = 0
        for m in msgs:
            total += 4
            if m.name:
                total += self.tok.count(m.name) + 1
            for p in m.parts:
                if isinstance(p, ToolCallPart):
                    total += self.tok.count(p.tool_name) + self.tok.count(p.arguments_json) + self.tok.count(p.call_id) + 8
                    continue
                text = p.text if isinstance(p, (TextPart, ToolResultPart)) else getattr(p, "text", None)
                if isinstance(text, str):
                    total += self.tok.count(text)
                if isinstance(p, ToolResultPart):
                    total += self.tok.count(p.call_id) + 4
                elif p.kind == "image":
                    total += 85
        return total

    def _select(self, system: tuple[str, ...], tools: tuple[ToolSchema, ...], pieces: list[_Piece], retrieval: list[_Piece], ev: Evaluator, budget: int, provider: str, scope: Scope, count: Any, serialize: Any) -> tuple[NeutralRequest, list[_Piece], list[str]]:
        """Budget allocation with the drop order of seed 001 §9.

        Works on selection-time estimates and confirms with an exact count of the
        serialized payload; every step is recorded in the trace.  Drop steps, in policy
        order: low-confidence retrieval → expired memory → large tool results become
        artifact references (raw results above ``tool_output.max_tokens // 4`` tokens) →
        compress old history (an old exchange becomes one evidence line, then the oldest
        lines and units go) → shorten the recent tail (oldest first).  Mandatory pieces
        (task statement, current input, recovery state, runtime state) are not dropped
        by these steps.  Evidence lines go least valuable first: volatile before durable,
        successes before failures, fewer content words shared with the current input,
        then oldest.  Room freed by a later step (e.g. no tool declarations once the last
        exchange is a line) goes back to the newest dropped chat messages, then to the
        best evicted lines.  If the mandatory pieces alone exceed the budget, the last
        resort, in order: older protected failures become evidence lines; raw mandatory
        results become their memory views; the newest failure becomes an evidence line
        (its error line kept); an older task statement gives way to the current input;
        the longest texts are cut with an explicit marker; the system text is cut.
        """
        chosen = list(pieces)
        self._reshaped: set[str] = set()
        self._evicted: list[_Piece] = []
        self._dropped_chat: list[_Piece] = []
        self._left: _Piece | None = None  # the piece the last drop step took out of ``chosen``
        self._stale_queue: list[_Piece] | None = None
        self._evict_queue: tuple[list[_Piece], list[_Piece], dict[tuple[str, str], int]] | None = None
        current = max((p for p in pieces if p.mandatory and p.unit is not None and p.unit.is_turn_start), key=lambda p: p.order, default=None)
        current_text = " ".join(_first_text(m) for m in current.messages) if current is not None else ""
        terms = query_terms(current_text)
        if current_text and ev.rehydration.requested(current_text):
            # exact evidence was asked for: the exchange the request is about keeps its
            # place (not compressed into a line) so stage 2 can rehydrate it
            about = [p for p in chosen if p.unit is not None and p.memory_ids and p.unit.kind in ("exchange", "observation") and any(not _outdated(m, ev) for m in p.unit.memories.values())]
            scored = [(max(len(terms.intersection(memory_terms(m))) for m in p.unit.memories.values()), p.order, i) for i, p in enumerate(about) if p.unit is not None]
            if scored and max(scored)[0] > 0:
                about[max(scored)[2]].mandatory = True
        keys: dict[tuple[str, tuple[int, int]], tuple[int, int, int, tuple[int, int]]] = {}

        def evict_key(n: _Piece) -> tuple[int, int, int, tuple[int, int]]:
            # constant for a line during one selection: computed once (terms are a regex
            # pass), and across selections for the same memory record and request terms
            v = n.evict
            if v is not None:
                return v
            k = (n.memory_ids[0] if n.memory_ids else "", n.order)
            v = keys.get(k)
            if v is None:
                mem = n.memory
                v = keys[k] = _eviction_key(n, terms) if mem is None else derived(mem, ("evict", terms, n.order), lambda: _eviction_key(n, terms))
            n.evict = v
            return v

        self._evict_key = evict_key
        notes = sorted(retrieval, key=lambda p: p.order)
        steps = [s.value for s in self.policy.budget.drop_order] + ["truncate"]
        large = max(64, self.policy.tool_output.max_tokens // 4)

        by_order = attrgetter("order")

        def build(ps: list[_Piece], ns: list[_Piece], sysb: tuple[str, ...]) -> NeutralRequest:
            ordered = sorted(ps, key=by_order)
            msgs: list[WireMessage] = []
            if ordered:
                msgs.extend(ordered[0].messages)
            if ns:
                lines = [n.line or "" for n in sorted(ns, key=by_order)]
                msgs.append(retrieval_block(lines))
            for p in ordered[1:]:
                msgs.extend(p.messages)
            return NeutralRequest(system=sysb, messages=tuple(msgs), tools=tools)

        # wire forms and counts of unchanged messages are reused between the rounds
        serial_memo: dict[int, Any] = {}
        count_memo: dict[int, Any] = {}

        def exact(req: NeutralRequest) -> int:
            return int(count(provider, serialize(provider, req, resolve_blob=None, memo=serial_memo), memo=count_memo))

        from contextledger.providers.registry import ADDITIVE_PROVIDERS

        additive = provider in ADDITIVE_PROVIDERS

        def sent_cost(p: _Piece) -> int:
            """Tokens ``p``'s messages took in the last exact count, read from the memos
            (a Chat Completions count is a sum over its wire messages, each counted
            once); the selection estimate ``p.cost`` when not all of them were counted
            or the provider's count is not such a sum."""
            if not additive or not p.messages:
                return p.cost
            total = 0
            for m in p.messages:
                hit = serial_memo.get(id(m))
                if hit is None or hit[0] is not m:
                    if m.role == "tool":
                        continue  # counted with the assistant turn it answers
                    return p.cost
                for w in hit[2]:
                    c = count_memo.get(id(w))
                    if c is None or c[0] is not w:
                        return p.cost
                    total += c[1]
            return total

        grouped: set[tuple[str, str]] = set()  # (age, hint) of stale lines in ``notes``
        # calls of tools the request does not declare: the serializer declares each with
        # a minimal schema while a call is sent, so dropping the last call of one saves
        # more than its messages (an estimate cannot run past that drop: see the loop)
        declared = {t.name for t in tools}
        undeclared_calls: dict[str, int] = {}
        for p in chosen:
            for name in _called_tools(p):
                if name not in declared:
                    undeclared_calls[name] = undeclared_calls.get(name, 0) + 1

        def declarations_freed(p: _Piece) -> int | None:
            """Count ``p``'s calls out (it just left ``chosen``); the tokens of the
            declarations of tools that lost their last call, from the memos (``None``
            when one was not counted yet, or no tool is left: the tools block goes)."""
            freed = 0
            for name in _called_tools(p):
                left = undeclared_calls.get(name)
                if left is None:
                    continue
                undeclared_calls[name] = left - 1
                if left != 1:
                    continue
                if not declared and not any(undeclared_calls.values()):
                    return None
                hit = serial_memo.get(id(missing_tool_schema(name)))
                c = count_memo.get(id(hit[1])) if hit is not None else None
                if c is None or c[0] is not hit[1]:  # type: ignore[index]
                    return None
                freed += int(c[1])
            return freed

        notes_scratch = ev.quiet()
        ever_lines = {m for n in notes for m in n.memory_ids}
        lines_sorted = [True]  # ``notes`` is in ``order`` (a refill appends out of order)

        def to_notes(p: _Piece) -> int:
            """Turn a unit into its evidence lines; returns a lower bound of the tokens
            they add to the retrieval block: a line's own tokens, or only its body for
            a stale line that joins a group of the same age and hint
            (:func:`~contextledger.assembly.render.group_stale_lines`).  With the
            exact costs of the dropped messages (``sent_cost``) the estimated saving is
            then an upper bound, so an estimate never runs past the first drop that
            fits."""
            if p.unit is None:
                return 0
            # memories already shown as lines are not added twice: ``ever_lines`` holds
            # every memory ever made a line, so most units skip the scan of ``notes``
            have = {m for n in notes for m in n.memory_ids} if any(m.id in ever_lines for m in p.unit.memories.values()) else set()
            quiet = notes_scratch  # memory views read no trace state: one scratch copy serves all
            added = 0
            for mem in sorted(p.unit.memories.values(), key=lambda m: (m.seq, m.id)):
                if mem.id in have:
                    continue
                view = quiet.memory_view(mem)
                if view is None:
                    continue
                line = memory_line(mem, view.text)
                cost = self.tok.count(line) + 2
                parts = stale_line_parts(line) if additive else None
                if parts is not None and (parts[0], parts[2]) in grouped:
                    added += self.tok.count(parts[1])
                else:
                    added += cost - 2 if additive else cost
                    if parts is not None:
                        grouped.add((parts[0], parts[2]))
                notes.append(_Piece(unit=None, messages=[], cost=cost, bucket="retrieval", shape=view.shape, order=(mem.seq, 1), memory_ids=(mem.id,), confidence=mem.confidence, stale=view.stale, memory=mem, line=line))
                ever_lines.add(mem.id)
                self._evict_queue = None
                if lines_sorted[0]:
                    notes.insert(bisect.bisect_right(notes, notes[-1].order, hi=len(notes) - 1, key=by_order), notes.pop())
            if not lines_sorted[0]:
                notes.sort(key=by_order)
                lines_sorted[0] = True
            return added

        sysb = system
        req = build(chosen, notes, sysb)
        total = exact(req)
        counted = True  # ``total`` is an exact count (else a lower-bound estimate)
        rounds = 0
        for step in steps[:-1]:
            self._stale_queue = None
            self._evict_queue = None
            grouped.clear()
            if additive:
                grouped.update((x[0], x[2]) for x in (stale_line_parts(n.line or "") for n in notes) if x is not None)
            while total > budget and rounds < 400:
                rounds += 1
                est = total
                progressed = False
                exhausted = False
                while est > budget:
                    self._left = None
                    saved = self._drop_once(step, chosen, notes, ev, large, to_notes, sent_cost if additive else None)
                    if saved is None:
                        exhausted = True
                        break
                    progressed = True
                    est -= saved
                    if additive and self._left is not None:
                        freed = declarations_freed(self._left)
                        if freed is None:
                            break  # the saving is larger than estimated: count exactly now
                        est -= freed
                if not progressed:
                    break
                if exhausted and additive:
                    # the step has nothing left and even the estimate (a lower bound:
                    # savings are upper bounds) is above budget: the next step runs
                    # anyway, so it starts from the estimate, not a new exact count
                    total, counted = est, False
                    continue
                req = build(chosen, notes, sysb)
                total, counted = exact(req), True
        if not counted:
            req = build(chosen, notes, sysb)
            total = exact(req)
        # refill: later steps may free room (e.g. an exchange turned into a line drops
        # the tool declarations); give it back first to the newest dropped user messages
        # (the user's own words), then to the most valuable evicted evidence lines, then
        # to the newest dropped assistant messages
        def give_back(total: int, target: list[_Piece], candidates: list[_Piece], restore: Any) -> int:
            # membership by identity: pieces are distinct objects, and comparing them
            # field by field (messages, parts) was most of the refill's time
            present = {id(x) for x in target}
            for p in candidates:
                if total + p.cost > budget or id(p) in present:
                    continue
                target.append(p)
                trial = exact(build(chosen, notes, sysb))
                if trial <= budget:
                    total = trial
                    present.add(id(p))
                    restore(p)
                else:
                    target.pop()
            return total

        def dropped_chat(kind: str) -> list[_Piece]:
            return sorted((p for p in self._dropped_chat if p.unit is not None and p.unit.kind == kind), key=lambda p: p.order, reverse=True)[:8]

        def restore_chat(p: _Piece) -> None:
            for m in p.unit.messages if p.unit is not None else ():
                ev.restore(m.id, "message", "room freed by later drop steps")

        def refill(total: int) -> int:
            total = give_back(total, chosen, dropped_chat("user"), restore_chat)
            lines = sorted(self._evicted, key=self._evict_key, reverse=True)[:24]
            lines_sorted[0] = False
            self._evict_queue = None
            total = give_back(total, notes, lines, lambda n: ev.restore(n.memory_ids[0], "memory", "room freed by later drop steps"))
            return give_back(total, chosen, dropped_chat("assistant"), restore_chat)

        total = refill(total)
        req = build(chosen, notes, sysb)
        attempts = 0
        while total > budget and attempts < 32:
            # last resort: mandatory pieces alone exceed the budget.  First give up the
            # oldest protected failures (kept as evidence lines; the newest stays raw),
            # then cut the longest texts with an explicit marker.
            over = total - budget + 8 * (attempts + 1)
            failures = [p for p in chosen if p.mandatory and p.unit is not None and p.unit.failed_calls and not p.unit.unresolved_calls]
            if len(failures) > 1:
                p = min(failures, key=lambda p: p.order)
                chosen[:] = [x for x in chosen if x is not p]
                to_notes(p)
                ev.omit_unit(p.unit, OmissionReason.BUDGET, "older protected failure: kept as an evidence line to fit the budget")  # type: ignore[arg-type]
            elif self._last_resort(chosen, ev, over, cut=False):
                pass
            elif failures and any(p.unit is not None and p.unit.memories for p in failures):
                # the newest failure as an evidence line: its memory keeps the error
                # line, and without a tool exchange no tool declarations are sent
                p = failures[0]
                chosen[:] = [x for x in chosen if x is not p]
                to_notes(p)
                ev.omit_unit(p.unit, OmissionReason.BUDGET, "protected failure kept as an evidence line (error line kept) to fit the budget")  # type: ignore[arg-type]
            elif not self._drop_working_set(chosen, ev) and not self._drop_task_statement(chosen, ev) and not self._last_resort(chosen, ev, over):
                sysb = self._truncate_system(sysb, over, ev)
            req = build(chosen, notes, sysb)
            total = exact(req)
            attempts += 1
        if attempts and total <= budget:
            total = refill(total)  # the last resort may have freed more than it needed
            req = build(chosen, notes, sysb)
        for n in notes:
            ev.include(n.memory_ids[0], "memory", n.shape, "retrieval")
        with_raw = list(chosen)
        rehydrated = self._rehydrate(with_raw, ev, scope)
        if rehydrated:
            # the exact evidence outranks older context: make room for it with the same
            # drop steps (on copies), or give it up
            for i, p in enumerate(with_raw):
                if set(p.raw_artifacts) & set(rehydrated):
                    with_raw[i] = dataclasses.replace(p, mandatory=True)
            room_notes = list(notes)
            quiet = ev.quiet()
            fits = exact(build(with_raw, room_notes, sysb))
            for step in ("compress_old_history", "shorten_recent_tail"):
                while fits > budget and self._drop_once(step, with_raw, room_notes, quiet, large, lambda p: None) is not None:
                    fits = exact(build(with_raw, room_notes, sysb))
            req2 = build(with_raw, room_notes, sysb)
            if fits <= budget:
                for d in quiet.decisions:
                    if d["decision"] == "omit":
                        ev.omit_record(d["record_id"], d["record_kind"], OmissionReason.BUDGET, "dropped to make room for rehydrated evidence")
                req, chosen, notes = req2, with_raw, room_notes
            else:
                for art_id in rehydrated:  # the raw payloads do not fit: the memories stay
                    ev.refuse_rehydration(art_id, OmissionReason.BUDGET)
                rehydrated = []
        return req, chosen + notes, rehydrated

    def _drop_once(self, step: str, chosen: list[_Piece], notes: list[_Piece], ev: Evaluator, large: int, to_notes: Callable[[_Piece], int | None], sent_cost: Callable[[_Piece], int] | None = None) -> int | None:
        """Apply one unit of drop ``step``; returns the estimated tokens saved, or
        ``None`` when the step has nothing left to give.  ``sent_cost(piece)``: the
        tokens a piece's messages cost in the payload (default: its estimate ``cost``)."""
        cost_of: Callable[[_Piece], int] = sent_cost or attrgetter("cost")
        if step == "low_confidence_retrieval":
            low = [n for n in notes if n.confidence < self.policy.promotion.auto_min_confidence]
            if not low:
                return None
            # the whole class goes at once (linear, not one scan per dropped line)
            drop = {id(n) for n in low}
            notes[:] = [n for n in notes if id(n) not in drop]
            for n in low:
                ev.omit_record(n.memory_ids[0], "memory", OmissionReason.LOW_CONFIDENCE, "drop order: low-confidence retrieval")
            return sum(n.cost for n in low)
        if step == "expired_memory":
            # an expired observation keeps only its one-line stale marker with the
            # revalidation hint (seed 000 §4.7): old exchanges holding only stale
            # results become such lines; the lines themselves go in compress_old_history
            # oldest first; during this step pieces only leave ``chosen`` (here), so the
            # candidates are ordered once per step (``_select`` resets the queue)
            if self._stale_queue is None:
                self._stale_queue = sorted((p for p in chosen if p.stale and not p.mandatory and p.bucket != "recent_tail" and p.unit is not None), key=lambda p: p.order, reverse=True)
            if not self._stale_queue:
                return None
            p = self._stale_queue.pop()
            chosen[:] = [x for x in chosen if x is not p]
            self._left = p
            cost = cost_of(p)
            added: int = to_notes(p) or 0
            ev.omit_unit(p.unit, OmissionReason.STALE, "drop order: expired memory kept as a stale marker line")  # type: ignore[arg-type]
            return max(1, cost - added)
        if step == "large_tool_results_to_refs":
            big = sorted((p for p in chosen if p.raw_artifacts and not p.mandatory and p.unit is not None and p.unit.key not in self._reshaped and self._max_raw_tokens(p) > large), key=lambda p: (-p.cost, p.order))
            for p in big:
                self._reshaped.add(p.unit.key)  # type: ignore[union-attr]
                scratch = ev.quiet()
                shaped = self._render_unit(p.unit, scratch, raw=False, bucket=p.bucket, mandatory=False, order=p.order)  # type: ignore[arg-type]
                if shaped.cost >= p.cost:
                    continue
                # keep the probe rendering when its trace would be the same here
                chosen[chosen.index(p)] = shaped if ev.absorb(scratch) else self._render_unit(p.unit, ev, raw=False, bucket=p.bucket, mandatory=False, order=p.order)  # type: ignore[arg-type]
                return p.cost - shaped.cost
            return None
        if step in ("compress_old_history", "shorten_recent_tail"):
            # old history first, the recent tail last (seed 001 §9): a unit becomes its
            # evidence lines; when no unit is left, the least valuable line goes
            buckets = ("retrieval", "tool_results", "long_term_memory") if step == "compress_old_history" else ("recent_tail",)
            units = [p for p in chosen if not p.mandatory and p.bucket in buckets]
            why = f"drop order: {step.replace('_', ' ')}"
            if units:
                p = min(units, key=lambda p: p.order)
                cost = cost_of(p)
                chosen[:] = [x for x in chosen if x is not p]
                self._left = p
                if p.unit is not None and p.unit.kind in ("user", "assistant"):
                    self._dropped_chat.append(p)
                added_lines: int = to_notes(p) or 0
                if p.unit is not None:
                    ev.omit_unit(p.unit, OmissionReason.BUDGET, why + " (kept as evidence lines)")
                return max(1, cost - added_lines)
            if notes:
                # least valuable first; ties: the earlier in ``notes`` (as ``min``).  The
                # order is made once for a run of evictions: lines are only added by
                # turning a unit into lines, which drops the queue
                q = self._evict_queue
                if q is None or q[0] is not notes:
                    for x in notes:
                        if x.evict is None:
                            self._evict_key(x)
                    ranked = sorted(range(len(notes)), key=lambda i: (notes[i].evict, i), reverse=True)
                    groups: dict[tuple[str, str], int] = {}
                    for x in notes:
                        parts = stale_line_parts(x.line or "")
                        if parts is not None:
                            groups[parts[0], parts[2]] = groups.get((parts[0], parts[2]), 0) + 1
                    q = self._evict_queue = (notes, [notes[i] for i in ranked], groups)
                n = q[1].pop()
                notes.remove(n)
                self._evicted.append(n)
                ev.omit_record(n.memory_ids[0], "memory", OmissionReason.BUDGET, why + " (evidence line)")
                parts = stale_line_parts(n.line or "") if sent_cost is not None else None
                if parts is not None:
                    left = q[2][parts[0], parts[2]] = q[2].get((parts[0], parts[2]), 1) - 1
                    if left:
                        # the group stays: the line's body (and a separator) goes
                        return min(n.cost, self.tok.count(parts[1]) + 2)
                return n.cost
            return None
        return None

    def _max_raw_tokens(self, p: _Piece) -> int:
        best = 0
        for m in p.messages:
            if m.ref in p.raw_artifacts:
                for part in m.parts:
                    t = getattr(part, "text", None)
                    if isinstance(t, str):
                        best = max(best, self.tok.count(t))
        return best

    def _drop_task_statement(self, chosen: list[_Piece], ev: Evaluator) -> bool:
        """Last resort before cutting texts: an older task statement (the first user
        message, when a later user message is the current input) gives way to the
        current input, the recovery state and the runtime state (seed 001 §2 authority
        chain: the current user instruction and task state outrank raw old
        conversation).  Returns whether a piece was dropped (recorded as a budget
        omission)."""
        for p in chosen:
            if p.task_statement and p.unit is not None:
                chosen.remove(p)
                ev.omit_unit(p.unit, OmissionReason.BUDGET, "mandatory content alone exceeds the budget: the older task statement gives way to the current input and recovery state")
                return True
        return False

    def _last_resort(self, chosen: list[_Piece], ev: Evaluator, over: int, *, cut: bool = True) -> bool:
        """Shrink mandatory content: first turn a raw result into its memory view; then,
        when ``cut``, cut the longest text with an explicit marker.  Returns whether
        anything shrank."""
        for p in sorted((p for p in chosen if p.raw_artifacts and p.unit is not None and p.unit.key not in self._reshaped), key=lambda p: -p.cost):
            self._reshaped.add(p.unit.key)  # type: ignore[union-attr]
            scratch = ev.quiet()
            shaped = self._render_unit(p.unit, scratch, raw=False, bucket=p.bucket, mandatory=p.mandatory, order=p.order)  # type: ignore[arg-type]
            if shaped.cost >= p.cost:
                continue
            chosen[chosen.index(p)] = shaped if ev.absorb(scratch) else self._render_unit(p.unit, ev, raw=False, bucket=p.bucket, mandatory=p.mandatory, order=p.order)  # type: ignore[arg-type]
            return True
        if not cut:
            return False
        biggest = max(chosen, key=lambda p: p.cost, default=None)
        if biggest is None or biggest.cost < 64:
            return False
        target = max(32, biggest.cost - over - 16)
        new_msgs: list[WireMessage] = []
        for m in biggest.messages:
            parts: list[Part] = []
            share = max(16, target // max(1, len(biggest.messages)))
            for part in m.parts:
                if isinstance(part, TextPart) and self.tok.count(part.text) > 48:
                    parts.append(TextPart(text=self._cut(part.text, share, m.ref)))
                elif isinstance(part, ToolResultPart) and part.text is not None and self.tok.count(part.text) > 48:
                    parts.append(part.model_copy(update={"text": self._cut(part.text, share, m.ref)}))
                else:
                    parts.append(part)
            new_msgs.append(WireMessage(role=m.role, parts=tuple(parts), name=m.name, ref=m.ref))
        new_cost = self._cost(new_msgs)
        if new_cost >= biggest.cost:
            return False
        biggest.messages = new_msgs
        biggest.cost = new_cost
        if biggest.unit is not None:
            ev.shape_record(biggest.unit.key, "message", Shape.EXTRACT, OmissionReason.BUDGET, "text cut to fit the budget (head and tail kept)")
        return True

    def _cut(self, text: str, max_tokens: int, ref: str | None) -> str:
        ids = self.tok.encode(text)
        if len(ids) <= max_tokens:
            return text
        head = self.tok.decode(ids[: max_tokens * 2 // 3])
        tail = self.tok.decode(ids[-(max_tokens // 3) :]) if max_tokens >= 3 else ""
        return f"{head}\n[… {len(ids) - max_tokens:,} tokens omitted; full text in the ledger ({ref}) …]\n{tail}"

    def _truncate_system(self, sysb: tuple[str, ...], over: int, ev: Evaluator) -> tuple[str, ...]:
        if not sysb:
            return sysb
        i = max(range(len(sysb)), key=lambda j: len(sysb[j]))
        n = self.tok.count(sysb[i])
        cut = self._cut(sysb[i], max(16, n - over - 16), "system prompt")
        ev.note_bulk("system", OmissionReason.BUDGET, 1, "system prompt cut to fit the budget")
        return (*sysb[:i], cut, *sysb[i + 1 :])

    def _rehydrate(self, chosen: list[_Piece], ev: Evaluator, scope: Scope) -> list[str]:
        """Stage 2: read raw payloads only for records already selected, after the
        privacy / provider check and within the byte budget (seed 000 §4.11, §8 R12).

        Triggers (policy ``rehydration.triggers``): the current user input asks for exact
        evidence (the newest shaped exchange); a recovery-critical exchange (unresolved or
        failed) was shaped; an exchange's memory was not promoted (seed 000 §8 R11: then
        the raw evidence stands in for it).  Refusals are recorded with their reason.
        """
        trig = self.policy.rehydration.triggers
        current = next((p for p in sorted(chosen, key=lambda p: p.order, reverse=True) if p.unit is not None and p.unit.is_turn_start), None)
        asked_text = " ".join(getattr(part, "text", "") for m in current.messages for part in m.parts) if current is not None else ""
        asked = current is not None and ev.rehydration.requested(asked_text)
        shaped = [p for p in sorted(chosen, key=lambda p: p.order, reverse=True) if p.unit is not None and p.memory_ids and p.unit.kind in ("exchange", "observation")]
        targets: list[_Piece] = []
        current_ones = [p for p in shaped if p.unit is not None and any(not _outdated(m, ev) for m in p.unit.memories.values())]
        if asked and current_ones:
            # the exchange the request is about: most content words shared, then newest
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
        done: list[str] = []
        for p in targets:
            i = chosen.index(p)
            for c in p.unit.calls if p.unit is not None else []:
                art = p.unit.artifacts.get(c.call_id) if p.unit is not None else None
                if art is None or art.id in p.raw_artifacts:
                    continue
                mem = p.unit.memories.get(art.id) if p.unit is not None else None
                if mem is not None and _outdated(mem, ev):
                    # the exact bytes of an outdated observation are outdated too
                    ev.refuse_rehydration(art.id, OmissionReason.SUPERSEDED if mem.superseded_by else OmissionReason.STALE)
                    continue
                ok, reason = ev.raw_allowed(art)
                refusal = ev.rehydration.check(art, None if ok else Verdict(family=PolicyFamily.PRIVACY, reason=reason, detail="raw payload not allowed"))
                if refusal is not None:
                    ev.refuse_rehydration(art.id, refusal.reason)
                    continue
                try:
                    raw = self.store.read_artifact_bytes(scope, art).decode("utf-8")
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
                chosen[i] = _Piece(unit=old.unit, messages=new_msgs, cost=self._cost(new_msgs), bucket=old.bucket, shape=Shape.RAW, mandatory=old.mandatory, order=old.order, memory_ids=old.memory_ids, raw_artifacts=(*old.raw_artifacts, art.id))
                ev.rehydrated(art.id)
                done.append(art.id)
        return done

    # ------------------------------------------------------------------------------------
    def _replay(self, scope: Scope, cands: CandidateSet, provider: str, mode: str, serialize: Any, count: Any) -> tuple[int, int]:
        """Tokens of the naive full-transcript request for ``provider`` (seed 000 §5.1)."""
        from contextledger.assembly.replay import estimate_replay_tokens, replay_request

        if mode == "estimate":
            return estimate_replay_tokens(self.store, scope, cands)
        req, n = replay_request(self.store, scope, cands, self._tool_schemas(cands, None))
        return int(count(provider, serialize(provider, req, resolve_blob=None))), n

    def _selected_refs(self, selected: list[_Piece]) -> list[str]:
        refs: list[str] = []
        for p in sorted(selected, key=lambda p: p.order):
            if p.unit is not None:
                refs.extend(m.id for m in p.unit.messages)
            elif not p.memory_ids:
                refs.extend(m.ref for m in p.messages if m.ref)
            refs.extend(p.extra_refs)
            refs.extend(p.memory_ids)
            refs.extend(a for a in p.raw_artifacts)
        seen: set[str] = set()
        out = []
        for r in refs:
            if r not in seen:
                seen.add(r)
                out.append(r)
        return out

    def _bucket_report(self, budget: int, system: tuple[str, ...], tools: tuple[ToolSchema, ...], selected: list[_Piece]) -> dict[str, dict[str, int]]:
        """Used and limit per bucket (tokens).  Limits: share × budget, and a bucket's
        unused tokens flow to the next bucket in ``budget.flow_order``."""
        shares = self.policy.budget.buckets
        used: dict[str, int] = {name: 0 for name in type(shares).model_fields}
        used["system_rules"] += sum(self.tok.count(s) for s in system) + sum(self.tok.count(json.dumps(t.parameters, sort_keys=True)) + self.tok.count(t.name) for t in tools)
        for p in selected:
            used[p.bucket] = used.get(p.bucket, 0) + p.cost
        report: dict[str, dict[str, int]] = {}
        carry = 0
        for b in self.policy.budget.flow_order:
            name = b.value
            limit = int(getattr(shares, name) * budget) + carry
            u = used.get(name, 0)
            carry = max(0, limit - u)
            report[name] = {"used": u, "limit": limit}
        return report


_FRESHNESS_RANK = {"volatile": 0, "session": 1, "time_bounded": 2, "durable": 3, "permanent": 4}
_HANDLE = re.compile(r"\b(?:file_id|document_id|doc_id|attachment_id)\b")


def _call_paths(arguments_json: str, touched: Any) -> tuple[str, ...]:
    """Paths a call's JSON arguments touch (``policy.constraints.touched_paths``), ``()``
    for arguments that are not a JSON object."""
    try:
        args = loads_json(arguments_json)
    except ValueError:
        return ()
    return tuple(touched(args)) if isinstance(args, dict) else ()


def _outdated(mem: ToolMemory, ev: Evaluator) -> bool:
    """Superseded by a newer observation, or a file read whose file changed later (as
    stored, or through a link that holds on this request's lineage)."""
    return mem.superseded_by is not None or mem.resolution_state in (ResolutionState.SUPERSEDED, ResolutionState.STALE) or mem.id in ev.lineage.stale or mem.id in ev.lineage.superseded


def _eviction_key(note: _Piece, terms: frozenset[str] = frozenset()) -> tuple[int, int, int, tuple[int, int]]:
    """Which evidence line goes first under budget pressure: short-lived observations
    before durable ones (generated-file handles, entity ids), successes before failures,
    then lines sharing fewer content words with the current user input (``terms``;
    seed 001 §3: what the current request asks about is hot), then the oldest (seed 000
    §4.6-4.7: provenance and recovery context outlive volatile search results)."""
    mem = note.memory
    if mem is None:
        return (0, 0, 0, note.order)
    failed = 1 if mem.status.value in ("failed", "abandoned") else 0
    rank = _FRESHNESS_RANK.get(mem.freshness_class.value, 1)
    if mem.payload.get("extractor") == "search" or "search" in mem.source_tool.lower():
        rank = 0  # search results are clues, not facts (seed 001 §6 problem 3)
    elif mem.payload.get("extractor") in ("generated_file", "file_write") or _HANDLE.search(mem.summary):
        rank = max(rank, _FRESHNESS_RANK["durable"])  # a file/document handle outlives observations
    relevance = len(terms.intersection(memory_terms(mem))) if terms else 0
    return (rank, failed, relevance, note.order)


def _goal_truncated(comp: Any) -> bool:
    """Whether a compaction had to cut the user goal (then the raw task statement stays)."""
    goal = (comp.metadata.get("sections") or {}).get("user_goal") if comp is not None else None
    return isinstance(goal, dict) and bool(goal.get("truncated"))


def _first_text_of(msg: Any) -> str:
    """Text of a stored message's text parts."""
    return "\n".join(p.text for p in msg.parts if isinstance(p, TextPart))


def _first_text(msg: WireMessage) -> str:
    """The text of a message's first text part ("" when it has none)."""
    for p in msg.parts:
        if isinstance(p, TextPart):
            return p.text
    return ""
