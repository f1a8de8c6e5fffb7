"""Reads of the audit records: context assemblies and policy decisions."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from contextledger.errors import NotFoundError
from contextledger.records.models import (
    ContextAssembly,
    PolicyDecision,
)
from contextledger.store import schema as S
from contextledger.store.base import (
    Scope,
    require_scope,
)
from contextledger.store.connection import SqlStoreBase

__all__ = ["AuditReads"]


class AuditReads(SqlStoreBase):
    """Assemblies and policy decisions."""

    # -- assemblies ----------------------------------------------------------------------
    def get_assembly(self, scope: Scope | None, assembly_id: str) -> tuple[ContextAssembly, dict[str, Any] | None]:
        """An assembly record and the payload stored with it.

        Raises:
            NotFoundError: not in scope.
        """
        scope = require_scope(scope)
        self.deferred.settle(assembly_id=assembly_id)
        t = S.assemblies
        with self.reader() as conn:
            row = conn.execute(sa.select(t.c.body, t.c.payload).where(t.c.id == assembly_id, t.c.tenant_id == scope.tenant_id)).first()
        if row is None:
            raise NotFoundError("assembly", assembly_id)
        return ContextAssembly.model_validate(row.body), row.payload

    def latest_assembly(
        self, scope: Scope | None, conversation_id: str, branch_id: str, participant_id: str | None, conn: Connection | None = None
    ) -> ContextAssembly | None:
        """The newest assembly for the same branch and participant, if any."""
        scope = require_scope(scope)
        self.deferred.settle(conversation_id)
        t = S.assemblies
        stmt = (
            sa.select(t.c.body)
            .where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id, t.c.branch_id == branch_id)
            .where(t.c.participant_id.is_(None) if participant_id is None else t.c.participant_id == participant_id)
            .order_by(t.c.created_at.desc(), t.c.id.desc())
            .limit(1)
        )
        rows = self._rows(stmt, ContextAssembly, conn)
        return rows[0] if rows else None

    def recent_assemblies(self, scope: Scope | None, conversation_id: str, participant_id: str | None, *, limit: int = 8) -> list[ContextAssembly]:
        """The newest ``limit`` assemblies of a conversation for one participant (any
        branch), newest first (the epoch state of :mod:`contextledger.assembly.epoch`)."""
        scope = require_scope(scope)
        self.deferred.settle(conversation_id)
        t = S.assemblies
        stmt = (
            sa.select(t.c.body)
            .where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id)
            .where(t.c.participant_id.is_(None) if participant_id is None else t.c.participant_id == participant_id)
            .order_by(t.c.created_at.desc(), t.c.id.desc())
            .limit(limit)
        )
        return self._rows(stmt, ContextAssembly, None)

    def decisions(self, scope: Scope | None, *, assembly_id: str | None = None, record_id: str | None = None, conversation_id: str | None = None) -> list[PolicyDecision]:
        """Policy decisions filtered by assembly, subject record or conversation."""
        scope = require_scope(scope)
        self.deferred.settle(conversation_id, assembly_id)
        t = S.policy_decisions
        stmt = sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id)
        if assembly_id is not None:
            stmt = stmt.where(t.c.assembly_id == assembly_id)
        if record_id is not None:
            stmt = stmt.where(t.c.record_id == record_id)
        if conversation_id is not None:
            stmt = stmt.where(t.c.conversation_id == conversation_id)
        return sorted(self._rows(stmt, PolicyDecision), key=lambda d: (d.created_at, d.id))
