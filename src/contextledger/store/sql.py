"""The SQL store: one implementation for SQLite and PostgreSQL (SQLAlchemy Core).

Backend differences are confined to connection set-up (SQLite: WAL, busy timeout,
``BEGIN IMMEDIATE`` for writes; PostgreSQL: psycopg 3) and the insert-or-ignore dialect.
Sequence numbers are allocated from ``conversations.next_seq`` inside the write
transaction, so concurrent writers (threads or processes) never collide.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from pydantic import BaseModel, ValidationError
from sqlalchemy.engine import Connection, Engine

from contextledger.errors import BackendError, InputError, NotFoundError
from contextledger.memory.terms import memory_terms
from contextledger.records.enums import ToolCallStatus
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
from contextledger.store import counters as K
from contextledger.store import schema as S
from contextledger.store import textguard
from contextledger.store.base import (
    CAPABILITIES,
    LineageSegment,
    Scope,
    SubjectEntry,
    require_scope,
)
from contextledger.store.blobs import BlobStore

__all__ = ["ConversationSummary", "SqlStore", "Writer"]

R = TypeVar("R", bound=BaseModel)

_WRITER_FLAG = "contextledger.writer"
"""``Connection.info`` key marking a connection inside :meth:`SqlStore.writer`."""

DEFAULT_INLINE_THRESHOLD_BYTES = 4096
"""Payloads above this many bytes go to the blob store (seed 001 §6 problem 2)."""

SQLITE_CACHE_KIB = 16384
"""Page cache of each SQLite connection, in KiB (SQLite's default is 2,000).  One
assembly reads ≈ 1,000–2,000 pages (the working set alone scans 600 memory rows of about
one page each); with the default cache those pages were read again from the file at
every assembly.  The cache grows only as pages are read."""


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat()


def _body(record: BaseModel) -> dict[str, Any]:
    return record.model_dump(mode="json")


DECODE_CACHE_SIZE = 4096
"""Decoded records kept per process by :func:`_decode` (least recently used go first)."""

_CACHED_MODELS: frozenset[type[BaseModel]] = frozenset(
    {Conversation, Branch, Participant, Message, ToolCall, ToolArtifact, ToolMemory, SkillState, ContinuationCheckpoint}
)


@lru_cache(maxsize=DECODE_CACHE_SIZE)
def _decode_cached(model: type[BaseModel], text: str) -> BaseModel:
    return _decode_text(model, text)


def _decode_text(model: type[R], text: str) -> R:
    try:
        return model.model_validate_json(text)
    except ValidationError:
        # what the JSON parser of pydantic refuses but ``json`` reads (``NaN``, lone
        # surrogates): the original decoding path, which reports real shape errors
        return model.model_validate(json.loads(text))


def _decode(model: type[R], body: Any) -> R:
    """One record from a stored ``body``: JSON text (parsed and validated in one pass by
    pydantic), or an already decoded dict.  Records that an assembly reads again and
    again (messages, calls, artifacts, memories, conversations, branches, participants,
    runtime state) are memoised by their exact JSON text in a process-wide LRU of
    :data:`DECODE_CACHE_SIZE` entries: the same bytes always give the same record, and an
    updated record has new bytes, so a cached record is never out of date.  Records are
    frozen; callers must not mutate their ``dict`` fields in place.

    Raises:
        pydantic.ValidationError: the body does not fit ``model``.
    """
    if not isinstance(body, str):
        return model.model_validate(body)
    if model in _CACHED_MODELS:
        return _decode_cached(model, body)  # type: ignore[return-value]
    return _decode_text(model, body)


def _segments_clause(table: sa.Table, segments: Sequence[LineageSegment]) -> sa.ColumnElement[bool]:
    clauses = []
    for seg in segments:
        if seg.max_seq is None:
            clauses.append(table.c.branch_id == seg.branch_id)
        else:
            clauses.append(sa.and_(table.c.branch_id == seg.branch_id, table.c.seq <= seg.max_seq))
    if not clauses:
        return sa.false()
    return sa.or_(*clauses)


def _newest_per_segment(
    stmt: sa.Select[Any], table: sa.Table, segments: Sequence[LineageSegment], last: int, order: tuple[sa.Column[Any], ...]
) -> sa.Select[Any]:
    """The newest ``last`` rows of a multi-segment lineage, as one query that reads at
    most ``last`` rows per segment: a ``UNION ALL`` of per-branch windows, each an
    ordered backward range scan of the ``(tenant_id, conversation_id, branch_id, seq)``
    index, then the newest ``last`` of their union.  ``stmt`` selects ``body`` with the
    scope and filters applied, but no lineage condition yet."""
    cols = [table.c.body, *order]
    windows = []
    for seg in segments:
        sub = (
            stmt.with_only_columns(*cols)
            .where(_segments_clause(table, [seg]))
            .order_by(*(c.desc() for c in order))
            .limit(last)
            .subquery()
        )
        windows.append(sa.select(*sub.c))
    union = sa.union_all(*windows).subquery()
    return sa.select(union.c.body).order_by(*(union.c[c.name].desc() for c in order)).limit(last)


@cache
def _insert_statement(table: sa.Table) -> sa.Insert:
    return table.insert()


@cache
def _insert_ignore_statement(dialect: str, table: sa.Table) -> Any:
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table).on_conflict_do_nothing().returning(table.c.id)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table).on_conflict_do_nothing().returning(table.c.id)


@cache
def _update_statement(table: sa.Table) -> sa.Update:
    """``UPDATE table SET <the parameters' columns> WHERE id = :p_id AND tenant_id = :p_tenant RETURNING id``."""
    return (
        table.update()
        .where(table.c.id == sa.bindparam("p_id"), table.c.tenant_id == sa.bindparam("p_tenant"))
        .returning(table.c.id)
    )


@cache
def _allocate_statement() -> sa.Update:
    t = S.conversations
    return (
        t.update()
        .where(t.c.id == sa.bindparam("p_id"), t.c.tenant_id == sa.bindparam("p_tenant"))
        .values(next_seq=t.c.next_seq + sa.bindparam("p_count", type_=sa.BigInteger))
        .returning(t.c.next_seq)
    )


@cache
def _conversation_exists_statement() -> sa.Select[Any]:
    t = S.conversations
    return sa.select(t.c.id).where(t.c.id == sa.bindparam("p_id"), t.c.tenant_id == sa.bindparam("p_tenant"))


@dataclass(frozen=True, kw_only=True)
class ConversationSummary:
    """A conversation with its record counts (``contextledger conversations``)."""

    conversation: Conversation
    message_count: int
    tool_call_count: int
    artifact_count: int


class Writer:
    """A unit of work: every write made through one ``Writer`` commits or rolls back together.

    Obtain one with :meth:`SqlStore.writer`.  Methods raise :class:`ScopeError` when a
    record's ``tenant_id`` differs from the writer's scope.
    """

    def __init__(self, store: SqlStore, conn: Connection, scope: Scope | None) -> None:
        self.store = store
        self.conn = conn
        self.scope = require_scope(scope)
        self._conversations: set[str] = set()
        self._pending: dict[str, K.Delta] = {}
        self._locked: set[str] = set()
        self._trees: dict[str, dict[str, K.BranchRow]] = {}

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
        row = self.conn.execute(_conversation_exists_statement(), {"p_id": conversation_id, "p_tenant": self.scope.tenant_id}).first()
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
        row = self.conn.execute(_update_statement(table), {"p_id": record_id, "p_tenant": self.scope.tenant_id, **values}).first()
        if row is None:
            raise NotFoundError(kind, record_id)

    def _insert(self, table: sa.Table, values: dict[str, Any], *, ignore_conflict: bool = False) -> bool:
        # statements built once per table, values bound as parameters: SQLAlchemy reuses
        # the compiled statement instead of building and hashing a new one per row
        if ignore_conflict:
            # RETURNING, not rowcount: psycopg reports rowcount -1 for a skipped
            # ``ON CONFLICT DO NOTHING``, which would read as "inserted".
            return self.conn.execute(_insert_ignore_statement(self.store.dialect, table), values).first() is not None
        self.conn.execute(_insert_statement(table), values)
        return True

    # -- branch counters (store/counters.py) ---------------------------------------
    def _count(self, conversation_id: str, branch_id: str, seq: int, kind: str, tokens: int) -> None:
        delta = self._pending.get(branch_id)
        if delta is None:
            delta = self._pending[branch_id] = K.Delta(conversation_id)
        delta.add(seq, kind, tokens)

    def _lock_conversation(self, conversation_id: str) -> None:
        """PostgreSQL: take the conversation's row lock (held to commit) before reading or
        changing its counters, so they change under one writer at a time."""
        if self.store.dialect != "postgresql" or conversation_id in self._locked:
            return
        t = S.conversations
        self.conn.execute(
            sa.select(t.c.id).where(t.c.id == conversation_id, t.c.tenant_id == self.scope.tenant_id).with_for_update()
        )
        self._locked.add(conversation_id)

    def _tree(self, conversation_id: str) -> dict[str, K.BranchRow]:
        tree = self._trees.get(conversation_id)
        if tree is None:
            t = S.branches
            rows = self.conn.execute(
                sa.select(t.c.id, t.c.parent_branch_id, t.c.fork_seq).where(
                    t.c.tenant_id == self.scope.tenant_id, t.c.conversation_id == conversation_id
                )
            ).all()
            tree = {r.id: K.BranchRow(r.id, r.parent_branch_id, None if r.fork_seq is None else int(r.fork_seq)) for r in rows}
            self._trees[conversation_id] = tree
        return tree

    def flush_counters(self) -> None:
        """Apply the counts of the rows inserted so far to ``branch_counters`` (called
        before commit, before a fork reads them and before a lineage total is read inside
        this transaction)."""
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        for conv in sorted({d.conversation_id for d in pending.values()}):
            self._lock_conversation(conv)
        tenant = self.scope.tenant_id
        for branch_id in sorted(pending):
            delta = pending[branch_id]
            row = self.conn.execute(K.bump_statement(""), K.bump_params(branch_id, tenant, delta.values)).first()
            if row is None:  # no counters row (not expected): build it from the rows, pending ones included
                max_child = self._create_counters(delta.conversation_id, branch_id)
            else:
                max_child = row.max_child_fork_seq
            if max_child is not None:
                late = [r for r in delta.rows if r[0] <= max_child]
                if late:
                    self._propagate(delta.conversation_id, branch_id, late)

    def _propagate(self, conversation_id: str, branch_id: str, rows: Sequence[tuple[int, str, int]]) -> None:
        """Add rows inserted on ``branch_id`` to the inherited counts of every branch whose
        lineage includes them (rows at or below a fork point, inserted after the fork)."""
        tree = self._tree(conversation_id)
        for other in sorted(tree):
            if other == branch_id:
                continue
            limit = next((lim for b, lim in K.lineage_walk(tree, other)[1:] if b == branch_id), -1)
            if limit == -1:
                continue
            delta = K.Delta(conversation_id)
            for seq, kind, tokens in rows:
                if limit is None or seq <= limit:
                    delta.add(seq, kind, tokens)
            if delta.rows:
                self.conn.execute(K.bump_statement("inherited_"), K.bump_params(other, self.scope.tenant_id, delta.values))

    def _inherited(self, conversation_id: str, branch_id: str) -> dict[str, int | None]:
        """Aggregates of ``branch_id``'s lineage without the branch itself, from the
        parent's counters plus a range count of the parent's own rows up to the fork
        point when the fork keeps the parent's older limits, else by a full count."""
        tree = self._tree(conversation_id)
        ancestors = K.lineage_walk(tree, branch_id)[1:]
        if not ancestors:
            return K.empty_aggregates()
        parent_id, fork = ancestors[0]
        tenant = self.scope.tenant_id
        if fork is not None and K.lineage_walk(tree, parent_id)[1:] == ancestors[1:]:
            row = self._counters_row(conversation_id, parent_id)
            own = K.row_values(row, "")
            out = K.row_values(row, "inherited_")
            part = self._own_upto(conversation_id, parent_id, fork, own)
            K.merge_aggregates(out, part)
            return out

        def clause(t: sa.Table) -> sa.ColumnElement[bool]:
            return _segments_clause(t, [LineageSegment(branch_id=b, max_seq=lim) for b, lim in ancestors])

        return K.aggregate(self.conn, tenant, conversation_id, clause)

    def _own_upto(self, conversation_id: str, branch_id: str, fork: int, own: dict[str, int | None]) -> dict[str, int | None]:
        """A branch's own aggregates restricted to ``seq <= fork``: counted directly or as
        the whole minus the part above ``fork``, whichever range is nearer to an end."""
        tenant = self.scope.tenant_id
        lo, hi = own["min_seq"], own["max_seq"]
        if hi is not None and lo is not None and hi - fork < fork - lo:
            above = K.aggregate(self.conn, tenant, conversation_id, lambda t: sa.and_(t.c.branch_id == branch_id, t.c.seq > fork))
            part = dict(own)
            K.merge_aggregates(part, above, sign=-1)
            if above["messages"]:
                m = S.messages
                part["max_seq"] = self.conn.execute(
                    sa.select(sa.func.max(m.c.seq)).where(
                        m.c.tenant_id == tenant, m.c.conversation_id == conversation_id, m.c.branch_id == branch_id, m.c.seq <= fork
                    )
                ).scalar_one()
                if part["messages"] == 0:
                    part["min_seq"] = None
            return part
        return K.aggregate(self.conn, tenant, conversation_id, lambda t: sa.and_(t.c.branch_id == branch_id, t.c.seq <= fork))

    def rebuild_counters(self, conversation_id: str) -> None:
        """Recompute every ``branch_counters`` row of a conversation from its rows (after
        rows were written around the Writer, e.g. a bulk load with ``conn.execute``).
        O(history) — a repair, never on the assembly path."""
        self.flush_counters()
        self._lock_conversation(conversation_id)
        t = S.branch_counters
        self.conn.execute(t.delete().where(t.c.tenant_id == self.scope.tenant_id, t.c.conversation_id == conversation_id))
        self._trees.pop(conversation_id, None)
        tree = self._tree(conversation_id)
        done: set[str] = set()
        for branch_id in sorted(tree):  # a parent's row is built on demand before its children's
            if branch_id not in done and self.conn.execute(
                sa.select(t.c.branch_id).where(t.c.branch_id == branch_id, t.c.tenant_id == self.scope.tenant_id)
            ).first() is None:
                self._create_counters(conversation_id, branch_id)
            done.add(branch_id)

    def _counters_row(self, conversation_id: str, branch_id: str) -> Any:
        t = S.branch_counters
        stmt = sa.select(t).where(t.c.branch_id == branch_id, t.c.tenant_id == self.scope.tenant_id)
        row = self.conn.execute(stmt).first()
        if row is None:
            self._create_counters(conversation_id, branch_id)
            row = self.conn.execute(stmt).one()
        return row

    def _create_counters(self, conversation_id: str, branch_id: str) -> int | None:
        """Insert ``branch_id``'s counters row computed from the rows themselves; returns
        its ``max_child_fork_seq``."""
        tree = self._tree(conversation_id)
        own = K.aggregate(self.conn, self.scope.tenant_id, conversation_id, lambda t: t.c.branch_id == branch_id)
        inherited = self._inherited(conversation_id, branch_id) if branch_id in tree else K.empty_aggregates()
        forks = [K.UNBOUNDED_FORK if b.fork_seq is None else b.fork_seq for b in tree.values() if b.parent_branch_id == branch_id]
        max_child = max(forks) if forks else None
        self.conn.execute(
            S.branch_counters.insert(),
            {
                "branch_id": branch_id,
                "tenant_id": self.scope.tenant_id,
                "conversation_id": conversation_id,
                **own,
                **{f"inherited_{k}": v for k, v in inherited.items()},
                "max_child_fork_seq": max_child,
            },
        )
        return max_child

    # -- tenants, conversations, branches ------------------------------------------
    def ensure_tenant(self, name: str | None = None) -> Tenant:
        """Create the scope's tenant row if missing and return it."""
        row = self.conn.execute(
            sa.select(S.tenants.c.body).where(S.tenants.c.id == self.scope.tenant_id)
        ).first()
        if row is not None:
            return Tenant.model_validate(row.body)
        tenant = Tenant(id=self.scope.tenant_id, name=name or self.scope.tenant_id, created_at=datetime.now(UTC))
        self._insert(S.tenants, {"id": tenant.id, "name": tenant.name, "body": _body(tenant)}, ignore_conflict=True)
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
                "created_at": _iso(conv.created_at),
                "body": _body(conv),
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
        self._update(S.conversations, conv.id, "conversation", {"title": conv.title, "body": _body(conv)})

    def allocate_seq(self, conversation_id: str, count: int = 1) -> int:
        """Reserve ``count`` consecutive sequence numbers; returns the first.

        Raises:
            NotFoundError: no such conversation in scope.
        """
        row = self.conn.execute(
            _allocate_statement(), {"p_id": conversation_id, "p_tenant": self.scope.tenant_id, "p_count": count}
        ).first()
        if row is None:
            raise NotFoundError("conversation", conversation_id)
        return int(row.next_seq) - count + 1

    def add_branch(self, branch: Branch) -> None:
        """Insert a branch (fork without copying) and its counters row: what it inherits
        from its ancestors is computed now, from the parent's counters (store/counters.py)."""
        self._child(branch)
        conv = branch.conversation_id
        self.flush_counters()
        self._lock_conversation(conv)
        self._insert(
            S.branches,
            {
                "id": branch.id,
                "tenant_id": branch.tenant_id,
                "conversation_id": conv,
                "parent_branch_id": branch.parent_branch_id,
                "fork_seq": branch.fork_seq,
                "body": _body(branch),
            },
        )
        self._trees.pop(conv, None)
        inherited = self._inherited(conv, branch.id)
        self.conn.execute(
            S.branch_counters.insert(),
            {
                "branch_id": branch.id,
                "tenant_id": branch.tenant_id,
                "conversation_id": conv,
                **{k: None if k.endswith("_seq") else 0 for k in K.AGGREGATES},
                **{f"inherited_{k}": v for k, v in inherited.items()},
                "max_child_fork_seq": None,
            },
        )
        if branch.parent_branch_id is not None:
            fork = K.UNBOUNDED_FORK if branch.fork_seq is None else branch.fork_seq
            params = {"p_branch": branch.parent_branch_id, "p_tenant": self.scope.tenant_id, "p_fork": fork}
            if self.conn.execute(K.fork_statement(), params).first() is None and branch.parent_branch_id in self._tree(conv):
                self._create_counters(conv, branch.parent_branch_id)

    def add_participant(self, p: Participant) -> None:
        """Insert a participant."""
        self._child(p)
        self._insert(
            S.participants,
            {"id": p.id, "tenant_id": p.tenant_id, "conversation_id": p.conversation_id, "name": p.name, "body": _body(p)},
        )

    # -- transcript ------------------------------------------------------------------
    def add_message(self, m: Message) -> bool:
        """Insert a message; returns ``False`` when its ``content_key`` was already recorded."""
        self._child(m)
        inserted = self._insert(
            S.messages,
            {
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
                "body": _body(m),
            },
            ignore_conflict=m.content_key is not None,
        )
        if inserted:
            self._count(m.conversation_id, m.branch_id, m.seq, "message", m.token_count)
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
                "body": _body(run),
            },
        )

    def add_tool_call(self, call: ToolCall) -> bool:
        """Insert a tool call; ``False`` when its ``call_id`` is already recorded (idempotent)."""
        self._child(call)
        return self._insert(
            S.tool_calls,
            {
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
                "body": _body(call),
            },
            ignore_conflict=True,
        )

    def update_tool_call(self, call: ToolCall) -> None:
        """Replace a tool call's status/body."""
        self._check(call)
        self._update(S.tool_calls, call.id, "tool call", {"status": call.status.value, "body": _body(call)})

    def add_artifact(self, a: ToolArtifact) -> bool:
        """Insert a tool artifact; ``False`` when one for the same ``call_id`` exists."""
        self._child(a)
        inserted = self._insert(
            S.tool_artifacts,
            {
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
                "body": _body(a),
            },
            ignore_conflict=True,
        )
        if inserted:
            self._count(a.conversation_id, a.branch_id, a.seq, "artifact", a.result_tokens)
        return inserted

    def update_artifact(self, a: ToolArtifact) -> None:
        """Replace an artifact's body (status, visibility, retention)."""
        self._check(a)
        self._update(
            S.tool_artifacts, a.id, "artifact", {"status": a.status.value, "visibility": a.visibility_scope.value, "body": _body(a)}
        )

    def _memory_values(self, m: ToolMemory) -> dict[str, Any]:
        return {
            "artifact_id": m.source_artifact_ids[0] if m.source_artifact_ids else None,
            "subject_key": m.subject_key,
            "resolution_state": m.resolution_state.value,
            "visibility": m.visibility_scope.value,
            "owner_participant_id": m.owner_participant_id,
            "token_count": m.token_count,
            "body": _body(m),
        }

    def add_memory(self, m: ToolMemory) -> None:
        """Insert a tool memory."""
        self._child(m)
        self._insert(
            S.tool_memories,
            {"id": m.id, "tenant_id": m.tenant_id, "conversation_id": m.conversation_id, "branch_id": m.branch_id, "seq": m.seq, **self._memory_values(m)},
        )
        self._count(m.conversation_id, m.branch_id, m.seq, "memory", 0)
        terms = memory_terms(m)
        if terms:
            self.conn.execute(
                _insert_statement(S.memory_terms),
                [{"memory_id": m.id, "term": t, "tenant_id": m.tenant_id, "conversation_id": m.conversation_id, "branch_id": m.branch_id, "seq": m.seq} for t in terms],
            )

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
            {"id": s.id, "tenant_id": s.tenant_id, "conversation_id": s.conversation_id, "branch_id": s.branch_id, "seq": s.seq, "body": _body(s)},
        )

    def add_checkpoint(self, c: ContinuationCheckpoint) -> None:
        """Insert a continuation checkpoint."""
        self._child(c)
        self._insert(
            S.checkpoints,
            {"id": c.id, "tenant_id": c.tenant_id, "conversation_id": c.conversation_id, "branch_id": c.branch_id, "seq": c.seq, "body": _body(c)},
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
            {"id": d.id, "tenant_id": d.tenant_id, "conversation_id": d.conversation_id, "assembly_id": d.assembly_id, "record_id": d.record_id, "body": _body(d)},
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
                "created_at": _iso(a.created_at),
                "body": _body(a),
                "payload": payload,
            },
        )


