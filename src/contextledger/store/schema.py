"""The relational schema (SQLAlchemy Core), shared by every SQL backend.

Each table keeps the columns that queries filter, join or sort on, plus ``body``: the
record's full JSON (pydantic ``model_dump(mode="json")``).  Loading a row validates
``body`` into its record class, so new optional fields need no column.  Every table has
``tenant_id`` and every query filters on it (scope enforced inside the query).

Changing this module requires a new Alembic migration under ``store/migrations/versions``
(``tests/test_migrations.py`` compares the migrated schema with this metadata).  Why each
index exists, with the query plans observed on both backends: ``docs/query-plans.md``.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

__all__ = ["FULLTEXT_OBJECTS", "TABLES", "JsonBody", "metadata"]

metadata = sa.MetaData()


class JsonBody(sa.types.TypeDecorator[Any]):
    """JSON on SQLite, ``jsonb`` on PostgreSQL.  The PostgreSQL type is loaded only when
    a PostgreSQL connection compiles a statement, so opening an SQLite ledger never
    imports SQLAlchemy's PostgreSQL dialect."""

    impl = sa.JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: sa.Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(sa.JSON())


_JSON = JsonBody()


def _id() -> sa.Column[str]:
    return sa.Column("id", sa.String(64), primary_key=True)


def _tenant() -> sa.Column[str]:
    return sa.Column("tenant_id", sa.String(64), nullable=False)


def _conv() -> sa.Column[str]:
    return sa.Column("conversation_id", sa.String(64), nullable=False)


def _body() -> sa.Column[object]:
    return sa.Column("body", _JSON, nullable=False)


tenants = sa.Table(
    "tenants",
    metadata,
    _id(),
    sa.Column("name", sa.String(200), nullable=False),
    _body(),
)

