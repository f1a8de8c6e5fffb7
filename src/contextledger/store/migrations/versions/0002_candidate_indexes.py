"""Indexes for the assembler's candidate queries (docs/query-plans.md).

* ``ix_messages_role`` (tenant, conversation, role, seq): system/developer messages and the
  first user message of a lineage without reading the whole conversation.
* ``ix_messages_id`` (tenant, conversation, id): several messages by id; without
  statistics SQLite prefers a (tenant, conversation) range to the primary key for an
  ``IN`` list of more than one id, reading the whole conversation.
* ``ix_tool_calls_message`` (tenant, conversation, message_id): the calls of the messages
  in the recent window.
* ``ix_tool_memories_artifact`` gains ``conversation_id`` (tenant, conversation,
  artifact_id): every memory read is per conversation, and with the conversation in the
  key SQLite picks it over the lineage index even without ``ANALYZE`` statistics.

Revision ID: 0002_candidate_indexes
Revises: 0001_initial
"""

from __future__ import annotations

from alembic import op

revision = "0002_candidate_indexes"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.create_index("ix_messages_role", ["tenant_id", "conversation_id", "role", "seq"], unique=False)
        batch_op.create_index("ix_messages_id", ["tenant_id", "conversation_id", "id"], unique=False)
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.create_index("ix_tool_calls_message", ["tenant_id", "conversation_id", "message_id"], unique=False)
    with op.batch_alter_table("tool_memories", schema=None) as batch_op:
        batch_op.drop_index("ix_tool_memories_artifact")
        batch_op.create_index("ix_tool_memories_artifact", ["tenant_id", "conversation_id", "artifact_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("tool_memories", schema=None) as batch_op:
        batch_op.drop_index("ix_tool_memories_artifact")
        batch_op.create_index("ix_tool_memories_artifact", ["tenant_id", "artifact_id"], unique=False)
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.drop_index("ix_tool_calls_message")
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index("ix_messages_id")
        batch_op.drop_index("ix_messages_role")