class SqlStore:
    """The relational store (SQLite or PostgreSQL, chosen by URL) plus a blob store.

    Args:
        url: SQLAlchemy URL (``sqlite:////path/ledger.db``, ``postgresql+psycopg://…``).
        blobs: where payloads above ``inline_threshold_bytes`` live.
        inline_threshold_bytes: payload size (bytes) above which raw results are stored
            as blobs; default 4096 (seed 001 §6 problem 2).
        migrate: run Alembic migrations to head on open (default ``True``).

    Raises:
        BackendError: the driver is missing (``pip install 'contextledger[postgres]'``)
            or the database cannot be reached.
    """

    capabilities = CAPABILITIES

    def __init__(
        self,
        url: str,
        blobs: BlobStore,
        *,
        inline_threshold_bytes: int = DEFAULT_INLINE_THRESHOLD_BYTES,
        migrate: bool = True,
    ) -> None:
        self.url = url
        self.blobs = blobs
        self.inline_threshold_bytes = inline_threshold_bytes
        self.engine = _make_engine(url)
        self.dialect = self.engine.dialect.name
        if migrate:
            from contextledger.store.migrate import upgrade

            upgrade(self.engine)

    def close(self) -> None:
        """Dispose of pooled connections."""
        self.engine.dispose()

    # -- transactions ------------------------------------------------------------------
    def _insert_ignore(self, table: sa.Table) -> Any:
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert(table).on_conflict_do_nothing()
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(table).on_conflict_do_nothing()

    @contextmanager
    def writer(self, scope: Scope | None, *, retries: int = 8) -> Iterator[Writer]:
        """Open one write transaction for ``scope``.

        On SQLite the transaction starts with ``BEGIN IMMEDIATE`` (writers queue on the
        database lock, waiting up to the 60 s busy timeout); a busy error is retried
        (up to ``retries`` times, backing off 0.1 s doubling to 1 s) only when raised
        before the body ran, never after.  On PostgreSQL writers of one conversation
        queue on its row lock (taken by :meth:`Writer.allocate_seq`, or earlier by a
        :meth:`lineage` read made inside the transaction).  Everything written through the yielded
        :class:`Writer` commits together or not at all.

        Raises:
            ScopeError: no scope.
            BackendError: the database stayed locked or unreachable.
        """
        scope = require_scope(scope)
        attempt = 0
        while True:
            try:
                conn = self.engine.connect()
            except sa.exc.OperationalError as exc:
                raise BackendError(f"cannot connect to {self.engine.url!r}: {exc}") from exc
            try:
                if self.dialect == "sqlite":
                    conn.exec_driver_sql("BEGIN IMMEDIATE")
                else:
                    conn.begin()
            except sa.exc.OperationalError as exc:
                conn.close()
                attempt += 1
                if attempt > retries:
                    raise BackendError(f"database busy after {retries} retries: {exc}") from exc
                time.sleep(min(0.05 * 2**attempt, 1.0))
                continue
            break
        writer = Writer(self, conn, scope)
        conn.info[_WRITER_FLAG] = writer
        try:
            yield writer
            writer.flush_counters()
            if self.dialect == "sqlite":
                conn.exec_driver_sql("COMMIT")
            else:
                conn.commit()
        except BaseException:
            try:
                if self.dialect == "sqlite":
                    conn.exec_driver_sql("ROLLBACK")
                else:
                    conn.rollback()
            finally:
                conn.info.pop(_WRITER_FLAG, None)
                conn.close()
            raise
        conn.info.pop(_WRITER_FLAG, None)
        conn.close()

    @contextmanager
    def reader(self) -> Iterator[Connection]:
        """A read transaction over one consistent snapshot: ``REPEATABLE READ`` on
        PostgreSQL (a read-only snapshot never fails to serialise), a deferred
        transaction on SQLite WAL.  Several queries made through it (e.g. the assembler's
        candidate collection) never see a writer's commit half-way."""
        with self.engine.connect() as conn:
            if self.dialect == "postgresql":
                conn.execution_options(isolation_level="REPEATABLE READ")
            if self.dialect == "sqlite":
                conn.exec_driver_sql("BEGIN")
                try:
                    yield conn
                finally:
                    conn.exec_driver_sql("COMMIT")
            else:
                with conn.begin():
                    yield conn

    def _rows(self, stmt: sa.Select[Any], model: type[R], conn: Connection | None = None) -> list[R]:
        """Run ``stmt`` (its first column is a ``body``) and decode every row into
        ``model``.  The body is fetched as JSON text (SQLite: the stored text as is;
        PostgreSQL: ``body::text``) and decoded by :func:`_decode`, without an
        intermediate ``json.loads``."""
        stmt = self._body_as_text(stmt)
        if conn is None:
            with self.reader() as c:
                rows = c.execute(stmt).all()
        else:
            rows = conn.execute(stmt).all()
        return [_decode(model, r[0]) for r in rows]

    def _body_as_text(self, stmt: sa.Select[Any]) -> sa.Select[Any]:
        """``stmt`` with its first column (``body``) read as text: a type coercion on
        SQLite (the SQL is unchanged), a cast to ``text`` on PostgreSQL (JSONB)."""
        cols = list(stmt.selected_columns)
        body = cols[0]
        text = sa.cast(body, sa.Text()) if self.dialect == "postgresql" else sa.type_coerce(body, sa.Text())
        return stmt.with_only_columns(text, *cols[1:])

    def _one(self, stmt: sa.Select[Any], model: type[R], kind: str, record_id: str, conn: Connection | None = None) -> R:
        rows = self._rows(stmt, model, conn)
        if not rows:
            raise NotFoundError(kind, record_id)
        return rows[0]

    # -- conversations -----------------------------------------------------------------
    def get_conversation(self, scope: Scope | None, conversation_id: str, conn: Connection | None = None) -> Conversation:
        """The conversation ``conversation_id``.

        Raises:
            NotFoundError: not in scope.
        """
        scope = require_scope(scope)
        t = S.conversations
        stmt = sa.select(t.c.body).where(t.c.id == conversation_id, t.c.tenant_id == scope.tenant_id)
        if scope.user_id is not None:
            stmt = stmt.where(t.c.user_id == scope.user_id)
        return self._one(stmt, Conversation, "conversation", conversation_id, conn)

    def find_conversation_by_content_key(self, scope: Scope | None, content_key: str) -> Conversation | None:
        """The conversation imported from the same bytes, if any (idempotent import)."""
        scope = require_scope(scope)
        t = S.conversations
        rows = self._rows(
            sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.content_key == content_key),
            Conversation,
        )
        return rows[0] if rows else None

    def list_conversations(self, scope: Scope | None) -> list[ConversationSummary]:
        """Every conversation in scope (oldest first) with message/tool-call/artifact counts."""
        scope = require_scope(scope)
        c = S.conversations

        def count(table: sa.Table) -> sa.ScalarSelect[Any]:
            return (
                sa.select(sa.func.count())
                .where(table.c.tenant_id == scope.tenant_id, table.c.conversation_id == c.c.id)
                .scalar_subquery()
            )

        stmt = (
            sa.select(c.c.body, count(S.messages).label("n_msg"), count(S.tool_calls).label("n_call"), count(S.tool_artifacts).label("n_art"))
            .where(c.c.tenant_id == scope.tenant_id)
            .order_by(c.c.created_at, c.c.id)
        )
        if scope.user_id is not None:
            stmt = stmt.where(c.c.user_id == scope.user_id)
        with self.reader() as conn:
            rows = conn.execute(stmt).all()
        return [
            ConversationSummary(
                conversation=Conversation.model_validate(r.body),
                message_count=int(r.n_msg),
                tool_call_count=int(r.n_call),
                artifact_count=int(r.n_art),
            )
            for r in rows
        ]

    def delete_conversation(self, scope: Scope | None, conversation_id: str) -> None:
        """Delete a conversation and every record of it (retention / account deletion).
        Blobs are content-addressed and may be shared; they are left to blob GC."""
        scope = require_scope(scope)
        self.get_conversation(scope, conversation_id)
        with self.writer(scope) as w:
            for table in S.metadata.sorted_tables:
                if "conversation_id" in table.c:
                    w.conn.execute(
                        table.delete().where(table.c.tenant_id == scope.tenant_id, table.c.conversation_id == conversation_id)
                    )
            w.conn.execute(
                S.conversations.delete().where(
                    S.conversations.c.tenant_id == scope.tenant_id, S.conversations.c.id == conversation_id
                )
            )

    # -- branches / participants -----------------------------------------------------
    def branches(self, scope: Scope | None, conversation_id: str, conn: Connection | None = None) -> list[Branch]:
        """Every branch of a conversation, oldest first."""
        scope = require_scope(scope)
        t = S.branches
        stmt = sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id).order_by(t.c.id)
        return sorted(self._rows(stmt, Branch, conn), key=lambda b: (b.created_at, b.id))

    def get_branch(self, scope: Scope | None, branch_id: str, conn: Connection | None = None) -> Branch:
        """The branch ``branch_id``.

        Raises:
            NotFoundError: not in scope.
        """
        scope = require_scope(scope)
        t = S.branches
        return self._one(sa.select(t.c.body).where(t.c.id == branch_id, t.c.tenant_id == scope.tenant_id), Branch, "branch", branch_id, conn)

    def lineage(self, scope: Scope | None, branch_id: str, conn: Connection | None = None) -> list[LineageSegment]:
        """The active branch and its ancestors up to each fork point (seed 000 §4.10).

        Returns segments newest first: ``[LineageSegment(active, None), LineageSegment(parent,
        fork_seq), …]``.  A child inherits from its parent only records with ``seq`` ≤ the
        fork point, and the limit tightens as the walk goes up.

        Called with a :meth:`writer` connection on PostgreSQL, it first locks the
        conversation row, so the lineage head read next stays the head until commit.

        Raises:
            NotFoundError: ``branch_id`` is not in scope.
        """
        scope = require_scope(scope)
        t = S.branches
        stmt = sa.select(t.c.id, t.c.parent_branch_id, t.c.fork_seq).where(t.c.tenant_id == scope.tenant_id)
        first = self.get_branch(scope, branch_id, conn)
        stmt = stmt.where(t.c.conversation_id == first.conversation_id)
        if conn is not None and conn.info.get(_WRITER_FLAG) and self.dialect == "postgresql":
            # Inside a write transaction, take the conversation's row lock (the one
            # ``allocate_seq`` takes) before reading the lineage: writers of one
            # conversation are then serialised from here on, and the head a writer
            # reads is still the head when it appends (as BEGIN IMMEDIATE gives on SQLite).
            ct = S.conversations
            conn.execute(
                sa.select(ct.c.id).where(ct.c.id == first.conversation_id, ct.c.tenant_id == scope.tenant_id).with_for_update()
            )
        if conn is None:
            with self.reader() as c:
                rows = c.execute(stmt).all()
        else:
            rows = conn.execute(stmt).all()
        by_id = {r.id: K.BranchRow(r.id, r.parent_branch_id, None if r.fork_seq is None else int(r.fork_seq)) for r in rows}
        return [LineageSegment(branch_id=b, max_seq=lim) for b, lim in K.lineage_walk(by_id, branch_id)]

    def participants(self, scope: Scope | None, conversation_id: str, conn: Connection | None = None) -> list[Participant]:
        """Every participant of a conversation, oldest first."""
        scope = require_scope(scope)
        t = S.participants
        stmt = sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id)
        return sorted(self._rows(stmt, Participant, conn), key=lambda p: (p.created_at, p.id))

    # -- lineage-scoped reads ----------------------------------------------------------
    def messages(
        self,
        scope: Scope | None,
        conversation_id: str,
        segments: Sequence[LineageSegment] | None = None,
        *,
        min_seq: int | None = None,
        last: int | None = None,
        kinds: Iterable[str] | None = None,
        roles: Iterable[str] | None = None,
        ids: Iterable[str] | None = None,
        conn: Connection | None = None,
    ) -> list[Message]:
        """Messages of a conversation, in ``seq`` order.

        Args:
            segments: lineage to read (``None``: every branch).
            min_seq: only messages with ``seq`` ≥ this.
            last: only the newest ``last`` messages (a bounded window).
            kinds / roles / ids: optional filters.
        """
        scope = require_scope(scope)
        t = S.messages
        stmt = sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id)
        if segments is not None and (last is None or len(segments) <= 1):
            stmt = stmt.where(_segments_clause(t, segments))
        if min_seq is not None:
            stmt = stmt.where(t.c.seq >= min_seq)
        if kinds is not None:
            stmt = stmt.where(t.c.kind.in_(list(kinds)))
        if roles is not None:
            stmt = stmt.where(t.c.role.in_(list(roles)))
        if ids is not None:
            stmt = stmt.where(t.c.id.in_(list(ids)))
        if last is not None:
            if segments is not None and len(segments) > 1:
                stmt = _newest_per_segment(stmt, t, segments, last, (t.c.seq,))
            else:
                stmt = stmt.order_by(t.c.seq.desc()).limit(last)
            return list(reversed(self._rows(stmt, Message, conn)))
        if kinds is not None or roles is not None or ids is not None:
            # a selective filter: no ORDER BY, so SQLite without statistics picks the
            # filter's index over the lineage range (which would deliver seq order but
            # read the whole branch); the few rows are sorted here
            return sorted(self._rows(stmt, Message, conn), key=lambda m: m.seq)
        return self._rows(stmt.order_by(t.c.seq), Message, conn)

    def lineage_totals(
        self, scope: Scope | None, conversation_id: str, segments: Sequence[LineageSegment], conn: Connection | None = None
    ) -> dict[str, int]:
        """Aggregates over a lineage without reading its rows: ``messages``,
        ``message_tokens``, ``artifacts``, ``artifact_tokens``, ``memories``, ``min_seq``,
        ``max_seq`` (message seqs, 0 when there are none; tokens are the cached o200k
        counts).

        ``segments`` is a lineage as :meth:`lineage` returns it; the totals are read from
        the ``branch_counters`` row of its first (active) branch — one indexed row,
        whatever the history length.  Other segment lists are aggregated over the rows.
        Inside a :meth:`writer` transaction the writer's pending counts are applied first.
        """
        scope = require_scope(scope)

        def run(c: Connection) -> dict[str, int]:
            w = c.info.get(_WRITER_FLAG)
            if isinstance(w, Writer):
                w.flush_counters()
            totals = self._counter_totals(c, scope, conversation_id, segments)
            if totals is None:
                totals = K.aggregate(c, scope.tenant_id, conversation_id, lambda t: _segments_clause(t, segments))
            return {k: int(v or 0) for k, v in totals.items()}

        if conn is None:
            with self.reader() as c:
                return run(c)
        return run(conn)

    def _counter_totals(
        self, conn: Connection, scope: Scope, conversation_id: str, segments: Sequence[LineageSegment]
    ) -> dict[str, int | None] | None:
        """Own + inherited counters of the lineage's active branch (``None`` when
        ``segments`` does not start with a whole branch or the row is missing)."""
        if not segments or segments[0].max_seq is not None:
            return None
        t = S.branch_counters
        row = conn.execute(
            sa.select(t).where(
                t.c.branch_id == segments[0].branch_id, t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id
            )
        ).first()
        if row is None:
            return None
        totals = K.row_values(row, "")
        K.merge_aggregates(totals, K.row_values(row, "inherited_"))
        return totals

    def outside_lineage_counts(
        self, scope: Scope | None, conversation_id: str, segments: Sequence[LineageSegment], conn: Connection | None = None
    ) -> dict[str, int]:
        """How many messages, artifacts and memories of the conversation lie outside the
        lineage (``{"message": n, "artifact": n, "memory": n}``): the conversation's
        counters summed over its branches minus the lineage totals — O(branches), not
        O(history).  Falls back to counting rows when a counters row is missing."""
        scope = require_scope(scope)

        def run(c: Connection) -> dict[str, int]:
            w = c.info.get(_WRITER_FLAG)
            if isinstance(w, Writer):
                w.flush_counters()
            inside = self._counter_totals(c, scope, conversation_id, segments)
            if inside is not None:
                t = S.branch_counters
                row = c.execute(
                    sa.select(
                        sa.func.coalesce(sa.func.sum(t.c.messages), 0),
                        sa.func.coalesce(sa.func.sum(t.c.artifacts), 0),
                        sa.func.coalesce(sa.func.sum(t.c.memories), 0),
                    ).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id)
                ).one()
                return {
                    "message": int(row[0]) - int(inside["messages"] or 0),
                    "artifact": int(row[1]) - int(inside["artifacts"] or 0),
                    "memory": int(row[2]) - int(inside["memories"] or 0),
                }
            out = K.aggregate(c, scope.tenant_id, conversation_id, lambda t: sa.not_(_segments_clause(t, segments)))
            return {"message": int(out["messages"] or 0), "artifact": int(out["artifacts"] or 0), "memory": int(out["memories"] or 0)}

        if conn is None:
            with self.reader() as c:
                return run(c)
        return run(conn)

    def tool_calls(
        self,
        scope: Scope | None,
        conversation_id: str,
        segments: Sequence[LineageSegment] | None = None,
        *,
        statuses: Iterable[ToolCallStatus] | None = None,
        message_ids: Iterable[str] | None = None,
        call_ids: Iterable[str] | None = None,
        conn: Connection | None = None,
    ) -> list[ToolCall]:
        """Tool calls in ``seq`` then ``call_index`` order, optionally filtered."""
        scope = require_scope(scope)
        t = S.tool_calls
        stmt = sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id)
        if segments is not None:
            stmt = stmt.where(_segments_clause(t, segments))
        if statuses is not None:
            stmt = stmt.where(t.c.status.in_([s.value for s in statuses]))
        if message_ids is not None:
            stmt = stmt.where(t.c.message_id.in_(list(message_ids)))
        if call_ids is not None:
            stmt = stmt.where(t.c.call_id.in_(list(call_ids)))
        if statuses is None and message_ids is None and call_ids is None:
            stmt = stmt.order_by(t.c.seq)
        # with a filter, no ORDER BY (see ``messages``): sorted here
        return sorted(self._rows(stmt, ToolCall, conn), key=lambda c: (c.seq, c.call_index))

    def get_tool_call(self, scope: Scope | None, conversation_id: str, call_id: str, conn: Connection | None = None) -> ToolCall:
        """The tool call with provider id ``call_id``.

        Raises:
            NotFoundError: unknown call id in this conversation.
        """
        rows = self.tool_calls(scope, conversation_id, call_ids=[call_id], conn=conn)
        if not rows:
            raise NotFoundError("tool call", call_id)
        return rows[0]

    def artifacts(
        self,
        scope: Scope | None,
        conversation_id: str,
        segments: Sequence[LineageSegment] | None = None,
        *,
        ids: Iterable[str] | None = None,
        call_ids: Iterable[str] | None = None,
        conn: Connection | None = None,
    ) -> list[ToolArtifact]:
        """Tool artifacts in ``seq`` order, optionally filtered."""
        scope = require_scope(scope)
        t = S.tool_artifacts
        if ids is not None:
            # by id the primary key decides (see ``memories``): scope checked, not indexed
            stmt = sa.select(t.c.body).where(t.c.id.in_(list(ids)), t.c.tenant_id.concat("") == scope.tenant_id, t.c.conversation_id.concat("") == conversation_id)
        else:
            stmt = sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id)
        if segments is not None:
            stmt = stmt.where(_segments_clause(t, segments))
        if call_ids is not None:
            stmt = stmt.where(t.c.call_id.in_(list(call_ids)))
        if ids is None and call_ids is None:
            return self._rows(stmt.order_by(t.c.seq), ToolArtifact, conn)
        return sorted(self._rows(stmt, ToolArtifact, conn), key=lambda a: a.seq)

    def get_artifact(self, scope: Scope | None, artifact_id: str, conn: Connection | None = None) -> ToolArtifact:
        """The artifact ``artifact_id`` (any conversation of the tenant).

        Raises:
            NotFoundError: not in scope.
        """
        scope = require_scope(scope)
        t = S.tool_artifacts
        return self._one(
            sa.select(t.c.body).where(t.c.id == artifact_id, t.c.tenant_id == scope.tenant_id),
            ToolArtifact,
            "artifact",
            artifact_id,
            conn,
        )

    def read_artifact_bytes(self, scope: Scope | None, artifact: ToolArtifact | str) -> bytes:
        """The exact raw bytes of an artifact's result, verified against its sha256.

        ``artifact`` is an id or a loaded record of the scope's tenant.

        Raises:
            NotFoundError: unknown artifact, another tenant's artifact, or a payload
                removed by retention.
            IntegrityError: blob missing or bytes do not match the recorded sha256
                (``record_id`` = the artifact id, ``actual`` = ``None`` when missing).
        """
        from contextledger.errors import IntegrityError
        from contextledger.store.blobs import sha256_key

        scope = require_scope(scope)
        art = self.get_artifact(scope, artifact) if isinstance(artifact, str) else artifact
        if art.tenant_id != scope.tenant_id:
            raise NotFoundError("artifact", art.id)
        if art.deleted_at is not None:
            raise NotFoundError("artifact payload (retention-deleted)", art.id)
        if art.blob_key is not None:
            try:
                data = self.blobs.get(art.blob_key)
            except IntegrityError as exc:  # name the artifact, not only the blob key
                raise IntegrityError(art.id, art.sha256, exc.actual) from exc
        else:
            data = (art.inline_text or "").encode("utf-8")
        actual = sha256_key(data)
        if actual != art.sha256:
            raise IntegrityError(art.id, art.sha256, actual)
        return data

    def memories(
        self,
        scope: Scope | None,
        conversation_id: str,
        segments: Sequence[LineageSegment] | None = None,
        *,
        last: int | None = None,
        ids: Iterable[str] | None = None,
        subject_keys: Iterable[str] | None = None,
        subject_prefix: str | None = None,
        artifact_ids: Iterable[str] | None = None,
        conn: Connection | None = None,
    ) -> list[ToolMemory]:
        """Tool memories in ``seq`` order (``last``: only the newest N)."""
        scope = require_scope(scope)
        t = S.tool_memories
        if ids is not None:
            # by id the primary key decides: the scope is still checked, but in a form no
            # (tenant, conversation, …) index can serve — SQLite without statistics
            # would otherwise range over the whole conversation to find a few ids
            stmt = sa.select(t.c.body).where(t.c.id.in_(list(ids)), t.c.tenant_id.concat("") == scope.tenant_id, t.c.conversation_id.concat("") == conversation_id)
        else:
            stmt = sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id)
        if segments is not None and (last is None or len(segments) <= 1):
            stmt = stmt.where(_segments_clause(t, segments))
        if subject_keys is not None:
            stmt = stmt.where(t.c.subject_key.in_(list(subject_keys)))
        if subject_prefix is not None:
            stmt = stmt.where(t.c.subject_key >= subject_prefix, t.c.subject_key < subject_prefix + "\uffff")
        if artifact_ids is not None:
            stmt = stmt.where(t.c.artifact_id.in_(list(artifact_ids)))
        if last is not None:
            if segments is not None and len(segments) > 1:
                stmt = _newest_per_segment(stmt, t, segments, last, (t.c.seq, t.c.id))
            else:
                stmt = stmt.order_by(t.c.seq.desc(), t.c.id.desc()).limit(last)
            return sorted(self._rows(stmt, ToolMemory, conn), key=lambda m: (m.seq, m.id))
        if ids is None and subject_keys is None and subject_prefix is None and artifact_ids is None:
            stmt = stmt.order_by(t.c.seq)
        # with a filter, no ORDER BY (see ``messages``): sorted here
        return sorted(self._rows(stmt, ToolMemory, conn), key=lambda m: (m.seq, m.id))

    def recent_subject_memories(
        self,
        scope: Scope | None,
        conversation_id: str,
        segments: Sequence[LineageSegment],
        subject_prefix: str,
        *,
        scan: int = 2000,
        limit: int = 400,
        settled: Callable[[SubjectEntry], bool] | None = None,
        conn: Connection | None = None,
    ) -> list[ToolMemory]:
        """The newest ``limit`` memories whose ``subject_key`` starts with
        ``subject_prefix`` among the newest ``scan`` memories of each lineage segment (in
        ``(seq, id)`` order).  Bounded work whatever the history: per segment one
        backward range of ``ix_tool_memories_lineage`` reading at most ``scan`` entries,
        then the matching rows by primary key, in one prepared statement
        (:meth:`~contextledger.store.reads.LineageReads.recent_subject_memories`) —
        unlike a prefix range over the subject index, which reads every matching memory
        of the conversation to sort them.

        ``settled`` (optional): for a reader that needs, per subject, only the newest
        memory passing a test on its indexed columns (:class:`SubjectEntry`) — the
        window's entries are read first without bodies, and only the records of each
        subject newest first up to the first entry ``settled`` accepts are returned
        (every record of a subject none is accepted for), still in ``(seq, id)`` order.
        Whatever the reader picks from the full window's newest-first walk it picks
        from this subset when its test passes at least where ``settled`` does.

        Raises:
            ScopeError: no scope.
        """
        from contextledger.store.reads import LineageReads

        scope = require_scope(scope)

        if conn is None:
            with self.reader() as c:
                return LineageReads(self, c, scope, conversation_id).recent_subject_memories(segments, subject_prefix, scan=scan, limit=limit, settled=settled)
        return LineageReads(self, conn, scope, conversation_id).recent_subject_memories(segments, subject_prefix, scan=scan, limit=limit, settled=settled)

    def term_matches(
        self, scope: Scope | None, conversation_id: str, terms: Iterable[str], *, per_term: int = 64, conn: Connection | None = None
    ) -> list[tuple[str, str, str, int]]:
        """``(memory_id, term, branch_id, seq)`` of the newest ``per_term`` memories of
        the conversation indexed under each of ``terms`` (one ``ix_memory_terms_term``
        range per term, so the work is bounded by ``len(terms) × per_term`` rows whatever
        the history length).  Lineage is not filtered here (callers check branch/seq).
        """
        scope = require_scope(scope)
        t = S.memory_terms
        out: list[tuple[str, str, str, int]] = []

        def run(c: Connection) -> None:
            for term in sorted(set(terms)):
                stmt = (
                    sa.select(t.c.memory_id, t.c.term, t.c.branch_id, t.c.seq)
                    .where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id, t.c.term == term)
                    .order_by(t.c.seq.desc())
                    .limit(per_term)
                )
                out.extend((r.memory_id, r.term, r.branch_id, int(r.seq)) for r in c.execute(stmt))

        if conn is None:
            with self.reader() as c:
                run(c)
        else:
            run(conn)
        return out

    def get_memory(self, scope: Scope | None, memory_id: str) -> ToolMemory:
        """The memory ``memory_id``.

        Raises:
            NotFoundError: not in scope.
        """
        scope = require_scope(scope)
        t = S.tool_memories
        return self._one(sa.select(t.c.body).where(t.c.id == memory_id, t.c.tenant_id == scope.tenant_id), ToolMemory, "memory", memory_id)

    def skill_states(self, scope: Scope | None, conversation_id: str, segments: Sequence[LineageSegment] | None = None, conn: Connection | None = None) -> list[SkillState]:
        """Skill state snapshots in ``seq`` order."""
        scope = require_scope(scope)
        t = S.skill_states
        stmt = sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id)
        if segments is not None:
            stmt = stmt.where(_segments_clause(t, segments))
        return self._rows(stmt.order_by(t.c.seq), SkillState, conn)

    def checkpoints(self, scope: Scope | None, conversation_id: str, segments: Sequence[LineageSegment] | None = None, conn: Connection | None = None) -> list[ContinuationCheckpoint]:
        """Continuation checkpoints in ``seq`` order."""
        scope = require_scope(scope)
        t = S.checkpoints
        stmt = sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id)
        if segments is not None:
            stmt = stmt.where(_segments_clause(t, segments))
        return self._rows(stmt.order_by(t.c.seq), ContinuationCheckpoint, conn)

    def rule_bodies(self, scope: Scope | None, conversation_id: str, conn: Connection | None = None) -> list[dict[str, Any]]:
        """Pinned rule records of a conversation (raw JSON bodies, ``seq`` order)."""
        scope = require_scope(scope)
        t = S.rules
        stmt = sa.select(t.c.body, t.c.branch_id, t.c.seq).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id).order_by(t.c.seq, t.c.id)
        if conn is None:
            with self.reader() as c:
                rows = c.execute(stmt).all()
        else:
            rows = conn.execute(stmt).all()
        return [dict(r.body) | {"_branch_id": r.branch_id, "_seq": int(r.seq)} for r in rows]

    def model_runs(self, scope: Scope | None, conversation_id: str) -> list[ModelRun]:
        """Model runs of a conversation."""
        scope = require_scope(scope)
        t = S.model_runs
        stmt = sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id)
        return sorted(self._rows(stmt, ModelRun), key=lambda r: (r.started_at, r.id))

    # -- assemblies ----------------------------------------------------------------------
    def get_assembly(self, scope: Scope | None, assembly_id: str) -> tuple[ContextAssembly, dict[str, Any] | None]:
        """An assembly record and the payload stored with it.

        Raises:
            NotFoundError: not in scope.
        """
        scope = require_scope(scope)
        t = S.assemblies
        with self.reader() as conn:
            row = conn.execute(sa.select(t.c.body, t.c.payload).where(t.c.id == assembly_id, t.c.tenant_id == scope.tenant_id)).first()
        if row is None:
            raise NotFoundError("assembly", assembly_id)
        return ContextAssembly.model_validate(row.body), row.payload

    def latest_assembly(
        self, scope: Scope | None, conversation_id: str, branch_id: str, participant_id: str | None, conn: Connection | None = None
    ) -> ContextAssembly | None:
        """The newest assembly for the same branch and participant, if any."""
        scope = require_scope(scope)
        t = S.assemblies
        stmt = (
            sa.select(t.c.body)
            .where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id, t.c.branch_id == branch_id)
            .where(t.c.participant_id.is_(None) if participant_id is None else t.c.participant_id == participant_id)
            .order_by(t.c.created_at.desc(), t.c.id.desc())
            .limit(1)
        )
        rows = self._rows(stmt, ContextAssembly, conn)
        return rows[0] if rows else None

    def decisions(self, scope: Scope | None, *, assembly_id: str | None = None, record_id: str | None = None, conversation_id: str | None = None) -> list[PolicyDecision]:
        """Policy decisions filtered by assembly, subject record or conversation."""
        scope = require_scope(scope)
        t = S.policy_decisions
        stmt = sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id)
        if assembly_id is not None:
            stmt = stmt.where(t.c.assembly_id == assembly_id)
        if record_id is not None:
            stmt = stmt.where(t.c.record_id == record_id)
        if conversation_id is not None:
            stmt = stmt.where(t.c.conversation_id == conversation_id)
        return sorted(self._rows(stmt, PolicyDecision), key=lambda d: (d.created_at, d.id))


