"""Run contextledger and every peer strategy on one recorded case, side by side.

Same inputs, same budget, same tokenizer (o200k), same provider payload (issue "Prove
it"): contextledger assembles from the runtime graph with the default policy; each peer
reduces the naive replay request (:func:`replay_request` — every message of the active
lineage with every raw tool result, seed 000 §5.1) with its trigger/limit set to the
budget; every output is serialized to the provider's wire payload (leniently for peers
whose output the strict serializer refuses, :mod:`contextledger.bench.lenient`), counted
with :func:`~contextledger.providers.registry.count_payload_tokens`, validated with
:func:`~contextledger.providers.registry.validate_payload` and probed with
:func:`~contextledger.bench.probes.check_probes`.

A :class:`Row` holds the fields of the JSON report: ``strategy``, ``case``, ``provider``,
``tokens``, ``replay_tokens``, ``reduction`` (``1 - tokens / replay_tokens``),
``must_see_tokens``, ``must_see_recall``, ``must_not_see_leaks``, ``valid``,
``assembly_ms`` (wall milliseconds of the strategy's own work: the assembler's
``assemble`` call with the constant-work replay estimate — the exact replay size is
measured in a separate, untimed call — or the peer's ``reduce`` plus serialization),
and details.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from contextledger.assembly.candidates import collect_candidates
from contextledger.assembly.replay import replay_request
from contextledger.bench.lenient import lenient_payload
from contextledger.bench.probes import Fact, check_probes, facts_tokens
from contextledger.bench.strategies import Strategy, all_strategies
from contextledger.ledger import Ledger
from contextledger.providers.base import NeutralRequest, ToolSchema
from contextledger.providers.registry import count_payload_tokens, validate_payload
from contextledger.store.base import Scope

__all__ = [
    "CONTEXTLEDGER", "DEFAULT_PROVIDERS", "NATIVE", "CaseInput", "Row", "build_replay", "case_providers", "replay_tool_schemas",
    "run_case", "run_contextledger", "run_peer", "run_scenarios",
]

CONTEXTLEDGER = "contextledger"
"""Strategy name of the assembler with the default policy."""

NATIVE = "native"
"""Stands for a case's own provider (the format its agent spoke) in a providers list."""

DEFAULT_PROVIDERS = (NATIVE, "openai-responses")
"""Every case runs in its own provider's payload and as an OpenAI Responses payload."""


def case_providers(native: str, providers: Sequence[str]) -> list[str]:
    """The providers one case runs in: ``providers`` with :data:`NATIVE` replaced by
    ``native``, duplicates removed, order kept.

    Raises:
        InputError: an unknown provider name.
    """
    from contextledger.errors import InputError
    from contextledger.providers.registry import PROVIDERS

    out: list[str] = []
    for p in providers:
        name = native if p == NATIVE else p
        if name not in PROVIDERS:
            raise InputError(f"unknown provider {p!r}; expected {NATIVE} or one of {', '.join(PROVIDERS)}")
        if name not in out:
            out.append(name)
    return out

_ALL = 10**9


@dataclass(frozen=True, kw_only=True)
class CaseInput:
    """Everything needed to run one case (see :class:`~contextledger.bench.scenarios.base.BuiltCase`).

    ``scale`` is the history multiplier (1, 10, 100) or, for real transcripts, 1;
    ``replay`` is ``"exact"`` or ``"estimate"`` (scale rows only, labelled in reports).
    """

    case: str
    ledger: Ledger
    conversation_id: str
    branch_id: str | None
    participant_id: str | None
    provider: str
    budget_tokens: int
    now: datetime | None
    must_see: tuple[Fact, ...]
    must_not_see: tuple[Fact, ...]
    scale: int = 1
    replay: str = "exact"


