"""Explicit promotion: widening who may see a record, recorded with who and why.

Seed 000 §4.9 and §4.14: a child subagent's raw tool arguments and results are private or
audit-only by default; a participant's run state is participant-private; nothing crosses
those boundaries unless it is *explicitly promoted*.  :func:`promote` is that act.  It
changes the record's visibility and writes a :class:`PolicyDecision` of family
``promotion`` (``actor`` = who, ``detail["why"]`` = why) in the **same transaction**, so
a visibility change without its decision (or the reverse) never exists.

What a promotion changes:

* an artifact: the artifact, its result message and every memory derived from it
  (``promotion_policy`` becomes ``promoted``);
* a memory: the memory alone;
* a message: the message alone.

A child's records (owner participant is a ``subagent_child``) may leave the child only
after the child reached a terminal state (its ModelRun is ``completed``, ``failed`` or
``timeout``): generated-file handles become parent-visible after the child finished and
was promoted, never while it is still writing (seed 000 §4.14).

:func:`resolve_with_child_report` is the parent-side half of a subagent call: it records
the child's final report (or its compact failure/timeout state) as the result of the
parent's tool call and the promotion decision for it, in one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from contextledger.errors import InputError, NotFoundError
from contextledger.graph._writes import update_message
from contextledger.ids import new_id
from contextledger.ingest.recorder import TERMINAL_RUN_STATUSES, Recorder
from contextledger.limits import utf8_bytes
from contextledger.records.enums import (
    PolicyFamily,
    PromotionPolicy,
    RuntimeIsolationPolicy,
    RuntimeKind,
    Visibility,
)
from contextledger.records.models import (
    Message,
    ModelRun,
    Participant,
    PolicyDecision,
    ToolArtifact,
    ToolMemory,
)
from contextledger.store import schema as S
from contextledger.store.base import Scope
from contextledger.store.sql import SqlStore, Writer

if TYPE_CHECKING:
    from contextledger.runtime import HasRuntime

__all__ = [
    "VISIBILITY_RANK",
    "ChildReport",
    "PromotionError",
    "child_run_state",
    "promote",
    "resolve_with_child_report",
]

VISIBILITY_RANK: dict[Visibility, int] = {
    Visibility.AUDIT_ONLY: 0,
    Visibility.PARTICIPANT_PRIVATE: 1,
    Visibility.BRANCH: 2,
    Visibility.CONVERSATION: 3,
}
"""How widely each visibility is seen; a promotion must raise the rank."""


class PromotionError(InputError):
    """A promotion the boundary rules do not allow (child not terminal, narrowing, …)."""


@dataclass(frozen=True, kw_only=True)
class ChildReport:
    """What :func:`resolve_with_child_report` wrote: the parent's result records and the
    promotion decision linking them to the child."""

    message: Message
    artifact: ToolArtifact
    memory: ToolMemory
    decision: PolicyDecision
    child_run: ModelRun


def _participants(source: HasRuntime, scope: Scope, conversation_id: str) -> dict[str, Participant]:
    return {p.id: p for p in source.runtime.store.participants(scope, conversation_id)}


def _is_child(p: Participant | None) -> bool:
    return p is not None and (p.runtime_kind is RuntimeKind.SUBAGENT_CHILD or p.isolation_policy is RuntimeIsolationPolicy.CHILD_AUDIT_ONLY)


def child_run_state(source: HasRuntime, scope: Scope, conversation_id: str, participant_id: str, model_run_id: str | None = None) -> ModelRun | None:
    """The ModelRun deciding whether a child may be promoted: ``model_run_id`` when
    given, else the child's newest run (by start time, then id); ``None`` when the child
    has no recorded run."""
    runs = [r for r in source.runtime.store.model_runs(scope, conversation_id) if r.participant_id == participant_id]
    if model_run_id is not None:
        runs = [r for r in runs if r.id == model_run_id]
    return runs[-1] if runs else None


def _require_terminal(source: HasRuntime, scope: Scope, conversation_id: str, owner: Participant, run_id: str | None, record_id: str) -> ModelRun:
    run = child_run_state(source, scope, conversation_id, owner.id, run_id)
    if run is None:
        raise PromotionError(
            f"cannot promote {record_id}: child subagent {owner.name!r} ({owner.id}) has no recorded model run; "
            "a child's records leave the child only after its run reaches a terminal state"
        )
    if run.status not in TERMINAL_RUN_STATUSES:
        raise PromotionError(
            f"cannot promote {record_id}: child subagent {owner.name!r} run {run.id} is {run.status!r}; "
            f"promote after it is one of {sorted(TERMINAL_RUN_STATUSES)} (seed 000 §4.14)"
        )
    return run


def _check_widening(record_id: str, current: Visibility, to: Visibility) -> None:
    if VISIBILITY_RANK[to] <= VISIBILITY_RANK[current]:
        raise PromotionError(f"cannot promote {record_id} from {current.value} to {to.value}: a promotion must widen visibility")


def _find(source: HasRuntime, scope: Scope, record_id: str) -> ToolArtifact | ToolMemory | Message:
    store = source.runtime.store
    if record_id.startswith("art_"):
        return store.get_artifact(scope, record_id)
    if record_id.startswith("mem_"):
        return store.get_memory(scope, record_id)
    if record_id.startswith("msg_"):
        t = S.messages
        with store.reader() as conn:
            row = conn.execute(sa.select(t.c.body).where(t.c.id == record_id, t.c.tenant_id == scope.tenant_id)).first()
        if row is not None:
            return Message.model_validate(row.body)
    raise NotFoundError("promotable record (artifact, memory or message)", record_id)


def promote(
    source: HasRuntime,
    scope: Scope,
    record_id: str,
    *,
    to: Visibility,
    actor: str,
    reason: str,
    detail: Mapping[str, Any] | None = None,
) -> PolicyDecision:
    """Widen the visibility of one record and record why, atomically (module docstring).

    Args:
        record_id: an artifact (``art_…``), memory (``mem_…``) or message (``msg_…``) id.
        to: the new visibility; must be wider than the current one
            (``audit_only`` < ``participant_private`` < ``branch`` < ``conversation``).
        actor: who promotes (user id, ``"runtime"``, ``"import"``) — ``PolicyDecision.actor``.
        reason: why, in words — kept as ``PolicyDecision.detail["why"]``; the decision's
            ``reason`` code is ``"promoted"``.

    Returns:
        The PolicyDecision (family ``promotion``, decision ``"promote"``, ``record_id``,
        detail with ``record_kind``, ``from``, ``to``, ``why``, ``memory_ids``,
        ``message_ids``, and for a child's record ``child_participant_id`` /
        ``child_run_id`` / ``child_run_status``).

    Raises:
        NotFoundError: unknown record in scope.
        PromotionError: narrowing or unchanged visibility; a child's record whose run is
            not terminal (or has no run).
        InputError: empty ``actor`` or ``reason``.
    """
    if not actor.strip() or not reason.strip():
        raise InputError("a promotion needs an actor (who) and a reason (why)")
    record = _find(source, scope, record_id)
    conv_id = record.conversation_id
    participants = _participants(source, scope, conv_id)
    if isinstance(record, Message):
        owner_id, run_id, current, kind = record.participant_id, record.model_run_id, record.visibility, "message"
    elif isinstance(record, ToolArtifact):
        owner_id, run_id, current, kind = record.owner_participant_id, record.owner_model_run_id, record.visibility_scope, "artifact"
    else:
        owner_id, run_id, current, kind = record.owner_participant_id, record.owner_model_run_id, record.visibility_scope, "memory"
    _check_widening(record_id, current, to)
    owner = participants.get(owner_id or "")
    extra: dict[str, Any] = {}
    if _is_child(owner) and owner is not None:
        run = _require_terminal(source, scope, conv_id, owner, run_id, record_id)
        extra = {"child_participant_id": owner.id, "child_run_id": run.id, "child_run_status": run.status}
    now = datetime.now(UTC)
    store = source.runtime.store
    with store.writer(scope) as w:
        memory_ids, message_ids = _widen(w, store, scope, record, to)
        decision = PolicyDecision(
            id=new_id("dec"), tenant_id=scope.tenant_id, conversation_id=conv_id, family=PolicyFamily.PROMOTION,
            decision="promote", record_id=record_id, reason="promoted", actor=actor,
            detail={
                "record_kind": kind, "from": current.value, "to": to.value, "why": reason,
                "memory_ids": sorted(memory_ids), "message_ids": sorted(message_ids), **extra, **dict(detail or {}),
            },
            created_at=now,
        )
        w.add_decision(decision)
    return decision


def _widen(w: Writer, store: SqlStore, scope: Scope, record: Message | ToolArtifact | ToolMemory, to: Visibility) -> tuple[list[str], list[str]]:
    """Within ``w``'s transaction, widen ``record`` to ``to`` with what follows it (an
    artifact's memories and result message); returns ``(memory ids, message ids)`` widened."""
    conv_id = record.conversation_id
    memory_ids: list[str] = []
    message_ids: list[str] = []
    if isinstance(record, ToolArtifact):
        art = store.get_artifact(scope, record.id, conn=w.conn)
        w.update_artifact(art.model_copy(update={"visibility_scope": to}))
        for mem in store.memories(scope, conv_id, artifact_ids=[art.id], conn=w.conn):
            _promote_memory(w, mem, to)
            memory_ids.append(mem.id)
        for mem in store.memories(scope, conv_id, conn=w.conn):
            if art.id in mem.source_artifact_ids and mem.id not in memory_ids:
                _promote_memory(w, mem, to)
                memory_ids.append(mem.id)
        if art.message_id:
            for msg in store.messages(scope, conv_id, ids=[art.message_id], conn=w.conn):
                if VISIBILITY_RANK[msg.visibility] < VISIBILITY_RANK[to]:
                    update_message(w, msg.model_copy(update={"visibility": to}))
                    message_ids.append(msg.id)
    elif isinstance(record, ToolMemory):
        mems = store.memories(scope, conv_id, ids=[record.id], conn=w.conn)
        _promote_memory(w, mems[0], to)
        memory_ids.append(record.id)
    else:
        msg = store.messages(scope, conv_id, ids=[record.id], conn=w.conn)[0]
        update_message(w, msg.model_copy(update={"visibility": to}))
        message_ids.append(msg.id)
    return memory_ids, message_ids


