"""Initial schema: every table of the runtime graph.

Revision ID: 0001_initial
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy import Text
from sqlalchemy.dialects import postgresql

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "assemblies",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=64), nullable=False),
        sa.Column("branch_id", sa.String(length=64), nullable=False),
        sa.Column("participant_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.String(length=40), nullable=False),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "payload",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"),
            nullable=True,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("assemblies", schema=None) as batch_op:
        batch_op.create_index(
            "ix_assemblies_conv",
            ["tenant_id", "conversation_id", "branch_id", "created_at"],
            unique=False,
        )

    op.create_table(
        "branches",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=64), nullable=False),
        sa.Column("parent_branch_id", sa.String(length=64), nullable=True),
        sa.Column("fork_seq", sa.BigInteger(), nullable=True),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("branches", schema=None) as batch_op:
        batch_op.create_index("ix_branches_conv", ["tenant_id", "conversation_id"], unique=False)

    op.create_table(
        "checkpoints",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=64), nullable=False),
        sa.Column("branch_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("checkpoints", schema=None) as batch_op:
        batch_op.create_index(
            "ix_checkpoints_lineage",
            ["tenant_id", "conversation_id", "branch_id", "seq"],
            unique=False,
        )

    op.create_table(
        "conversations",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=True),
        sa.Column("title", sa.Text(), server_default="", nullable=False),
        sa.Column("content_key", sa.String(length=80), nullable=True),
        sa.Column("next_seq", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("created_at", sa.String(length=40), nullable=False),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.create_index(
            "ix_conversations_tenant_created", ["tenant_id", "created_at"], unique=False
        )
        batch_op.create_index(
            "ux_conversations_content_key", ["tenant_id", "content_key"], unique=True
        )

    op.create_table(
        "messages",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=64), nullable=False),
        sa.Column("branch_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("kind", sa.String(length=24), nullable=False),
        sa.Column("participant_id", sa.String(length=64), nullable=True),
        sa.Column("visibility", sa.String(length=24), nullable=False),
        sa.Column("token_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("content_key", sa.String(length=80), nullable=True),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.create_index(
            "ix_messages_lineage",
            ["tenant_id", "conversation_id", "branch_id", "seq"],
            unique=False,
        )
        batch_op.create_index(
            "ux_messages_content_key", ["tenant_id", "conversation_id", "content_key"], unique=True
        )

    op.create_table(
        "model_runs",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=64), nullable=False),
        sa.Column("branch_id", sa.String(length=64), nullable=False),
        sa.Column("participant_id", sa.String(length=64), nullable=True),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("model_runs", schema=None) as batch_op:
        batch_op.create_index("ix_model_runs_conv", ["tenant_id", "conversation_id"], unique=False)

    op.create_table(
        "participants",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("participants", schema=None) as batch_op:
        batch_op.create_index(
            "ix_participants_conv", ["tenant_id", "conversation_id"], unique=False
        )

    op.create_table(
        "policy_decisions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=64), nullable=False),
        sa.Column("assembly_id", sa.String(length=64), nullable=True),
        sa.Column("record_id", sa.String(length=64), nullable=True),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("policy_decisions", schema=None) as batch_op:
        batch_op.create_index(
            "ix_policy_decisions_conv", ["tenant_id", "conversation_id"], unique=False
        )
        batch_op.create_index(
            "ix_policy_decisions_record", ["tenant_id", "record_id"], unique=False
        )

    op.create_table(
        "rules",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=64), nullable=False),
        sa.Column("branch_id", sa.String(length=64), nullable=True),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("rules", schema=None) as batch_op:
        batch_op.create_index(
            "ix_rules_conv", ["tenant_id", "conversation_id", "seq"], unique=False
        )

    op.create_table(
        "skill_states",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=64), nullable=False),
        sa.Column("branch_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("skill_states", schema=None) as batch_op:
        batch_op.create_index(
            "ix_skill_states_lineage",
            ["tenant_id", "conversation_id", "branch_id", "seq"],
            unique=False,
        )

    op.create_table(
        "tenants",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "tool_artifacts",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=64), nullable=False),
        sa.Column("branch_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("call_id", sa.String(length=128), nullable=False),
        sa.Column("tool_name", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=24), nullable=False),
        sa.Column("sha256", sa.String(length=80), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("result_tokens", sa.Integer(), server_default="0", nullable=False),
        sa.Column("blob_key", sa.String(length=80), nullable=True),
        sa.Column("inline_text", sa.Text(), nullable=True),
        sa.Column("visibility", sa.String(length=24), nullable=False),
        sa.Column("owner_participant_id", sa.String(length=64), nullable=True),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("tool_artifacts", schema=None) as batch_op:
        batch_op.create_index(
            "ix_tool_artifacts_lineage",
            ["tenant_id", "conversation_id", "branch_id", "seq"],
            unique=False,
        )
        batch_op.create_index(
            "ux_tool_artifacts_call_id", ["tenant_id", "conversation_id", "call_id"], unique=True
        )

    op.create_table(
        "tool_calls",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=64), nullable=False),
        sa.Column("branch_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("call_id", sa.String(length=128), nullable=False),
        sa.Column("tool_name", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=24), nullable=False),
        sa.Column("message_id", sa.String(length=64), nullable=False),
        sa.Column("participant_id", sa.String(length=64), nullable=True),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.create_index(
            "ix_tool_calls_lineage",
            ["tenant_id", "conversation_id", "branch_id", "seq"],
            unique=False,
        )
        batch_op.create_index(
            "ix_tool_calls_status", ["tenant_id", "conversation_id", "status"], unique=False
        )
        batch_op.create_index(
            "ux_tool_calls_call_id", ["tenant_id", "conversation_id", "call_id"], unique=True
        )

    op.create_table(
        "tool_memories",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=64), nullable=False),
        sa.Column("branch_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("artifact_id", sa.String(length=64), nullable=True),
        sa.Column("subject_key", sa.String(length=600), nullable=True),
        sa.Column("resolution_state", sa.String(length=24), nullable=False),
        sa.Column("visibility", sa.String(length=24), nullable=False),
        sa.Column("owner_participant_id", sa.String(length=64), nullable=True),
        sa.Column("token_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("tool_memories", schema=None) as batch_op:
        batch_op.create_index(
            "ix_tool_memories_artifact", ["tenant_id", "artifact_id"], unique=False
        )
        batch_op.create_index(
            "ix_tool_memories_lineage",
            ["tenant_id", "conversation_id", "branch_id", "seq"],
            unique=False,
        )
        batch_op.create_index(
            "ix_tool_memories_subject",
            ["tenant_id", "conversation_id", "subject_key"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("tool_memories", schema=None) as batch_op:
        batch_op.drop_index("ix_tool_memories_subject")
        batch_op.drop_index("ix_tool_memories_lineage")
        batch_op.drop_index("ix_tool_memories_artifact")

    op.drop_table("tool_memories")
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.drop_index("ux_tool_calls_call_id")
        batch_op.drop_index("ix_tool_calls_status")
        batch_op.drop_index("ix_tool_calls_lineage")

    op.drop_table("tool_calls")
    with op.batch_alter_table("tool_artifacts", schema=None) as batch_op:
        batch_op.drop_index("ux_tool_artifacts_call_id")
        batch_op.drop_index("ix_tool_artifacts_lineage")

    op.drop_table("tool_artifacts")
    op.drop_table("tenants")
    with op.batch_alter_table("skill_states", schema=None) as batch_op:
        batch_op.drop_index("ix_skill_states_lineage")

    op.drop_table("skill_states")
    with op.batch_alter_table("rules", schema=None) as batch_op:
        batch_op.drop_index("ix_rules_conv")

    op.drop_table("rules")
    with op.batch_alter_table("policy_decisions", schema=None) as batch_op:
        batch_op.drop_index("ix_policy_decisions_record")
        batch_op.drop_index("ix_policy_decisions_conv")

    op.drop_table("policy_decisions")
    with op.batch_alter_table("participants", schema=None) as batch_op:
        batch_op.drop_index("ix_participants_conv")

    op.drop_table("participants")
    with op.batch_alter_table("model_runs", schema=None) as batch_op:
        batch_op.drop_index("ix_model_runs_conv")

    op.drop_table("model_runs")
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index("ux_messages_content_key")
        batch_op.drop_index("ix_messages_lineage")

    op.drop_table("messages")
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_index("ux_conversations_content_key")
        batch_op.drop_index("ix_conversations_tenant_created")

    op.drop_table("conversations")
    with op.batch_alter_table("checkpoints", schema=None) as batch_op:
        batch_op.drop_index("ix_checkpoints_lineage")

    op.drop_table("checkpoints")
    with op.batch_alter_table("branches", schema=None) as batch_op:
        batch_op.drop_index("ix_branches_conv")

    op.drop_table("branches")
    with op.batch_alter_table("assemblies", schema=None) as batch_op:
        batch_op.drop_index("ix_assemblies_conv")

    op.drop_table("assemblies")
