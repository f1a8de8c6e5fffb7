"""The memory reads of one assembly (:class:`~contextledger.store.reads.LineageReads`):
the newest memories, memories by artifact, seq and id, recall's term lookups and the
working set's newest subjects."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa

from contextledger.records.models import ToolMemory
from contextledger.store import counters as K
from contextledger.store import schema as S
from contextledger.store.base import LineageSegment, SubjectEntry
from contextledger.store.codec import decode_body
from contextledger.store.prepared import (
    in_values,
    lineage_clause,
    lineage_params,
    lineage_shape,
    list_value,
)
from contextledger.store.read_statements import (
    PreparedReads,
    filtered_rows,
    newest_rows,
    param,
    scoped,
    scoped_by_id,
    text_body,
    union_of,
)

__all__ = ["MemoryReads", "settled_entries"]


def settled_entries(
    rows: Sequence[Sequence[Any]], settled: Callable[[SubjectEntry], bool]
) -> list[str]:
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


class MemoryReads(PreparedReads):
    """The lineage's memory reads (see :class:`~contextledger.store.reads.LineageReads`)."""

    def newest_memories(self, segments: Sequence[LineageSegment], last: int) -> list[ToolMemory]:
        """The newest ``last`` memories of the lineage in ``(seq, id)`` order
        (SqlStore.memories with ``last``)."""
        shape = lineage_shape(segments)
        t = S.tool_memories

        def build() -> sa.Select[Any]:
            return newest_rows(t, shape, ("seq", "id"), [], self._name)

        rows = self._rows(
            ("newest_memories", shape), build, {**lineage_params(segments), "p_last": last}
        )
        return sorted((decode_body(ToolMemory, r[0]) for r in rows), key=lambda m: (m.seq, m.id))

    def memories_by_artifact(
        self, segments: Sequence[LineageSegment], artifact_ids: Sequence[str]
    ) -> list[ToolMemory]:
        """Lineage memories of ``artifact_ids`` in ``(seq, id)`` order (SqlStore.memories
        with ``artifact_ids``).  Read by artifact id alone (``ix_tool_memories_artifact``),
        the lineage checked on the few rows (see
        :meth:`~contextledger.store.read_messages.MessageReads.messages_by_id`)."""
        t = S.tool_memories

        def build() -> sa.Select[Any]:
            stmt = sa.select(t.c.body, t.c.branch_id, t.c.seq).where(
                *scoped(t), in_values(t.c.artifact_id, "p_ids", self._name)
            )
            return text_body(stmt, self._name)

        rows = self._rows(("memories_by_artifact",), build, {"p_ids": self._ids(artifact_ids)})
        return sorted(
            (
                decode_body(ToolMemory, r[0])
                for r in rows
                if K.in_lineage(segments, r[1], int(r[2]))
            ),
            key=lambda m: (m.seq, m.id),
        )

    def memories_at_seqs(
        self, segments: Sequence[LineageSegment], seqs: Sequence[int]
    ) -> list[ToolMemory]:
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
            return union_of(
                [
                    filtered_rows(t, None, [lineage_clause(t, (bounded,), i), at], self._name)
                    for i, bounded in enumerate(shape)
                ]
            )

        params = {**lineage_params(segments), "p_seqs": list_value(self._name, sorted(set(seqs)))}
        rows = self._rows(("memories_at_seqs", shape), build, params)
        return sorted((decode_body(ToolMemory, r[0]) for r in rows), key=lambda m: (m.seq, m.id))

    def memories_by_id(self, ids: Sequence[str]) -> list[ToolMemory]:
        """Memories ``ids`` of the conversation in ``(seq, id)`` order, by primary key
        (SqlStore.memories with ``ids``)."""
        t = S.tool_memories

        def build() -> sa.Select[Any]:
            return text_body(sa.select(t.c.body).where(*scoped_by_id(t, self._name)), self._name)

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
                .where(*scoped(t), t.c.term == param(f"p_term{i}", t.c.term))
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
        params = {
            **lineage_params(segments),
            "p_scan": scan,
            "p_limit": limit,
            "p_lo": subject_prefix,
            "p_hi": subject_prefix + "\uffff",
        }
        if settled is not None:
            rows = self._rows(
                ("subject_entries", shape),
                lambda: self._subject_window(shape, bodies=False),
                params,
            )
            ids = settled_entries(rows, settled)
            return self.memories_by_id(ids) if ids else []
        rows = self._rows(
            ("recent_subject_memories", shape),
            lambda: self._subject_window(shape, bodies=True),
            params,
        )
        return sorted((decode_body(ToolMemory, r[0]) for r in rows), key=lambda m: (m.seq, m.id))

    def _subject_window(self, shape: tuple[bool, ...], *, bodies: bool) -> sa.Select[Any]:
        """The newest ``p_limit`` subject memories among the newest ``p_scan`` of each
        segment: their bodies (by primary key) or, without ``bodies``, their
        :class:`SubjectEntry` columns newest first."""
        t = S.tool_memories
        scan_p = sa.bindparam("p_scan", type_=sa.Integer())
        cols = (
            (t.c.id, t.c.seq, t.c.subject_key)
            if bodies
            else (t.c.id, t.c.seq, t.c.subject_key, t.c.visibility, t.c.owner_participant_id)
        )
        windows = []
        for i, bounded in enumerate(shape):
            inner = (
                sa.select(*cols)
                .where(*scoped(t), lineage_clause(t, (bounded,), i))
                .order_by(t.c.seq.desc())
                .limit(scan_p)
                .subquery()
            )
            windows.append(
                sa.select(*(c for c in inner.c if c.name != "subject_key" or not bodies)).where(
                    inner.c.subject_key >= param("p_lo", t.c.subject_key),
                    inner.c.subject_key < param("p_hi", t.c.subject_key),
                )
            )
        union = sa.union_all(*windows).subquery()
        newest_first = (union.c.seq.desc(), union.c.id.desc())
        limit = sa.bindparam("p_limit", type_=sa.Integer())
        if not bodies:
            return sa.select(*union.c).order_by(*newest_first).limit(limit)
        newest = sa.select(union.c.id).order_by(*newest_first).limit(limit)
        return text_body(
            sa.select(t.c.body).where(
                t.c.id.in_(newest),
                t.c.tenant_id.concat("") == param("p_tenant", t.c.tenant_id),
                t.c.conversation_id.concat("") == param("p_conv", t.c.conversation_id),
            ),
            self._name,
        )
