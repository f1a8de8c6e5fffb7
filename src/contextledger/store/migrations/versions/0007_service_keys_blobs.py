"""Service API keys and the shared blob table.

* ``api_keys``: one row per key of ``contextledger keys create`` — the tenant it maps
  to and the sha256 of the key (the key itself is never stored); ``ux_api_keys_hash``
  answers "which tenant holds this key" with one index probe.
* ``blobs``: payloads above the inline threshold of a PostgreSQL ledger, shared by every
  service worker and host (content addressed: ``key`` is ``sha256:<hex>``).

Revision ID: 0007_service_keys_blobs
Revises: 0006_memory_lineage_covering
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy import Text
from sqlalchemy.dialects import postgresql

revision = "0007_service_keys_blobs"
down_revision = "0006_memory_lineage_covering"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("key_hash", sa.String(length=80), nullable=False),
        sa.Column("created_at", sa.String(length=40), nullable=False),
        sa.Column("revoked_at", sa.String(length=40), nullable=True),
        sa.Column("body", sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ux_api_keys_hash", "api_keys", ["key_hash"], unique=True)
    op.create_index("ix_api_keys_tenant", "api_keys", ["tenant_id"])
    op.create_table(
        "blobs",
        sa.Column("key", sa.String(length=80), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )


def downgrade() -> None:
    op.drop_table("blobs")
    op.drop_index("ix_api_keys_tenant", table_name="api_keys")
    op.drop_index("ux_api_keys_hash", table_name="api_keys")
    op.drop_table("api_keys")
