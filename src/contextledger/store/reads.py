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
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa

from contextledger.errors import NotFoundError
from contextledger.records.enums import Role
from contextledger.records.models import (
    ContinuationCheckpoint,
    Conversation,
    Message,
    Participant,
    SkillState,
    ToolArtifact,
    ToolCall,
    ToolMemory,
)
from contextledger.store import counters as K
from contextledger.store import schema as S
from contextledger.store.base import LineageSegment, Scope, StoreReads, SubjectEntry, require_scope
from contextledger.store.codec import decode_body
from contextledger.store.prepared import (
    in_values,
    lineage_clause,
    lineage_params,
    lineage_shape,
    list_value,
    prepared,
)

__all__ = ["LineageReads", "settled_entries"]



def settled_entries(rows: Sequence[Sequence[Any]], settled: Callable[[SubjectEntry], bool]) -> list[str]:
    """Ids of the entries a reader of ``rows`` (:class:`SubjectEntry` fields, newest
    first) needs: per subject, its entries newest first up to and including the first
    one ``settled`` accepts (all of them when none is accepted).  Rows of a settled
    subject are skipped unread."""
    done: set[str] = set()
    ids: list[str] = []
    for r in rows:
        if r[2] in done:
            continue
        ids.append(r[0])
        if settled(SubjectEntry(r[0], int(r[1]), r[2], r[3], r[4])):
            done.add(r[2])
    return ids

_Build = Callable[[], sa.Select[Any] | sa.CompoundSelect[Any]]


def _p(name: str, column: sa.ColumnElement[Any]) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=column.type)


def _scoped(t: sa.Table) -> tuple[sa.ColumnElement[bool], sa.ColumnElement[bool]]:
    return t.c.tenant_id == _p("p_tenant", t.c.tenant_id), t.c.conversation_id == _p("p_conv", t.c.conversation_id)


def _scoped_by_id(t: sa.Table, dialect: str) -> tuple[sa.ColumnElement[bool], ...]:
    # by id the primary key decides; the scope is checked in a form no (tenant,
    # conversation, …) index can serve (SqlStore.memories)
    return (
        in_values(t.c.id, "p_ids", dialect),
        t.c.tenant_id.concat("") == _p("p_tenant", t.c.tenant_id),
        t.c.conversation_id.concat("") == _p("p_conv", t.c.conversation_id),
    )


_LAST = sa.bindparam("p_last", type_=sa.Integer())


def _text_body(stmt: sa.Select[Any], dialect: str) -> sa.Select[Any]:
    """``stmt`` with its first column (``body``) read as JSON text (SqlStore._body_as_text)."""
    cols = list(stmt.selected_columns)
    body = sa.cast(cols[0], sa.Text()) if dialect == "postgresql" else sa.type_coerce(cols[0], sa.Text())
    return stmt.with_only_columns(body, *cols[1:])


