"""Per-branch counters: lineage totals and out-of-lineage counts in O(1) reads.

Each branch has one ``branch_counters`` row (``store/schema.py``): its *own* message,
artifact and memory counts (message and artifact token sums, message seq range) and the
same aggregates *inherited* from its ancestors up to each fork point.  The lineage totals
of a branch are ``own + inherited``; what lies outside a lineage is the conversation's
sum of ``own`` over all branches minus the lineage totals.  Neither reads the history.

The :class:`~contextledger.store.sql.Writer` keeps the rows exact inside the transaction
that inserts the counted rows:

* inserts accumulate per-branch deltas, applied before commit with one atomic
  ``UPDATE … SET n = n + :d`` per touched branch;
* a new branch's inherited aggregates are its parent's inherited aggregates plus the
  parent's own rows up to the fork point (a range count from whichever end of the
  parent is nearer the fork point), or a full count over its ancestors when the fork
  tightens an older limit;
* a row inserted later on a branch at or below a child's fork point (imports write
  branches first, then their history) is added to the inherited aggregates of every
  descendant whose lineage includes it.

On PostgreSQL the writer first takes the conversation's row lock (the lock
``Writer.allocate_seq`` takes), so the counters of one conversation change under one
writer at a time; on SQLite ``BEGIN IMMEDIATE`` already serialises writers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from contextledger.store import schema as S

__all__ = [
    "AGGREGATES",
    "UNBOUNDED_FORK",
    "BranchRow",
    "Delta",
    "aggregate",
    "bump_statement",
    "empty_aggregates",
    "lineage_walk",
    "merge_aggregates",
]

UNBOUNDED_FORK = 2**62
"""``max_child_fork_seq`` recorded for a child without a fork point (it inherits the
whole parent)."""

AGGREGATES = ("messages", "message_tokens", "min_seq", "max_seq", "artifacts", "artifact_tokens", "memories")
"""Aggregate names, as ``branch_counters`` columns (own) and with ``inherited_`` prefixed."""


class BranchRow(NamedTuple):
    """The lineage-relevant columns of one branch."""

    id: str
    parent_branch_id: str | None
    fork_seq: int | None


def lineage_walk(by_id: Mapping[str, BranchRow], branch_id: str) -> list[tuple[str, int | None]]:
    """``[(branch_id, max_seq), …]`` newest first: the branch itself (``None``, all of it),
    then each ancestor with the highest seq inherited from it (the tightest fork point on
    the way up; ``None`` when a fork point is unknown).  The walk of
    :meth:`SqlStore.lineage`; stops at a missing parent or a cycle."""
    segments: list[tuple[str, int | None]] = [(branch_id, None)]
    limit: int | None = None
    current = by_id[branch_id]
    seen = {branch_id}
    while current.parent_branch_id is not None:
        fork = current.fork_seq
        limit = fork if limit is None or fork is None else min(limit, fork)
        parent = by_id.get(current.parent_branch_id)
        if parent is None or parent.id in seen:
            break
        seen.add(parent.id)
        segments.append((parent.id, limit))
        current = parent
    return segments


def empty_aggregates() -> dict[str, int | None]:
    """Zero counts and no seq range."""
    return {k: None if k.endswith("_seq") else 0 for k in AGGREGATES}


def merge_aggregates(into: dict[str, int | None], other: Mapping[str, int | None], sign: int = 1) -> None:
    """Add ``other`` to ``into`` in place (``sign=-1`` subtracts counts; seq ranges are
    only ever widened, so subtract only where the range is recomputed separately)."""
    for k in AGGREGATES:
        v = other.get(k)
        if v is None:
            continue
        cur = into.get(k)
        if k == "min_seq":
            into[k] = v if cur is None else min(cur, v)
        elif k == "max_seq":
            into[k] = v if cur is None else max(cur, v)
        else:
            into[k] = (cur or 0) + sign * v


def aggregate(
    conn: Connection,
    tenant_id: str,
    conversation_id: str,
    where: Callable[[sa.Table], sa.ColumnElement[bool]],
) -> dict[str, int | None]:
    """Count the messages (with token sum and seq range), artifacts (token sum) and
    memories of one conversation matching ``where(table)`` — three aggregate queries over
    the rows themselves (the slow path: new counters rows, forks that tighten a limit)."""
    m, a, t = S.messages, S.tool_artifacts, S.tool_memories
    r1 = conn.execute(
        sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(m.c.token_count), 0), sa.func.min(m.c.seq), sa.func.max(m.c.seq)).where(
            m.c.tenant_id == tenant_id, m.c.conversation_id == conversation_id, where(m)
        )
    ).one()
    r2 = conn.execute(
        sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(a.c.result_tokens), 0)).where(
            a.c.tenant_id == tenant_id, a.c.conversation_id == conversation_id, where(a)
        )
    ).one()
    r3 = conn.execute(
        sa.select(sa.func.count()).where(t.c.tenant_id == tenant_id, t.c.conversation_id == conversation_id, where(t))
    ).one()
    return {
        "messages": int(r1[0]),
        "message_tokens": int(r1[1]),
        "min_seq": None if r1[2] is None else int(r1[2]),
        "max_seq": None if r1[3] is None else int(r1[3]),
        "artifacts": int(r2[0]),
        "artifact_tokens": int(r2[1]),
        "memories": int(r3[0]),
    }


@dataclass
class Delta:
    """Counts added to one branch in the current transaction, and the rows behind them
    (``(seq, kind, tokens)``, kind ``message`` / ``artifact`` / ``memory``) for propagation
    to descendants."""

    conversation_id: str
    values: dict[str, int | None] = field(default_factory=empty_aggregates)
    rows: list[tuple[int, str, int]] = field(default_factory=list)

    def add(self, seq: int, kind: str, tokens: int) -> None:
        """Count one inserted row."""
        v = self.values
        if kind == "message":
            v["messages"] = (v["messages"] or 0) + 1
            v["message_tokens"] = (v["message_tokens"] or 0) + tokens
            v["min_seq"] = seq if v["min_seq"] is None else min(v["min_seq"], seq)
            v["max_seq"] = seq if v["max_seq"] is None else max(v["max_seq"], seq)
        elif kind == "artifact":
            v["artifacts"] = (v["artifacts"] or 0) + 1
            v["artifact_tokens"] = (v["artifact_tokens"] or 0) + tokens
        else:
            v["memories"] = (v["memories"] or 0) + 1
        self.rows.append((seq, kind, tokens))


def bump_params(branch_id: str, tenant_id: str, values: Mapping[str, int | None]) -> dict[str, Any]:
    """Bind parameters of :func:`bump_statement` for adding ``values``."""
    return {
        "p_branch": branch_id,
        "p_tenant": tenant_id,
        "p_lo": values.get("min_seq"),
        "p_hi": values.get("max_seq"),
        **{f"p_{k}": int(values.get(k) or 0) for k in AGGREGATES if not k.endswith("_seq")},
    }


@cache
def bump_statement(prefix: str) -> sa.Update:
    """``UPDATE branch_counters SET <prefix>n = <prefix>n + :d …`` for one branch (atomic
    increments; the seq range widened to include ``:p_lo``/``:p_hi`` when given),
    returning ``max_child_fork_seq``.  ``prefix`` is ``""`` (own) or ``"inherited_"``.
    Built once per prefix so SQLAlchemy reuses its compiled form."""
    t = S.branch_counters
    lo = sa.bindparam("p_lo", type_=sa.BigInteger)
    hi = sa.bindparam("p_hi", type_=sa.BigInteger)
    cmin, cmax = t.c[prefix + "min_seq"], t.c[prefix + "max_seq"]
    values: dict[str, Any] = {
        prefix + k: t.c[prefix + k] + sa.bindparam(f"p_{k}", type_=sa.BigInteger) for k in AGGREGATES if not k.endswith("_seq")
    }
    values[prefix + "min_seq"] = sa.case((lo.is_(None), cmin), (sa.or_(cmin.is_(None), lo < cmin), lo), else_=cmin)
    values[prefix + "max_seq"] = sa.case((hi.is_(None), cmax), (sa.or_(cmax.is_(None), hi > cmax), hi), else_=cmax)
    return (
        t.update()
        .where(t.c.branch_id == sa.bindparam("p_branch"), t.c.tenant_id == sa.bindparam("p_tenant"))
        .values(values)
        .returning(t.c.max_child_fork_seq)
    )


@cache
def fork_statement() -> sa.Update:
    """Raise a branch's ``max_child_fork_seq`` to ``:p_fork`` (returns the branch id)."""
    t = S.branch_counters
    fork = sa.bindparam("p_fork", type_=sa.BigInteger)
    cur = t.c.max_child_fork_seq
    return (
        t.update()
        .where(t.c.branch_id == sa.bindparam("p_branch"), t.c.tenant_id == sa.bindparam("p_tenant"))
        .values(max_child_fork_seq=sa.case((sa.or_(cur.is_(None), cur < fork), fork), else_=cur))
        .returning(t.c.branch_id)
    )


def row_values(row: Any, prefix: str) -> dict[str, int | None]:
    """The aggregates of a ``branch_counters`` row under ``prefix`` (``""`` or ``"inherited_"``)."""
    m = row._mapping
    return {k: (None if m[prefix + k] is None else int(m[prefix + k])) for k in AGGREGATES}


def in_lineage(segments: Sequence[Any], branch_id: str, seq: int) -> bool:
    """Whether a row on ``branch_id`` at ``seq`` lies in the lineage ``segments``
    (:class:`~contextledger.store.base.LineageSegment` list)."""
    for s in segments:
        if s.branch_id == branch_id:
            return s.max_seq is None or seq <= s.max_seq
    return False
