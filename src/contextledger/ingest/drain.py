"""The derivation queue between the two recording tiers.

The first tier (:mod:`contextledger.ingest.durable`, written by
:class:`~contextledger.ingest.recorder.Recorder`) commits a tool result's artifact,
result message and call status together with one ``derivation_queue`` row
(:func:`enqueue_result`).  :func:`drain` takes queued rows in ``queue_id`` order, in
batches, and derives each one (:mod:`contextledger.ingest.derivation`: memory, links,
terms, retrieval documents of the memory and of the result message, vectors when an
encoder is on, branch counts) in one transaction per batch that also deletes the rows.

A batch's rows are deleted first (``DELETE … RETURNING``) and only the rows this
transaction deleted are derived, so two drains never derive one row twice, and a crash
(even ``kill -9``) before the commit leaves the rows queued for the next drain.  Until a
result is drained the assembler sees its artifact without a memory and shows the raw
result.

Who drains: the library (a :class:`Recorder` used directly) right after its first-tier
transaction commits, in a separate transaction; the service's background worker
(:mod:`contextledger.server.drain_worker`); ``contextledger index``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from contextledger.ingest.derivation import derive_result_memory, index_message
from contextledger.records.enums import PrivacyClass, Visibility
from contextledger.records.models import Message, ToolArtifact, ToolCall, ToolMemory
from contextledger.store import schema as S
from contextledger.store.base import Scope

if TYPE_CHECKING:
    from contextledger.runtime import Runtime
    from contextledger.security.screen import ScreenedResult
    from contextledger.store.sql import Writer

__all__ = ["DRAIN_BATCH", "DrainReport", "KnownResult", "QueuedResult", "drain", "enqueue_result", "queued_artifact_ids"]

DRAIN_BATCH = 64
"""Queued results derived per transaction by :func:`drain`."""


@dataclass(frozen=True, kw_only=True)
class QueuedResult:
    """The derivation inputs of one tool result that its stored rows do not hold.

    ``declared_privacy``: the privacy class the caller gave (the stored artifact's may be
    raised to ``secret_like``); ``redacted``: the redacted text of a secret-like result
    (its raw payload is restricted), else ``None``; ``visibility`` and ``child``: as the
    artifact's; ``action_text``: the text that decided the call's status, if any.
    """

    declared_privacy: PrivacyClass
    redacted: str | None
    visibility: Visibility
    child: bool
    action_text: str | None

    def body(self) -> dict[str, Any]:
        """The ``derivation_queue.body`` JSON of this entry."""
        return {
            "declared_privacy": self.declared_privacy.value, "redacted": self.redacted,
            "visibility": self.visibility.value, "child": self.child, "action_text": self.action_text,
        }

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> QueuedResult:
        """The entry stored as ``body`` (see :meth:`body`)."""
        return cls(
            declared_privacy=PrivacyClass(body["declared_privacy"]), redacted=body.get("redacted"),
            visibility=Visibility(body["visibility"]), child=bool(body.get("child")), action_text=body.get("action_text"),
        )


@dataclass
class DrainReport:
    """What one :func:`drain` call did: ``memories`` derived (in queue order), the number
    of ``batches`` (transactions) and, with ``skip_failed``, the ``failed`` rows as
    ``(queue_id, artifact id, error text)`` (still queued)."""

    memories: list[ToolMemory]
    batches: int = 0
    failed: list[tuple[int, str, str]] = field(default_factory=list)


def enqueue_result(w: Writer, stored: ToolArtifact, msg: Message, screened: ScreenedResult, entry: QueuedResult) -> None:
    """Inside the first-tier transaction ``w``: queue the derivation of ``stored`` (its
    result message ``msg``, ``screened`` its screening, ``entry`` the other inputs)."""
    redacted = screened.text if screened.screening is not None else None
    body = QueuedResult(
        declared_privacy=entry.declared_privacy, redacted=redacted, visibility=entry.visibility,
        child=entry.child, action_text=entry.action_text,
    ).body()
    w.conn.execute(
        S.derivation_queue.insert(),
        {
            "tenant_id": stored.tenant_id, "conversation_id": stored.conversation_id, "artifact_id": stored.id,
            "message_id": msg.id, "call_status": stored.status.value, "body": body,
        },
    )


def queued_artifact_ids(runtime: Runtime, scope: Scope, conversation_id: str) -> set[str]:
    """Artifact ids of ``conversation_id`` whose derivation is still queued."""
    q = S.derivation_queue
    with runtime.store.reader() as c:
        rows = c.execute(sa.select(q.c.artifact_id).where(q.c.tenant_id == scope.tenant_id, q.c.conversation_id == conversation_id))
        return {r.artifact_id for r in rows}


def _pending(runtime: Runtime, scope: Scope | None, conversation_id: str | None, limit: int, after: int) -> list[tuple[int, str, str]]:
    """``(queue_id, tenant, conversation)`` of the oldest ``limit`` queued rows past
    ``queue_id`` ``after``."""
    q = S.derivation_queue
    stmt = sa.select(q.c.queue_id, q.c.tenant_id, q.c.conversation_id).where(q.c.queue_id > after).order_by(q.c.queue_id).limit(limit)
    if scope is not None:
        stmt = stmt.where(q.c.tenant_id == scope.tenant_id)
    if conversation_id is not None:
        stmt = stmt.where(q.c.conversation_id == conversation_id)
    with runtime.store.engine.connect() as c:
        return [(int(r.queue_id), r.tenant_id, r.conversation_id) for r in c.execute(stmt)]


@dataclass(frozen=True)
class KnownResult:
    """A first-tier result its recorder still holds (the stored artifact, its call,
    result message and screened text), so the drain right after the commit reads none of
    them back."""

    stored: ToolArtifact
    call: ToolCall
    msg: Message
    text: str | None


def drain(
    runtime: Runtime,
    scope: Scope | None = None,
    *,
    conversation_id: str | None = None,
    batch: int = DRAIN_BATCH,
    max_batches: int | None = None,
    skip_failed: bool = False,
    known: Mapping[str, KnownResult] | None = None,
) -> DrainReport:
    """Derive queued tool results, oldest first, ``batch`` rows per transaction, until
    the queue (of ``scope``'s tenant and ``conversation_id`` when given; of every tenant
    when ``scope`` is ``None``) is empty or ``max_batches`` transactions ran.

    Each transaction deletes its rows and derives exactly the rows it deleted (see the
    module docstring), so concurrent drains and crashes never derive a result twice.
    A failing batch rolls back whole (its rows stay queued).  With ``skip_failed`` (the
    service's worker) its rows are retried one per transaction and a row that fails alone
    is left queued and reported in ``failed``, so one bad row never stops the others.
    ``known``: records by artifact id the caller holds (:class:`KnownResult`).

    Raises:
        ValueError: ``batch`` < 1.
        Exception: whatever a derivation raised, unless ``skip_failed``.
    """
    if batch < 1:
        raise ValueError(f"drain batch must be at least 1, got {batch}")
    report = DrainReport(memories=[])
    after = 0
    while max_batches is None or report.batches < max_batches:
        ids: list[int] | None = None
        tenant_scope = scope
        if tenant_scope is None:  # every tenant: one writer scope per transaction
            rows = _pending(runtime, None, conversation_id, batch, after)
            if not rows:
                break
            ids = [qid for qid, t, _ in rows if t == rows[0][1]]
            tenant_scope = Scope(tenant_id=rows[0][1])
        try:
            taken = _drain_batch(runtime, tenant_scope, ids, conversation_id, batch, after, known or {})
        except Exception:
            if not skip_failed:
                raise
            report.batches += 1
            retry = ids if ids is not None else [qid for qid, _, _ in _pending(runtime, tenant_scope, conversation_id, batch, after)]
            for qid in retry:
                try:
                    report.memories.extend(_drain_batch(runtime, tenant_scope, [qid], conversation_id, 1, after, known or {}) or [])
                except Exception as exc:
                    report.failed.append((qid, _artifact_of(runtime, qid), f"{type(exc).__name__}: {exc}"))
                    after = max(after, qid)
            continue
        if taken is None:
            break
        report.batches += 1
        report.memories.extend(taken)
    return report


def _artifact_of(runtime: Runtime, queue_id: int) -> str:
    q = S.derivation_queue
    with runtime.store.engine.connect() as c:
        return str(c.execute(sa.select(q.c.artifact_id).where(q.c.queue_id == queue_id)).scalar() or "?")


def _drain_batch(
    runtime: Runtime, scope: Scope, queue_ids: Sequence[int] | None, conversation_id: str | None, batch: int, after: int,
    known: Mapping[str, KnownResult],
) -> list[ToolMemory] | None:
    """One drain transaction: delete the rows ``queue_ids`` (or the oldest ``batch`` of
    the scope past ``after``: chosen inside the same statement, no read before the
    writer) and derive the rows deleted; ``None`` when there were none."""
    from contextledger.retrieval.index import batched_vectors

    q = S.derivation_queue
    out: list[ToolMemory] = []
    if queue_ids is not None:
        where = q.c.queue_id.in_(list(queue_ids))
    else:
        pick = sa.select(q.c.queue_id).where(q.c.tenant_id == scope.tenant_id, q.c.queue_id > after)
        if conversation_id is not None:
            pick = pick.where(q.c.conversation_id == conversation_id)
        where = q.c.queue_id.in_(pick.order_by(q.c.queue_id).limit(batch).scalar_subquery())
    with runtime.store.writer(scope) as w, batched_vectors(w):
        taken = w.conn.execute(
            q.delete().where(where, q.c.tenant_id == scope.tenant_id)
            .returning(q.c.queue_id, q.c.conversation_id, q.c.artifact_id, q.c.message_id, q.c.body)
        ).all()
        if not taken:
            return None
        for row in sorted(taken, key=lambda r: int(r.queue_id)):
            body = row.body if isinstance(row.body, dict) else _json(row.body)
            entry = QueuedResult.from_body(body)
            mem = derive_queued(runtime, w, scope, row.conversation_id, row.artifact_id, row.message_id, entry, known.get(row.artifact_id))
            if mem is not None:
                out.append(mem)
    return out


def _json(text: Any) -> dict[str, Any]:
    import json

    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"derivation_queue body is not an object: {text!r:.80}")
    return value


def derive_queued(
    runtime: Runtime, w: Writer, scope: Scope, conversation_id: str, artifact_id: str, message_id: str, entry: QueuedResult,
    known: KnownResult | None = None,
) -> ToolMemory | None:
    """Inside ``w``'s transaction: derive the second tier of one first-tier result (its
    memory, links, terms, the retrieval documents of the memory and of the result message
    ``message_id``).  ``None`` when the artifact is gone (its conversation was forgotten
    after it was queued)."""
    from contextledger.memory.continuation import continued_command
    from contextledger.security.screen import SECRETS_KEY, ScreenedResult
    from contextledger.security.secrets import Screening

    store = runtime.store
    if known is not None:
        stored, call = known.stored, known.call
    else:
        arts = store.artifacts(scope, conversation_id, ids=[artifact_id], conn=w.conn)
        if not arts:
            return None
        stored = arts[0]
        call = store.get_tool_call(scope, conversation_id, stored.call_id, w.conn)
    art = stored.model_copy(update={
        "privacy_class": entry.declared_privacy,
        "provider_metadata": {k: v for k, v in stored.provider_metadata.items() if k != SECRETS_KEY},
    })
    if entry.redacted is not None:
        screened = ScreenedResult(screening=Screening(text=entry.redacted), text=entry.redacted)
    else:
        screened = ScreenedResult(screening=None, text=known.text if known is not None else _result_text(runtime, stored))
    mem = derive_result_memory(
        runtime, w, scope, art, stored, screened, size_bytes=stored.size_bytes, content_type=stored.content_type,
        visibility=entry.visibility, child=entry.child, action_text=entry.action_text,
        continues=continued_command(store, w, scope, call),
    )
    msgs = [known.msg] if known is not None else store.messages(scope, conversation_id, ids=[message_id], conn=w.conn)
    if msgs:
        index_message(w, msgs[0])
    return mem


def _result_text(runtime: Runtime, art: ToolArtifact) -> str | None:
    """The UTF-8 text of a (non secret-like) stored result: inline, or its blob; ``None``
    for a binary payload."""
    if art.inline_text is not None:
        return art.inline_text
    if art.blob_key is None:
        return None
    try:
        return runtime.store.blobs.get(art.blob_key).decode("utf-8")
    except UnicodeDecodeError:
        return None
