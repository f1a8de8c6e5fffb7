"""Run state a :class:`~contextledger.ingest.recorder.Recorder` records besides messages
and tool results: model runs (seed 000 §4.13, §4.14), skill states, continuation
checkpoints and policy decisions outside an assembly (seed 000 §4.5, §4.6).

Each public method is one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from contextledger.errors import InputError, NotFoundError
from contextledger.ids import new_id
from contextledger.ingest.durable import TERMINAL_RUN_STATUSES
from contextledger.records.enums import RuntimeKind, Visibility
from contextledger.records.models import (
    ContinuationCheckpoint,
    Conversation,
    ModelRun,
    PolicyDecision,
    SkillState,
)

if TYPE_CHECKING:
    from contextledger.runtime import Runtime
    from contextledger.store.base import Scope
    from contextledger.store.sql import SqlStore

__all__ = ["RunStateRecording"]


def _now() -> datetime:
    return datetime.now(UTC)


class RunStateRecording:
    """The run-state half of :class:`~contextledger.ingest.recorder.Recorder` (a base
    class: it needs the recorder's ``runtime``, ``store`` and ``scope``)."""

    runtime: Runtime
    store: SqlStore
    scope: Scope

    def _branch_of(self, conv: Conversation, branch_id: str | None) -> str:
        return branch_id or conv.active_branch_id

    def start_model_run(
        self,
        conversation_id: str,
        *,
        participant_id: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        branch_id: str | None = None,
        runtime_kind: RuntimeKind = RuntimeKind.CHAT,
        assembly_id: str | None = None,
        job_id: str | None = None,
        parent_model_run_id: str | None = None,
    ) -> ModelRun:
        """Record the start of one provider-facing generation attempt (status ``running``).

        ``job_id`` names the scheduled job that created the turn; ``parent_model_run_id``
        the parent run of a child subagent (seed 000 §4.13).
        """
        conv = self.store.get_conversation(self.scope, conversation_id)
        run = ModelRun(
            id=new_id("run"),
            tenant_id=self.scope.tenant_id,
            conversation_id=conversation_id,
            branch_id=self._branch_of(conv, branch_id),
            participant_id=participant_id,
            provider=provider,
            model=model,
            runtime_kind=runtime_kind,
            assembly_id=assembly_id,
            job_id=job_id,
            parent_model_run_id=parent_model_run_id,
            status="running",
            started_at=_now(),
        )
        with self.store.writer(self.scope) as w:
            w.add_model_run(run)
        return run

    def finish_model_run(self, conversation_id: str, run_id: str, status: str = "completed", *, usage: Mapping[str, Any] | None = None) -> ModelRun:
        """Close a run with a terminal ``status`` (``completed`` / ``failed`` / ``timeout``).

        Raises:
            NotFoundError: unknown run in this conversation.
            InputError: ``status`` is not terminal, or the run is already finished.
        """
        from contextledger.graph._writes import update_model_run

        if status not in TERMINAL_RUN_STATUSES:
            raise InputError(f"run status {status!r} is not terminal; expected one of {sorted(TERMINAL_RUN_STATUSES)}")
        runs = [r for r in self.store.model_runs(self.scope, conversation_id) if r.id == run_id]
        if not runs:
            raise NotFoundError("model run", run_id)
        run = runs[0]
        if run.status in TERMINAL_RUN_STATUSES:
            raise InputError(f"model run {run_id} already finished ({run.status})")
        done = run.model_copy(update={"status": status, "finished_at": _now(), "usage": dict(usage or run.usage)})
        with self.store.writer(self.scope) as w:
            update_model_run(w, done)
        return done


    # -- runtime state -----------------------------------------------------------------
    def record_skill_state(
        self,
        conversation_id: str,
        *,
        loaded_skills: Sequence[str] = (),
        active_profile: str | None = None,
        usable_tools: Sequence[str] = (),
        integration_state: Mapping[str, Any] | None = None,
        participant_id: str | None = None,
        branch_id: str | None = None,
        visibility: Visibility = Visibility.BRANCH,
        model_run_id: str | None = None,
    ) -> SkillState:
        """Record the skills, profile and usable tools visible to a run (a first-class
        record on the branch; :func:`contextledger.graph.resume.resume_state` restores the
        newest one)."""
        conv = self.store.get_conversation(self.scope, conversation_id)
        with self.store.writer(self.scope) as w:
            s = SkillState(
                id=new_id("skill"),
                tenant_id=self.scope.tenant_id,
                conversation_id=conversation_id,
                branch_id=self._branch_of(conv, branch_id),
                seq=w.allocate_seq(conversation_id),
                participant_id=participant_id,
                model_run_id=model_run_id,
                loaded_skills=tuple(loaded_skills),
                active_profile=active_profile,
                usable_tools=tuple(sorted(usable_tools)),
                integration_state=dict(integration_state or {}),
                visibility_scope=visibility,
                created_at=_now(),
            )
            w.add_skill_state(s)
        return s

    def record_checkpoint(self, conversation_id: str, **fields: Any) -> ContinuationCheckpoint:
        """Record a ContinuationCheckpoint (pending calls, subagent batch, retry contract).

        ``fields`` are ContinuationCheckpoint fields (``pending_call_ids``,
        ``subagent_batch_id``, ``retry_contract`` …); ``branch_id`` defaults to the active
        branch and ``owner_participant_id`` to ``participant_id`` (a checkpoint is
        participant-private run state by default, seed 000 §4.9).

        Raises:
            NotFoundError: unknown conversation or branch.
        """
        conv = self.store.get_conversation(self.scope, conversation_id)
        branch_id = fields.pop("branch_id", None) or conv.active_branch_id
        self.store.get_branch(self.scope, branch_id)
        if fields.get("owner_participant_id") is None and fields.get("participant_id") is not None:
            fields["owner_participant_id"] = fields["participant_id"]
        for key in ("pending_call_ids", "subagent_run_ids", "promoted_report_ids"):
            if key in fields:
                fields[key] = tuple(fields[key])
        with self.store.writer(self.scope) as w:
            c = ContinuationCheckpoint(
                id=new_id("ckpt"),
                tenant_id=self.scope.tenant_id,
                conversation_id=conversation_id,
                branch_id=branch_id,
                seq=w.allocate_seq(conversation_id),
                created_at=_now(),
                **fields,
            )
            w.add_checkpoint(c)
        return c

    def record_decision(self, conversation_id: str, **fields: Any) -> PolicyDecision:
        """Record a PolicyDecision outside an assembly (e.g. a promotion)."""
        d = PolicyDecision(id=new_id("dec"), tenant_id=self.scope.tenant_id, conversation_id=conversation_id, created_at=_now(), **fields)
        with self.store.writer(self.scope) as w:
            w.add_decision(d)
        return d
