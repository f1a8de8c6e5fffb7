"""The bounded system head: the newest system/developer chat messages as an index range.

* ``ix_messages_role_kind`` (tenant, conversation, role, kind, branch_id, seq): candidate
  collection reads the newest system and developer messages of kind ``chat`` of each
  lineage segment (``store/reads.py`` ``newest_head_messages``) as one backward range
  per role and segment, up to a limit.  ``ix_messages_role`` cannot: imported
  transcripts record progress and meta records as system messages (1,709 in one real
  Claude Code session), all between the chat rows of its ``(role, branch_id, seq)``
  range.  ``ix_messages_role`` stays (the first user message, user messages by role).

Revision ID: 0005_messages_role_kind
Revises: 0004_memory_terms
"""

from __future__ import annotations

from alembic import op

revision = "0005_messages_role_kind"
down_revision = "0004_memory_terms"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.create_index("ix_messages_role_kind", ["tenant_id", "conversation_id", "role", "kind", "branch_id", "seq"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index("ix_messages_role_kind")
