"""The batched recording path: many tool exchanges in one transaction, written in bulk.

:func:`record_exchanges` records what a run of ``record_assistant`` (one call per turn)
+ ``record_tool_result`` pairs records — the same messages, calls, artifacts, memories,
memory links, retrieval documents and branch counters (``tests/test_record_batch.py``
compares the two graphs) — but:

* one write transaction, one sequence allocation and one lineage read for the batch;
* one multi-row ``INSERT`` per table (:meth:`~contextledger.store.writer.Writer.add_new_records`);
  a call is written once, already resolved, instead of inserted pending and updated;
* memory links planned in memory (:class:`_Links`): the earlier memories of every
  subject named in the batch are read with one indexed query per 500 subjects, then
  each new memory is linked against that subject's current list — the store is never
  asked again for the whole history of a subject;
* retrieval documents (and vectors, when an encoder is on) indexed in one call.

Raw payloads above the inline threshold go to the blob store first (content addressed,
harmless when the transaction then rolls back), as on the live path.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from contextledger.errors import InputError
from contextledger.ids import new_id
from contextledger.limits import payload_bytes
from contextledger.records.enums import (
    AuthorityLevel,
    MessageKind,
    PrivacyClass,
    PromotionPolicy,
    Role,
    RuntimeIsolationPolicy,
    RuntimeKind,
)
from contextledger.records.models import Conversation, Message, ToolArtifact, ToolCall, ToolMemory
from contextledger.records.parts import Part, ToolCallPart, ToolResultPart
from contextledger.store.blobs import sha256_key

if TYPE_CHECKING:
    from contextledger.ingest.recorder import Recorder
    from contextledger.store.base import LineageSegment
    from contextledger.store.writer import Writer

__all__ = ["Exchange", "Recorded", "record_exchanges"]

_SUBJECTS_PER_QUERY = 500


@dataclass(frozen=True, kw_only=True)
class Exchange:
    """One tool exchange to record: the call (``call_id``, ``tool_name``, ``arguments``
    as a mapping or the exact argument text) and its complete raw ``result``."""

    call_id: str
    tool_name: str
    arguments: Mapping[str, Any] | str = "{}"
    result: str | bytes
    is_error: bool = False

    @property
    def arguments_json(self) -> str:
        """The argument text as stored (a mapping as compact, key-sorted JSON)."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), ensure_ascii=False, separators=(",", ":"), sort_keys=True)


@dataclass(frozen=True)
class Recorded:
    """What one exchange became: the assistant ``turn``, its resolved ``call``, the
    ``result`` message, the ``artifact`` and the ``memory`` (as linked at the end of the
    batch)."""

    turn: Message
    call: ToolCall
    result: Message
    artifact: ToolArtifact
    memory: ToolMemory


def _now() -> datetime:
    return datetime.now(UTC)