def _newest(
    t: sa.Table,
    shape: tuple[bool, ...],
    order: tuple[str, ...],
    filters: Sequence[sa.ColumnElement[bool]],
    dialect: str,
    *,
    last: sa.BindParameter[Any] = _LAST,
    oldest: bool = False,
) -> sa.Select[Any]:
    """The newest ``last`` rows of a lineage (SqlStore.messages / memories with
    ``last``): one ordered backward range, or per segment one window of at most
    ``last`` rows, then the newest ``last`` of their ``UNION ALL``.  ``oldest``: the
    oldest ``last`` rows instead (forward ranges)."""
    cols = [t.c[c] for c in order]

    def direction(c: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
        return c.asc() if oldest else c.desc()

    if len(shape) <= 1:
        stmt = sa.select(t.c.body).where(*_scoped(t), lineage_clause(t, shape), *filters)
        return _text_body(stmt.order_by(*(direction(c) for c in cols)).limit(last), dialect)
    windows = []
    for i, bounded in enumerate(shape):
        sub = (
            sa.select(t.c.body, *cols)
            .where(*_scoped(t), *filters, lineage_clause(t, (bounded,), i))
            .order_by(*(direction(c) for c in cols))
            .limit(last)
            .subquery()
        )
        windows.append(sa.select(*sub.c))
    union = sa.union_all(*windows).subquery()
    stmt = sa.select(union.c.body).order_by(*(direction(union.c[c]) for c in order)).limit(last)
    return _text_body(stmt, dialect)


def _union(arms: Sequence[sa.Select[Any]]) -> sa.Select[Any] | sa.CompoundSelect[Any]:
    """One statement of ``arms`` (each ordered and limited on its own): the arm itself,
    or the ``UNION ALL`` of the arms as subqueries."""
    if len(arms) == 1:
        return arms[0]
    return sa.union_all(*(sa.select(*a.subquery().c) for a in arms))


def _filtered(t: sa.Table, shape: tuple[bool, ...] | None, filters: Sequence[sa.ColumnElement[bool]], dialect: str) -> sa.Select[Any]:
    """Bodies of the scope's rows matching ``filters`` (on the lineage of ``shape``
    unless ``None``), no ``ORDER BY`` (sorted by the caller, as the store does)."""
    lineage = () if shape is None else (lineage_clause(t, shape),)
    return _text_body(sa.select(t.c.body).where(*_scoped(t), *lineage, *filters), dialect)


class LineageReads:
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

    def __init__(self, store: StoreReads, conn: sa.Connection, scope: Scope | None, conversation_id: str) -> None:
        self.store = store
        self.conn = conn
        self.scope = require_scope(scope)
        self.conversation_id = conversation_id
        self._dialect = store.engine.dialect
        self._name = store.dialect
        self._base: dict[str, Any] = {"p_tenant": self.scope.tenant_id, "p_conv": conversation_id}

    def _rows(self, key: tuple[Any, ...], build: _Build, params: dict[str, Any] | None = None) -> list[Any]:
        stmt = prepared(self._dialect, key, build)
        return stmt.rows(self.conn, self._base if params is None else {**self._base, **params})

    def _ids(self, values: Sequence[str]) -> Any:
        return list_value(self._name, values)

    # -- conversation and lineage ----------------------------------------------------
    def conversation(self) -> Conversation:
        """The conversation (SqlStore.get_conversation).

        Raises:
            NotFoundError: not in scope.
        """
        t = S.conversations
        user = self.scope.user_id is not None

        def build() -> sa.Select[Any]:
            stmt = sa.select(t.c.body).where(t.c.id == _p("p_conv", t.c.id), t.c.tenant_id == _p("p_tenant", t.c.tenant_id))
            if user:
                stmt = stmt.where(t.c.user_id == _p("p_user", t.c.user_id))
            return _text_body(stmt, self._name)

        rows = self._rows(("conversation", user), build, {"p_user": self.scope.user_id} if user else None)
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
            return sa.select(t.c.id, t.c.parent_branch_id, t.c.fork_seq).where(*_scoped(t))

        rows = self._rows(("branches",), build)
        by_id = {r[0]: K.BranchRow(r[0], r[1], None if r[2] is None else int(r[2])) for r in rows}
        if branch_id not in by_id:
            self.store.get_branch(self.scope, branch_id, self.conn)  # NotFoundError("branch") when not in scope
            raise NotFoundError(f"branch of conversation {self.conversation_id}", branch_id)
        return [LineageSegment(branch_id=b, max_seq=lim) for b, lim in K.lineage_walk(by_id, branch_id)]

    def totals_and_outside(self, segments: Sequence[LineageSegment]) -> tuple[dict[str, int], dict[str, int]]:
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
                sa.select(*(sa.func.coalesce(sa.func.sum(t.c[k]), 0).label(f"all_{k}") for k in ("messages", "artifacts", "memories")))
                .where(*_scoped(t))
                .subquery()
            )
            cols = [t.c[k] for k in K.AGGREGATES] + [t.c["inherited_" + k] for k in K.AGGREGATES]
            return (
                sa.select(*cols, *sums.c)
                .select_from(t.join(sums, sa.true()))
                .where(t.c.branch_id == _p("p_b0", t.c.branch_id), *_scoped(t))
            )

        rows = self._rows(("counters",), build, {"p_b0": segments[0].branch_id})
        if not rows:
            return self._slow_counts(segments)
        row = rows[0]
        n = len(K.AGGREGATES)
        totals: dict[str, int | None] = {k: None if row[i] is None else int(row[i]) for i, k in enumerate(K.AGGREGATES)}
        K.merge_aggregates(totals, {k: None if row[n + i] is None else int(row[n + i]) for i, k in enumerate(K.AGGREGATES)})
        inside = {k: int(v or 0) for k, v in totals.items()}
        outside = {
            "message": int(row[2 * n]) - inside["messages"],
            "artifact": int(row[2 * n + 1]) - inside["artifacts"],
            "memory": int(row[2 * n + 2]) - inside["memories"],
        }
        return inside, outside

    def _slow_counts(self, segments: Sequence[LineageSegment]) -> tuple[dict[str, int], dict[str, int]]:
        s, c = self.store, self.conversation_id
        return s.lineage_totals(self.scope, c, segments, self.conn), s.outside_lineage_counts(self.scope, c, segments, self.conn)

    # -- messages --------------------------------------------------------------------
    def newest_messages(self, segments: Sequence[LineageSegment], last: int, kind: str | None = None) -> list[Message]:
        """The newest ``last`` messages of the lineage (of ``kind`` when given), in
        ``seq`` order (SqlStore.messages with ``last`` [and ``kinds=[kind]``])."""
        shape = lineage_shape(segments)
        t = S.messages
        kinds = kind is not None

        def build() -> sa.Select[Any]:
            filters = [t.c.kind.in_([_p("p_kind", t.c.kind)])] if kinds else []
            return _newest(t, shape, ("seq",), filters, self._name)

        params = {**lineage_params(segments), "p_last": last}
        if kinds:
            params["p_kind"] = kind
        rows = self._rows(("newest_messages", shape, kinds), build, params)
        return [decode_body(Message, r[0]) for r in reversed(rows)]

    def head_messages(self, segments: Sequence[LineageSegment], roles: Sequence[str], kind: str, *, before: int, last: int) -> list[Message]:
        """Lineage messages of ``kind`` with ``seq < before``, for each of ``roles`` the
        first one and the newest ``last``, in ``seq`` order without duplicates (for one
        role: SqlStore.messages with ``roles=[role], kinds=[kind]`` on the lineage cut at
        ``before``, its first row and its newest ``last``).  Each is an ordered range of
        ``ix_messages_role_kind`` per segment (backward, resp. a forward ``LIMIT 1``
        probe), all in one ``UNION ALL``: at most ``len(roles) * (last + 1)`` rows
        whatever the history length.  The cut bounds every segment (``seq <=
        before - 1``): one upper bound per segment, as SQLite (no statistics) picks
        ``ix_messages_kind`` over the longer index for a range with two upper bounds."""
        cut = [LineageSegment(branch_id=s.branch_id, max_seq=before - 1 if s.max_seq is None else min(s.max_seq, before - 1)) for s in segments]
        shape, n = lineage_shape(cut), len(roles)
        if not shape or not n:
            return []
        t = S.messages
        one = sa.bindparam("p_one", type_=sa.Integer())

        def build() -> sa.Select[Any] | sa.CompoundSelect[Any]:
            arms = []
            for i in range(n):
                where = [t.c.role == _p(f"p_r{i}", t.c.role), t.c.kind == _p("p_kind", t.c.kind)]
                arms.append(_newest(t, shape, ("seq",), where, self._name))
                arms.append(_newest(t, shape, ("seq",), where, self._name, last=one, oldest=True))
            return _union(arms)

        params = {**lineage_params(cut), **{f"p_r{i}": r for i, r in enumerate(roles)}, "p_kind": kind, "p_last": last, "p_one": 1}
        rows = self._rows(("head_messages", shape, n), build, params)
        found = {m.id: m for m in (decode_body(Message, r[0]) for r in rows)}
        return sorted(found.values(), key=lambda m: m.seq)

    def messages_by_id(self, segments: Sequence[LineageSegment], ids: Sequence[str]) -> list[Message]:
        """Lineage messages among ``ids`` in ``seq`` order (SqlStore.messages with
        ``ids``).  Read by id alone (``ix_messages_id``), the lineage checked on the few
        rows: with the lineage in the query SQLite (no statistics) ranged over a
        one-segment lineage's whole branch."""
        t = S.messages

        def build() -> sa.Select[Any]:
            return _text_body(sa.select(t.c.body, t.c.branch_id, t.c.seq).where(*_scoped(t), in_values(t.c.id, "p_ids", self._name)), self._name)

        rows = self._rows(("messages_by_id",), build, {"p_ids": self._ids(ids)})
        return sorted((decode_body(Message, r[0]) for r in rows if K.in_lineage(segments, r[1], int(r[2]))), key=lambda m: m.seq)

    def first_user(self, segments: Sequence[LineageSegment]) -> Message | None:
        """The lineage's first user chat message (the first of :meth:`first_users`)."""
        firsts = self.first_users(segments, 1)
        return firsts[0] if firsts else None

    def first_users(self, segments: Sequence[LineageSegment], limit: int) -> list[Message]:
        """The lineage's first ``limit`` user chat messages in ``seq`` order: the first
        ``limit`` of each segment (one ``LIMIT`` probe of ``ix_messages_role`` per
        segment, in one ``UNION ALL``), then the lowest seqs.  At most
        ``len(segments) * limit`` rows whatever the history length."""
        shape = lineage_shape(segments)
        if not shape or limit < 1:
            return []
        t = S.messages

        def probe(i: int, bounded: bool) -> sa.Select[Any]:
            # ``kind || ''``: not indexable, so the probe goes through ix_messages_role
            # (role, branch, seq) and stops after the first user rows; ix_messages_kind
            # (kind = chat, most rows) would walk the branch's chat rows to the first user one
            return (
                sa.select(t.c.body, t.c.seq)
                .where(*_scoped(t), lineage_clause(t, (bounded,), i))
                .where(t.c.role == Role.USER.value, t.c.kind.concat("") == "chat")
                .order_by(t.c.seq)
                .limit(sa.bindparam("p_first", type_=sa.Integer()))
            )

        def build() -> sa.Select[Any] | sa.CompoundSelect[Any]:
            if len(shape) == 1:
                return _text_body(probe(0, shape[0]), self._name)
            subs = [probe(i, b).subquery() for i, b in enumerate(shape)]
            return sa.union_all(*(_text_body(sa.select(*s.c), self._name) for s in subs))

        rows = self._rows(("first_users", shape), build, {**lineage_params(segments), "p_first": limit})
        rows = sorted(rows, key=lambda r: int(r[1]))[:limit]
        return [decode_body(Message, r[0]) for r in rows]

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
            return _filtered(t, None, [in_values(column, "p_ids", self._name)], self._name)

        rows = self._rows((key,), build, {"p_ids": self._ids(values)})
        return sorted((decode_body(ToolCall, r[0]) for r in rows), key=lambda c: (c.seq, c.call_index))

    def newest_calls(self, segments: Sequence[LineageSegment], limits: Sequence[tuple[str, int]]) -> list[ToolCall]:
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
            return _union([
                _newest(t, shape, ("seq", "id"), [t.c.status == _p(f"p_st{i}", t.c.status)], self._name,
                        last=sa.bindparam(f"p_last{i}", type_=sa.Integer()))
                for i in range(n)
            ])

        params = {**lineage_params(segments)}
        for i, (status, last) in enumerate(limits):
            params[f"p_st{i}"] = status
            params[f"p_last{i}"] = last
        rows = self._rows(("newest_calls", shape, n), build, params)
        return sorted((decode_body(ToolCall, r[0]) for r in rows), key=lambda c: (c.seq, c.call_index))

    def artifacts_by_call_id(self, call_ids: Sequence[str]) -> list[ToolArtifact]:
        """Artifacts of ``call_ids`` (any branch) in ``seq`` order (SqlStore.artifacts
        with ``call_ids``)."""
        t = S.tool_artifacts

        def build() -> sa.Select[Any]:
            return _filtered(t, None, [in_values(t.c.call_id, "p_ids", self._name)], self._name)

        rows = self._rows(("artifacts_by_call_id",), build, {"p_ids": self._ids(call_ids)})
        return sorted((decode_body(ToolArtifact, r[0]) for r in rows), key=lambda a: a.seq)

    def artifacts_by_id(self, ids: Sequence[str]) -> list[ToolArtifact]:
        """Artifacts ``ids`` of the conversation in ``seq`` order, by primary key
        (SqlStore.artifacts with ``ids``)."""
        t = S.tool_artifacts

        def build() -> sa.Select[Any]:
            return _text_body(sa.select(t.c.body).where(*_scoped_by_id(t, self._name)), self._name)

        rows = self._rows(("artifacts_by_id",), build, {"p_ids": self._ids(ids)})
        return sorted((decode_body(ToolArtifact, r[0]) for r in rows), key=lambda a: a.seq)

    # -- memories --------------------------------------------------------------------
    def newest_memories(self, segments: Sequence[LineageSegment], last: int) -> list[ToolMemory]:
        """The newest ``last`` memories of the lineage in ``(seq, id)`` order
        (SqlStore.memories with ``last``)."""
        shape = lineage_shape(segments)
        t = S.tool_memories

        def build() -> sa.Select[Any]:
            return _newest(t, shape, ("seq", "id"), [], self._name)

        rows = self._rows(("newest_memories", shape), build, {**lineage_params(segments), "p_last": last})
        return sorted((decode_body(ToolMemory, r[0]) for r in rows), key=lambda m: (m.seq, m.id))

    def memories_by_artifact(self, segments: Sequence[LineageSegment], artifact_ids: Sequence[str]) -> list[ToolMemory]:
        """Lineage memories of ``artifact_ids`` in ``(seq, id)`` order (SqlStore.memories
        with ``artifact_ids``).  Read by artifact id alone (``ix_tool_memories_artifact``),
        the lineage checked on the few rows (see :meth:`messages_by_id`)."""
        t = S.tool_memories

        def build() -> sa.Select[Any]:
            stmt = sa.select(t.c.body, t.c.branch_id, t.c.seq).where(*_scoped(t), in_values(t.c.artifact_id, "p_ids", self._name))
            return _text_body(stmt, self._name)

        rows = self._rows(("memories_by_artifact",), build, {"p_ids": self._ids(artifact_ids)})
        return sorted((decode_body(ToolMemory, r[0]) for r in rows if K.in_lineage(segments, r[1], int(r[2]))), key=lambda m: (m.seq, m.id))

    def memories_at_seqs(self, segments: Sequence[LineageSegment], seqs: Sequence[int]) -> list[ToolMemory]:
        """Lineage memories recorded at ``seqs`` (what the handles ``m12`` / ``a12`` name:
        :mod:`contextledger.handles`) in ``(seq, id)`` order: per lineage segment one
        probe of ``ix_tool_memories_lineage`` (branch, then the listed seqs), in one
        ``UNION ALL`` — at most a few rows per seq and segment, whatever the history
        length."""
        shape = lineage_shape(segments)
        if not shape or not seqs:
            return []
        t = S.tool_memories

        def build() -> sa.Select[Any] | sa.CompoundSelect[Any]:
            at = in_values(t.c.seq, "p_seqs", self._name)
            return _union([_filtered(t, None, [lineage_clause(t, (bounded,), i), at], self._name) for i, bounded in enumerate(shape)])

        params = {**lineage_params(segments), "p_seqs": list_value(self._name, sorted(set(seqs)))}
        rows = self._rows(("memories_at_seqs", shape), build, params)
        return sorted((decode_body(ToolMemory, r[0]) for r in rows), key=lambda m: (m.seq, m.id))

    def memories_by_id(self, ids: Sequence[str]) -> list[ToolMemory]:
        """Memories ``ids`` of the conversation in ``(seq, id)`` order, by primary key
        (SqlStore.memories with ``ids``)."""
        t = S.tool_memories

        def build() -> sa.Select[Any]:
            return _text_body(sa.select(t.c.body).where(*_scoped_by_id(t, self._name)), self._name)

        rows = self._rows(("memories_by_id",), build, {"p_ids": self._ids(ids)})
        return sorted((decode_body(ToolMemory, r[0]) for r in rows), key=lambda m: (m.seq, m.id))

    def term_matches(self, terms: Sequence[str], per_term: int) -> list[tuple[str, str, str, int]]:
        """``(memory_id, term, branch_id, seq)`` of the newest ``per_term`` memories
        indexed under each term (SqlStore.term_matches): one backward range of
        ``ix_memory_terms_term`` per term, in one ``UNION ALL``; rows by term, then
        newest first."""
        uniq = sorted(set(terms))
        if not uniq:
            return []
        t = S.memory_terms
        n = len(uniq)

        def one(i: int) -> sa.Select[Any]:
            return (
                sa.select(t.c.memory_id, t.c.term, t.c.branch_id, t.c.seq)
                .where(*_scoped(t), t.c.term == _p(f"p_term{i}", t.c.term))
                .order_by(t.c.seq.desc())
                .limit(sa.bindparam("p_per", type_=sa.Integer()))
            )

        def build() -> sa.Select[Any] | sa.CompoundSelect[Any]:
            if n == 1:
                return one(0)
            return sa.union_all(*(sa.select(*s.c) for s in (one(i).subquery() for i in range(n))))

        params: dict[str, Any] = {f"p_term{i}": term for i, term in enumerate(uniq)}
        params["p_per"] = per_term
        rows = self._rows(("term_matches", n), build, params)
        # the arms come back in order; a stable sort by term keeps each arm's order
        rows.sort(key=lambda r: r[1])
        return [(r[0], r[1], r[2], int(r[3])) for r in rows]

    def recent_subject_memories(
        self,
        segments: Sequence[LineageSegment],
        subject_prefix: str,
        *,
        scan: int,
        limit: int,
        settled: Callable[[SubjectEntry], bool] | None = None,
    ) -> list[ToolMemory]:
        """SqlStore.recent_subject_memories: the newest ``limit`` memories whose
        ``subject_key`` starts with ``subject_prefix`` among the newest ``scan`` of each
        lineage segment, in ``(seq, id)`` order — the per-segment backward ranges of
        ``ix_tool_memories_lineage`` and the bodies by primary key, in one statement.
        With ``settled``: the entries of that window first (no bodies), then the bodies
        of each subject's entries newest first up to the first ``settled`` one."""
        shape = lineage_shape(segments)
        if not shape:
            return []
        params = {**lineage_params(segments), "p_scan": scan, "p_limit": limit, "p_lo": subject_prefix, "p_hi": subject_prefix + "\uffff"}
        if settled is not None:
            rows = self._rows(("subject_entries", shape), lambda: self._subject_window(shape, bodies=False), params)
            ids = settled_entries(rows, settled)
            return self.memories_by_id(ids) if ids else []
        rows = self._rows(("recent_subject_memories", shape), lambda: self._subject_window(shape, bodies=True), params)
        return sorted((decode_body(ToolMemory, r[0]) for r in rows), key=lambda m: (m.seq, m.id))

    def _subject_window(self, shape: tuple[bool, ...], *, bodies: bool) -> sa.Select[Any]:
        """The newest ``p_limit`` subject memories among the newest ``p_scan`` of each
        segment: their bodies (by primary key) or, without ``bodies``, their
        :class:`SubjectEntry` columns newest first."""
        t = S.tool_memories
        scan_p = sa.bindparam("p_scan", type_=sa.Integer())
        cols = (t.c.id, t.c.seq, t.c.subject_key) if bodies else (t.c.id, t.c.seq, t.c.subject_key, t.c.visibility, t.c.owner_participant_id)
        windows = []
        for i, bounded in enumerate(shape):
            inner = (
                sa.select(*cols)
                .where(*_scoped(t), lineage_clause(t, (bounded,), i))
                .order_by(t.c.seq.desc())
                .limit(scan_p)
                .subquery()
            )
            windows.append(
                sa.select(*(c for c in inner.c if c.name != "subject_key" or not bodies)).where(
                    inner.c.subject_key >= _p("p_lo", t.c.subject_key), inner.c.subject_key < _p("p_hi", t.c.subject_key)
                )
            )
        union = sa.union_all(*windows).subquery()
        newest_first = (union.c.seq.desc(), union.c.id.desc())
        limit = sa.bindparam("p_limit", type_=sa.Integer())
        if not bodies:
            return sa.select(*union.c).order_by(*newest_first).limit(limit)
        newest = sa.select(union.c.id).order_by(*newest_first).limit(limit)
        return _text_body(
            sa.select(t.c.body).where(
                t.c.id.in_(newest),
                t.c.tenant_id.concat("") == _p("p_tenant", t.c.tenant_id),
                t.c.conversation_id.concat("") == _p("p_conv", t.c.conversation_id),
            ),
            self._name,
        )

    # -- small tables ----------------------------------------------------------------
    def rule_bodies(self) -> list[dict[str, Any]]:
        """Pinned rule records (SqlStore.rule_bodies)."""
        t = S.rules

        def build() -> sa.Select[Any]:
            return _text_body(sa.select(t.c.body, t.c.branch_id, t.c.seq).where(*_scoped(t)).order_by(t.c.seq, t.c.id), self._name)

        return [dict(json.loads(r[0])) | {"_branch_id": r[1], "_seq": int(r[2])} for r in self._rows(("rules",), build)]

    def participants(self) -> list[Participant]:
        """Participants, oldest first (SqlStore.participants)."""
        t = S.participants

        def build() -> sa.Select[Any]:
            return _filtered(t, None, [], self._name)

        return sorted((decode_body(Participant, r[0]) for r in self._rows(("participants",), build)), key=lambda p: (p.created_at, p.id))

    def skill_states(self, segments: Sequence[LineageSegment]) -> list[SkillState]:
        """Lineage skill states in ``seq`` order (SqlStore.skill_states)."""
        return self._runtime_state("skill_states", S.skill_states, SkillState, segments)

    def checkpoints(self, segments: Sequence[LineageSegment]) -> list[ContinuationCheckpoint]:
        """Lineage checkpoints in ``seq`` order (SqlStore.checkpoints)."""
        return self._runtime_state("checkpoints", S.checkpoints, ContinuationCheckpoint, segments)

    def _runtime_state(self, key: str, t: sa.Table, model: Any, segments: Sequence[LineageSegment]) -> list[Any]:
        shape = lineage_shape(segments)

        def build() -> sa.Select[Any]:
            return _filtered(t, shape, [], self._name).order_by(t.c.seq)

        return [decode_body(model, r[0]) for r in self._rows((key, shape), build, lineage_params(segments))]
