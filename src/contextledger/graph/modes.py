"""Entry points of the runtime modes that need more than one record (seed 000 §4.13, §9.3).

Every mode uses the same recorder and the same branch-aware assembly path; what differs
is the boundary each one writes:

* ``chat`` / ``multi_model`` / ``debate``: :class:`~contextledger.ingest.recorder.Recorder`
  directly (participants, speaker labels, moderator messages);
* ``subagent_child``: :func:`start_subagent` — a child participant, its ModelRun (parent
  run linked) and its task prompt, all audit-only to the parent until promoted;
* ``subagent_parent_resume``: :func:`contextledger.graph.promotion.resolve_with_child_report`
  and :func:`contextledger.graph.resume.resume_state`;
* ``scheduled_job``: :func:`scheduled_turn` — the job creates an ordinary chat turn and a
  ModelRun carrying ``job_id``;
* ``branch_send``: :meth:`Recorder.branch_send` with an explicit parent message id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from contextledger.ingest.recorder import Recorder
from contextledger.records.enums import (
    MessageKind,
    Role,
    RuntimeIsolationPolicy,
    RuntimeKind,
    Visibility,
)
from contextledger.records.models import Message, ModelRun, Participant
from contextledger.store.base import Scope

if TYPE_CHECKING:
    from contextledger.runtime import HasRuntime

__all__ = ["ScheduledTurn", "SubagentStart", "scheduled_turn", "start_subagent"]


@dataclass(frozen=True, kw_only=True)
class SubagentStart:
    """What :func:`start_subagent` recorded."""

    participant: Participant
    run: ModelRun
    task_message: Message


@dataclass(frozen=True, kw_only=True)
class ScheduledTurn:
    """What :func:`scheduled_turn` recorded: the job's user message and its ModelRun."""

    message: Message
    run: ModelRun


def start_subagent(
    source: HasRuntime,
    scope: Scope,
    conversation_id: str,
    *,
    parent_participant_id: str,
    name: str,
    task: str,
    parent_model_run_id: str | None = None,
    parent_call_id: str | None = None,
    subagent_batch_id: str | None = None,
    branch_id: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    tool_names: Sequence[str] = (),
) -> SubagentStart:
    """Start a child subagent under ``parent_participant_id`` (seed 000 §4.13, §4.14).

    Records a ``subagent_child`` participant with ``child_audit_only`` isolation, its
    ModelRun (status ``running``, ``parent_model_run_id`` linked) and the task prompt as
    the child's first message (``audit_only``; metadata ``parent_call_id`` and
    ``subagent_batch_id``).  Everything the child records afterwards defaults to
    ``audit_only`` too; nothing reaches the parent until promoted.

    Raises:
        NotFoundError: unknown conversation or parent participant.
    """
    rec = Recorder(source, scope)
    rec.participant(conversation_id, parent_participant_id)
    child = rec.add_participant(
        conversation_id, name, provider=provider, model=model, runtime_kind=RuntimeKind.SUBAGENT_CHILD,
        parent_participant_id=parent_participant_id, tool_names=tool_names,
        isolation_policy=RuntimeIsolationPolicy.CHILD_AUDIT_ONLY,
    )
    run = rec.start_model_run(
        conversation_id, participant_id=child.id, provider=provider, model=model, branch_id=branch_id,
        runtime_kind=RuntimeKind.SUBAGENT_CHILD, parent_model_run_id=parent_model_run_id,
    )
    meta = {k: v for k, v in (("parent_call_id", parent_call_id), ("subagent_batch_id", subagent_batch_id)) if v is not None}
    task_message = rec.record_message(
        conversation_id, Role.USER, task, branch_id=branch_id, participant_id=child.id, model_run_id=run.id,
        visibility=Visibility.AUDIT_ONLY, runtime_kind=RuntimeKind.SUBAGENT_CHILD, metadata=meta,
    )
    return SubagentStart(participant=child, run=run, task_message=task_message)


def scheduled_turn(
    source: HasRuntime,
    scope: Scope,
    conversation_id: str,
    *,
    job_id: str,
    prompt: str,
    participant_id: str | None = None,
    branch_id: str | None = None,
    provider: str | None = None,
    model: str | None = None,
) -> ScheduledTurn:
    """A scheduled job's turn: the ordinary chat path, created by the job (seed 000 §4.13).

    Records the job's prompt as a user chat message (``runtime_kind`` ``scheduled_job``,
    metadata ``job_id``) and starts the ModelRun that answers it (``job_id``,
    ``runtime_kind`` ``scheduled_job``).  The request is then assembled exactly like a
    chat turn (``Ledger.assemble(..., runtime_kind=RuntimeKind.SCHEDULED_JOB)``).

    Raises:
        NotFoundError: unknown conversation, branch or participant.
    """
    rec = Recorder(source, scope)
    message = rec.record_message(
        conversation_id, Role.USER, prompt, branch_id=branch_id, participant_id=None, kind=MessageKind.CHAT,
        runtime_kind=RuntimeKind.SCHEDULED_JOB, metadata={"job_id": job_id},
    )
    run = rec.start_model_run(
        conversation_id, participant_id=participant_id, provider=provider, model=model, branch_id=message.branch_id,
        runtime_kind=RuntimeKind.SCHEDULED_JOB, job_id=job_id,
    )
    return ScheduledTurn(message=message, run=run)
