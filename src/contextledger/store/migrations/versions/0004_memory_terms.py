"""The memory term index: older relevant memories reach the bounded candidate set.

* ``memory_terms``: one row per tool memory and content term
  (:func:`contextledger.memory.terms.memory_terms`), with the memory's branch and seq;
  ``ix_memory_terms_term`` (tenant, conversation, term, seq) serves "the newest memories
  with this term" as an index range.  Backfilled here from the stored memories.

Revision ID: 0004_memory_terms
Revises: 0003_branch_counters
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0004_memory_terms"
down_revision = "0003_branch_counters"
branch_labels = None
depends_on = None

_BATCH = 500


def upgrade() -> None:
    op.create_table(
        "memory_terms",
        sa.Column("memory_id", sa.String(length=64), nullable=False),
        sa.Column("term", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=64), nullable=False),
        sa.Column("branch_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("memory_id", "term"),
    )
    op.create_index("ix_memory_terms_term", "memory_terms", ["tenant_id", "conversation_id", "term", "seq"])
    _backfill()


def _backfill() -> None:
    from contextledger.memory.terms import terms_of

    bind = op.get_bind()
    memories = sa.table(
        "tool_memories", sa.column("id"), sa.column("tenant_id"), sa.column("conversation_id"),
        sa.column("branch_id"), sa.column("seq"), sa.column("body"),
    )
    terms = sa.table(
        "memory_terms", sa.column("memory_id"), sa.column("term"), sa.column("tenant_id"),
        sa.column("conversation_id"), sa.column("branch_id"), sa.column("seq"),
    )
    rows: list[dict[str, Any]] = []
    for r in bind.execute(sa.select(memories.c.id, memories.c.tenant_id, memories.c.conversation_id, memories.c.branch_id, memories.c.seq, memories.c.body)):
        body = json.loads(r.body) if isinstance(r.body, str) else r.body
        body = body if isinstance(body, dict) else {}
        found = terms_of(body.get("source_tool"), body.get("summary"), body.get("payload"))
        rows.extend({"memory_id": r.id, "term": t, "tenant_id": r.tenant_id, "conversation_id": r.conversation_id, "branch_id": r.branch_id, "seq": r.seq} for t in found)
        if len(rows) >= _BATCH:
            bind.execute(terms.insert(), rows)
            rows = []
    if rows:
        bind.execute(terms.insert(), rows)


def downgrade() -> None:
    op.drop_index("ix_memory_terms_term", table_name="memory_terms")
    op.drop_table("memory_terms")