class _Links:
    """Memory links of one batch, planned in memory (the rules of
    :func:`contextledger.memory.linking.link_on_write`)."""

    def __init__(self, rec: Recorder, w: Writer, conversation_id: str, segments: list[LineageSegment], memories: Sequence[ToolMemory]) -> None:
        self.current: dict[str, ToolMemory] = {}
        self.stored: set[str] = set()
        self.by_subject: dict[str, list[str]] = {}
        self.files: list[str] = []
        subjects = sorted({m.subject_key for m in memories if m.subject_key})
        for start in range(0, len(subjects), _SUBJECTS_PER_QUERY):
            chunk = subjects[start : start + _SUBJECTS_PER_QUERY]
            for m in rec.store.memories(rec.scope, conversation_id, segments, subject_keys=chunk, unsuperseded=len(segments) == 1, conn=w.conn):
                self._remember(m, stored=True)
        from contextledger.memory.paths import path_alias_keys, written_paths

        written = [p for m in memories for p in written_paths(m)]
        aliases = sorted(set(path_alias_keys(written)) - set(subjects))
        for start in range(0, len(aliases), _SUBJECTS_PER_QUERY):
            for m in rec.store.memories(rec.scope, conversation_id, segments, subject_keys=aliases[start : start + _SUBJECTS_PER_QUERY], conn=w.conn):
                if m.id not in self.current:
                    self._remember(m, stored=True)
        if any(_kind(m) == "test_run" for m in memories) or any(not p.startswith("/") for p in written):
            known = set(self.current)
            older = rec.store.memories(rec.scope, conversation_id, segments, subject_prefix="file:", last=200, conn=w.conn)
            self.files = [m.id for m in older]
            for m in older:
                if m.id not in known:
                    self.current[m.id] = m
                    self.stored.add(m.id)

    def _remember(self, m: ToolMemory, *, stored: bool) -> None:
        self.current[m.id] = m
        if stored:
            self.stored.add(m.id)
        if m.subject_key:
            self.by_subject.setdefault(m.subject_key, []).append(m.id)

    def link(self, new: ToolMemory) -> ToolMemory:
        """``new`` linked to the batch's and the store's earlier memories of its subject;
        the earlier ones change in :attr:`current`."""
        from contextledger.memory.links import annotate_test_file_versions, plan_links, reaches
        from contextledger.memory.path_links import plan_path_staleness
        from contextledger.memory.paths import written_paths

        if new.subject_key and _kind(new) == "test_run":
            files = [self.current[i] for i in self.files[-200:]]
            new = annotate_test_file_versions([*[m for m in files if m.seq < new.seq and reaches(m, new)], new])[-1]
        if new.subject_key:
            earlier = [self.current[i] for i in self.by_subject.get(new.subject_key, [])]
            earlier = [m for m in earlier if m.seq < new.seq and m.id != new.id]
            if earlier:
                plan = plan_links(new, earlier)
                for old in plan.updated:
                    self.current[old.id] = old
                new = plan.new
        if written_paths(new):
            # reads of the written files under other spellings (memory.linking._link_written_files)
            plan = plan_path_staleness(new, [m for m in self.current.values() if m.subject_key and m.subject_key.startswith("file:")])
            for old in plan.updated:
                self.current[old.id] = old
            new = plan.new
        self._remember(new, stored=False)
        if (new.subject_key or "").startswith("file:"):
            self.files.append(new.id)
        return new

    def changed_stored(self, before: Mapping[str, ToolMemory]) -> list[ToolMemory]:
        """The stored memories whose record changed, in ``(seq, id)`` order."""
        out = [m for i, m in self.current.items() if i in self.stored and m is not before.get(i)]
        return sorted(out, key=lambda m: (m.seq, m.id))


def _kind(m: ToolMemory) -> str:
    return str(m.payload.get("kind") or m.payload.get("extractor") or "")


def record_exchanges(
    rec: Recorder,
    conversation_id: str,
    exchanges: Sequence[Exchange],
    *,
    branch_id: str | None = None,
    participant_id: str | None = None,
) -> list[Recorded]:
    """Record ``exchanges`` in order, in one transaction (see module docstring): each as
    an assistant turn requesting the call, then its result (artifact, result message,
    memory), on ``branch_id`` (default: the active branch) for ``participant_id``.

    Returns:
        one :class:`Recorded` per exchange, in order.

    Raises:
        NotFoundError: unknown conversation, branch or participant.
        InputError: no exchange, duplicate call ids in the batch, or a call id already
            recorded in the conversation (nothing is written).
    """
    if not exchanges:
        raise InputError("a batch needs at least one exchange")
    ids = [x.call_id for x in exchanges]
    if len(set(ids)) != len(ids):
        raise InputError(f"duplicate call ids in one batch: {sorted({i for i in ids if ids.count(i) > 1})[:5]}")
    store = rec.store
    with store.reader() as c:
        conv = store.get_conversation(rec.scope, conversation_id, c)
        existing = store.tool_calls(rec.scope, conversation_id, call_ids=ids, conn=c)
    if existing:
        raise InputError(f"call ids already recorded: {[x.call_id for x in existing][:5]}")
    raws = [payload_bytes(x.result, f"tool result of {x.call_id}") for x in exchanges]
    blob_keys = [rec.runtime.put_blob_if_large(raw) for raw in raws]
    branch = branch_id or conv.active_branch_id
    out: list[Recorded] = []
    texts: dict[str, str | None] = {}
    with store.writer(rec.scope) as w:
        segments = store.lineage(rec.scope, branch, conn=w.conn)
        head = store.messages(rec.scope, conv.id, segments, last=1, conn=w.conn)
        parent = head[0].id if head else None
        first = w.allocate_seq(conv.id, 2 * len(exchanges))
        for i, (x, raw, bkey) in enumerate(zip(exchanges, raws, blob_keys, strict=True)):
            turn, call = _turn(rec, conv, branch, participant_id, x, first + 2 * i, parent)
            result, art, mem, call, text = _result(rec, conv, call, raw, bkey, x.is_error)
            texts[art.id] = text
            parent = result.id
            out.append(Recorded(turn, call, result, art, mem))
        out = _link_and_write(rec, w, conv.id, segments, out, texts)
    return out


