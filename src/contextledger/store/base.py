"""The storage contract: scope, lineage segments and the ``Store`` protocol.

One interface, several backends (SQLite embedded default, PostgreSQL for production),
checked by one conformance suite (``tests/store_conformance``).  Every read and write
takes a :class:`Scope`; the tenant filter is part of each query, never applied after the
fact, and a missing scope is a denial (:class:`~contextledger.errors.ScopeError`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from contextledger.errors import ScopeError

if TYPE_CHECKING:
    import sqlalchemy as sa

    from contextledger.records.models import Branch

__all__ = ["CAPABILITIES", "LineageSegment", "Scope", "StoreReads", "SubjectEntry", "require_scope"]


@dataclass(frozen=True, kw_only=True)
class Scope:
    """Who is reading or writing.

    Attributes:
        tenant_id: isolation root; required.
        user_id: when given, conversations are additionally filtered to this user.
        agent_id: when given, recorded as the actor of writes (audit).
    """

    tenant_id: str
    user_id: str | None = None
    agent_id: str | None = None


def require_scope(scope: Scope | None) -> Scope:
    """Return ``scope`` or raise :class:`ScopeError` when it is missing or has no tenant."""
    if scope is None or not isinstance(scope, Scope) or not scope.tenant_id:
        raise ScopeError("a tenant scope is required for every read and write")
    return scope


@dataclass(frozen=True, kw_only=True)
class LineageSegment:
    """One branch of a lineage and the highest sequence number inherited from it.

    ``max_seq`` is ``None`` for the active branch itself (everything on it) and the fork
    point for ancestors (seed 000 §4.10: inherit up to the fork without copying).
    """

    branch_id: str
    max_seq: int | None = None


class SubjectEntry(NamedTuple):
    """The indexed columns of one memory with a ``subject_key`` (no body): what a reader
    can decide on before reading the record (see ``settled`` of
    :meth:`~contextledger.store.sql.SqlStore.recent_subject_memories`).

    ``visibility`` is the stored visibility scope value (``"branch"``,
    ``"participant_private"`` …); sharing with further participants is in the body only.
    """

    id: str
    seq: int
    subject_key: str
    visibility: str
    owner_participant_id: str | None


CAPABILITIES = frozenset(
    {
        "transactions",
        "idempotent_content_keys",
        "lineage_queries",
        "blob_payloads",
        "multi_process_writers",
    }
)
"""Capabilities a conforming store declares (``store.capabilities``)."""


class StoreReads(Protocol):
    """What :class:`~contextledger.store.reads.LineageReads` needs of the store (:class:`~contextledger.store.sql.SqlStore`):
    its engine (the dialect compiles the statements) and the plain reads it falls back on."""

    engine: sa.Engine
    dialect: str

    def get_branch(self, scope: Scope | None, branch_id: str, conn: sa.Connection | None = None) -> Branch: ...

    def lineage_totals(self, scope: Scope | None, conversation_id: str, segments: Sequence[LineageSegment], conn: sa.Connection | None = None) -> dict[str, int]: ...

    def outside_lineage_counts(self, scope: Scope | None, conversation_id: str, segments: Sequence[LineageSegment], conn: sa.Connection | None = None) -> dict[str, int]: ...
