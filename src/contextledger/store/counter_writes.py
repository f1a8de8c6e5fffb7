"""Keeping ``branch_counters`` exact inside a write transaction (``store/counters.py``).

Each inserted message, artifact and memory is counted on its branch as it is written
(:meth:`CounterWrites.count`); the counts are applied before commit, before a fork reads
them and before a lineage total is read in the transaction (:meth:`CounterWrites.flush`).
Rows inserted at or below a fork point after the fork are added to the inherited counts
of every branch whose lineage includes them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from contextledger.records.models import Branch
from contextledger.store import counters as K
from contextledger.store import schema as S
from contextledger.store.base import LineageSegment
from contextledger.store.clauses import segments_clause

__all__ = ["CounterWrites"]


class CounterWrites:
    """The branch counters of one write transaction.

    Args:
        conn: the writer's connection.
        tenant_id: the writer's tenant.
        dialect: ``"sqlite"`` or ``"postgresql"`` (PostgreSQL takes the conversation's
            row lock before counters change).
    """

    def __init__(self, conn: Connection, tenant_id: str, dialect: str) -> None:
        self.conn = conn
        self.tenant_id = tenant_id
        self.dialect = dialect
        self._pending: dict[str, K.Delta] = {}
        self._locked: set[str] = set()
        self._trees: dict[str, dict[str, K.BranchRow]] = {}

    def add_branch(self, branch: Branch, insert_row: Callable[[], object]) -> None:
        """Insert ``branch`` (``insert_row()`` writes its row) and its counters row: what
        it inherits from its ancestors is computed now, from the parent's counters; the
        parent's row learns the new fork point."""
        conv = branch.conversation_id
        self.flush()
        self.lock_conversation(conv)
        insert_row()
        self._trees.pop(conv, None)
        inherited = self.inherited(conv, branch.id)
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
            params = {"p_branch": branch.parent_branch_id, "p_tenant": self.tenant_id, "p_fork": fork}
            if self.conn.execute(K.fork_statement(), params).first() is None and branch.parent_branch_id in self.tree(conv):
                self.create_row(conv, branch.parent_branch_id)

    def count(self, conversation_id: str, branch_id: str, seq: int, kind: str, tokens: int) -> None:
        delta = self._pending.get(branch_id)
        if delta is None:
            delta = self._pending[branch_id] = K.Delta(conversation_id)
        delta.add(seq, kind, tokens)

    def lock_conversation(self, conversation_id: str) -> None:
        """PostgreSQL: take the conversation's row lock (held to commit) before reading or
        changing its counters, so they change under one writer at a time."""
        if self.dialect != "postgresql" or conversation_id in self._locked:
            return
        t = S.conversations
        self.conn.execute(
            sa.select(t.c.id).where(t.c.id == conversation_id, t.c.tenant_id == self.tenant_id).with_for_update()
        )
        self._locked.add(conversation_id)

    def tree(self, conversation_id: str) -> dict[str, K.BranchRow]:
        tree = self._trees.get(conversation_id)
        if tree is None:
            t = S.branches
            rows = self.conn.execute(
                sa.select(t.c.id, t.c.parent_branch_id, t.c.fork_seq).where(
                    t.c.tenant_id == self.tenant_id, t.c.conversation_id == conversation_id
                )
            ).all()
            tree = {r.id: K.BranchRow(r.id, r.parent_branch_id, None if r.fork_seq is None else int(r.fork_seq)) for r in rows}
            self._trees[conversation_id] = tree
        return tree

    def flush(self) -> None:
        """Apply the counts of the rows inserted so far to ``branch_counters`` (called
        before commit, before a fork reads them and before a lineage total is read inside
        this transaction)."""
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        for conv in sorted({d.conversation_id for d in pending.values()}):
            self.lock_conversation(conv)
        tenant = self.tenant_id
        for branch_id in sorted(pending):
            delta = pending[branch_id]
            row = self.conn.execute(K.bump_statement(""), K.bump_params(branch_id, tenant, delta.values)).first()
            if row is None:  # no counters row (not expected): build it from the rows, pending ones included
                max_child = self.create_row(delta.conversation_id, branch_id)
            else:
                max_child = row.max_child_fork_seq
            if max_child is not None:
                late = [r for r in delta.rows if r[0] <= max_child]
                if late:
                    self._propagate(delta.conversation_id, branch_id, late)

    def _propagate(self, conversation_id: str, branch_id: str, rows: Sequence[tuple[int, str, int]]) -> None:
        """Add rows inserted on ``branch_id`` to the inherited counts of every branch whose
        lineage includes them (rows at or below a fork point, inserted after the fork)."""
        tree = self.tree(conversation_id)
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
                self.conn.execute(K.bump_statement("inherited_"), K.bump_params(other, self.tenant_id, delta.values))

    def inherited(self, conversation_id: str, branch_id: str) -> dict[str, int | None]:
        """Aggregates of ``branch_id``'s lineage without the branch itself, from the
        parent's counters plus a range count of the parent's own rows up to the fork
        point when the fork keeps the parent's older limits, else by a full count."""
        tree = self.tree(conversation_id)
        ancestors = K.lineage_walk(tree, branch_id)[1:]
        if not ancestors:
            return K.empty_aggregates()
        parent_id, fork = ancestors[0]
        tenant = self.tenant_id
        if fork is not None and K.lineage_walk(tree, parent_id)[1:] == ancestors[1:]:
            row = self._counters_row(conversation_id, parent_id)
            own = K.row_values(row, "")
            out = K.row_values(row, "inherited_")
            part = self._own_upto(conversation_id, parent_id, fork, own)
            K.merge_aggregates(out, part)
            return out

        def clause(t: sa.Table) -> sa.ColumnElement[bool]:
            return segments_clause(t, [LineageSegment(branch_id=b, max_seq=lim) for b, lim in ancestors])

        return K.aggregate(self.conn, tenant, conversation_id, clause)

    def _own_upto(self, conversation_id: str, branch_id: str, fork: int, own: dict[str, int | None]) -> dict[str, int | None]:
        """A branch's own aggregates restricted to ``seq <= fork``: counted directly or as
        the whole minus the part above ``fork``, whichever range is nearer to an end."""
        tenant = self.tenant_id
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

    def rebuild(self, conversation_id: str) -> None:
        """Recompute every ``branch_counters`` row of a conversation from its rows (after
        rows were written around the Writer, e.g. a bulk load with ``conn.execute``).
        O(history) — a repair, never on the assembly path."""
        self.flush()
        self.lock_conversation(conversation_id)
        t = S.branch_counters
        self.conn.execute(t.delete().where(t.c.tenant_id == self.tenant_id, t.c.conversation_id == conversation_id))
        self._trees.pop(conversation_id, None)
        tree = self.tree(conversation_id)
        done: set[str] = set()
        for branch_id in sorted(tree):  # a parent's row is built on demand before its children's
            if branch_id not in done and self.conn.execute(
                sa.select(t.c.branch_id).where(t.c.branch_id == branch_id, t.c.tenant_id == self.tenant_id)
            ).first() is None:
                self.create_row(conversation_id, branch_id)
            done.add(branch_id)

    def _counters_row(self, conversation_id: str, branch_id: str) -> Any:
        t = S.branch_counters
        stmt = sa.select(t).where(t.c.branch_id == branch_id, t.c.tenant_id == self.tenant_id)
        row = self.conn.execute(stmt).first()
        if row is None:
            self.create_row(conversation_id, branch_id)
            row = self.conn.execute(stmt).one()
        return row

    def create_row(self, conversation_id: str, branch_id: str) -> int | None:
        """Insert ``branch_id``'s counters row computed from the rows themselves; returns
        its ``max_child_fork_seq``."""
        tree = self.tree(conversation_id)
        own = K.aggregate(self.conn, self.tenant_id, conversation_id, lambda t: t.c.branch_id == branch_id)
        inherited = self.inherited(conversation_id, branch_id) if branch_id in tree else K.empty_aggregates()
        forks = [K.UNBOUNDED_FORK if b.fork_seq is None else b.fork_seq for b in tree.values() if b.parent_branch_id == branch_id]
        max_child = max(forks) if forks else None
        self.conn.execute(
            S.branch_counters.insert(),
            {
                "branch_id": branch_id,
                "tenant_id": self.tenant_id,
                "conversation_id": conversation_id,
                **own,
                **{f"inherited_{k}": v for k, v in inherited.items()},
                "max_child_fork_seq": max_child,
            },
        )
        return max_child
