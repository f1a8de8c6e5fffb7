"""Deletion audit and blob write times.

* ``deletion_audit``: append-only, one row per deletion (``contextledger forget`` of a
  conversation or tenant, ``contextledger gc``) — event, tenant, subject id, actor and
  counts; never content.
* ``blobs.created_at``: when a blob of the shared blob table was written, so garbage
  collection can spare blobs younger than its grace period (an import writes its blobs
  before the rows that reference them).  Rows written before this migration have none.

Revision ID: 0009_deletion_audit
Revises: 0008_retrieval_index
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy import Text
from sqlalchemy.dialects import postgresql

revision = "0009_deletion_audit"
down_revision = "0008_retrieval_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deletion_audit",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.String(length=40), nullable=False),
        sa.Column("event", sa.String(length=32), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=True),
        sa.Column("subject", sa.String(length=200), nullable=True),
        sa.Column("actor", sa.String(length=200), nullable=True),
        sa.Column("body", sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_deletion_audit_tenant", "deletion_audit", ["tenant_id", "created_at"])
    # SQLite cannot add a column with a non-constant default; only PostgreSQL ledgers
    # write this table, and a missing time reads as "older than any grace period"
    default = sa.func.now() if op.get_bind().dialect.name == "postgresql" else None
    op.add_column("blobs", sa.Column("created_at", sa.DateTime(timezone=True), nullable=True, server_default=default))


def downgrade() -> None:
    op.drop_column("blobs", "created_at")
    op.drop_index("ix_deletion_audit_tenant", table_name="deletion_audit")
    op.drop_table("deletion_audit")
