"""Lineage-scoped reads of the transcript: messages, tool calls and the lineage totals
kept by the branch counters.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from contextledger.errors import NotFoundError
from contextledger.records.enums import ToolCallStatus
from contextledger.records.models import (
    Message,
    ToolCall,
)
from contextledger.store import counters as K
from contextledger.store import schema as S
from contextledger.store.base import (
    LineageSegment,
    Scope,
    require_scope,
)
from contextledger.store.clauses import newest_per_segment, segments_clause
from contextledger.store.connection import SqlStoreBase
from contextledger.store.writer import WRITER_FLAG, Writer

__all__ = ["TranscriptReads"]


class TranscriptReads(SqlStoreBase):
    """Messages, tool calls and lineage totals."""

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
            stmt = stmt.where(segments_clause(t, segments))
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
                stmt = newest_per_segment(stmt, t, segments, last, (t.c.seq,))
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
            w = c.info.get(WRITER_FLAG)
            if isinstance(w, Writer):
                w.flush_counters()
            totals = self._counter_totals(c, scope, conversation_id, segments)
            if totals is None:
                totals = K.aggregate(c, scope.tenant_id, conversation_id, lambda t: segments_clause(t, segments))
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
            w = c.info.get(WRITER_FLAG)
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
            out = K.aggregate(c, scope.tenant_id, conversation_id, lambda t: sa.not_(segments_clause(t, segments)))
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
            stmt = stmt.where(segments_clause(t, segments))
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
