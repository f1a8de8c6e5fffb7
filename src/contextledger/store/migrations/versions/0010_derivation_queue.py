"""The derivation queue of two-tier recording.

* ``derivation_queue``: one row per tool result whose first tier (artifact, result
  message, call status) is committed and whose second tier (memory, links, terms,
  retrieval documents, vectors) is not derived yet.  The recording transaction inserts
  it; the transaction that derives the result deletes it
  (:mod:`contextledger.ingest.drain`).  Ledgers migrated from 0009 start with an empty
  queue: every result they hold was derived when it was recorded.

Revision ID: 0010_derivation_queue
Revises: 0009_deletion_audit
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy import Text
from sqlalchemy.dialects import postgresql

revision = "0010_derivation_queue"
down_revision = "0009_deletion_audit"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "derivation_queue",
        sa.Column("queue_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=64), nullable=False),
        sa.Column("artifact_id", sa.String(length=64), nullable=False),
        sa.Column("message_id", sa.String(length=64), nullable=False),
        sa.Column("call_status", sa.String(length=32), nullable=False),
        sa.Column("body", sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"), nullable=False),
        sa.PrimaryKeyConstraint("queue_id"),
    )
    op.create_index("ux_derivation_queue_artifact", "derivation_queue", ["tenant_id", "artifact_id"], unique=True)
    op.create_index("ix_derivation_queue_conv", "derivation_queue", ["tenant_id", "conversation_id", "queue_id"])


def downgrade() -> None:
    op.drop_index("ix_derivation_queue_conv", table_name="derivation_queue")
    op.drop_index("ux_derivation_queue_artifact", table_name="derivation_queue")
    op.drop_table("derivation_queue")
