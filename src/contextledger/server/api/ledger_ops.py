"""``/api``: assemble, explain (and why-not), rehydrate, promote, compact, search."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from contextledger.errors import InputError
from contextledger.server.api.models import AssembleIn, CompactIn, PromoteIn
from contextledger.server.deps import ledger_of, tenant_scope
from contextledger.store.base import Scope

__all__ = ["router"]

router = APIRouter()
ScopeDep = Annotated[Scope, Depends(tenant_scope)]


def _aware(body: AssembleIn | CompactIn) -> None:
    if body.now is not None and body.now.tzinfo is None:
        raise InputError("now must be timezone-aware (e.g. 2026-01-01T00:00:00Z)")


@router.post("/conversations/{conversation_id}/assemble", tags=["assembly"], summary="Assemble and record the next request's context")
def assemble(conversation_id: str, body: AssembleIn, request: Request, scope: ScopeDep) -> dict[str, Any]:
    _aware(body)
    result = ledger_of(request).assemble(
        conversation_id, branch_id=body.branch_id, participant_id=body.participant_id, provider=body.provider,
        budget_tokens=body.budget_tokens, now=body.now, trace=body.trace, scope=scope,
    )
    return result.as_dict()


@router.get("/assemblies/{assembly_id}/explain", tags=["assembly"], summary="Why each record was included, shaped or omitted")
def explain(assembly_id: str, request: Request, scope: ScopeDep, record_id: Annotated[str | None, Query(max_length=64)] = None) -> dict[str, Any]:
    return ledger_of(request).explain(assembly_id, record_id=record_id, scope=scope)


@router.get("/assemblies/{assembly_id}/why-not/{record_id}", tags=["assembly"], summary="Why a record was (not) in an assembly")
def why_not(assembly_id: str, record_id: str, request: Request, scope: ScopeDep) -> dict[str, Any]:
    return ledger_of(request).explain(assembly_id, record_id=record_id, scope=scope)


@router.get(
    "/artifacts/{artifact_id}/raw", tags=["artifacts"], summary="The exact raw bytes of an artifact, verified against its sha256",
    response_class=Response, responses={200: {"content": {"application/octet-stream": {}}}},
)
def rehydrate(artifact_id: str, request: Request, scope: ScopeDep) -> Response:
    ledger = ledger_of(request)
    art = ledger.store.get_artifact(scope, artifact_id)
    data = ledger.rehydrate(artifact_id, scope=scope)
    return Response(data, media_type=art.content_type or "application/octet-stream", headers={"x-contextledger-sha256": art.sha256})


@router.post("/records/{record_id}/promote", tags=["records"], summary="Widen a record's visibility (recorded decision)")
def promote(record_id: str, body: PromoteIn, request: Request, scope: ScopeDep) -> dict[str, Any]:
    decision = ledger_of(request).promote(record_id, to=body.to, actor=body.actor, reason=body.reason, scope=scope)
    return decision.model_dump(mode="json")


@router.post("/conversations/{conversation_id}/compact", tags=["assembly"], summary="Fold old history into a handoff summary")
def compact(conversation_id: str, body: CompactIn, request: Request, scope: ScopeDep) -> dict[str, Any]:
    _aware(body)
    c = ledger_of(request).compact(conversation_id, branch_id=body.branch_id, keep_recent_units=body.keep_recent_units, now=body.now, scope=scope)
    return {"compaction_id": c.id, "from_seq": c.from_seq, "to_seq": c.to_seq, "covered_units": c.covered_units, "kept_units": c.kept_units,
            "previous_compaction_id": c.previous_compaction_id, "source_refs": list(c.source_refs), "document": c.document}


@router.get("/conversations/{conversation_id}/search", tags=["records"], summary="Tool memories matching the words of a query")
def search(
    conversation_id: str, request: Request, scope: ScopeDep,
    q: Annotated[str, Query(min_length=1, max_length=2000)], limit: Annotated[int, Query(ge=1, le=200)] = 20,
) -> dict[str, Any]:
    """Memories indexed under the query's content terms (the memory term index), ranked
    by how many terms they match, newest first among equals."""
    from contextledger.memory.terms import query_terms

    store = ledger_of(request).store
    store.get_conversation(scope, conversation_id)
    terms = sorted(query_terms(q))
    hits: dict[str, tuple[int, int]] = {}
    for memory_id, _term, _branch, seq in store.term_matches(scope, conversation_id, terms, per_term=limit):
        n, _ = hits.get(memory_id, (0, seq))
        hits[memory_id] = (n + 1, seq)
    ranked = sorted(hits.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))[:limit]
    results = []
    for memory_id, (matched, _seq) in ranked:
        mem = store.get_memory(scope, memory_id)
        results.append({"memory_id": mem.id, "matched_terms": matched, "source_tool": mem.source_tool, "summary": mem.summary,
                        "source_artifact_ids": list(mem.source_artifact_ids), "observed_at": mem.observed_at.isoformat()})
    return {"query": q, "terms": terms, "results": results}
