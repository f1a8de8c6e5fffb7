"""The unit of work of the SQL store: every write of one :class:`Writer` commits or rolls
back together.

Sequence numbers are allocated from ``conversations.next_seq`` inside the write
transaction, so concurrent writers (threads or processes) never collide; the branch
counters are kept exact by :class:`~contextledger.store.counter_writes.CounterWrites`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from contextledger.errors import InputError, NotFoundError
from contextledger.memory.terms import memory_terms
from contextledger.records.models import (
    Branch,
    ContextAssembly,
    ContinuationCheckpoint,
    Conversation,
    Message,
    ModelRun,
    Participant,
    PolicyDecision,
    SkillState,
    Tenant,
    ToolArtifact,
    ToolCall,
    ToolMemory,
)
from contextledger.store import schema as S
from contextledger.store.base import (
    Scope,
    require_scope,
)
from contextledger.store.clauses import (
    allocate_statement,
    check_lengths,
    conversation_exists_statement,
    insert_ignore_statement,
    insert_statement,
    update_statement,
)
from contextledger.store.codec import iso_utc, record_body
from contextledger.store.counter_writes import CounterWrites

__all__ = ["WRITER_FLAG", "HasDialect", "Writer"]

WRITER_FLAG = "contextledger.writer"
"""``Connection.info`` key marking a connection inside :meth:`SqlStore.writer`."""


class HasDialect(Protocol):
    """What a :class:`Writer` needs of its store: the SQL dialect name."""

    dialect: str


class Writer:
    """A unit of work: every write made through one ``Writer`` commits or rolls back together.

    Obtain one with :meth:`SqlStore.writer`.  Methods raise :class:`ScopeError` when a
    record's ``tenant_id`` differs from the writer's scope.
    """

    def __init__(self, store: HasDialect, conn: Connection, scope: Scope | None) -> None:
        self.store = store
        self.conn = conn
        self.scope = require_scope(scope)
        self._conversations: set[str] = set()
        self._counters = CounterWrites(conn, self.scope.tenant_id, store.dialect)

    def flush_counters(self) -> None:
        """Apply the counts of the rows inserted so far to ``branch_counters`` (called
        before commit, before a fork reads them and before a lineage total is read inside
        this transaction)."""
        self._counters.flush()

    def rebuild_counters(self, conversation_id: str) -> None:
        """Recompute every ``branch_counters`` row of a conversation from its rows (after
        rows were written around the Writer, e.g. a bulk load with ``conn.execute``).
        O(history) — a repair, never on the assembly path."""
        self._counters.rebuild(conversation_id)

    # -- helpers -------------------------------------------------------------------
    def _check(self, record: Any) -> None:
        tenant = getattr(record, "tenant_id", self.scope.tenant_id)
        if tenant != self.scope.tenant_id:
            from contextledger.errors import ScopeError

            raise ScopeError(
                f"record {getattr(record, 'id', '?')} belongs to tenant {tenant!r}, "
                f"outside the writer's scope {self.scope.tenant_id!r}"
            )

    def _require_conversation(self, conversation_id: str) -> None:
        """Deny writes into a conversation that is not the scope tenant's (checked once
        per conversation and transaction).

        Raises:
            NotFoundError: no such conversation in the writer's tenant.
        """
        if conversation_id in self._conversations:
            return
        row = self.conn.execute(conversation_exists_statement(), {"p_id": conversation_id, "p_tenant": self.scope.tenant_id}).first()
        if row is None:
            raise NotFoundError("conversation", conversation_id)
        self._conversations.add(conversation_id)

    def _child(self, record: Any) -> None:
        """Checks before inserting a record that belongs to a conversation: same tenant,
        and the conversation exists in that tenant."""
        self._check(record)
        self._require_conversation(record.conversation_id)

    def _update(self, table: sa.Table, record_id: str, kind: str, values: dict[str, Any]) -> None:
        """Update one row of the writer's tenant.

        Raises:
            NotFoundError: no row ``record_id`` in this tenant (another tenant's row is
                never touched).
        """
        row = self.conn.execute(update_statement(table), {"p_id": record_id, "p_tenant": self.scope.tenant_id, **values}).first()
        if row is None:
            raise NotFoundError(kind, record_id)

    def _insert(self, table: sa.Table, values: dict[str, Any], *, ignore_conflict: bool = False) -> bool:
        # statements built once per table, values bound as parameters: SQLAlchemy reuses
        # the compiled statement instead of building and hashing a new one per row
        check_lengths(table, values)
        if ignore_conflict:
            # RETURNING, not rowcount: psycopg reports rowcount -1 for a skipped
            # ``ON CONFLICT DO NOTHING``, which would read as "inserted".
            return self.conn.execute(insert_ignore_statement(self.store.dialect, table), values).first() is not None
        self.conn.execute(insert_statement(table), values)
        return True

    # -- tenants, conversations, branches ------------------------------------------
    def ensure_tenant(self, name: str | None = None) -> Tenant:
        """Create the scope's tenant row if missing and return it."""
        row = self.conn.execute(
            sa.select(S.tenants.c.body).where(S.tenants.c.id == self.scope.tenant_id)
        ).first()
        if row is not None:
            return Tenant.model_validate(row.body)
        tenant = Tenant(id=self.scope.tenant_id, name=name or self.scope.tenant_id, created_at=datetime.now(UTC))
        self._insert(S.tenants, {"id": tenant.id, "name": tenant.name, "body": record_body(tenant)}, ignore_conflict=True)
        return tenant

    def add_conversation(self, conv: Conversation, root_branch: Branch) -> bool:
        """Insert a conversation and its root branch.  Returns ``False`` (and writes
        nothing) when a conversation with the same ``content_key`` already exists."""
        self._check(conv)
        self.ensure_tenant()
        inserted = self._insert(
            S.conversations,
            {
                "id": conv.id,
                "tenant_id": conv.tenant_id,
                "user_id": conv.user_id,
                "title": conv.title,
                "content_key": conv.content_key,
                "next_seq": 0,
                "created_at": iso_utc(conv.created_at),
                "body": record_body(conv),
            },
            ignore_conflict=conv.content_key is not None,
        )
        if inserted:
            self._conversations.add(conv.id)
            self.add_branch(root_branch)
        return inserted

    def update_conversation(self, conv: Conversation) -> None:
        """Replace a conversation's body (title, active branch, metadata)."""
        self._check(conv)
        self._update(S.conversations, conv.id, "conversation", {"title": conv.title, "body": record_body(conv)})

    def allocate_seq(self, conversation_id: str, count: int = 1) -> int:
        """Reserve ``count`` consecutive sequence numbers; returns the first.

        Raises:
            NotFoundError: no such conversation in scope.
        """
        row = self.conn.execute(
            allocate_statement(), {"p_id": conversation_id, "p_tenant": self.scope.tenant_id, "p_count": count}
        ).first()
        if row is None:
            raise NotFoundError("conversation", conversation_id)
        return int(row.next_seq) - count + 1

    def add_branch(self, branch: Branch) -> None:
        """Insert a branch (fork without copying) and its counters row: what it inherits
        from its ancestors is computed now, from the parent's counters (store/counters.py)."""
        self._child(branch)
        self._counters.add_branch(
            branch,
            lambda: self._insert(
                S.branches,
                {
                    "id": branch.id,
                    "tenant_id": branch.tenant_id,
                    "conversation_id": branch.conversation_id,
                    "parent_branch_id": branch.parent_branch_id,
                    "fork_seq": branch.fork_seq,
                    "body": record_body(branch),
                },
            ),
        )

    def add_participant(self, p: Participant) -> None:
        """Insert a participant."""
        self._child(p)
        self._insert(
            S.participants,
            {"id": p.id, "tenant_id": p.tenant_id, "conversation_id": p.conversation_id, "name": p.name, "body": record_body(p)},
        )

    # -- transcript ------------------------------------------------------------------
    @staticmethod
    def message_row(m: Message) -> dict[str, Any]:
        """The ``messages`` row of ``m``."""
        return {
            "id": m.id,
            "tenant_id": m.tenant_id,
            "conversation_id": m.conversation_id,
            "branch_id": m.branch_id,
            "seq": m.seq,
            "role": m.role.value,
            "kind": m.kind.value,
            "participant_id": m.participant_id,
            "visibility": m.visibility.value,
            "token_count": m.token_count,
            "content_key": m.content_key,
            "body": record_body(m),
        }

    def add_message(self, m: Message) -> bool:
        """Insert a message; returns ``False`` when its ``content_key`` was already recorded."""
        self._child(m)
        inserted = self._insert(S.messages, self.message_row(m), ignore_conflict=m.content_key is not None)
        if inserted:
            self._counters.count(m.conversation_id, m.branch_id, m.seq, "message", m.token_count)
        return inserted

    def add_model_run(self, run: ModelRun) -> None:
        """Insert a model run."""
        self._child(run)
        self._insert(
            S.model_runs,
            {
                "id": run.id,
                "tenant_id": run.tenant_id,
                "conversation_id": run.conversation_id,
                "branch_id": run.branch_id,
                "participant_id": run.participant_id,
                "body": record_body(run),
            },
        )

    @staticmethod
    def tool_call_row(call: ToolCall) -> dict[str, Any]:
        """The ``tool_calls`` row of ``call``."""
        return {
            "id": call.id,
            "tenant_id": call.tenant_id,
            "conversation_id": call.conversation_id,
            "branch_id": call.branch_id,
            "seq": call.seq,
            "call_id": call.call_id,
            "tool_name": call.tool_name,
            "status": call.status.value,
            "message_id": call.message_id,
            "participant_id": call.participant_id,
            "body": record_body(call),
        }

    def add_tool_call(self, call: ToolCall) -> bool:
        """Insert a tool call; ``False`` when its ``call_id`` is already recorded (idempotent)."""
        self._child(call)
        return self._insert(S.tool_calls, self.tool_call_row(call), ignore_conflict=True)

    def update_tool_call(self, call: ToolCall) -> None:
        """Replace a tool call's status/body."""
        self._check(call)
        self._update(S.tool_calls, call.id, "tool call", {"status": call.status.value, "body": record_body(call)})

    @staticmethod
    def artifact_row(a: ToolArtifact) -> dict[str, Any]:
        """The ``tool_artifacts`` row of ``a``."""
        return {
            "id": a.id,
            "tenant_id": a.tenant_id,
            "conversation_id": a.conversation_id,
            "branch_id": a.branch_id,
            "seq": a.seq,
            "call_id": a.call_id,
            "tool_name": a.tool_name,
            "status": a.status.value,
            "sha256": a.sha256,
            "size_bytes": a.size_bytes,
            "result_tokens": a.result_tokens,
            "blob_key": a.blob_key,
            "inline_text": a.inline_text,
            "visibility": a.visibility_scope.value,
            "owner_participant_id": a.owner_participant_id,
            "body": record_body(a),
        }

    def add_artifact(self, a: ToolArtifact) -> bool:
        """Insert a tool artifact; ``False`` when one for the same ``call_id`` exists."""
        self._child(a)
        inserted = self._insert(S.tool_artifacts, self.artifact_row(a), ignore_conflict=True)
        if inserted:
            self._counters.count(a.conversation_id, a.branch_id, a.seq, "artifact", a.result_tokens)
        return inserted

    def update_artifact(self, a: ToolArtifact) -> None:
        """Replace an artifact's body (status, visibility, retention)."""
        self._check(a)
        self._update(
            S.tool_artifacts, a.id, "artifact", {"status": a.status.value, "visibility": a.visibility_scope.value, "body": record_body(a)}
        )

    def _memory_values(self, m: ToolMemory) -> dict[str, Any]:
        return {
            "artifact_id": m.source_artifact_ids[0] if m.source_artifact_ids else None,
            "subject_key": m.subject_key,
            "resolution_state": m.resolution_state.value,
            "visibility": m.visibility_scope.value,
            "owner_participant_id": m.owner_participant_id,
            "token_count": m.token_count,
            "body": record_body(m),
        }

    def _memory_row(self, m: ToolMemory) -> dict[str, Any]:
        return {"id": m.id, "tenant_id": m.tenant_id, "conversation_id": m.conversation_id, "branch_id": m.branch_id, "seq": m.seq, **self._memory_values(m)}

    @staticmethod
    def _term_rows(m: ToolMemory) -> list[dict[str, Any]]:
        return [{"memory_id": m.id, "term": t, "tenant_id": m.tenant_id, "conversation_id": m.conversation_id, "branch_id": m.branch_id, "seq": m.seq} for t in memory_terms(m)]

    def add_memory(self, m: ToolMemory) -> None:
        """Insert a tool memory."""
        self._child(m)
        self._insert(S.tool_memories, self._memory_row(m))
        self._counters.count(m.conversation_id, m.branch_id, m.seq, "memory", 0)
        terms = self._term_rows(m)
        if terms:
            self.conn.execute(insert_statement(S.memory_terms), terms)

    def add_new_records(
        self,
        *,
        messages: Sequence[Message] = (),
        calls: Sequence[ToolCall] = (),
        artifacts: Sequence[ToolArtifact] = (),
        memories: Sequence[ToolMemory] = (),
    ) -> None:
        """Insert records that are new in bulk: one multi-row statement per table (the
        same rows and counters as :meth:`add_message`, :meth:`add_tool_call`,
        :meth:`add_artifact` and :meth:`add_memory`, one by one).  The caller guarantees
        fresh ids, no ``content_key`` and no ``call_id`` recorded before (a conflict
        raises instead of being skipped).

        Raises:
            ScopeError: a record of another tenant.  NotFoundError: an unknown
            conversation.  sqlalchemy.exc.IntegrityError: a duplicate.
        """
        for batch in (messages, calls, artifacts, memories):
            for r in batch:
                self._child(r)
        for table, rows in (
            (S.messages, [self.message_row(m) for m in messages]),
            (S.tool_calls, [self.tool_call_row(c) for c in calls]),
            (S.tool_artifacts, [self.artifact_row(a) for a in artifacts]),
            (S.tool_memories, [self._memory_row(m) for m in memories]),
            (S.memory_terms, [t for m in memories for t in self._term_rows(m)]),
        ):
            if rows:
                for row in rows:
                    check_lengths(table, row)
                self.conn.execute(insert_statement(table), rows)
        for m in messages:
            self._counters.count(m.conversation_id, m.branch_id, m.seq, "message", m.token_count)
        for a in artifacts:
            self._counters.count(a.conversation_id, a.branch_id, a.seq, "artifact", a.result_tokens)
        for mem in memories:
            self._counters.count(mem.conversation_id, mem.branch_id, mem.seq, "memory", 0)

    def update_memory(self, m: ToolMemory) -> None:
        """Replace a memory (links, resolution state, repair attempts).  Its branch and
        seq are its place in the lineage and never change.

        Raises:
            NotFoundError: no such memory in the writer's tenant.
            InputError: ``m`` names another branch or seq than the stored memory.
        """
        self._check(m)
        t = S.tool_memories
        row = self.conn.execute(
            t.update()
            .where(t.c.id == m.id, t.c.tenant_id == self.scope.tenant_id, t.c.branch_id == m.branch_id, t.c.seq == m.seq)
            .values(**self._memory_values(m))
            .returning(t.c.id)
        ).first()
        if row is None:
            found = self.conn.execute(sa.select(t.c.id).where(t.c.id == m.id, t.c.tenant_id == self.scope.tenant_id)).first()
            if found is None:
                raise NotFoundError("memory", m.id)
            raise InputError(f"memory {m.id}: branch_id and seq cannot change")

    def add_skill_state(self, s: SkillState) -> None:
        """Insert a skill state snapshot."""
        self._child(s)
        self._insert(
            S.skill_states,
            {"id": s.id, "tenant_id": s.tenant_id, "conversation_id": s.conversation_id, "branch_id": s.branch_id, "seq": s.seq, "body": record_body(s)},
        )

    def add_checkpoint(self, c: ContinuationCheckpoint) -> None:
        """Insert a continuation checkpoint."""
        self._child(c)
        self._insert(
            S.checkpoints,
            {"id": c.id, "tenant_id": c.tenant_id, "conversation_id": c.conversation_id, "branch_id": c.branch_id, "seq": c.seq, "body": record_body(c)},
        )

    def add_rule(self, rule_id: str, conversation_id: str, branch_id: str | None, seq: int, body: dict[str, Any]) -> bool:
        """Insert a pinned rule/constraint record (idempotent on ``rule_id``)."""
        self._require_conversation(conversation_id)
        return self._insert(
            S.rules,
            {"id": rule_id, "tenant_id": self.scope.tenant_id, "conversation_id": conversation_id, "branch_id": branch_id, "seq": seq, "body": body},
            ignore_conflict=True,
        )

    def add_decision(self, d: PolicyDecision) -> None:
        """Insert a policy decision."""
        self._child(d)
        self._insert(
            S.policy_decisions,
            {"id": d.id, "tenant_id": d.tenant_id, "conversation_id": d.conversation_id, "assembly_id": d.assembly_id, "record_id": d.record_id, "body": record_body(d)},
        )

    def add_assembly(self, a: ContextAssembly, payload: dict[str, Any] | None) -> None:
        """Insert a context assembly and (optionally) the payload it produced."""
        self._child(a)
        self._insert(
            S.assemblies,
            {
                "id": a.id,
                "tenant_id": a.tenant_id,
                "conversation_id": a.conversation_id,
                "branch_id": a.branch_id,
                "participant_id": a.participant_id,
                "created_at": iso_utc(a.created_at),
                "body": record_body(a),
                "payload": payload,
            },
        )

    def annotate_assembly(self, assembly_id: str, fields: dict[str, Any]) -> ContextAssembly:
        """Set top-level fields of a stored assembly record (what became known after it
        was made: the proxy's ``upstream_usage`` and ``proxy`` mode) and return it.  The
        row is locked for the update on PostgreSQL; the payload is never touched.

        Raises:
            NotFoundError: no assembly ``assembly_id`` in the writer's tenant.
            pydantic.ValidationError: ``fields`` that are not fields of the record.
        """
        t = S.assemblies
        row = self.conn.execute(sa.select(t.c.body).where(t.c.id == assembly_id, t.c.tenant_id == self.scope.tenant_id).with_for_update()).first()
        if row is None:
            raise NotFoundError("assembly", assembly_id)
        record = ContextAssembly.model_validate({**row.body, **fields})
        self._update(t, assembly_id, "assembly", {"body": record_body(record)})
        return record