@dataclass(kw_only=True)
class Row:
    """One strategy × case result (fields documented in the module docstring)."""

    strategy: str
    case: str
    provider: str
    tokens: int
    replay_tokens: int
    reduction: float
    must_see_tokens: int
    must_see_recall: float
    must_not_see_leaks: int
    valid: bool
    assembly_ms: float
    scale: int = 1
    budget_tokens: int = 0
    floor_ratio: float | None = None
    must_see_count: int = 0
    must_not_see_count: int = 0
    missing: list[str] = field(default_factory=list)
    leaked: list[str] = field(default_factory=list)
    validity_errors: list[str] = field(default_factory=list)
    replay_estimated: bool = False
    error: str | None = None
    selected_refs: tuple[str, ...] = ()
    """contextledger rows: the graph refs the assembly selected (not in the report)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (lists of probes capped at 20 entries, errors at 5; without
        ``selected_refs``)."""
        d = asdict(self)
        del d["selected_refs"]
        d["missing"] = d["missing"][:20]
        d["leaked"] = d["leaked"][:20]
        d["validity_errors"] = d["validity_errors"][:5]
        return d


def replay_tool_schemas(ledger: Ledger, scope: Scope, conversation_id: str) -> tuple[ToolSchema, ...]:
    """The tool schemas recorded on the conversation (``metadata["tools"]``), sorted by
    name — what a replaying agent declares on every request."""
    conv = ledger.store.get_conversation(scope, conversation_id)
    schemas: dict[str, ToolSchema] = {}
    for t in conv.metadata.get("tools") or []:
        fn = t.get("function", t) if isinstance(t, dict) else {}
        name = fn.get("name")
        if isinstance(name, str) and name:
            params = fn.get("parameters") or fn.get("input_schema") or {"type": "object", "properties": {}}
            schemas[name] = ToolSchema(name=name, description=str(fn.get("description") or ""), parameters=params)
    return tuple(schemas[k] for k in sorted(schemas))


def build_replay(ledger: Ledger, conversation_id: str, branch_id: str | None, scope: Scope | None = None) -> NeutralRequest:
    """The naive replay request of the branch's whole lineage (seed 000 §5.1): the input
    every peer strategy reduces.

    Raises:
        NotFoundError: unknown conversation or branch.
    """
    sc = scope or ledger.scope()
    cands = collect_candidates(ledger.store, sc, conversation_id, branch_id, recent_window=_ALL, max_candidates=_ALL)
    request, _ = replay_request(ledger.store, sc, cands, replay_tool_schemas(ledger, sc, conversation_id))
    return request


def _reduction(tokens: int, replay_tokens: int) -> float:
    return round(1 - tokens / replay_tokens, 4) if replay_tokens > 0 else 0.0


def _row(inp: CaseInput, strategy: str, payload: dict[str, Any] | None, tokens: int, replay_tokens: int, ms: float, error: str | None = None) -> Row:
    ms_tokens = facts_tokens(inp.must_see)
    if payload is None:
        return Row(
            strategy=strategy, case=inp.case, provider=inp.provider, tokens=0, replay_tokens=replay_tokens, reduction=0.0,
            must_see_tokens=ms_tokens, must_see_recall=0.0, must_not_see_leaks=0, valid=False, assembly_ms=round(ms, 3),
            scale=inp.scale, budget_tokens=inp.budget_tokens, must_see_count=len(inp.must_see),
            must_not_see_count=len(inp.must_not_see), replay_estimated=inp.replay == "estimate", error=error,
        )
    probe = check_probes(payload, inp.must_see, inp.must_not_see)
    errors = validate_payload(inp.provider, payload)
    return Row(
        strategy=strategy, case=inp.case, provider=inp.provider, tokens=tokens, replay_tokens=replay_tokens,
        reduction=_reduction(tokens, replay_tokens), must_see_tokens=ms_tokens, must_see_recall=probe.recall,
        must_not_see_leaks=probe.leaks, valid=not errors, assembly_ms=round(ms, 3), scale=inp.scale,
        budget_tokens=inp.budget_tokens, floor_ratio=round(tokens / ms_tokens, 2) if ms_tokens else None,
        must_see_count=len(inp.must_see), must_not_see_count=len(inp.must_not_see), missing=list(probe.missing),
        leaked=list(probe.leaked), validity_errors=errors, replay_estimated=inp.replay == "estimate", error=error,
    )


