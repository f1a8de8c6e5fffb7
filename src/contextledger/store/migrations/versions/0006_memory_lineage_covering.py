"""The working set's window from the index alone.

* ``ix_tool_memories_lineage`` gains ``subject_key``, ``visibility``,
  ``owner_participant_id`` and ``id`` after ``(tenant, conversation, branch_id, seq)``:
  the working set reads, per lineage segment, the newest memories' subject, visibility
  and owner (``store/reads.py`` ``subject_entries``) before it reads the few bodies it
  shows.  With the old four columns every entry of the window was a table row lookup —
  a memory row carries its JSON body (2–3 KB for a file read), so 600 entries were
  ≈ 600 leaf pages; the longer index answers from its own pages.  Every other reader
  of the index uses its prefix, as before.

Revision ID: 0006_memory_lineage_covering
Revises: 0005_messages_role_kind
"""

from __future__ import annotations

from alembic import op

revision = "0006_memory_lineage_covering"
down_revision = "0005_messages_role_kind"
branch_labels = None
depends_on = None

_OLD = ["tenant_id", "conversation_id", "branch_id", "seq"]
_NEW = [*_OLD, "subject_key", "visibility", "owner_participant_id", "id"]


def upgrade() -> None:
    with op.batch_alter_table("tool_memories", schema=None) as batch_op:
        batch_op.drop_index("ix_tool_memories_lineage")
        batch_op.create_index("ix_tool_memories_lineage", _NEW, unique=False)


def downgrade() -> None:
    with op.batch_alter_table("tool_memories", schema=None) as batch_op:
        batch_op.drop_index("ix_tool_memories_lineage")
        batch_op.create_index("ix_tool_memories_lineage", _OLD, unique=False)