def _make_engine(url: str) -> Engine:
    if url.startswith("postgresql"):
        try:
            import psycopg  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on install
            raise BackendError("PostgreSQL needs psycopg: pip install 'contextledger[postgres]'") from exc
        pg = sa.create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10, **textguard.engine_options())
        textguard.install(pg)
        return pg
    if not url.startswith("sqlite"):
        raise InputError(f"unsupported database URL {url!r}: use sqlite:///PATH or postgresql+psycopg://…")
    path = url.split("///", 1)[1] if "///" in url else ""
    if path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    # LIFO: the connection used last (its page cache warm) is handed out next
    engine = sa.create_engine(url, connect_args={"timeout": 60, "check_same_thread": False}, pool_use_lifo=True, **textguard.engine_options())
    textguard.install(engine)

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        import sqlite3

        dbapi_conn.isolation_level = None  # we issue BEGIN/COMMIT ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA busy_timeout=60000")
        # switching to WAL needs a moment with no other writer and is not retried by the
        # busy handler: skip it when the file is already in WAL mode, retry otherwise
        for attempt in range(50):
            try:
                if str(cur.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                    cur.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError:
                if attempt == 49:
                    raise
                time.sleep(0.05 * (1 + attempt % 5))
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
        cur.close()

    return engine
