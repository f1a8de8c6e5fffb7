"""The message reads of one assembly (:class:`~contextledger.store.reads.LineageReads`):
the newest messages, the system head, messages by id and the first user requests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from contextledger.records.enums import Role
from contextledger.records.models import Message
from contextledger.store import counters as K
from contextledger.store import schema as S
from contextledger.store.base import LineageSegment
from contextledger.store.codec import decode_body
from contextledger.store.prepared import in_values, lineage_clause, lineage_params, lineage_shape
from contextledger.store.read_statements import (
    PreparedReads,
    newest_rows,
    param,
    scoped,
    text_body,
    union_of,
)

__all__ = ["MessageReads"]


class MessageReads(PreparedReads):
    """The lineage's message reads (see :class:`~contextledger.store.reads.LineageReads`)."""

    def newest_messages(
        self, segments: Sequence[LineageSegment], last: int, kind: str | None = None
    ) -> list[Message]:
        """The newest ``last`` messages of the lineage (of ``kind`` when given), in
        ``seq`` order (SqlStore.messages with ``last`` [and ``kinds=[kind]``])."""
        shape = lineage_shape(segments)
        t = S.messages
        kinds = kind is not None

        def build() -> sa.Select[Any]:
            filters = [t.c.kind.in_([param("p_kind", t.c.kind)])] if kinds else []
            return newest_rows(t, shape, ("seq",), filters, self._name)

        params = {**lineage_params(segments), "p_last": last}
        if kinds:
            params["p_kind"] = kind
        rows = self._rows(("newest_messages", shape, kinds), build, params)
        return [decode_body(Message, r[0]) for r in reversed(rows)]

    def head_messages(
        self,
        segments: Sequence[LineageSegment],
        roles: Sequence[str],
        kind: str,
        *,
        before: int,
        last: int,
    ) -> list[Message]:
        """Lineage messages of ``kind`` with ``seq < before``, for each of ``roles`` the
        first one and the newest ``last``, in ``seq`` order without duplicates (for one
        role: SqlStore.messages with ``roles=[role], kinds=[kind]`` on the lineage cut at
        ``before``, its first row and its newest ``last``).  Each is an ordered range of
        ``ix_messages_role_kind`` per segment (backward, resp. a forward ``LIMIT 1``
        probe), all in one ``UNION ALL``: at most ``len(roles) * (last + 1)`` rows
        whatever the history length.  The cut bounds every segment (``seq <=
        before - 1``): one upper bound per segment, as SQLite (no statistics) picks
        ``ix_messages_kind`` over the longer index for a range with two upper bounds."""
        cut = [
            LineageSegment(
                branch_id=s.branch_id,
                max_seq=before - 1 if s.max_seq is None else min(s.max_seq, before - 1),
            )
            for s in segments
        ]
        shape, n = lineage_shape(cut), len(roles)
        if not shape or not n:
            return []
        t = S.messages
        one = sa.bindparam("p_one", type_=sa.Integer())

        def build() -> sa.Select[Any] | sa.CompoundSelect[Any]:
            arms = []
            for i in range(n):
                where = [
                    t.c.role == param(f"p_r{i}", t.c.role),
                    t.c.kind == param("p_kind", t.c.kind),
                ]
                arms.append(newest_rows(t, shape, ("seq",), where, self._name))
                arms.append(
                    newest_rows(t, shape, ("seq",), where, self._name, last=one, oldest=True)
                )
            return union_of(arms)

        params = {
            **lineage_params(cut),
            **{f"p_r{i}": r for i, r in enumerate(roles)},
            "p_kind": kind,
            "p_last": last,
            "p_one": 1,
        }
        rows = self._rows(("head_messages", shape, n), build, params)
        found = {m.id: m for m in (decode_body(Message, r[0]) for r in rows)}
        return sorted(found.values(), key=lambda m: m.seq)

    def messages_by_id(
        self, segments: Sequence[LineageSegment], ids: Sequence[str]
    ) -> list[Message]:
        """Lineage messages among ``ids`` in ``seq`` order (SqlStore.messages with
        ``ids``).  Read by id alone (``ix_messages_id``), the lineage checked on the few
        rows: with the lineage in the query SQLite (no statistics) ranged over a
        one-segment lineage's whole branch."""
        t = S.messages

        def build() -> sa.Select[Any]:
            return text_body(
                sa.select(t.c.body, t.c.branch_id, t.c.seq).where(
                    *scoped(t), in_values(t.c.id, "p_ids", self._name)
                ),
                self._name,
            )

        rows = self._rows(("messages_by_id",), build, {"p_ids": self._ids(ids)})
        return sorted(
            (decode_body(Message, r[0]) for r in rows if K.in_lineage(segments, r[1], int(r[2]))),
            key=lambda m: m.seq,
        )

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
                .where(*scoped(t), lineage_clause(t, (bounded,), i))
                .where(t.c.role == Role.USER.value, t.c.kind.concat("") == "chat")
                .order_by(t.c.seq)
                .limit(sa.bindparam("p_first", type_=sa.Integer()))
            )

        def build() -> sa.Select[Any] | sa.CompoundSelect[Any]:
            if len(shape) == 1:
                return text_body(probe(0, shape[0]), self._name)
            subs = [probe(i, b).subquery() for i, b in enumerate(shape)]
            return sa.union_all(*(text_body(sa.select(*s.c), self._name) for s in subs))

        rows = self._rows(
            ("first_users", shape), build, {**lineage_params(segments), "p_first": limit}
        )
        rows = sorted(rows, key=lambda r: int(r[1]))[:limit]
        return [decode_body(Message, r[0]) for r in rows]
