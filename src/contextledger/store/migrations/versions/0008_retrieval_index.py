"""The retrieval index: keyword documents with a full-text index, and embeddings.

* ``retrieval_docs``: one row per user / assistant message and tool memory with its
  code-aware tokens (``contextledger.retrieval.text``); backfilled here from the stored
  records (memories without their raw results: ``contextledger index`` adds those).
* the full-text index over ``retrieval_docs.tokens``: on SQLite an external-content FTS5
  table ``retrieval_fts`` (``scope``, ``tokens``; tokeniser ``unicode61`` with ``_`` as
  a token character, diacritics kept — the tokens are already folded) kept in step by
  insert / delete triggers; on PostgreSQL a GIN index on
  ``array_to_tsvector(string_to_array(tokens, ' '))`` (the tokens are the lexemes).
* ``retrieval_vectors``: embeddings of memories and user messages, filled when recording
  with the ``retrieval`` extra installed, or by ``contextledger index`` (none here: a
  migration loads no model).
* ``ix_tool_artifacts_sha256``: artifact lookup by digest prefix.

Revision ID: 0008_retrieval_index
Revises: 0007_service_keys_blobs
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0008_retrieval_index"
down_revision = "0007_service_keys_blobs"
branch_labels = None
depends_on = None

_BATCH = 500


def upgrade() -> None:
    op.create_table(
        "retrieval_docs",
        sa.Column("doc_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=64), nullable=False),
        sa.Column("branch_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("record_kind", sa.String(length=16), nullable=False),
        sa.Column("record_id", sa.String(length=64), nullable=False),
        sa.Column("scope", sa.String(length=40), nullable=False),
        sa.Column("tokens", sa.Text(), nullable=False),
    )
    op.create_index("ux_retrieval_docs_record", "retrieval_docs", ["tenant_id", "record_id"], unique=True)
    op.create_index("ix_retrieval_docs_conv", "retrieval_docs", ["tenant_id", "conversation_id", "doc_id"])
    op.create_table(
        "retrieval_vectors",
        sa.Column("doc_id", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=64), nullable=False),
        sa.Column("branch_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("record_kind", sa.String(length=16), nullable=False),
        sa.Column("record_id", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=64), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
    )
    op.create_index("ix_tool_artifacts_sha256", "tool_artifacts", ["tenant_id", "conversation_id", "sha256"])
    op.create_index("ix_retrieval_vectors_conv", "retrieval_vectors", ["tenant_id", "conversation_id", "model", "doc_id"])
    if op.get_bind().dialect.name == "sqlite":
        for stmt in SQLITE_FULLTEXT:
            op.execute(stmt)
    else:
        op.execute(POSTGRES_FULLTEXT)
    _backfill()


SQLITE_FULLTEXT = (
    "CREATE VIRTUAL TABLE retrieval_fts USING fts5(scope, tokens, content='retrieval_docs', content_rowid='doc_id', "
    "tokenize=\"unicode61 remove_diacritics 0 tokenchars '_'\")",
    "CREATE TRIGGER retrieval_docs_ai AFTER INSERT ON retrieval_docs BEGIN "
    "INSERT INTO retrieval_fts(rowid, scope, tokens) VALUES (new.doc_id, new.scope, new.tokens); END",
    "CREATE TRIGGER retrieval_docs_ad AFTER DELETE ON retrieval_docs BEGIN "
    "INSERT INTO retrieval_fts(retrieval_fts, rowid, scope, tokens) VALUES ('delete', old.doc_id, old.scope, old.tokens); END",
)

POSTGRES_FULLTEXT = "CREATE INDEX ix_retrieval_docs_tsv ON retrieval_docs USING gin (array_to_tsvector(string_to_array(tokens, ' ')))"


def _backfill() -> None:
    from contextledger.records.models import Message, ToolMemory
    from contextledger.retrieval.index import doc_row

    bind = op.get_bind()
    docs = sa.table(
        "retrieval_docs", sa.column("tenant_id"), sa.column("conversation_id"), sa.column("branch_id"), sa.column("seq"),
        sa.column("record_kind"), sa.column("record_id"), sa.column("scope"), sa.column("tokens"),
    )
    rows: list[dict[str, Any]] = []
    sources: tuple[tuple[str, type[Message] | type[ToolMemory], str], ...] = (
        ("messages", Message, "role IN ('user', 'assistant')"),
        ("tool_memories", ToolMemory, "1 = 1"),
    )
    for table, model, where in sources:
        for r in bind.execute(sa.text(f"SELECT body FROM {table} WHERE {where} ORDER BY tenant_id, conversation_id, seq")):
            body = json.loads(r.body) if isinstance(r.body, str) else r.body
            try:
                record = model.model_validate(body)
            except ValueError:
                continue  # a body the current model cannot read is left to `contextledger index`
            row = doc_row(record)
            if row is not None:
                rows.append(row)
            if len(rows) >= _BATCH:
                bind.execute(docs.insert(), rows)
                rows = []
    if rows:
        bind.execute(docs.insert(), rows)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS retrieval_docs_ad")
        op.execute("DROP TRIGGER IF EXISTS retrieval_docs_ai")
        op.execute("DROP TABLE IF EXISTS retrieval_fts")
    else:
        op.execute("DROP INDEX IF EXISTS ix_retrieval_docs_tsv")
    op.drop_index("ix_tool_artifacts_sha256", table_name="tool_artifacts")
    op.drop_index("ix_retrieval_vectors_conv", table_name="retrieval_vectors")
    op.drop_table("retrieval_vectors")
    op.drop_index("ix_retrieval_docs_conv", table_name="retrieval_docs")
    op.drop_index("ux_retrieval_docs_record", table_name="retrieval_docs")
    op.drop_table("retrieval_docs")
