"""Reads of the graph's containers: conversations, branches and their lineage,
participants and model runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from contextledger.records.models import (
    Branch,
    Conversation,
    ModelRun,
    Participant,
)
from contextledger.store import counters as K
from contextledger.store import schema as S
from contextledger.store.base import (
    LineageSegment,
    Scope,
    require_scope,
)
from contextledger.store.connection import SqlStoreBase
from contextledger.store.writer import WRITER_FLAG

__all__ = ["ConversationSummary", "GraphReads"]


@dataclass(frozen=True, kw_only=True)
class ConversationSummary:
    """A conversation with its record counts (``contextledger conversations``)."""

    conversation: Conversation
    message_count: int
    tool_call_count: int
    artifact_count: int


_LINEAGE_CACHE_SIZE = 4096
"""Lineages kept per store (the cache is emptied when full)."""


class GraphReads(SqlStoreBase):
    """Conversations, branches, lineage, participants and model runs."""

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
        A complete lineage (one that reaches a root branch) is kept per tenant and
        branch for the life of the store: it never changes once the branch exists.

        Raises:
            NotFoundError: ``branch_id`` is not in scope.
        """
        scope = require_scope(scope)
        cache: dict[tuple[str, str], tuple[str, tuple[LineageSegment, ...]]] = self.__dict__.setdefault("_lineages", {})
        hit = cache.get((scope.tenant_id, branch_id))
        if hit is not None:
            self._lock_for_writer(scope, hit[0], conn)
            return list(hit[1])
        t = S.branches
        stmt = sa.select(t.c.id, t.c.parent_branch_id, t.c.fork_seq).where(t.c.tenant_id == scope.tenant_id)
        first = self.get_branch(scope, branch_id, conn)
        stmt = stmt.where(t.c.conversation_id == first.conversation_id)
        self._lock_for_writer(scope, first.conversation_id, conn)
        if conn is None:
            with self.reader() as c:
                rows = c.execute(stmt).all()
        else:
            rows = conn.execute(stmt).all()
        by_id = {r.id: K.BranchRow(r.id, r.parent_branch_id, None if r.fork_seq is None else int(r.fork_seq)) for r in rows}
        walk = K.lineage_walk(by_id, branch_id)
        segments = tuple(LineageSegment(branch_id=b, max_seq=lim) for b, lim in walk)
        if by_id[walk[-1][0]].parent_branch_id is None:
            # a complete walk (it reached a root): a branch's ancestors and fork points
            # never change once it exists, so the lineage is kept for the process
            if len(cache) >= _LINEAGE_CACHE_SIZE:
                cache.clear()
            cache[(scope.tenant_id, branch_id)] = (first.conversation_id, segments)
        return list(segments)

    def forget_lineages(self) -> None:
        """Drop the kept lineages (after branches were deleted)."""
        self.__dict__.pop("_lineages", None)

    def _lock_for_writer(self, scope: Scope, conversation_id: str, conn: Connection | None) -> None:
        """Inside a PostgreSQL write transaction, take the conversation's row lock (the
        one ``allocate_seq`` takes) before the lineage is used: writers of one
        conversation are then serialised from here on, and the head a writer reads is
        still the head when it appends (as BEGIN IMMEDIATE gives on SQLite)."""
        if conn is not None and conn.info.get(WRITER_FLAG) and self.dialect == "postgresql":
            ct = S.conversations
            conn.execute(sa.select(ct.c.id).where(ct.c.id == conversation_id, ct.c.tenant_id == scope.tenant_id).with_for_update())

    def participants(self, scope: Scope | None, conversation_id: str, conn: Connection | None = None) -> list[Participant]:
        """Every participant of a conversation, oldest first."""
        scope = require_scope(scope)
        t = S.participants
        stmt = sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id)
        return sorted(self._rows(stmt, Participant, conn), key=lambda p: (p.created_at, p.id))

    def model_runs(self, scope: Scope | None, conversation_id: str) -> list[ModelRun]:
        """Model runs of a conversation."""
        scope = require_scope(scope)
        t = S.model_runs
        stmt = sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id)
        return sorted(self._rows(stmt, ModelRun), key=lambda r: (r.started_at, r.id))
