"""``/api/conversations``: list, create, read; record messages, tool calls and tool
results, one at a time or in a batch (seed 000 §4.1–§4.2: raw results are stored whole
before anything is reduced)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from contextledger.ingest.recorder import Recorder
from contextledger.server.api.models import (
    AssistantTurnIn,
    BatchIn,
    ConversationIn,
    MessageIn,
    ToolResultIn,
)
from contextledger.server.deps import ledger_of, tenant_scope
from contextledger.store.base import Scope

__all__ = ["router"]

router = APIRouter(prefix="/conversations", tags=["conversations"])
ScopeDep = Annotated[Scope, Depends(tenant_scope)]


def _recorder(request: Request, scope: Scope) -> Recorder:
    return ledger_of(request).recorder(scope)


@router.get("", summary="List conversations with their record counts")
def list_conversations(request: Request, scope: ScopeDep) -> list[dict[str, Any]]:
    return [
        {"id": s.conversation.id, "title": s.conversation.title, "created_at": s.conversation.created_at.isoformat(), "source": s.conversation.source,
         "messages": s.message_count, "tool_calls": s.tool_call_count, "artifacts": s.artifact_count}
        for s in ledger_of(request).store.list_conversations(scope)
    ]


@router.post("", status_code=201, summary="Create a conversation")
def create_conversation(body: ConversationIn, request: Request, scope: ScopeDep) -> dict[str, Any]:
    conv = _recorder(request, scope).start_conversation(title=body.title, system_prompt=body.system_prompt, metadata=body.metadata)
    return conv.model_dump(mode="json")


@router.get("/{conversation_id}", summary="A conversation and its branches")
def get_conversation(conversation_id: str, request: Request, scope: ScopeDep) -> dict[str, Any]:
    store = ledger_of(request).store
    conv = store.get_conversation(scope, conversation_id)
    branches = store.branches(scope, conversation_id)
    return {**conv.model_dump(mode="json"), "branches": [b.model_dump(mode="json") for b in branches]}


@router.get("/{conversation_id}/cost", summary="Cost per request and per conversation, beside a plain replay's")
def get_cost(conversation_id: str, request: Request, scope: ScopeDep) -> dict[str, Any]:
    """``{"conversation_id", "requests": [{assembly_id, created_at, cost}], "totals"}``
    (:mod:`contextledger.inspector.cost_view`); 404 for an unknown conversation."""
    from contextledger.inspector.cost_view import conversation_cost, request_costs
    from contextledger.inspector.views import assemblies_of

    store = ledger_of(request).store
    store.get_conversation(scope, conversation_id)
    assemblies = assemblies_of(store, scope, conversation_id)
    return {"conversation_id": conversation_id, "requests": request_costs(assemblies), "totals": conversation_cost(assemblies)}


def _record_message(rec: Recorder, conversation_id: str, body: MessageIn) -> dict[str, Any]:
    msg = rec.record_message(conversation_id, body.role, body.content, branch_id=body.branch_id, participant_id=body.participant_id, content_key=body.content_key)
    return {"type": "message", "message": msg.model_dump(mode="json")}


def _record_turn(rec: Recorder, conversation_id: str, body: AssistantTurnIn) -> dict[str, Any]:
    calls = [{"call_id": c.call_id, "tool_name": c.tool_name, "arguments": c.arguments} for c in body.tool_calls]
    msg, recorded = rec.record_assistant(conversation_id, text=body.text, tool_calls=calls, branch_id=body.branch_id, participant_id=body.participant_id)
    return {"type": "tool_calls", "message": msg.model_dump(mode="json"), "tool_calls": [c.model_dump(mode="json") for c in recorded]}


def _record_result(rec: Recorder, conversation_id: str, body: ToolResultIn) -> dict[str, Any]:
    msg, art, mem = rec.record_tool_result(conversation_id, body.call_id, body.result, is_error=body.is_error, error_type=body.error_type, content_type=body.content_type)
    return {"type": "tool_result", "message": msg.model_dump(mode="json"), "artifact": art.model_dump(mode="json"), "memory": mem.model_dump(mode="json")}


@router.post("/{conversation_id}/messages", status_code=201, summary="Record a message")
def record_message(conversation_id: str, body: MessageIn, request: Request, scope: ScopeDep) -> dict[str, Any]:
    return _record_message(_recorder(request, scope), conversation_id, body)


@router.post("/{conversation_id}/tool-calls", status_code=201, summary="Record an assistant turn and its tool calls")
def record_tool_calls(conversation_id: str, body: AssistantTurnIn, request: Request, scope: ScopeDep) -> dict[str, Any]:
    return _record_turn(_recorder(request, scope), conversation_id, body)


@router.post("/{conversation_id}/tool-results", status_code=201, summary="Record a tool result (artifact, result message, memory)")
def record_tool_result(conversation_id: str, body: ToolResultIn, request: Request, scope: ScopeDep) -> dict[str, Any]:
    return _record_result(_recorder(request, scope), conversation_id, body)


@router.post("/{conversation_id}/records", status_code=201, summary="Record messages, tool calls and tool results in order")
def record_batch(conversation_id: str, body: BatchIn, request: Request, scope: ScopeDep) -> dict[str, Any]:
    """Each item is recorded as its single endpoint would; on the first failure the
    answer is that error (its detail names the item) and the items before it stay
    recorded — re-sending the batch is safe for tool calls, results and messages with a
    ``content_key``.  A run of two or more exchanges — a turn with one call and no text,
    then that call's result (no ``error_type`` / ``content_type``) — goes through the
    batched path (:func:`~contextledger.ingest.batch.record_exchanges`: one transaction,
    bulk inserts); its calls come back resolved.  A run with a call id already recorded
    falls back to the items one by one (idempotent)."""
    from contextledger.errors import ContextLedgerError

    rec = _recorder(request, scope)
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(body.records):
        end = _exchange_run(body.records, i)
        try:
            if end - i >= 4 and _record_run(rec, conversation_id, body.records[i:end], out):
                i = end
                continue
            item = body.records[i]
            if isinstance(item, MessageIn):
                out.append(_record_message(rec, conversation_id, item))
            elif isinstance(item, AssistantTurnIn):
                out.append(_record_turn(rec, conversation_id, item))
            else:
                out.append(_record_result(rec, conversation_id, item))
        except ContextLedgerError as exc:
            exc.args = (f"records[{i}]: {exc}",)
            raise
        i += 1
    return {"records": out}


def _exchange_run(records: list[Any], start: int) -> int:
    """The end (exclusive) of the run of exchanges starting at ``start``: pairs of a turn
    with one call, no text, the branch and participant of the first, then its result."""
    i = start
    first = records[start]
    while i + 1 < len(records):
        turn, result = records[i], records[i + 1]
        if not (isinstance(turn, AssistantTurnIn) and isinstance(result, ToolResultIn) and isinstance(first, AssistantTurnIn)):
            break
        if turn.text or len(turn.tool_calls) != 1 or turn.tool_calls[0].call_id != result.call_id or result.error_type or result.content_type:
            break
        if (turn.branch_id, turn.participant_id) != (first.branch_id, first.participant_id):
            break
        i += 2
    return i


def _record_run(rec: Recorder, conversation_id: str, run: list[Any], out: list[dict[str, Any]]) -> bool:
    """Record a run of exchanges batched; ``False`` (nothing written) when one of its
    call ids is already recorded or repeated — the caller records the items one by one."""
    from contextledger.errors import InputError
    from contextledger.ingest.batch import Exchange, record_exchanges

    turns, results = run[0::2], run[1::2]
    exchanges = [
        Exchange(call_id=t.tool_calls[0].call_id, tool_name=t.tool_calls[0].tool_name, arguments=t.tool_calls[0].arguments, result=r.result, is_error=r.is_error)
        for t, r in zip(turns, results, strict=True)
    ]
    try:
        recorded = record_exchanges(rec, conversation_id, exchanges, branch_id=turns[0].branch_id, participant_id=turns[0].participant_id)
    except InputError as exc:
        if "already recorded" in str(exc) or "duplicate call ids" in str(exc):
            return False
        raise
    for r in recorded:
        out.append({"type": "tool_calls", "message": r.turn.model_dump(mode="json"), "tool_calls": [r.call.model_dump(mode="json")]})
        out.append({"type": "tool_result", "message": r.result.model_dump(mode="json"), "artifact": r.artifact.model_dump(mode="json"), "memory": r.memory.model_dump(mode="json")})
    return True
