"""Reads of tool artifacts (and their raw bytes), tool memories and the term index,
runtime state (skill states, checkpoints) and pinned rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from contextledger.errors import NotFoundError
from contextledger.records.models import (
    ContinuationCheckpoint,
    SkillState,
    ToolArtifact,
    ToolMemory,
)
from contextledger.store import schema as S
from contextledger.store.base import (
    LineageSegment,
    Scope,
    require_scope,
)
from contextledger.store.clauses import newest_per_segment, segments_clause
from contextledger.store.connection import SqlStoreBase

__all__ = ["RecordReads"]


class RecordReads(SqlStoreBase):
    """Artifacts, memories, the term index, runtime state and rules."""

    def artifacts(
        self,
        scope: Scope | None,
        conversation_id: str,
        segments: Sequence[LineageSegment] | None = None,
        *,
        ids: Iterable[str] | None = None,
        call_ids: Iterable[str] | None = None,
        conn: Connection | None = None,
    ) -> list[ToolArtifact]:
        """Tool artifacts in ``seq`` order, optionally filtered."""
        scope = require_scope(scope)
        t = S.tool_artifacts
        if ids is not None:
            # by id the primary key decides (see ``memories``): scope checked, not indexed
            stmt = sa.select(t.c.body).where(t.c.id.in_(list(ids)), t.c.tenant_id.concat("") == scope.tenant_id, t.c.conversation_id.concat("") == conversation_id)
        else:
            stmt = sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id)
        if segments is not None:
            stmt = stmt.where(segments_clause(t, segments))
        if call_ids is not None:
            stmt = stmt.where(t.c.call_id.in_(list(call_ids)))
        if ids is None and call_ids is None:
            return self._rows(stmt.order_by(t.c.seq), ToolArtifact, conn)
        return sorted(self._rows(stmt, ToolArtifact, conn), key=lambda a: a.seq)

    def get_artifact(self, scope: Scope | None, artifact_id: str, conn: Connection | None = None) -> ToolArtifact:
        """The artifact ``artifact_id`` (any conversation of the tenant).

        Raises:
            NotFoundError: not in scope.
        """
        scope = require_scope(scope)
        t = S.tool_artifacts
        return self._one(
            sa.select(t.c.body).where(t.c.id == artifact_id, t.c.tenant_id == scope.tenant_id),
            ToolArtifact,
            "artifact",
            artifact_id,
            conn,
        )

    def read_artifact_bytes(self, scope: Scope | None, artifact: ToolArtifact | str) -> bytes:
        """The exact raw bytes of an artifact's result, verified against its sha256.

        ``artifact`` is an id or a loaded record of the scope's tenant.

        Raises:
            NotFoundError: unknown artifact, another tenant's artifact, or a payload
                removed by retention.
            IntegrityError: blob missing or bytes do not match the recorded sha256
                (``record_id`` = the artifact id, ``actual`` = ``None`` when missing).
        """
        from contextledger.errors import IntegrityError
        from contextledger.store.blobs import sha256_key

        scope = require_scope(scope)
        art = self.get_artifact(scope, artifact) if isinstance(artifact, str) else artifact
        if art.tenant_id != scope.tenant_id:
            raise NotFoundError("artifact", art.id)
        if art.deleted_at is not None:
            raise NotFoundError("artifact payload (retention-deleted)", art.id)
        if art.blob_key is not None:
            try:
                data = self.blobs.get(art.blob_key)
            except IntegrityError as exc:  # name the artifact, not only the blob key
                raise IntegrityError(art.id, art.sha256, exc.actual) from exc
        else:
            data = (art.inline_text or "").encode("utf-8")
        actual = sha256_key(data)
        if actual != art.sha256:
            raise IntegrityError(art.id, art.sha256, actual)
        return data

    def memories(
        self,
        scope: Scope | None,
        conversation_id: str,
        segments: Sequence[LineageSegment] | None = None,
        *,
        last: int | None = None,
        ids: Iterable[str] | None = None,
        subject_keys: Iterable[str] | None = None,
        subject_prefix: str | None = None,
        artifact_ids: Iterable[str] | None = None,
        unsuperseded: bool = False,
        conn: Connection | None = None,
    ) -> list[ToolMemory]:
        """Tool memories in ``seq`` order (``last``: only the newest N; ``unsuperseded``:
        none whose ``resolution_state`` is ``superseded``)."""
        scope = require_scope(scope)
        t = S.tool_memories
        if ids is not None:
            # by id the primary key decides: the scope is still checked, but in a form no
            # (tenant, conversation, …) index can serve — SQLite without statistics
            # would otherwise range over the whole conversation to find a few ids
            stmt = sa.select(t.c.body).where(t.c.id.in_(list(ids)), t.c.tenant_id.concat("") == scope.tenant_id, t.c.conversation_id.concat("") == conversation_id)
        else:
            stmt = sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id)
        if segments is not None and (last is None or len(segments) <= 1):
            stmt = stmt.where(segments_clause(t, segments))
        if subject_keys is not None:
            stmt = stmt.where(t.c.subject_key.in_(list(subject_keys)))
        if subject_prefix is not None:
            stmt = stmt.where(t.c.subject_key >= subject_prefix, t.c.subject_key < subject_prefix + "\uffff")
        if artifact_ids is not None:
            stmt = stmt.where(t.c.artifact_id.in_(list(artifact_ids)))
        if unsuperseded:
            stmt = stmt.where(t.c.resolution_state != "superseded")
        if last is not None:
            if segments is not None and len(segments) > 1:
                stmt = newest_per_segment(stmt, t, segments, last, (t.c.seq, t.c.id))
            else:
                stmt = stmt.order_by(t.c.seq.desc(), t.c.id.desc()).limit(last)
            return sorted(self._rows(stmt, ToolMemory, conn), key=lambda m: (m.seq, m.id))
        if ids is None and subject_keys is None and subject_prefix is None and artifact_ids is None:
            stmt = stmt.order_by(t.c.seq)
        # with a filter, no ORDER BY (see ``messages``): sorted here
        return sorted(self._rows(stmt, ToolMemory, conn), key=lambda m: (m.seq, m.id))

    def term_matches(
        self, scope: Scope | None, conversation_id: str, terms: Iterable[str], *, per_term: int = 64, conn: Connection | None = None
    ) -> list[tuple[str, str, str, int]]:
        """``(memory_id, term, branch_id, seq)`` of the newest ``per_term`` memories of
        the conversation indexed under each of ``terms`` (one ``ix_memory_terms_term``
        range per term, so the work is bounded by ``len(terms) × per_term`` rows whatever
        the history length).  Lineage is not filtered here (callers check branch/seq).
        """
        scope = require_scope(scope)
        t = S.memory_terms
        out: list[tuple[str, str, str, int]] = []

        def run(c: Connection) -> None:
            for term in sorted(set(terms)):
                stmt = (
                    sa.select(t.c.memory_id, t.c.term, t.c.branch_id, t.c.seq)
                    .where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id, t.c.term == term)
                    .order_by(t.c.seq.desc())
                    .limit(per_term)
                )
                out.extend((r.memory_id, r.term, r.branch_id, int(r.seq)) for r in c.execute(stmt))

        if conn is None:
            with self.reader() as c:
                run(c)
        else:
            run(conn)
        return out

    def get_memory(self, scope: Scope | None, memory_id: str) -> ToolMemory:
        """The memory ``memory_id``.

        Raises:
            NotFoundError: not in scope.
        """
        scope = require_scope(scope)
        t = S.tool_memories
        return self._one(sa.select(t.c.body).where(t.c.id == memory_id, t.c.tenant_id == scope.tenant_id), ToolMemory, "memory", memory_id)

    def id_at_seq(self, scope: Scope | None, conversation_id: str, kind: str, seq: int, conn: Connection | None = None) -> str:
        """The id of the tool ``kind`` (``"memory"`` / ``"artifact"``) recorded at ``seq``
        in a conversation: what a handle such as ``m12`` names
        (:mod:`contextledger.handles`).

        Raises:
            NotFoundError: no such record in the conversation (in scope).
            StoredDataError: more than one (the ledger breaks the one-record-per-seq rule).
        """
        from contextledger.errors import StoredDataError

        scope = require_scope(scope)
        t = S.tool_memories if kind == "memory" else S.tool_artifacts
        stmt = sa.select(t.c.id).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id, t.c.seq == seq).limit(2)
        if conn is None:
            with self.reader() as c:
                ids = [str(r[0]) for r in c.execute(stmt)]
        else:
            ids = [str(r[0]) for r in conn.execute(stmt)]
        handle = f"{'m' if kind == 'memory' else 'a'}{seq}"
        if not ids:
            raise NotFoundError(kind, f"{handle} in conversation {conversation_id}")
        if len(ids) > 1:
            raise StoredDataError(f"{kind} handle {handle} names {len(ids)} records in conversation {conversation_id}")
        return ids[0]

    def skill_states(self, scope: Scope | None, conversation_id: str, segments: Sequence[LineageSegment] | None = None, conn: Connection | None = None) -> list[SkillState]:
        """Skill state snapshots in ``seq`` order."""
        scope = require_scope(scope)
        t = S.skill_states
        stmt = sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id)
        if segments is not None:
            stmt = stmt.where(segments_clause(t, segments))
        return self._rows(stmt.order_by(t.c.seq), SkillState, conn)

    def checkpoints(self, scope: Scope | None, conversation_id: str, segments: Sequence[LineageSegment] | None = None, conn: Connection | None = None) -> list[ContinuationCheckpoint]:
        """Continuation checkpoints in ``seq`` order."""
        scope = require_scope(scope)
        t = S.checkpoints
        stmt = sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id)
        if segments is not None:
            stmt = stmt.where(segments_clause(t, segments))
        return self._rows(stmt.order_by(t.c.seq), ContinuationCheckpoint, conn)

    def rule_bodies(self, scope: Scope | None, conversation_id: str, conn: Connection | None = None) -> list[dict[str, Any]]:
        """Pinned rule records of a conversation (raw JSON bodies, ``seq`` order)."""
        scope = require_scope(scope)
        t = S.rules
        stmt = sa.select(t.c.body, t.c.branch_id, t.c.seq).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id).order_by(t.c.seq, t.c.id)
        if conn is None:
            with self.reader() as c:
                rows = c.execute(stmt).all()
        else:
            rows = conn.execute(stmt).all()
        return [dict(r.body) | {"_branch_id": r.branch_id, "_seq": int(r.seq)} for r in rows]
