"""Recording tool results in two tiers (the tool-result half of
:class:`~contextledger.ingest.recorder.Recorder`).

The first tier is one transaction: raw bytes to the blob store when above the inline
threshold (content addressed, before anything else), then the ToolArtifact row (sha256,
byte size, cached token count), the result Message, the ToolCall status change and a
``derivation_queue`` row (:func:`contextledger.ingest.drain.enqueue_result`).  Nothing is
truncated or summarised before the raw artifact exists (seed 000 §4.2).  The second tier
— memory, links, terms, retrieval documents, vectors — is derived by
:func:`contextledger.ingest.drain.drain` in its own transaction: right after the first
tier commits when the recorder is used directly (the library default), and by the
service's background worker and ``contextledger index`` for rows left queued (a process
killed between the tiers).

:meth:`ResultRecording.write_result` keeps both tiers in the caller's transaction for the
batch writers that own one (import, reconciliation, promotion).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from contextledger.errors import InputError, NotFoundError
from contextledger.ingest.derivation import derive_result_memory, index_message
from contextledger.ingest.drain import KnownResult, QueuedResult, drain, enqueue_result
from contextledger.ingest.durable import AlreadyRecorded, decode_result, result_artifact
from contextledger.limits import payload_bytes, utf8_bytes
from contextledger.memory.continuation import continued_command
from contextledger.memory.write_status import result_status
from contextledger.records.enums import PrivacyClass, Role, RuntimeKind, ToolCallStatus, Visibility
from contextledger.records.models import Conversation, Message, ToolArtifact, ToolCall, ToolMemory
from contextledger.records.parts import ToolResultPart
from contextledger.security.screen import ScreenedResult, screen_tool_result
from contextledger.store.blobs import sha256_key

if TYPE_CHECKING:
    from contextledger.runtime import Runtime
    from contextledger.store.base import Scope
    from contextledger.store.sql import SqlStore, Writer

__all__ = ["ResultRecording"]


class _Resolved(Exception):
    """Control flow: the call already has a result (raised inside the first-tier writer,
    before anything is written)."""


class _FirstTier:
    """What the first tier of one result wrote, and what its derivation needs."""

    def __init__(self, msg: Message, art: ToolArtifact, stored: ToolArtifact, screened: ScreenedResult, entry: QueuedResult) -> None:
        self.msg, self.art, self.stored, self.screened, self.entry = msg, art, stored, screened, entry


class ResultRecording:
    """The tool-result half of :class:`~contextledger.ingest.recorder.Recorder` (a base
    class: it needs the recorder's ``runtime``, ``store``, ``scope``, message writing
    and ownership defaults)."""

    runtime: Runtime
    store: SqlStore
    scope: Scope

    if TYPE_CHECKING:

        def is_child(self, conversation_id: str, participant_id: str | None) -> bool: ...

        def default_visibility(self, conversation_id: str, participant_id: str | None, *, run_state: bool) -> Visibility: ...

        _add_message: Callable[..., Message]

    def record_tool_result(
        self,
        conversation_id: str,
        call_id: str,
        result: str | bytes,
        *,
        is_error: bool = False,
        error_type: str | None = None,
        content_type: str | None = None,
        privacy_class: PrivacyClass = PrivacyClass.INTERNAL,
        visibility: Visibility | None = None,
        shared_with_participants: Sequence[str] = (),
        skill_profile: str | None = None,
        provider_metadata: Mapping[str, Any] | None = None,
        observed_at: datetime | None = None,
    ) -> tuple[Message, ToolArtifact, ToolMemory]:
        """Record the raw result of ``call_id`` (first tier, one transaction:
        :meth:`queue_tool_result`) and derive its memory (second tier: the conversation's
        queue drained in a separate transaction, :meth:`derived`).

        Args:
            result: the complete raw result (text, or bytes for binary payloads).
            visibility: default ``branch``; ``participant_private`` keeps it to the
                calling participant (seed 000 §4.9).

        Raises:
            NotFoundError: ``call_id`` was never recorded in this conversation.
            InputError: the call already has a result (idempotent re-recording of the
                same bytes returns the existing records instead).
        """
        msg, art = self.queue_tool_result(
            conversation_id, call_id, result, is_error=is_error, error_type=error_type, content_type=content_type,
            privacy_class=privacy_class, visibility=visibility, shared_with_participants=shared_with_participants,
            skill_profile=skill_profile, provider_metadata=provider_metadata, observed_at=observed_at,
        )
        return msg, art, self.derived(art)

    def queue_tool_result(
        self,
        conversation_id: str,
        call_id: str,
        result: str | bytes,
        *,
        is_error: bool = False,
        error_type: str | None = None,
        content_type: str | None = None,
        privacy_class: PrivacyClass = PrivacyClass.INTERNAL,
        visibility: Visibility | None = None,
        shared_with_participants: Sequence[str] = (),
        skill_profile: str | None = None,
        provider_metadata: Mapping[str, Any] | None = None,
        observed_at: datetime | None = None,
    ) -> tuple[Message, ToolArtifact]:
        """The first tier of :meth:`record_tool_result` alone: the blob (when large), then
        one transaction holding the artifact, the result message, the call status and the
        derivation queue row.  The memory comes from the next
        :func:`~contextledger.ingest.drain.drain`; until then an assembly shows the raw
        result.  Same arguments and errors as :meth:`record_tool_result`."""
        raw = payload_bytes(result, f"tool result of {call_id}")
        blob_key = self.runtime.put_blob_if_large(raw, privacy_class)
        try:
            with self.store.writer(self.scope) as w:  # the look-ups read inside the writer
                conv = self.store.get_conversation(self.scope, conversation_id, w.conn)
                call = self.store.get_tool_call(self.scope, conversation_id, call_id, w.conn)
                if call.status not in (ToolCallStatus.PENDING, ToolCallStatus.AWAITING_APPROVAL):
                    raise _Resolved(call.status.value)
                first = self._first_tier(
                    w, conv, call, raw, blob_key=blob_key, is_error=is_error, error_type=error_type, content_type=content_type,
                    privacy_class=privacy_class, visibility=visibility, shared_with=shared_with_participants,
                    skill_profile=skill_profile, provider_metadata=provider_metadata, observed_at=observed_at,
                )
                enqueue_result(w, first.stored, first.msg, first.screened, first.entry)
        except AlreadyRecorded:
            # another writer recorded this call's result first; ours was rolled back whole
            return self.queue_tool_result(conversation_id, call_id, result, is_error=is_error)
        except _Resolved as resolved:
            return self._recorded_result(conversation_id, call_id, raw, str(resolved))
        self._hold(KnownResult(first.stored, call, first.msg, first.screened.text))
        return first.msg, first.stored

    def _hold(self, known: KnownResult) -> None:
        """Keep a just-committed result for :meth:`derived` (a few, newest last)."""
        held: dict[str, KnownResult] = self.__dict__.setdefault("_held_results", {})
        if len(held) >= 64:
            held.clear()
        held[known.stored.id] = known

    def _recorded_result(self, conversation_id: str, call_id: str, raw: bytes, status: str) -> tuple[Message, ToolArtifact]:
        arts = self.store.artifacts(self.scope, conversation_id, call_ids=[call_id])
        if not arts or arts[0].sha256 != sha256_key(raw):
            raise InputError(f"tool call {call_id} already has a result ({status})")
        msgs = self.store.messages(self.scope, conversation_id, ids=[arts[0].message_id or ""])
        return msgs[0], arts[0]

    def derived(self, art: ToolArtifact) -> ToolMemory:
        """The memory of ``art``, after draining the conversation's derivation queue (a
        transaction of its own, after the first tier committed).

        Raises:
            NotFoundError: ``art`` has no memory (its conversation was forgotten meanwhile).
        """
        held: dict[str, KnownResult] = self.__dict__.get("_held_results", {})
        known = {k: held.pop(k) for k in list(held) if k == art.id}
        for mem in drain(self.runtime, self.scope, conversation_id=art.conversation_id, known=known).memories:
            if art.id in mem.source_artifact_ids:
                return mem
        mems = self.store.memories(self.scope, art.conversation_id, artifact_ids=[art.id])
        if not mems:
            raise NotFoundError("memory of artifact", art.id)
        return mems[0]

    def _first_tier(
        self,
        w: Writer,
        conv: Conversation,
        call: ToolCall,
        raw: bytes,
        *,
        blob_key: str | None,
        is_error: bool = False,
        error_type: str | None = None,
        content_type: str | None = None,
        privacy_class: PrivacyClass = PrivacyClass.INTERNAL,
        visibility: Visibility | None = None,
        shared_with: Sequence[str] = (),
        skill_profile: str | None = None,
        provider_metadata: Mapping[str, Any] | None = None,
        observed_at: datetime | None = None,
        result_message: Message | None = None,
        images: Sequence[Any] = (),
        action_text: str | None = None,
        status: ToolCallStatus | None = None,
        artifact_id: str | None = None,
        message_metadata: Mapping[str, Any] | None = None,
    ) -> _FirstTier:
        """Within ``w``'s transaction: artifact row, result message (unless given, not
        indexed yet) and call status."""
        now = datetime.now(UTC)
        text, ctype = decode_result(raw, content_type)
        blob_key, inline, result_message, screened = screen_tool_result(raw, text, blob_key, result_message, self.runtime.put_restricted_blob)
        new_status = status or result_status(call.tool_name, call.arguments_json, text, is_error, action_text)  # a write's own failure text too
        seq = result_message.seq if result_message is not None else w.allocate_seq(conv.id)
        child = self.is_child(conv.id, call.participant_id)
        vis = visibility or self.default_visibility(conv.id, call.participant_id, run_state=True)
        art = result_artifact(
            self.scope.tenant_id, conv.id, call, raw, text=text, content_type=ctype, inline=inline, blob_key=blob_key,
            status=new_status, is_error=is_error, error_type=error_type, seq=seq, visibility=vis, child=child,
            privacy_class=privacy_class, shared_with=shared_with, skill_profile=skill_profile,
            provider_metadata=provider_metadata, observed_at=observed_at or now, now=now, artifact_id=artifact_id,
        )
        if result_message is None:
            part = ToolResultPart(call_id=call.call_id, artifact_id=art.id, text=inline, is_error=is_error, images=tuple(images))
            msg = self._add_message(
                w, conv, call.branch_id, Role.TOOL, [part], participant_id=call.participant_id,
                model_run_id=call.model_run_id, visibility=vis, privacy_class=privacy_class, seq=seq,
                parent_message_id=call.message_id, created_at=observed_at, metadata=message_metadata,
                runtime_kind=RuntimeKind.SUBAGENT_CHILD if child else RuntimeKind.CHAT, index=False,
            )
        else:
            msg = result_message
        art = art.model_copy(update={"message_id": msg.id})
        if not w.add_artifact(stored := screened.artifact(art, privacy_class)):
            raise AlreadyRecorded(call.call_id)
        w.update_tool_call(call.model_copy(update={"status": new_status, "result_message_id": msg.id, "resolved_at": now}))
        entry = QueuedResult(declared_privacy=privacy_class, redacted=None, visibility=vis, child=child, action_text=action_text)
        return _FirstTier(msg, art, stored, screened, entry)

    def write_result(self, w: Writer, conv: Conversation, call: ToolCall, raw: bytes, *, blob_key: str | None, **kw: Any) -> tuple[Message, ToolArtifact, ToolMemory]:
        """Within ``w``'s transaction, both tiers: artifact row, result message (unless
        ``result_message`` is given), call status, memory and the retrieval documents.
        ``blob_key`` must already hold ``raw`` when not ``None``; ``visibility`` defaults by
        ownership (:meth:`default_visibility`, run state): the artifact, its result
        message and its memory share it.  Keywords: those of :meth:`_first_tier`
        (``is_error``, ``error_type``, ``content_type``, ``privacy_class``, ``visibility``,
        ``shared_with``, ``skill_profile``, ``provider_metadata``, ``observed_at``,
        ``result_message``, ``images``, ``action_text``, ``status``, ``artifact_id``,
        ``message_metadata``).  For the batch writers that own a transaction (import,
        reconciliation, promotion); live recording queues the second tier instead."""
        first = self._first_tier(w, conv, call, raw, blob_key=blob_key, **kw)
        if kw.get("result_message") is None:
            index_message(w, first.msg)
        e = first.entry
        mem = derive_result_memory(
            self.runtime, w, self.scope, first.art, first.stored, first.screened, size_bytes=len(raw),
            content_type=first.stored.content_type, visibility=e.visibility, child=e.child, action_text=e.action_text,
            continues=continued_command(self.store, w, self.scope, call),
        )
        return first.msg, first.stored, mem

    def set_awaiting_approval(self, conversation_id: str, call_id: str) -> ToolCall:
        """Mark a pending call as awaiting human approval (still unresolved)."""
        call = self.store.get_tool_call(self.scope, conversation_id, call_id)
        if not call.status.unresolved:
            raise InputError(f"tool call {call_id} is already resolved ({call.status.value})")
        updated = call.model_copy(update={"status": ToolCallStatus.AWAITING_APPROVAL})
        with self.store.writer(self.scope) as w:
            w.update_tool_call(updated)
        return updated

    def mark_abandoned(self, conversation_id: str, call_id: str, reason: str) -> tuple[Message, ToolArtifact, ToolMemory]:
        """Close a call whose result will never come (crash, cancel): writes an explicit
        error result and the ``abandoned`` status in one transaction (its memory is
        derived as :meth:`record_tool_result`'s).

        Raises:
            InputError: the call is already resolved.
        """
        raw = utf8_bytes(f"[abandoned] no result will arrive for this call: {reason}")
        blob_key = self.runtime.put_blob_if_large(raw)
        with self.store.writer(self.scope) as w:
            conv = self.store.get_conversation(self.scope, conversation_id, w.conn)
            call = self.store.get_tool_call(self.scope, conversation_id, call_id, w.conn)
            if not call.status.unresolved:
                raise InputError(f"tool call {call_id} is already resolved ({call.status.value})")
            first = self._first_tier(w, conv, call, raw, blob_key=blob_key, is_error=True, error_type="Abandoned", status=ToolCallStatus.ABANDONED)
            enqueue_result(w, first.stored, first.msg, first.screened, first.entry)
        self._hold(KnownResult(first.stored, call, first.msg, first.screened.text))
        return first.msg, first.stored, self.derived(first.stored)
