"""The SQL store: one implementation for SQLite and PostgreSQL (SQLAlchemy Core).

:class:`SqlStore` is the union of the store's modules, by concern:

* ``connection`` — engine set-up (SQLite pragmas, PostgreSQL pool) and transactions
  (:meth:`~SqlStore.writer`, :meth:`~SqlStore.reader`), row decoding;
* ``writer`` — :class:`Writer`, the unit of work (inserts and updates of every record,
  sequence allocation); ``counter_writes`` keeps the branch counters exact;
* ``read_graph`` — conversations, branches and lineage, participants, model runs;
* ``read_transcript`` — messages, tool calls, lineage totals;
* ``read_records`` — artifacts and their raw bytes, memories and the term index, runtime
  state, rules;
* ``read_audit`` — context assemblies and policy decisions;
* ``reads`` — the prepared reads of one assembly (:class:`~contextledger.store.reads.LineageReads`).

The public surface (``SqlStore``, ``Writer``, ``ConversationSummary``) is importable from
here; the storage conformance suite (``tests/store_conformance``) runs unchanged against
every backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy.engine import Connection

from contextledger.records.models import ToolMemory
from contextledger.store.base import LineageSegment, Scope, SubjectEntry, require_scope
from contextledger.store.connection import DEFAULT_INLINE_THRESHOLD_BYTES
from contextledger.store.read_audit import AuditReads
from contextledger.store.read_graph import ConversationSummary, GraphReads
from contextledger.store.read_records import RecordReads
from contextledger.store.read_transcript import TranscriptReads
from contextledger.store.reads import LineageReads
from contextledger.store.writer import Writer

__all__ = ["DEFAULT_INLINE_THRESHOLD_BYTES", "ConversationSummary", "SqlStore", "Writer"]


class SqlStore(GraphReads, TranscriptReads, RecordReads, AuditReads):
    """The relational store (SQLite or PostgreSQL, chosen by URL) plus a blob store.

    Args:
        url: SQLAlchemy URL (``sqlite:////path/ledger.db``, ``postgresql+psycopg://…``).
        blobs: where payloads above ``inline_threshold_bytes`` live.
        inline_threshold_bytes: payload size (bytes) above which raw results are stored
            as blobs; default 4096 (seed 001 §6 problem 2).
        migrate: run Alembic migrations to head on open (default ``True``).

    Raises:
        BackendError: the driver is missing (``pip install 'contextledger[postgres]'``)
            or the database cannot be reached.
    """

    def recent_subject_memories(
        self,
        scope: Scope | None,
        conversation_id: str,
        segments: Sequence[LineageSegment],
        subject_prefix: str,
        *,
        scan: int = 2000,
        limit: int = 400,
        settled: Callable[[SubjectEntry], bool] | None = None,
        conn: Connection | None = None,
    ) -> list[ToolMemory]:
        """The newest ``limit`` memories whose ``subject_key`` starts with
        ``subject_prefix`` among the newest ``scan`` memories of each lineage segment (in
        ``(seq, id)`` order).  Bounded work whatever the history: per segment one
        backward range of ``ix_tool_memories_lineage`` reading at most ``scan`` entries,
        then the matching rows by primary key, in one prepared statement
        (:meth:`~contextledger.store.reads.LineageReads.recent_subject_memories`) —
        unlike a prefix range over the subject index, which reads every matching memory
        of the conversation to sort them.

        ``settled`` (optional): for a reader that needs, per subject, only the newest
        memory passing a test on its indexed columns (:class:`SubjectEntry`) — the
        window's entries are read first without bodies, and only the records of each
        subject newest first up to the first entry ``settled`` accepts are returned
        (every record of a subject none is accepted for), still in ``(seq, id)`` order.
        Whatever the reader picks from the full window's newest-first walk it picks
        from this subset when its test passes at least where ``settled`` does.

        Raises:
            ScopeError: no scope.
        """
        scope = require_scope(scope)

        if conn is None:
            with self.reader() as c:
                return LineageReads(self, c, scope, conversation_id).recent_subject_memories(segments, subject_prefix, scan=scan, limit=limit, settled=settled)
        return LineageReads(self, conn, scope, conversation_id).recent_subject_memories(segments, subject_prefix, scan=scan, limit=limit, settled=settled)