def _link_and_write(rec: Recorder, w: Writer, conversation_id: str, segments: list[LineageSegment], out: list[Recorded], texts: dict[str, str | None]) -> list[Recorded]:
    from contextledger.retrieval.documents import searchable_artifact
    from contextledger.retrieval.index import index_records

    links = _Links(rec, w, conversation_id, segments, [r.memory for r in out])
    before = dict(links.current)
    out = [Recorded(r.turn, r.call, r.result, r.artifact, links.link(r.memory)) for r in out]
    out = [Recorded(r.turn, r.call, r.result, r.artifact, links.current[r.memory.id]) for r in out]
    w.add_new_records(
        messages=[m for r in out for m in (r.turn, r.result)],
        calls=[r.call for r in out],
        artifacts=[r.artifact for r in out],
        memories=[r.memory for r in out],
    )
    for old in links.changed_stored(before):
        w.update_memory(old)
    records: list[Message | ToolMemory] = [m for r in out for m in (r.turn, r.result, r.memory)]
    index_records(w, records, artifacts={r.artifact.id: searchable_artifact(r.artifact, texts[r.artifact.id]) for r in out})
    return out


def _message(rec: Recorder, conv: Conversation, branch: str, role: Role, parts: Sequence[Part], **fields: Any) -> Message:
    """A message as :meth:`Recorder._add_message` builds it (screened, token counted)."""
    from contextledger.ingest.recorder import message_token_count
    from contextledger.security.screen import screen_message

    screened, privacy, metadata = screen_message(parts, fields.pop("privacy_class", PrivacyClass.INTERNAL), None, rec.runtime.put_restricted_blob)
    return Message(
        id=new_id("msg"), tenant_id=rec.scope.tenant_id, conversation_id=conv.id, branch_id=branch, role=role, kind=MessageKind.CHAT,
        parts=tuple(screened), privacy_class=privacy, authority=AuthorityLevel.OLD_CONVERSATION, token_count=message_token_count(screened),
        metadata=metadata, **fields,
    )


def _turn(rec: Recorder, conv: Conversation, branch: str, participant_id: str | None, x: Exchange, seq: int, parent: str | None) -> tuple[Message, ToolCall]:
    """The assistant turn requesting ``x``'s call and the call (as ``record_assistant``)."""
    vis = rec.default_visibility(conv.id, participant_id, run_state=True)
    kind = RuntimeKind.SUBAGENT_CHILD if rec.is_child(conv.id, participant_id) else RuntimeKind.CHAT
    part = ToolCallPart(call_id=x.call_id, tool_name=x.tool_name, arguments_json=x.arguments_json)
    msg = _message(
        rec, conv, branch, Role.ASSISTANT, [part], seq=seq, parent_message_id=parent, participant_id=participant_id,
        visibility=vis, runtime_kind=kind, created_at=_now(),
    )
    p = next(q for q in msg.parts if isinstance(q, ToolCallPart))
    call = ToolCall(
        id=new_id("call"), tenant_id=msg.tenant_id, conversation_id=msg.conversation_id, branch_id=msg.branch_id, message_id=msg.id,
        seq=msg.seq, call_index=0, call_id=p.call_id, tool_name=p.tool_name, arguments_json=p.arguments_json,
        participant_id=msg.participant_id, model_run_id=msg.model_run_id, created_at=msg.created_at,
    )
    return msg, call


