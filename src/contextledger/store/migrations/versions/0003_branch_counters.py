"""Per-branch counters and filter indexes that keep assembly cost flat in history size
(docs/query-plans.md).

* ``branch_counters``: one row per branch with its own message/artifact/memory counts,
  message and artifact token sums and message seq range, plus the same aggregates
  inherited from its ancestors up to each fork point, and the highest fork point of a
  direct child.  Lineage totals and out-of-lineage counts read these rows instead of
  aggregating over the history.  Backfilled here from the existing rows.
* ``ix_messages_role`` becomes (tenant, conversation, role, branch_id, seq) and
  ``ix_tool_calls_status`` (tenant, conversation, status, branch_id, seq): on a
  one-branch lineage SQLite (no statistics) otherwise prefers the lineage range and
  reads the whole branch.
* ``ix_messages_kind`` (tenant, conversation, kind, branch_id, seq): the newest
  compaction messages of a lineage.

Revision ID: 0003_branch_counters
Revises: 0002_candidate_indexes
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0003_branch_counters"
down_revision = "0002_candidate_indexes"
branch_labels = None
depends_on = None

UNBOUNDED_FORK = 2**62
"""``max_child_fork_seq`` of a branch with a child whose fork point is unknown (that child
inherits the whole branch)."""

_AGG = ("messages", "message_tokens", "min_seq", "max_seq", "artifacts", "artifact_tokens", "memories")


def _counter_columns() -> list[sa.Column[Any]]:
    def n(name: str) -> sa.Column[Any]:
        return sa.Column(name, sa.BigInteger(), server_default="0", nullable=False)

    return [
        sa.Column("branch_id", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=64), nullable=False),
        n("messages"),
        n("message_tokens"),
        sa.Column("min_seq", sa.BigInteger(), nullable=True),
        sa.Column("max_seq", sa.BigInteger(), nullable=True),
        n("artifacts"),
        n("artifact_tokens"),
        n("memories"),
        n("inherited_messages"),
        n("inherited_message_tokens"),
        sa.Column("inherited_min_seq", sa.BigInteger(), nullable=True),
        sa.Column("inherited_max_seq", sa.BigInteger(), nullable=True),
        n("inherited_artifacts"),
        n("inherited_artifact_tokens"),
        n("inherited_memories"),
        sa.Column("max_child_fork_seq", sa.BigInteger(), nullable=True),
    ]


def upgrade() -> None:
    op.create_table("branch_counters", *_counter_columns(), sa.PrimaryKeyConstraint("branch_id"))
    with op.batch_alter_table("branch_counters", schema=None) as batch_op:
        batch_op.create_index("ix_branch_counters_conv", ["tenant_id", "conversation_id"], unique=False)
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index("ix_messages_role")
        batch_op.create_index("ix_messages_role", ["tenant_id", "conversation_id", "role", "branch_id", "seq"], unique=False)
        batch_op.create_index("ix_messages_kind", ["tenant_id", "conversation_id", "kind", "branch_id", "seq"], unique=False)
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.drop_index("ix_tool_calls_status")
        batch_op.create_index("ix_tool_calls_status", ["tenant_id", "conversation_id", "status", "branch_id", "seq"], unique=False)
    _backfill(op.get_bind())


def _backfill(conn: sa.Connection) -> None:
    """One counters row per existing branch: own aggregates grouped by branch, inherited
    aggregates summed over each branch's ancestors up to its fork points (the walk of
    ``SqlStore.lineage``)."""
    branches = sa.table(
        "branches", sa.column("id"), sa.column("tenant_id"), sa.column("conversation_id"), sa.column("parent_branch_id"), sa.column("fork_seq")
    )
    rows = conn.execute(sa.select(branches)).all()
    if not rows:
        return
    msgs = sa.table("messages", sa.column("branch_id"), sa.column("seq"), sa.column("token_count"))
    arts = sa.table("tool_artifacts", sa.column("branch_id"), sa.column("seq"), sa.column("result_tokens"))
    mems = sa.table("tool_memories", sa.column("branch_id"), sa.column("seq"))

    def aggregates(branch_id: str | None = None, limit: int | None = None) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}

        def q(t: Any, cols: list[Any]) -> Any:
            stmt = sa.select(t.c.branch_id, *cols).group_by(t.c.branch_id)
            if branch_id is not None:
                stmt = stmt.where(t.c.branch_id == branch_id)
            if limit is not None:
                stmt = stmt.where(t.c.seq <= limit)
            return conn.execute(stmt).all()

        for r in q(msgs, [sa.func.count(), sa.func.coalesce(sa.func.sum(msgs.c.token_count), 0), sa.func.min(msgs.c.seq), sa.func.max(msgs.c.seq)]):
            out.setdefault(r[0], {}).update(messages=int(r[1]), message_tokens=int(r[2]), min_seq=r[3], max_seq=r[4])
        for r in q(arts, [sa.func.count(), sa.func.coalesce(sa.func.sum(arts.c.result_tokens), 0)]):
            out.setdefault(r[0], {}).update(artifacts=int(r[1]), artifact_tokens=int(r[2]))
        for r in q(mems, [sa.func.count()]):
            out.setdefault(r[0], {}).update(memories=int(r[1]))
        return out

    own = aggregates()
    by_id = {r.id: r for r in rows}
    child_fork: dict[str, int] = {}
    for r in rows:
        if r.parent_branch_id is not None:
            fork = UNBOUNDED_FORK if r.fork_seq is None else int(r.fork_seq)
            child_fork[r.parent_branch_id] = max(child_fork.get(r.parent_branch_id, fork), fork)
    values = []
    for r in rows:
        inherited = {k: None if k.endswith("_seq") else 0 for k in _AGG}
        limit: int | None = None
        current, seen = r, {r.id}
        while current.parent_branch_id is not None:
            fork = current.fork_seq
            limit = fork if limit is None or fork is None else min(limit, fork)
            parent = by_id.get(current.parent_branch_id)
            if parent is None or parent.id in seen:
                break
            seen.add(parent.id)
            part = own.get(parent.id, {}) if limit is None else aggregates(parent.id, int(limit)).get(parent.id, {})
            for k in _AGG:
                v = part.get(k)
                if v is None:
                    continue
                if k == "min_seq":
                    inherited[k] = v if inherited[k] is None else min(inherited[k], v)
                elif k == "max_seq":
                    inherited[k] = v if inherited[k] is None else max(inherited[k], v)
                else:
                    inherited[k] += v
            current = parent
        mine = own.get(r.id, {})
        values.append(
            {
                "branch_id": r.id,
                "tenant_id": r.tenant_id,
                "conversation_id": r.conversation_id,
                **{k: mine.get(k, None if k.endswith("_seq") else 0) for k in _AGG},
                **{f"inherited_{k}": v for k, v in inherited.items()},
                "max_child_fork_seq": child_fork.get(r.id),
            }
        )
    counters = sa.table("branch_counters", *[sa.column(c.name) for c in _counter_columns()])
    conn.execute(counters.insert(), values)


def downgrade() -> None:
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.drop_index("ix_tool_calls_status")
        batch_op.create_index("ix_tool_calls_status", ["tenant_id", "conversation_id", "status"], unique=False)
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index("ix_messages_kind")
        batch_op.drop_index("ix_messages_role")
        batch_op.create_index("ix_messages_role", ["tenant_id", "conversation_id", "role", "seq"], unique=False)
    with op.batch_alter_table("branch_counters", schema=None) as batch_op:
        batch_op.drop_index("ix_branch_counters_conv")
    op.drop_table("branch_counters")
