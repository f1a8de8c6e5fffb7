"""The inspector: why the model saw what it saw, and why it did not see the rest (seed 000
§2.5, §4.12; seed 001 §9 ContextPlan).

Pages (server-rendered HTML; one small script for filters-on-change and live updates):

* ``/`` — conversations, newest first, with a search; below them the newest proxy
  requests forwarded without a recorded turn (not assembled, or side calls) with why;
* ``/conversations/{id}`` — the user-visible transcript, the branch tree, participants and
  every model request (assembly) on the timeline; updates itself while the proxy records
  new requests (it polls ``/conversations/{id}/version``);
* ``/assemblies/{id}`` — one request: token bar, per-record decisions (filterable),
  omitted records grouped by reason, rules and authority decisions, the change against
  the previous request, the exact payload;
* ``/assemblies/{id}/why-not?q=TEXT`` — matching records with their decision;
* ``/records/{id}?assembly=…`` — one record: its decision in that request, its content and
  its provenance (memory → artifact → raw bytes, sha256 verified).

Every page acts for the caller's tenant (:func:`~contextledger.server.deps.page_scope`: key header, sign-in cookie, or keyless on loopback).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse

from contextledger.assembly.decisions import DECISIONS, REASON_TEXT
from contextledger.errors import ContextLedgerError, InputError, NotFoundError
from contextledger.inspector.assembly_view import assembly_view
from contextledger.inspector.provenance import artifact_view, memory_chain
from contextledger.inspector.resolve import SOURCES
from contextledger.inspector.views import (
    assemblies_of,
    conversation_rows,
    conversation_view,
    visible_text,
)
from contextledger.inspector.whynot import why_not
from contextledger.server.deps import ledger_of, page_scope
from contextledger.server.html import render, static_router
from contextledger.server.proxy.events import events_of
from contextledger.store.base import Scope

__all__ = ["router"]

router = APIRouter(include_in_schema=False)
router.include_router(static_router)
ScopeDep = Annotated[Scope, Depends(page_scope)]


def _problem(request: Request, exc: ContextLedgerError) -> HTMLResponse:
    status = 404 if isinstance(exc, NotFoundError) else 400
    return render(request, "error.html", status_code=status, title="Not found" if status == 404 else "Bad request", message=str(exc))


@router.get("/", response_class=HTMLResponse)
def conversations_page(request: Request, scope: ScopeDep, q: str = "") -> HTMLResponse:
    rows = conversation_rows(ledger_of(request), scope, q or None)
    forwarded = events_of(request.app).recent(scope.tenant_id)  # requests not recorded (.proxy.events)
    return render(request, "conversations.html", title="Conversations", rows=rows, q=q, forwarded=forwarded)


@router.get("/conversations/{conversation_id}", response_class=HTMLResponse)
def conversation_page(request: Request, conversation_id: str, scope: ScopeDep, branch: str | None = None) -> HTMLResponse:
    try:
        view = conversation_view(ledger_of(request), scope, conversation_id, branch_id=branch)
    except ContextLedgerError as exc:
        return _problem(request, exc)
    return render(request, "conversation.html", title=view.conversation.title or conversation_id, v=view, visible_text=visible_text)


@router.get("/conversations/{conversation_id}/version")
def conversation_version(request: Request, conversation_id: str, scope: ScopeDep) -> JSONResponse:
    """A token that changes whenever a message or assembly is recorded (live updates)."""
    store = ledger_of(request).store
    try:
        store.get_conversation(scope, conversation_id)
    except NotFoundError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=404)
    asm = assemblies_of(store, scope, conversation_id)
    messages = next((s.message_count for s in store.list_conversations(scope) if s.conversation.id == conversation_id), 0)
    return JSONResponse({"version": f"{messages}:{len(asm)}:{asm[-1].id if asm else ''}", "messages": messages, "assemblies": len(asm)})


@router.get("/assemblies/{assembly_id}", response_class=HTMLResponse)
def assembly_page(
    request: Request, assembly_id: str, scope: ScopeDep,
    decision: Annotated[str, Query(description="Show only this decision.")] = "",
    reason: Annotated[str, Query(description="Show only this reason.")] = "",
) -> HTMLResponse:
    try:
        v = assembly_view(ledger_of(request), scope, assembly_id)
    except ContextLedgerError as exc:
        return _problem(request, exc)
    shown = [d for d in v.decisions.records if (not decision or d.decision == decision) and (not reason or d.reason == reason)]
    # transcript order (records without a place — calls, rules, system pieces — after, as listed)
    shown = [d for _, d in sorted(enumerate(shown), key=lambda x: (x[1].record_id not in v.places, v.places[x[1].record_id].seq if x[1].record_id in v.places else 0, x[0]))]
    scale = max(v.record.replay_tokens, v.record.budget_tokens, v.record.assembled_tokens, 1)
    from contextledger.explain import retrieval_explanation

    return render(request, "assembly.html", title=f"Request {assembly_id}", v=v, shown=shown, decision=decision, reason=reason, decisions=DECISIONS,
                  reason_text=REASON_TEXT, sources=SOURCES, scale=scale, retrieval=retrieval_explanation(v.record.retrieval))


@router.get("/assemblies/{assembly_id}/why-not", response_class=HTMLResponse)
def why_not_page(request: Request, assembly_id: str, scope: ScopeDep, q: str = "") -> HTMLResponse:
    ledger = ledger_of(request)
    try:
        rec, _ = ledger.store.get_assembly(scope, assembly_id)
        hits = why_not(ledger, scope, assembly_id, q) if q.strip() else []
    except NotFoundError as exc:
        return _problem(request, exc)
    except InputError as exc:
        return render(request, "why_not.html", status_code=400, title="Why not?", rec=None, assembly_id=assembly_id, q=q, hits=[], error=str(exc), reason_text=REASON_TEXT)
    except ContextLedgerError as exc:
        return _problem(request, exc)
    return render(request, "why_not.html", title=f"Why not “{q}”?" if q else "Why not?", rec=rec, assembly_id=assembly_id, q=q, hits=hits, error=None, reason_text=REASON_TEXT)


def _record_context(request: Request, scope: Scope, record_id: str, assembly: str | None) -> dict[str, Any]:
    """What the record page shows for ``record_id`` (raises NotFoundError)."""
    ledger = ledger_of(request)
    store = ledger.store
    decision, provider = None, None
    if assembly:
        from contextledger.inspector.resolve import assembly_decisions

        ds = assembly_decisions(ledger, scope, assembly)
        decision, provider = ds.by_id().get(record_id), ds.assembly.provider
    ctx: dict[str, Any] = {"record_id": record_id, "assembly": assembly, "decision": decision, "message": None, "memory": None, "artifacts": []}
    if record_id.startswith("mem_"):
        mem, arts = memory_chain(ledger, scope, record_id)
        ctx["memory"] = mem
        ctx["artifacts"] = [artifact_view(ledger, scope, a.id, provider=provider) for a in arts]
    elif record_id.startswith("art_"):
        ctx["artifacts"] = [artifact_view(ledger, scope, record_id, provider=provider)]
    else:
        rows = _find_message(store, scope, record_id)
        if rows is None:
            raise NotFoundError("record", record_id)
        ctx["message"] = rows
    return ctx


def _find_message(store: Any, scope: Scope, message_id: str) -> Any:
    import sqlalchemy as sa

    from contextledger.records.models import Message
    from contextledger.store import schema as S

    t = S.messages
    with store.reader() as conn:
        row = conn.execute(sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.id == message_id)).first()
    return Message.model_validate(row.body) if row is not None else None


@router.get("/records/{record_id}", response_class=HTMLResponse)
def record_page(request: Request, record_id: str, scope: ScopeDep, assembly: str | None = None) -> HTMLResponse:
    try:
        ctx = _record_context(request, scope, record_id, assembly)
    except ContextLedgerError as exc:
        return _problem(request, exc)
    return render(request, "record.html", title=f"Record {record_id}", reason_text=REASON_TEXT, visible_text=visible_text, **ctx)