conversations = sa.Table(
    "conversations",
    metadata,
    _id(),
    _tenant(),
    sa.Column("user_id", sa.String(200)),
    sa.Column("title", sa.Text, nullable=False, server_default=""),
    sa.Column("content_key", sa.String(80)),
    sa.Column("next_seq", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("created_at", sa.String(40), nullable=False),
    _body(),
    sa.Index("ix_conversations_tenant_created", "tenant_id", "created_at"),
    sa.Index("ux_conversations_content_key", "tenant_id", "content_key", unique=True),
)

branches = sa.Table(
    "branches",
    metadata,
    _id(),
    _tenant(),
    _conv(),
    sa.Column("parent_branch_id", sa.String(64)),
    sa.Column("fork_seq", sa.BigInteger),
    _body(),
    sa.Index("ix_branches_conv", "tenant_id", "conversation_id"),
)

participants = sa.Table(
    "participants",
    metadata,
    _id(),
    _tenant(),
    _conv(),
    sa.Column("name", sa.String(200), nullable=False),
    _body(),
    sa.Index("ix_participants_conv", "tenant_id", "conversation_id"),
)

messages = sa.Table(
    "messages",
    metadata,
    _id(),
    _tenant(),
    _conv(),
    sa.Column("branch_id", sa.String(64), nullable=False),
    sa.Column("seq", sa.BigInteger, nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("kind", sa.String(24), nullable=False),
    sa.Column("participant_id", sa.String(64)),
    sa.Column("visibility", sa.String(24), nullable=False),
    sa.Column("token_count", sa.Integer, nullable=False, server_default="0"),
    sa.Column("content_key", sa.String(80)),
    _body(),
    sa.Index("ix_messages_lineage", "tenant_id", "conversation_id", "branch_id", "seq"),
    sa.Index("ux_messages_content_key", "tenant_id", "conversation_id", "content_key", unique=True),
    # system/developer messages and the first user message outside the recent window;
    # branch_id before seq: with a one-branch lineage the index matches four equalities,
    # so SQLite (no statistics) prefers it to the lineage range (docs/query-plans.md)
    sa.Index("ix_messages_role", "tenant_id", "conversation_id", "role", "branch_id", "seq"),
    # the newest compaction messages of a lineage (kind = 'compaction')
    sa.Index("ix_messages_kind", "tenant_id", "conversation_id", "kind", "branch_id", "seq"),
    # the newest system/developer chat messages of a lineage outside the recent window
    # (role, kind = 'chat'): an ordered backward range per segment, read up to a limit
    sa.Index("ix_messages_role_kind", "tenant_id", "conversation_id", "role", "kind", "branch_id", "seq"),
    # messages by id within a conversation (the exchanges of out-of-window recovery calls)
    sa.Index("ix_messages_id", "tenant_id", "conversation_id", "id"),
)

model_runs = sa.Table(
    "model_runs",
    metadata,
    _id(),
    _tenant(),
    _conv(),
    sa.Column("branch_id", sa.String(64), nullable=False),
    sa.Column("participant_id", sa.String(64)),
    _body(),
    sa.Index("ix_model_runs_conv", "tenant_id", "conversation_id"),
)

tool_calls = sa.Table(
    "tool_calls",
    metadata,
    _id(),
    _tenant(),
    _conv(),
    sa.Column("branch_id", sa.String(64), nullable=False),
    sa.Column("seq", sa.BigInteger, nullable=False),
    sa.Column("call_id", sa.String(128), nullable=False),
    sa.Column("tool_name", sa.String(200), nullable=False),
    sa.Column("status", sa.String(24), nullable=False),
    sa.Column("message_id", sa.String(64), nullable=False),
    sa.Column("participant_id", sa.String(64)),
    _body(),
    sa.Index("ux_tool_calls_call_id", "tenant_id", "conversation_id", "call_id", unique=True),
    sa.Index("ix_tool_calls_lineage", "tenant_id", "conversation_id", "branch_id", "seq"),
    sa.Index("ix_tool_calls_status", "tenant_id", "conversation_id", "status", "branch_id", "seq"),
    # the calls of the messages in the recent window
    sa.Index("ix_tool_calls_message", "tenant_id", "conversation_id", "message_id"),
)

tool_artifacts = sa.Table(
    "tool_artifacts",
    metadata,
    _id(),
    _tenant(),
    _conv(),
    sa.Column("branch_id", sa.String(64), nullable=False),
    sa.Column("seq", sa.BigInteger, nullable=False),
    sa.Column("call_id", sa.String(128), nullable=False),
    sa.Column("tool_name", sa.String(200), nullable=False),
    sa.Column("status", sa.String(24), nullable=False),
    sa.Column("sha256", sa.String(80), nullable=False),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    sa.Column("result_tokens", sa.Integer, nullable=False, server_default="0"),
    sa.Column("blob_key", sa.String(80)),
    sa.Column("inline_text", sa.Text),
    sa.Column("visibility", sa.String(24), nullable=False),
    sa.Column("owner_participant_id", sa.String(64)),
    _body(),
    sa.Index("ux_tool_artifacts_call_id", "tenant_id", "conversation_id", "call_id", unique=True),
    sa.Index("ix_tool_artifacts_lineage", "tenant_id", "conversation_id", "branch_id", "seq"),
    # artifact lookup by digest prefix (the retrieval router's artifact route, migration 0008)
    sa.Index("ix_tool_artifacts_sha256", "tenant_id", "conversation_id", "sha256"),
)

tool_memories = sa.Table(
    "tool_memories",
    metadata,
    _id(),
    _tenant(),
    _conv(),
    sa.Column("branch_id", sa.String(64), nullable=False),
    sa.Column("seq", sa.BigInteger, nullable=False),
    sa.Column("artifact_id", sa.String(64)),
    sa.Column("subject_key", sa.String(600)),
    sa.Column("resolution_state", sa.String(24), nullable=False),
    sa.Column("visibility", sa.String(24), nullable=False),
    sa.Column("owner_participant_id", sa.String(64)),
    sa.Column("token_count", sa.Integer, nullable=False, server_default="0"),
    _body(),
    # the working set reads subject, visibility and owner of a window from the index
    # alone (migration 0006)
    sa.Index("ix_tool_memories_lineage", "tenant_id", "conversation_id", "branch_id", "seq", "subject_key", "visibility", "owner_participant_id", "id"),
    sa.Index("ix_tool_memories_subject", "tenant_id", "conversation_id", "subject_key"),
    sa.Index("ix_tool_memories_artifact", "tenant_id", "conversation_id", "artifact_id"),
)

skill_states = sa.Table(
    "skill_states",
    metadata,
    _id(),
    _tenant(),
    _conv(),
    sa.Column("branch_id", sa.String(64), nullable=False),
    sa.Column("seq", sa.BigInteger, nullable=False),
    _body(),
    sa.Index("ix_skill_states_lineage", "tenant_id", "conversation_id", "branch_id", "seq"),
)

checkpoints = sa.Table(
    "checkpoints",
    metadata,
    _id(),
    _tenant(),
    _conv(),
    sa.Column("branch_id", sa.String(64), nullable=False),
    sa.Column("seq", sa.BigInteger, nullable=False),
    _body(),
    sa.Index("ix_checkpoints_lineage", "tenant_id", "conversation_id", "branch_id", "seq"),
)

rules = sa.Table(
    "rules",
    metadata,
    _id(),
    _tenant(),
    _conv(),
    sa.Column("branch_id", sa.String(64)),
    sa.Column("seq", sa.BigInteger, nullable=False),
    _body(),
    sa.Index("ix_rules_conv", "tenant_id", "conversation_id", "seq"),
)

assemblies = sa.Table(
    "assemblies",
    metadata,
    _id(),
    _tenant(),
    _conv(),
    sa.Column("branch_id", sa.String(64), nullable=False),
    sa.Column("participant_id", sa.String(64)),
    sa.Column("created_at", sa.String(40), nullable=False),
    _body(),
    sa.Column("payload", _JSON),
    sa.Index("ix_assemblies_conv", "tenant_id", "conversation_id", "branch_id", "created_at"),
)

policy_decisions = sa.Table(
    "policy_decisions",
    metadata,
    _id(),
    _tenant(),
    _conv(),
    sa.Column("assembly_id", sa.String(64)),
    sa.Column("record_id", sa.String(64)),
    _body(),
    sa.Index("ix_policy_decisions_conv", "tenant_id", "conversation_id"),
    sa.Index("ix_policy_decisions_record", "tenant_id", "record_id"),
)

def _count(name: str) -> sa.Column[int]:
    return sa.Column(name, sa.BigInteger, nullable=False, server_default="0")


branch_counters = sa.Table(
    "branch_counters",
    metadata,
    # One row per branch, maintained by the store's Writer in the transaction that inserts
    # the counted rows (docs/query-plans.md, "Lineage counters").  ``messages`` …
    # ``memories``: the branch's own rows; ``inherited_*``: the rows of its ancestors up to
    # each fork point (the lineage minus the branch itself).  Seqs are message seqs.
    # ``max_child_fork_seq``: the highest fork point of a direct child (a row inserted
    # later on this branch at or below it is propagated to the descendants' inherited
    # counts).
    sa.Column("branch_id", sa.String(64), primary_key=True),
    _tenant(),
    _conv(),
    _count("messages"),
    _count("message_tokens"),
    sa.Column("min_seq", sa.BigInteger),
    sa.Column("max_seq", sa.BigInteger),
    _count("artifacts"),
    _count("artifact_tokens"),
    _count("memories"),
    _count("inherited_messages"),
    _count("inherited_message_tokens"),
    sa.Column("inherited_min_seq", sa.BigInteger),
    sa.Column("inherited_max_seq", sa.BigInteger),
    _count("inherited_artifacts"),
    _count("inherited_artifact_tokens"),
    _count("inherited_memories"),
    sa.Column("max_child_fork_seq", sa.BigInteger),
    sa.Index("ix_branch_counters_conv", "tenant_id", "conversation_id"),
)

memory_terms = sa.Table(
    "memory_terms",
    metadata,
    # The inverted index of tool memories (``contextledger.memory.terms.memory_terms``):
    # one row per memory and term, written with the memory.  Candidate collection reads
    # the newest rows of each term of the current request (docs/query-plans.md, "Term
    # retrieval") to bring older relevant memories into the bounded candidate set.
    sa.Column("memory_id", sa.String(64), primary_key=True),
    sa.Column("term", sa.String(64), primary_key=True),
    _tenant(),
    _conv(),
    sa.Column("branch_id", sa.String(64), nullable=False),
    sa.Column("seq", sa.BigInteger, nullable=False),
    sa.Index("ix_memory_terms_term", "tenant_id", "conversation_id", "term", "seq"),
)

api_keys = sa.Table(
    "api_keys",
    metadata,
    # Service API keys (``contextledger keys create``): only the sha256 of a key is kept;
    # a request's key is looked up by its hash and maps to one tenant.
    _id(),
    _tenant(),
    sa.Column("key_hash", sa.String(80), nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("revoked_at", sa.String(40)),
    _body(),
    sa.Index("ux_api_keys_hash", "key_hash", unique=True),
    sa.Index("ix_api_keys_tenant", "tenant_id"),
)

blobs = sa.Table(
    "blobs",
    metadata,
    # The shared blob store of a PostgreSQL ledger (``store/blobs.py`` ``SqlBlobStore``):
    # content addressed like the local folder, so it has no tenant column; every service
    # worker and host reads the same payloads.  Only PostgreSQL ledgers write here.
    sa.Column("key", sa.String(80), primary_key=True),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    sa.Column("data", sa.LargeBinary, nullable=False),
    # when the blob was written (garbage collection spares blobs younger than its grace
    # period: an import writes its blobs before the rows that reference them)
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=True, server_default=sa.func.now()),
)

deletion_audit = sa.Table(
    "deletion_audit",
    metadata,
    # Append-only record of every deletion (``contextledger forget``, ``gc``): who, when,
    # what scope and how many rows / blobs — never any content.
    _id(),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("event", sa.String(32), nullable=False),
    sa.Column("tenant_id", sa.String(64)),
    sa.Column("subject", sa.String(200)),
    sa.Column("actor", sa.String(200)),
    _body(),
    sa.Index("ix_deletion_audit_tenant", "tenant_id", "created_at"),
)

def _doc_id() -> sa.Column[int]:
    # an alias of SQLite's rowid (the FTS5 index refers to it), a bigint identity elsewhere
    return sa.Column("doc_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True)


retrieval_docs = sa.Table(
    "retrieval_docs",
    metadata,
    # One row per indexed record (a user or assistant message, a tool memory): its
    # code-aware keyword tokens (``contextledger.retrieval.text``), space-separated.
    # The full-text index over ``tokens`` is dialect-specific and lives outside this
    # metadata (:data:`FULLTEXT_OBJECTS`, migration 0008): an FTS5 table kept in step by
    # triggers on SQLite, a GIN index on ``array_to_tsvector`` on PostgreSQL.
    # ``scope``: one token per tenant and conversation, so an FTS5 query matches inside
    # one conversation only.
    _doc_id(),
    _tenant(),
    _conv(),
    sa.Column("branch_id", sa.String(64), nullable=False),
    sa.Column("seq", sa.BigInteger, nullable=False),
    sa.Column("record_kind", sa.String(16), nullable=False),
    sa.Column("record_id", sa.String(64), nullable=False),
    sa.Column("scope", sa.String(40), nullable=False),
    sa.Column("tokens", sa.Text, nullable=False),
    sa.Index("ux_retrieval_docs_record", "tenant_id", "record_id", unique=True),
    sa.Index("ix_retrieval_docs_conv", "tenant_id", "conversation_id", "doc_id"),
)

retrieval_vectors = sa.Table(
    "retrieval_vectors",
    metadata,
    # One embedding per indexed record (tool memories and user messages), keyed by its
    # ``retrieval_docs`` row; ``vector``: ``dim`` little-endian float32, unit length.
    # Read in ``doc_id`` order per conversation and model by the semantic route's
    # process cache (``contextledger.retrieval.vectors``).  Append-only.
    sa.Column("doc_id", sa.BigInteger, primary_key=True),
    _tenant(),
    _conv(),
    sa.Column("branch_id", sa.String(64), nullable=False),
    sa.Column("seq", sa.BigInteger, nullable=False),
    sa.Column("record_kind", sa.String(16), nullable=False),
    sa.Column("record_id", sa.String(64), nullable=False),
    sa.Column("model", sa.String(64), nullable=False),
    sa.Column("vector", sa.LargeBinary, nullable=False),
    sa.Index("ix_retrieval_vectors_conv", "tenant_id", "conversation_id", "model", "doc_id"),
)

derivation_queue = sa.Table(
    "derivation_queue",
    metadata,
    # The second recording tier's work list: one row per tool result whose first tier
    # (artifact, result message, call status) committed and whose memory, links, terms,
    # retrieval documents and vectors are not derived yet.  Written in the first-tier
    # transaction, deleted in the transaction that derives it
    # (``contextledger.ingest.drain``).  ``body``: the derivation inputs the stored rows
    # do not hold (declared privacy, redacted text, action text).
    sa.Column("queue_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
    _tenant(),
    _conv(),
    sa.Column("artifact_id", sa.String(64), nullable=False),
    sa.Column("message_id", sa.String(64), nullable=False),
    sa.Column("call_status", sa.String(32), nullable=False),
    _body(),
    sa.Index("ux_derivation_queue_artifact", "tenant_id", "artifact_id", unique=True),
    sa.Index("ix_derivation_queue_conv", "tenant_id", "conversation_id", "queue_id"),
)

FULLTEXT_OBJECTS = {
    "sqlite": ("retrieval_fts", "retrieval_fts_data", "retrieval_fts_idx", "retrieval_fts_docsize", "retrieval_fts_config"),
    "postgresql": ("ix_retrieval_docs_tsv",),
}
"""The dialect-specific full-text objects over ``retrieval_docs.tokens`` (tables and
index names) created by migration 0008 and not part of :data:`metadata`."""


TABLES = {t.name: t for t in metadata.sorted_tables}
"""Every table by name."""
