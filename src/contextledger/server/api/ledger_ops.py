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
def rehydrate(
    artifact_id: str, request: Request, scope: ScopeDep,
    conversation: Annotated[str | None, Query(max_length=64, description="The conversation a handle (a12, m12) is numbered in.")] = None,
) -> Response:
    from contextledger.handles import resolve_artifact_ref

    ledger = ledger_of(request)
    art = ledger.store.get_artifact(scope, resolve_artifact_ref(ledger.store, scope, conversation, artifact_id))
    data = ledger.rehydrate(art.id, scope=scope)
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


@router.get("/conversations/{conversation_id}/search", tags=["records"], summary="Recall records that answer a query (the retrieval router)")
def search(
    conversation_id: str, request: Request, scope: ScopeDep,
    q: Annotated[str, Query(min_length=1, max_length=2000)], limit: Annotated[int, Query(ge=1, le=200)] = 20,
    branch_id: Annotated[str | None, Query(max_length=64)] = None,
    participant_id: Annotated[str | None, Query(max_length=64)] = None,
    provider: Annotated[str | None, Query(max_length=64)] = None,
    routes: Annotated[str | None, Query(max_length=200, description="Comma-separated route names (default: every search route).")] = None,
) -> dict[str, Any]:
    """The retrieval router's hits (``contextledger search --json``: ``query``, ``rrf_k``,
    ``routes_used``, ``degraded``, ``routes``, ``withheld``, ``hits`` with each hit's
    routes, ranks, own scores and fused score) and ``results``: the memory hits with
    their tool, artifacts and observation time."""
    from contextledger.retrieval import SEARCH_ROUTES
    from contextledger.retrieval import search as recall
    from contextledger.retrieval.present import memory_results

    ledger = ledger_of(request)
    chosen = tuple(r.strip() for r in routes.split(",") if r.strip()) if routes else SEARCH_ROUTES
    result = recall(ledger, scope, conversation_id, q, branch_id=branch_id, participant_id=participant_id, provider=provider, limit=limit, routes=chosen)
    return {**result.to_json(), "results": memory_results(ledger.store, scope, conversation_id, result, q)}