def run_contextledger(inp: CaseInput) -> tuple[Row, int]:
    """Assemble with the default policy (not persisted); returns the row and the replay
    token count the assembly record measured."""
    kw: dict[str, Any] = {
        "branch_id": inp.branch_id, "participant_id": inp.participant_id, "provider": inp.provider,
        "budget_tokens": inp.budget_tokens, "now": inp.now, "persist": False,
    }
    # the replay size for the row is measured (exactly, unless the case says estimate)
    # outside the timed call: the timed assembly is what an agent runs before each
    # model call (constant-work replay estimate)
    replay_tokens = inp.ledger.assemble(inp.conversation_id, replay=inp.replay, **kw).record.replay_tokens
    t0 = time.perf_counter()
    res = inp.ledger.assemble(inp.conversation_id, replay="estimate", **kw)
    ms = (time.perf_counter() - t0) * 1000
    row = _row(inp, CONTEXTLEDGER, res.payload, res.record.assembled_tokens, replay_tokens, ms)
    row.selected_refs = tuple(res.record.selected_refs)
    return row, replay_tokens


def run_peer(inp: CaseInput, strategy: Strategy, replay: NeutralRequest, replay_tokens: int) -> Row:
    """Reduce ``replay`` with ``strategy`` under the case budget and score the payload.

    A strategy that raises gets a row with ``error`` set, ``valid=False`` and recall 0.
    """
    provider = inp.provider

    def count(request: NeutralRequest) -> int:
        return count_payload_tokens(provider, lenient_payload(provider, request)[0])

    t0 = time.perf_counter()
    try:
        out = strategy.reduce(replay, budget_tokens=inp.budget_tokens, count_tokens=count)
        payload, _ = lenient_payload(provider, out)
    except Exception as exc:  # a peer library failure is a result, not a harness crash
        return _row(inp, strategy.name, None, 0, replay_tokens, (time.perf_counter() - t0) * 1000, error=f"{type(exc).__name__}: {exc}")
    ms = (time.perf_counter() - t0) * 1000
    return _row(inp, strategy.name, payload, count_payload_tokens(provider, payload), replay_tokens, ms)


def run_case(inp: CaseInput, strategies: Sequence[Strategy] | None = None) -> list[Row]:
    """contextledger first, then every peer (default :func:`all_strategies`), on one case."""
    peers = list(all_strategies() if strategies is None else strategies)
    cl_row, replay_tokens = run_contextledger(inp)
    rows = [cl_row]
    if peers:
        replay = build_replay(inp.ledger, inp.conversation_id, inp.branch_id)
        rows.extend(run_peer(inp, s, replay, replay_tokens) for s in peers)
    return rows


def run_scenarios(
    scales: Sequence[int] = (1, 10, 100),
    names: Sequence[str] | None = None,
    strategies: Sequence[Strategy] | None = None,
    workdir: str | None = None,
    providers: Sequence[str] = DEFAULT_PROVIDERS,
) -> list[Row]:
    """Build every scenario (or those in ``names``) at every scale into its own fresh
    SQLite ledger (under ``workdir`` or a temporary folder) and run :func:`run_case` once
    per provider of :func:`case_providers` (default: the scenario's own, then OpenAI
    Responses).

    Raises:
        KeyError: an unknown scenario name.
        InputError: an unknown provider.
    """
    import tempfile
    from pathlib import Path

    from contextledger.bench.scenarios import all_scenarios, get_scenario

    case_providers("openai-chat", providers)  # an unknown name fails before any work
    chosen = [get_scenario(n) for n in names] if names else list(all_scenarios())
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for scenario in chosen:
            for scale in scales:
                home = Path(tmp) / f"{scenario.name}-{scale}"
                ledger = Ledger.open(home=home)
                try:
                    b = scenario.build(ledger, scale)
                    for provider in case_providers(b.provider, providers):
                        inp = CaseInput(
                            case=scenario.name, ledger=ledger, conversation_id=b.conversation_id, branch_id=b.branch_id,
                            participant_id=b.participant_id, provider=provider, budget_tokens=b.budget_tokens, now=b.now,
                            must_see=b.must_see, must_not_see=b.must_not_see, scale=scale,
                        )
                        rows.extend(run_case(inp, strategies))
                finally:
                    ledger.close()
    return rows