def _result(rec: Recorder, conv: Conversation, call: ToolCall, raw: bytes, blob_key: str | None, is_error: bool) -> tuple[Message, ToolArtifact, ToolMemory, ToolCall, str | None]:
    """The result message, artifact and memory of ``call``, the resolved call (as
    :meth:`Recorder.write_result` builds them, unlinked) and the result's screened text
    (what the retrieval index reads, :func:`~contextledger.retrieval.documents.searchable_artifact`)."""
    from contextledger.memory.derive import derive_memory
    from contextledger.security.screen import screen_tool_result
    from contextledger.tokens import get_tokenizer

    now = _now()
    text: str | None
    try:
        text, ctype = raw.decode("utf-8"), "text/plain"
    except UnicodeDecodeError:
        text, ctype = None, "application/octet-stream"
    blob_key, inline, _, screened = screen_tool_result(raw, text, blob_key, None, rec.runtime.put_restricted_blob)
    from contextledger.memory.write_status import result_status
    status = result_status(call.tool_name, call.arguments_json, text, is_error)  # a write's own failure text too
    child = rec.is_child(conv.id, call.participant_id)
    vis = rec.default_visibility(conv.id, call.participant_id, run_state=True)
    kind = RuntimeKind.SUBAGENT_CHILD if child else RuntimeKind.CHAT
    art = ToolArtifact(
        id=new_id("art"), tenant_id=rec.scope.tenant_id, conversation_id=conv.id, branch_id=call.branch_id, tool_call_id=call.id,
        call_id=call.call_id, tool_name=call.tool_name, arguments_json=call.arguments_json, status=status, is_error=is_error,
        content_type=ctype, inline_text=inline, blob_key=blob_key, sha256=sha256_key(raw), size_bytes=len(raw),
        result_tokens=get_tokenizer().count(text) if text is not None else 0, seq=call.seq + 1, owner_participant_id=call.participant_id,
        owner_model_run_id=call.model_run_id, visibility_scope=vis, runtime_kind=kind,
        runtime_isolation_policy=RuntimeIsolationPolicy.CHILD_AUDIT_ONLY if child else RuntimeIsolationPolicy.PARTICIPANT,
        privacy_class=PrivacyClass.INTERNAL, observed_at=now, created_at=now,
    )
    part = ToolResultPart(call_id=call.call_id, artifact_id=art.id, text=inline, is_error=is_error)
    msg = _message(
        rec, conv, call.branch_id, Role.TOOL, [part], seq=art.seq, parent_message_id=call.message_id, participant_id=call.participant_id,
        model_run_id=call.model_run_id, visibility=vis, runtime_kind=kind, created_at=_now(),
    )
    art = art.model_copy(update={"message_id": msg.id})
    stored = screened.artifact(art, PrivacyClass.INTERNAL)
    resolved = call.model_copy(update={"status": status, "result_message_id": msg.id, "resolved_at": now})
    mem = screened.memory(derive_memory(art, screened.text if screened.text is not None else f"<binary payload, {len(raw)} bytes, {ctype}>", registry=rec.runtime.extractors))
    if child:
        mem = mem.model_copy(update={"promotion_policy": PromotionPolicy.NOT_PROMOTED, "visibility_scope": vis, "runtime_kind": RuntimeKind.SUBAGENT_CHILD})
    elif mem.visibility_scope is not vis:
        mem = mem.model_copy(update={"visibility_scope": vis})
    return msg, stored, mem, resolved, screened.text

