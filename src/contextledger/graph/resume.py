"""Restore runtime state from ContinuationCheckpoint records (seed 000 §4.1 rule 7, §4.13).

A parent resume after subagents must not search the transcript to find out what it was
waiting for: the newest :class:`ContinuationCheckpoint` on the branch lineage names the
pending tool calls, the subagent batch and runs, the parent message / job / tool call to
resume, the retry contract and the promoted child reports.  :func:`resume_state` reads
exactly those records (by the ids the checkpoint holds) plus the newest
:class:`SkillState`, and nothing else.  Same stored records ⇒ the same ``ResumeState``,
before and after a restart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from contextledger.records.models import (
    ContinuationCheckpoint,
    Message,
    ModelRun,
    SkillState,
    ToolCall,
)
from contextledger.store.base import Scope

if TYPE_CHECKING:
    from contextledger.runtime import HasRuntime

__all__ = ["ResumeState", "resume_state"]


@dataclass(frozen=True, kw_only=True)
class ResumeState:
    """The runtime state a continuation resumes from.

    Attributes:
        checkpoint: the newest checkpoint on the lineage for the participant, or ``None``.
        pending_calls: the checkpoint's ``pending_call_ids`` as ToolCall records with
            their *current* status (a call resolved since the checkpoint shows so), in
            the checkpoint's order; ids with no recorded call are in ``missing_call_ids``.
        subagent_runs: the checkpoint's ``subagent_run_ids`` as ModelRun records (status
            ``running`` / ``completed`` / ``failed`` / ``timeout``), in checkpoint order.
        promoted_reports: the messages named by ``promoted_report_ids``, in that order.
        skill_state: the newest SkillState on the lineage for the participant.
    """

    conversation_id: str
    branch_id: str
    participant_id: str | None
    checkpoint: ContinuationCheckpoint | None
    pending_calls: tuple[ToolCall, ...] = ()
    missing_call_ids: tuple[str, ...] = ()
    subagent_batch_id: str | None = None
    subagent_runs: tuple[ModelRun, ...] = ()
    parent_message_id: str | None = None
    parent_job_id: str | None = None
    parent_tool_call_id: str | None = None
    retry_contract: dict[str, Any] = field(default_factory=dict)
    promoted_reports: tuple[Message, ...] = ()
    skill_state: SkillState | None = None

    @property
    def unresolved_call_ids(self) -> tuple[str, ...]:
        """Provider call ids of the pending calls still without a result."""
        return tuple(c.call_id for c in self.pending_calls if c.status.unresolved)

    @property
    def children_done(self) -> bool:
        """Whether every subagent run of the batch reached a terminal state."""
        from contextledger.ingest.recorder import TERMINAL_RUN_STATUSES

        return all(r.status in TERMINAL_RUN_STATUSES for r in self.subagent_runs)


def _owned_by(record: ContinuationCheckpoint | SkillState, participant_id: str | None) -> bool:
    if participant_id is None:
        return True
    if isinstance(record, ContinuationCheckpoint):
        return participant_id in (record.participant_id, record.owner_participant_id)
    return record.participant_id == participant_id


def resume_state(
    source: HasRuntime,
    scope: Scope,
    conversation_id: str,
    *,
    branch_id: str | None = None,
    participant_id: str | None = None,
) -> ResumeState:
    """The runtime state to resume ``conversation_id`` from (see module docstring).

    Args:
        branch_id: the branch to resume (default: the conversation's active branch);
            checkpoints and skill states are read from its lineage only.
        participant_id: only checkpoints / skill states of this participant (a
            checkpoint matches on ``participant_id`` or ``owner_participant_id``).

    Raises:
        NotFoundError: unknown conversation or branch in scope.
    """
    store = source.runtime.store
    with store.reader() as conn:
        conv = store.get_conversation(scope, conversation_id, conn)
        branch = branch_id or conv.active_branch_id
        store.get_branch(scope, branch, conn)
        segments = store.lineage(scope, branch, conn)
        checkpoints = [c for c in store.checkpoints(scope, conversation_id, segments, conn) if _owned_by(c, participant_id)]
        skills = [s for s in store.skill_states(scope, conversation_id, segments, conn) if _owned_by(s, participant_id)]
        ckpt = max(checkpoints, key=lambda c: (c.seq, c.id)) if checkpoints else None
        skill = max(skills, key=lambda s: (s.seq, s.id)) if skills else None
        if ckpt is None:
            return ResumeState(conversation_id=conversation_id, branch_id=branch, participant_id=participant_id, checkpoint=None, skill_state=skill)
        calls = {c.call_id: c for c in store.tool_calls(scope, conversation_id, call_ids=ckpt.pending_call_ids, conn=conn)} if ckpt.pending_call_ids else {}
        reports = {m.id: m for m in store.messages(scope, conversation_id, ids=ckpt.promoted_report_ids, conn=conn)} if ckpt.promoted_report_ids else {}
    runs = {r.id: r for r in store.model_runs(scope, conversation_id)} if ckpt.subagent_run_ids else {}
    return ResumeState(
        conversation_id=conversation_id,
        branch_id=branch,
        participant_id=participant_id,
        checkpoint=ckpt,
        pending_calls=tuple(calls[i] for i in ckpt.pending_call_ids if i in calls),
        missing_call_ids=tuple(i for i in ckpt.pending_call_ids if i not in calls),
        subagent_batch_id=ckpt.subagent_batch_id,
        subagent_runs=tuple(runs[i] for i in ckpt.subagent_run_ids if i in runs),
        parent_message_id=ckpt.parent_message_id,
        parent_job_id=ckpt.parent_job_id,
        parent_tool_call_id=ckpt.parent_tool_call_id,
        retry_contract=dict(ckpt.retry_contract),
        promoted_reports=tuple(reports[i] for i in ckpt.promoted_report_ids if i in reports),
        skill_state=skill,
    )