def _promote_memory(w: Writer, mem: ToolMemory, to: Visibility) -> None:
    w.update_memory(mem.model_copy(update={"visibility_scope": to, "promotion_policy": PromotionPolicy.PROMOTED}))


def resolve_with_child_report(
    source: HasRuntime,
    scope: Scope,
    conversation_id: str,
    *,
    parent_call_id: str,
    child_participant_id: str,
    report: str,
    actor: str,
    reason: str,
    child_run_id: str | None = None,
) -> ChildReport:
    """Resolve the parent's subagent tool call with the child's final report (seed 000 §4.14).

    In one transaction: the parent's ToolArtifact / result message / ToolMemory for
    ``parent_call_id`` (owned by the parent, result message metadata
    ``child_report_for`` = the child's participant id) and a ``promotion`` PolicyDecision
    (``record_id`` = the result message, detail ``kind="child_report"``).  When the child
    run ended ``failed`` or ``timeout`` the result is an error (``error_type``
    ``"SubagentFailed"`` / ``"SubagentTimeout"``): the compact failure state the parent's
    recovery context keeps.

    Raises:
        NotFoundError: unknown call, child participant or run.
        PromotionError: ``child_participant_id`` is not a child subagent, or its run is
            not terminal.
        InputError: the call already has a result.
    """
    if not actor.strip() or not reason.strip():
        raise InputError("a promotion needs an actor (who) and a reason (why)")
    participants = _participants(source, scope, conversation_id)
    child = participants.get(child_participant_id)
    if child is None:
        raise NotFoundError("participant", child_participant_id)
    if not _is_child(child):
        raise PromotionError(f"participant {child.name!r} ({child.id}) is not a child subagent")
    run = _require_terminal(source, scope, conversation_id, child, child_run_id, parent_call_id)
    store = source.runtime.store
    conv = store.get_conversation(scope, conversation_id)
    call = store.get_tool_call(scope, conversation_id, parent_call_id)
    if not call.status.unresolved:
        raise InputError(f"tool call {parent_call_id} is already resolved ({call.status.value})")
    is_error = run.status != "completed"
    error_type = {"failed": "SubagentFailed", "timeout": "SubagentTimeout"}.get(run.status)
    raw = utf8_bytes(report)
    rec = Recorder(source, scope)
    blob_key = source.runtime.put_blob_if_large(raw)
    with store.writer(scope) as w:
        msg, art, mem = rec.write_result(
            w, conv, call, raw, blob_key=blob_key, is_error=is_error, error_type=error_type,
            provider_metadata={"child_report_for": child.id, "child_run_id": run.id, "child_run_status": run.status},
            message_metadata={"child_report_for": child.id, "child_run_id": run.id},
        )
        decision = PolicyDecision(
            id=new_id("dec"), tenant_id=scope.tenant_id, conversation_id=conversation_id, family=PolicyFamily.PROMOTION,
            decision="promote", record_id=msg.id, reason="promoted", actor=actor,
            detail={
                "kind": "child_report", "why": reason, "child_participant_id": child.id, "child_run_id": run.id,
                "child_run_status": run.status, "artifact_id": art.id, "memory_ids": [mem.id], "parent_call_id": parent_call_id,
            },
            created_at=datetime.now(UTC),
        )
        w.add_decision(decision)
    return ChildReport(message=msg, artifact=art, memory=mem, decision=decision, child_run=run)
