"""The reads of one assembly, as prepared statements (``store/prepared.py``).

:class:`LineageReads` holds the reads that candidate collection
(``assembly/candidates.py``) and the working set make for one conversation inside one
read transaction.  Each returns what the equivalent :class:`~contextledger.store.sql.SqlStore`
method returns for the same arguments — same records, same order — and runs the same
SQL on the same indexes (docs/query-plans.md; ``tests/store_conformance/test_reads.py``
compares the two), with some reads merged into one statement: the conversation's branch
rows serve both the branch check and the lineage walk; the lineage totals and the
out-of-lineage counts come from one ``branch_counters`` statement; the term lookups of
recall are one ``UNION ALL`` of per-term ranges; the working set's newest subjects and
their bodies are one statement.  The two bounded filtered reads — the system head
(:meth:`LineageReads.head_messages`) and the newest calls per status
(:meth:`LineageReads.newest_calls`) — have no single store method: they return the
first and newest rows of the store's filtered reads (the tests compare them with a
filter of those reads in Python).

The reads are grouped by what they read: messages (:mod:`.read_messages`), memories
(:mod:`.read_memories`), and here the conversation, lineage, calls, artifacts and small
tables; the statement builders are :mod:`.read_statements`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from contextledger.errors import NotFoundError
from contextledger.records.models import (
    ContinuationCheckpoint,
    Conversation,
    Participant,
    SkillState,
    ToolArtifact,
    ToolCall,
)
from contextledger.store import counters as K
from contextledger.store import schema as S
from contextledger.store.base import LineageSegment
from contextledger.store.codec import decode_body
from contextledger.store.prepared import in_values, lineage_params, lineage_shape
from contextledger.store.read_memories import MemoryReads
from contextledger.store.read_messages import MessageReads
from contextledger.store.read_statements import (
    filtered_rows,
    newest_rows,
    param,
    scoped,
    scoped_by_id,
    text_body,
    union_of,
)

__all__ = ["LineageReads"]


class LineageReads(MessageReads, MemoryReads):
    """The candidate and working-set reads of one conversation on one connection.

    Args:
        store: the store (its engine's dialect compiles the statements).
        conn: a connection inside :meth:`SqlStore.reader` (or a writer); every read runs
            on its DBAPI connection, in its transaction.
        scope: the tenant scope (required).
        conversation_id: the conversation read.

    Raises:
        ScopeError: no scope.
    """

    # -- conversation and lineage ----------------------------------------------------
    def conversation(self) -> Conversation:
        """The conversation (SqlStore.get_conversation).

        Raises:
            NotFoundError: not in scope.
        """
        t = S.conversations
        user = self.scope.user_id is not None

        def build() -> sa.Select[Any]:
            stmt = sa.select(t.c.body).where(
                t.c.id == param("p_conv", t.c.id), t.c.tenant_id == param("p_tenant", t.c.tenant_id)
            )
            if user:
                stmt = stmt.where(t.c.user_id == param("p_user", t.c.user_id))
            return text_body(stmt, self._name)

        rows = self._rows(
            ("conversation", user), build, {"p_user": self.scope.user_id} if user else None
        )
        if not rows:
            raise NotFoundError("conversation", self.conversation_id)
        return decode_body(Conversation, rows[0][0])

    def lineage(self, branch_id: str) -> list[LineageSegment]:
        """The lineage of ``branch_id`` (SqlStore.lineage), read with the branch check
        from the conversation's branch rows.

        Raises:
            NotFoundError: ``branch_id`` is not in scope, or not a branch of this
                conversation.
        """
        t = S.branches

        def build() -> sa.Select[Any]:
            return sa.select(t.c.id, t.c.parent_branch_id, t.c.fork_seq).where(*scoped(t))

        rows = self._rows(("branches",), build)
        by_id = {r[0]: K.BranchRow(r[0], r[1], None if r[2] is None else int(r[2])) for r in rows}
        if branch_id not in by_id:
            self.store.get_branch(
                self.scope, branch_id, self.conn
            )  # NotFoundError("branch") when not in scope
            raise NotFoundError(f"branch of conversation {self.conversation_id}", branch_id)
        return [
            LineageSegment(branch_id=b, max_seq=lim) for b, lim in K.lineage_walk(by_id, branch_id)
        ]

    def totals_and_outside(
        self, segments: Sequence[LineageSegment]
    ) -> tuple[dict[str, int], dict[str, int]]:
        """``(lineage_totals, outside_lineage_counts)`` of ``segments`` (the two
        SqlStore methods), from the active branch's counters row and the sums over the
        conversation's rows in one statement; the store's methods (and their row-count
        fallback) when the lineage does not start with a whole branch or the row is
        missing."""
        if not segments or segments[0].max_seq is not None:
            return self._slow_counts(segments)
        t = S.branch_counters

        def build() -> sa.Select[Any]:
            sums = (
                sa.select(
                    *(
                        sa.func.coalesce(sa.func.sum(t.c[k]), 0).label(f"all_{k}")
                        for k in ("messages", "artifacts", "memories")
                    )
                )
                .where(*scoped(t))
                .subquery()
            )
            cols = [t.c[k] for k in K.AGGREGATES] + [t.c["inherited_" + k] for k in K.AGGREGATES]
            return (
                sa.select(*cols, *sums.c)
                .select_from(t.join(sums, sa.true()))
                .where(t.c.branch_id == param("p_b0", t.c.branch_id), *scoped(t))
            )

        rows = self._rows(("counters",), build, {"p_b0": segments[0].branch_id})
        if not rows:
            return self._slow_counts(segments)
        row = rows[0]
        n = len(K.AGGREGATES)
        totals: dict[str, int | None] = {
            k: None if row[i] is None else int(row[i]) for i, k in enumerate(K.AGGREGATES)
        }
        K.merge_aggregates(
            totals,
            {
                k: None if row[n + i] is None else int(row[n + i])
                for i, k in enumerate(K.AGGREGATES)
            },
        )
        inside = {k: int(v or 0) for k, v in totals.items()}
        outside = {
            "message": int(row[2 * n]) - inside["messages"],
            "artifact": int(row[2 * n + 1]) - inside["artifacts"],
            "memory": int(row[2 * n + 2]) - inside["memories"],
        }
        return inside, outside

    def _slow_counts(
        self, segments: Sequence[LineageSegment]
    ) -> tuple[dict[str, int], dict[str, int]]:
        s, c = self.store, self.conversation_id
        return s.lineage_totals(self.scope, c, segments, self.conn), s.outside_lineage_counts(
            self.scope, c, segments, self.conn
        )

    # -- tool calls and artifacts ----------------------------------------------------
    def calls_by_message(self, message_ids: Sequence[str]) -> list[ToolCall]:
        """Calls requested by ``message_ids`` (any branch), in ``(seq, call_index)``
        order (SqlStore.tool_calls with ``message_ids``)."""
        return self._calls("calls_by_message", S.tool_calls.c.message_id, message_ids)

    def calls_by_call_id(self, call_ids: Sequence[str]) -> list[ToolCall]:
        """Calls with provider ids ``call_ids`` (SqlStore.tool_calls with ``call_ids``)."""
        return self._calls("calls_by_call_id", S.tool_calls.c.call_id, call_ids)

    def _calls(self, key: str, column: sa.Column[Any], values: Sequence[str]) -> list[ToolCall]:
        t = S.tool_calls

        def build() -> sa.Select[Any]:
            return filtered_rows(t, None, [in_values(column, "p_ids", self._name)], self._name)

        rows = self._rows((key,), build, {"p_ids": self._ids(values)})
        return sorted(
            (decode_body(ToolCall, r[0]) for r in rows), key=lambda c: (c.seq, c.call_index)
        )

    def newest_calls(
        self, segments: Sequence[LineageSegment], limits: Sequence[tuple[str, int]]
    ) -> list[ToolCall]:
        """For each ``(status, last)`` of ``limits``, the newest ``last`` lineage calls in
        that status (newest by ``(seq, id)``), together in ``(seq, call_index)`` order
        (the same as the newest ``last`` by ``(seq, id)`` of SqlStore.tool_calls with
        ``statuses=[status]``, per status).  One backward range of
        ``ix_tool_calls_status`` per status and segment, all in one ``UNION ALL``: at most
        ``Σ last`` rows whatever the history length."""
        shape, n = lineage_shape(segments), len(limits)
        if not shape or not n:
            return []
        t = S.tool_calls

        def build() -> sa.Select[Any] | sa.CompoundSelect[Any]:
            return union_of(
                [
                    newest_rows(
                        t,
                        shape,
                        ("seq", "id"),
                        [t.c.status == param(f"p_st{i}", t.c.status)],
                        self._name,
                        last=sa.bindparam(f"p_last{i}", type_=sa.Integer()),
                    )
                    for i in range(n)
                ]
            )

        params = {**lineage_params(segments)}
        for i, (status, last) in enumerate(limits):
            params[f"p_st{i}"] = status
            params[f"p_last{i}"] = last
        rows = self._rows(("newest_calls", shape, n), build, params)
        return sorted(
            (decode_body(ToolCall, r[0]) for r in rows), key=lambda c: (c.seq, c.call_index)
        )

    def artifacts_by_call_id(self, call_ids: Sequence[str]) -> list[ToolArtifact]:
        """Artifacts of ``call_ids`` (any branch) in ``seq`` order (SqlStore.artifacts
        with ``call_ids``)."""
        t = S.tool_artifacts

        def build() -> sa.Select[Any]:
            return filtered_rows(t, None, [in_values(t.c.call_id, "p_ids", self._name)], self._name)

        rows = self._rows(("artifacts_by_call_id",), build, {"p_ids": self._ids(call_ids)})
        return sorted((decode_body(ToolArtifact, r[0]) for r in rows), key=lambda a: a.seq)

    def artifacts_by_id(self, ids: Sequence[str]) -> list[ToolArtifact]:
        """Artifacts ``ids`` of the conversation in ``seq`` order, by primary key
        (SqlStore.artifacts with ``ids``)."""
        t = S.tool_artifacts

        def build() -> sa.Select[Any]:
            return text_body(sa.select(t.c.body).where(*scoped_by_id(t, self._name)), self._name)

        rows = self._rows(("artifacts_by_id",), build, {"p_ids": self._ids(ids)})
        return sorted((decode_body(ToolArtifact, r[0]) for r in rows), key=lambda a: a.seq)

    # -- small tables ----------------------------------------------------------------
    def rule_bodies(self) -> list[dict[str, Any]]:
        """Pinned rule records (SqlStore.rule_bodies)."""
        t = S.rules

        def build() -> sa.Select[Any]:
            return text_body(
                sa.select(t.c.body, t.c.branch_id, t.c.seq)
                .where(*scoped(t))
                .order_by(t.c.seq, t.c.id),
                self._name,
            )

        return [
            dict(json.loads(r[0])) | {"_branch_id": r[1], "_seq": int(r[2])}
            for r in self._rows(("rules",), build)
        ]

    def participants(self) -> list[Participant]:
        """Participants, oldest first (SqlStore.participants)."""
        t = S.participants

        def build() -> sa.Select[Any]:
            return filtered_rows(t, None, [], self._name)

        return sorted(
            (decode_body(Participant, r[0]) for r in self._rows(("participants",), build)),
            key=lambda p: (p.created_at, p.id),
        )

    def skill_states(self, segments: Sequence[LineageSegment]) -> list[SkillState]:
        """Lineage skill states in ``seq`` order (SqlStore.skill_states)."""
        return self._runtime_state("skill_states", S.skill_states, SkillState, segments)

    def checkpoints(self, segments: Sequence[LineageSegment]) -> list[ContinuationCheckpoint]:
        """Lineage checkpoints in ``seq`` order (SqlStore.checkpoints)."""
        return self._runtime_state("checkpoints", S.checkpoints, ContinuationCheckpoint, segments)

    def _runtime_state(
        self, key: str, t: sa.Table, model: Any, segments: Sequence[LineageSegment]
    ) -> list[Any]:
        shape = lineage_shape(segments)

        def build() -> sa.Select[Any]:
            return filtered_rows(t, shape, [], self._name).order_by(t.c.seq)

        return [
            decode_body(model, r[0])
            for r in self._rows((key, shape), build, lineage_params(segments))
        ]
