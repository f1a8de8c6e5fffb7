"""Reconcile a client's full history with the recorded lineage (proxy step 1–2).

* :func:`conversation_for` — the conversation of a request: the one named by the
  ``x-contextledger-conversation`` header (an id of the tenant, or any client key), else
  the one of the client's session (the dialect's :meth:`~.dialect.Dialect.session_key`
  with the first user message: a subagent of the session is its own conversation), else
  the one whose first model answer the request carries (system prompt, first user
  message, tool names and that answer — the provider's call and message ids make it a
  key two sessions never share).  A request without any answer yet and without a session
  starts a new conversation; its first recorded answer names it from then on
  (:func:`anchor_conversation`).  Created on first sight with the system prompt as its
  trusted system message; two workers creating it at once end with one conversation
  (unique ``content_key``).
* :func:`record_chain` — record the messages of a request (or a request and its answer)
  that are not recorded yet, in one transaction under the conversation's write lock, so
  concurrent workers record each message once.  New messages continue the branch of the
  last common message when it is that branch's newest message, else they start a fork
  there; tool results become artifacts (raw bytes whole, blobs first) with their memories.
* :func:`delta_base` — for a client that sends only its new messages
  (``x-contextledger-history: delta``), the recorded message they continue.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from contextledger.errors import NotFoundError
from contextledger.ids import new_id
from contextledger.ingest.importers.build import first_user_title
from contextledger.ingest.recorder import Recorder, message_token_count
from contextledger.ingest.transcript import ImportedMessage
from contextledger.ledger import Ledger
from contextledger.records.enums import (
    AuthorityLevel,
    MessageKind,
    PrivacyClass,
    Role,
    ToolCallStatus,
)
from contextledger.records.models import Branch, Conversation, Message, ModelRun, ToolCall
from contextledger.records.parts import ImagePart, Part, TextPart, ToolResultPart
from contextledger.security.screen import screen_message, screen_text
from contextledger.server.proxy.chain import fingerprint
from contextledger.store import schema as S
from contextledger.store.base import Scope
from contextledger.store.sql import Writer

__all__ = [
    "NEW_PREFIX", "ChainPosition", "ParsedRequest", "anchor_conversation", "conversation_for", "conversation_key", "delta_base", "matched_prefix",
    "record_chain", "root_key",
]

TAIL_PROBE = 8
"""The newest keys looked up first: a tool loop resends its history plus one or two new
messages, so one query usually finds the recorded prefix."""


@dataclass(kw_only=True)
class ParsedRequest:
    """A provider request in neutral form.

    Attributes:
        system_text: the request's system prompt ("" when none): the application's own
            instruction, sent upstream verbatim.
        messages: the history after the system prompt, as importers produce it.
        tools: the request's function tools, in the shape the assembler reads
            (``{"type": "function", "function": {...}}`` or ``{"name", "input_schema"}``).
        model: the requested model.
        stream: whether the client asked for a streamed answer.
        reserved_tokens: tokens the upstream body carries beside the assembly (client
            context the dialect sends as given); the assembly's budget is cut by them.
    """

    system_text: str
    messages: list[ImportedMessage]
    tools: list[dict[str, Any]] = field(default_factory=list)
    model: str | None = None
    stream: bool = False
    reserved_tokens: int = 0


@dataclass(frozen=True, kw_only=True)
class ChainPosition:
    """Where a recorded chain ends: its branch, last message and chain key, and how many
    messages this call recorded."""

    conversation_id: str
    branch_id: str
    head_message_id: str | None
    head_key: str
    recorded: int


def root_key(conversation_id: str) -> str:
    """The chain key before a conversation's first message."""
    return f"conv:{conversation_id}"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


NEW_PREFIX = "proxy-u:"
"""``content_key`` prefix of a conversation that no answer names yet (unique per request)."""


def _first_user_print(messages: Sequence[ImportedMessage]) -> str:
    first_user = next((m for m in messages if m.role is Role.USER), None)
    return fingerprint(first_user) if first_user else ""


def _answer_key(system_text: str, tools: Sequence[Any], messages: Sequence[ImportedMessage]) -> str | None:
    """The key of a history by its first model answer (``None`` before any)."""
    answer = next((m for m in messages if m.role is Role.ASSISTANT), None)
    if answer is None:
        return None
    names = sorted({str((t.get("function") or t).get("name", "")) for t in tools if isinstance(t, dict)})
    doc = [system_text, _first_user_print(messages), names, fingerprint(answer)]
    return "proxy-a:" + _sha(json.dumps(doc, ensure_ascii=False))


def conversation_key(parsed: ParsedRequest, session: str | None) -> str | None:
    """The ``content_key`` that finds the conversation of a request without a named one
    (see module docstring): ``proxy-s:…`` from the session, ``proxy-a:…`` from the first
    answer, ``None`` when neither exists (a new conversation)."""
    if session:
        return "proxy-s:" + _sha(json.dumps([session, _first_user_print(parsed.messages)], ensure_ascii=False))
    return _answer_key(parsed.system_text, parsed.tools, parsed.messages)


def conversation_for(ledger: Ledger, scope: Scope, header: str | None, parsed: ParsedRequest, *, source: str, session: str | None = None) -> Conversation:
    """The request's conversation, created when first seen (see module docstring).

    ``header`` is the ``x-contextledger-conversation`` value, ``session`` the client's
    session key (:meth:`~.dialect.Dialect.session_key`)."""
    store = ledger.store
    key: str | None
    if header:
        try:
            return store.get_conversation(scope, header)
        except NotFoundError:  # not an id of this tenant: a client's own key
            pass
        key = "proxy-h:" + _sha(header)
    else:
        key = conversation_key(parsed, session)
    found = store.find_conversation_by_content_key(scope, key) if key is not None else None
    if found is not None:
        return found
    key = key or NEW_PREFIX + new_id("k")
    now = datetime.now(UTC)
    conv_id = new_id("conv")
    branch = Branch(id=new_id("br"), tenant_id=scope.tenant_id, conversation_id=conv_id, name="main", created_at=now)
    title = screen_text(first_user_title(parsed.messages)).text  # injected preambles are never a title; secrets never one
    system = parsed.system_text.strip()
    parts, privacy, meta = screen_message([TextPart(text=system)], PrivacyClass.INTERNAL, None, ledger.runtime.put_restricted_blob) if system else ((), PrivacyClass.INTERNAL, {})
    shown = "".join(p.text for p in parts if isinstance(p, TextPart))  # what the assembly renders of it (secrets redacted)
    conv = Conversation(
        id=conv_id, tenant_id=scope.tenant_id, title=title, root_branch_id=branch.id, active_branch_id=branch.id, source=source,
        content_key=key, metadata={"proxy": {"system_sha256": _sha(shown) if system else None}, "tools": parsed.tools}, created_at=now,
    )
    with store.writer(scope) as w:
        if not w.add_conversation(conv, branch):
            other = store.find_conversation_by_content_key(scope, key)
            assert other is not None
            return other
        if system:
            seq = w.allocate_seq(conv_id)
            w.add_message(Message(
                id=new_id("msg"), tenant_id=scope.tenant_id, conversation_id=conv_id, branch_id=branch.id, seq=seq, role=Role.SYSTEM,
                parts=tuple(parts), authority=AuthorityLevel.SYSTEM, token_count=message_token_count(parts), created_at=now,
                privacy_class=privacy, metadata=meta,
            ))
    return conv


def anchor_conversation(ledger: Ledger, scope: Scope, conversation_id: str, parsed: ParsedRequest, answer: Sequence[ImportedMessage]) -> None:
    """Name a conversation that no answer named yet (``content_key`` ``proxy-u:…``) by the
    first answer recorded in it, so that the client's next request (which carries that
    answer) finds it.  Nothing happens for any other conversation, or when another
    conversation holds the key already."""
    key = _answer_key(parsed.system_text, parsed.tools, [*parsed.messages, *answer])
    if key is None:
        return
    t = S.conversations
    with ledger.store.writer(scope) as w:
        conv = ledger.store.get_conversation(scope, conversation_id, w.conn)
        if not (conv.content_key or "").startswith(NEW_PREFIX):
            return
        if w.conn.execute(sa.select(t.c.id).where(t.c.tenant_id == scope.tenant_id, t.c.content_key == key)).first() is not None:
            return
        w.conn.execute(sa.update(t).where(t.c.tenant_id == scope.tenant_id, t.c.id == conversation_id).values(content_key=key))
        w.update_conversation(conv.model_copy(update={"content_key": key}))


# -- the recorded prefix -------------------------------------------------------------------
@cache
def _lookup_statement(n: int) -> sa.Select[Any]:
    t = S.messages
    return sa.select(t.c.id, t.c.branch_id, t.c.seq, t.c.content_key).where(
        t.c.tenant_id == sa.bindparam("p_tenant"), t.c.conversation_id == sa.bindparam("p_conv"),
        t.c.content_key.in_([sa.bindparam(f"p_k{i}") for i in range(n)]),
    )


@cache
def _newest_statement() -> sa.Select[Any]:
    t = S.messages
    return sa.select(t.c.id, t.c.role, t.c.seq).where(
        t.c.tenant_id == sa.bindparam("p_tenant"), t.c.conversation_id == sa.bindparam("p_conv"), t.c.branch_id == sa.bindparam("p_branch"),
    ).order_by(t.c.seq.desc()).limit(1)


def _lookup(conn: Connection, scope: Scope, conversation_id: str, keys: Sequence[str]) -> dict[str, tuple[str, str, int]]:
    params = {"p_tenant": scope.tenant_id, "p_conv": conversation_id, **{f"p_k{i}": k for i, k in enumerate(keys)}}
    rows = conn.execute(_lookup_statement(len(keys)), params)
    return {r.content_key: (r.id, r.branch_id, int(r.seq)) for r in rows}


def _newest(conn: Connection, scope: Scope, conversation_id: str, branch_id: str) -> Any:
    return conn.execute(_newest_statement(), {"p_tenant": scope.tenant_id, "p_conv": conversation_id, "p_branch": branch_id}).first()


def _is_newest(conn: Connection, scope: Scope, conversation_id: str, row: tuple[str, str, int]) -> bool:
    newest = _newest(conn, scope, conversation_id, row[1])
    return newest is not None and int(newest.seq) == row[2]


def matched_prefix(conn: Connection, scope: Scope, conversation_id: str, keys: Sequence[str]) -> tuple[int, tuple[str, str, int] | None]:
    """``(m, row)``: the first ``m`` keys are recorded (``row`` = id, branch, seq of key
    ``m - 1``), the others are not.  One query for the newest :data:`TAIL_PROBE` keys,
    then a binary search of single-key probes (a recorded key implies its prefix)."""
    n = len(keys)
    if n == 0:
        return 0, None
    tail = _lookup(conn, scope, conversation_id, keys[-TAIL_PROBE:])
    for i in range(n - 1, max(-1, n - TAIL_PROBE - 1), -1):
        if keys[i] in tail:
            return i + 1, tail[keys[i]]
    lo, hi, row = 0, n - min(n, TAIL_PROBE), None  # answer in [lo, hi]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        found = _lookup(conn, scope, conversation_id, [keys[mid - 1]])
        if found:
            lo, row = mid, found[keys[mid - 1]]
        else:
            hi = mid - 1
    if lo and row is None:
        row = _lookup(conn, scope, conversation_id, [keys[lo - 1]])[keys[lo - 1]]
    return lo, row


# -- recording --------------------------------------------------------------------------------
def _result_of(m: ImportedMessage) -> ToolResultPart | None:
    """The tool result a message carries: a tool message's result, or an observation the
    importer could not pair because its call came in an earlier request (a client that
    sends only new messages)."""
    if m.role is Role.TOOL:
        return next((p for p in m.parts if isinstance(p, ToolResultPart)), None)
    orphan = m.metadata.get("orphan_call_id") if m.kind is MessageKind.OBSERVATION else None
    if not isinstance(orphan, str):
        return None
    images = tuple(p for p in m.parts if isinstance(p, ImagePart))
    return ToolResultPart(call_id=orphan, text="\n".join(p.text for p in m.parts if isinstance(p, TextPart)), images=images)


def _put_blobs(ledger: Ledger, messages: Sequence[ImportedMessage]) -> dict[int, str | None]:
    """Large results and attachments go to the blob store before the transaction
    (content addressed: harmless if it rolls back).  Keyed by ``id(message)``."""
    keys: dict[int, str | None] = {}
    for m in messages:
        for data in m.attachments.values():
            ledger.store.blobs.put(data)
        result = _result_of(m)
        if result is not None:
            keys[id(m)] = ledger.runtime.put_blob_if_large((result.text or "").encode("utf-8", "surrogatepass"))
    return keys


def _empty_fork(conn: Connection, scope: Scope, conversation_id: str, branch_id: str, seq: int) -> str | None:
    """A branch forked from ``branch_id`` at ``seq`` that holds no message yet (the oldest
    such), so that a history ending there (a retry) always continues the same branch."""
    b, m = S.branches, S.messages
    holds = sa.exists().where(m.c.tenant_id == scope.tenant_id, m.c.conversation_id == conversation_id, m.c.branch_id == b.c.id)
    row = conn.execute(sa.select(b.c.id).where(
        b.c.tenant_id == scope.tenant_id, b.c.conversation_id == conversation_id, b.c.parent_branch_id == branch_id, b.c.fork_seq == seq, ~holds,
    ).order_by(b.c.id).limit(1)).first()
    return str(row.id) if row is not None else None


def _branch_for(w: Writer, scope: Scope, conv: Conversation, row: tuple[str, str, int] | None) -> tuple[str, str | None]:
    """The branch the new messages go on and the message they follow."""
    if row is None:
        # nothing of this history is recorded: the active branch if it holds no
        # conversation yet (only the system prompt), else a new root branch
        head = _newest(w.conn, scope, conv.id, conv.active_branch_id)
        if head is None or head.role == Role.SYSTEM.value:
            return conv.active_branch_id, head.id if head is not None else None
        branch = Branch(id=new_id("br"), tenant_id=scope.tenant_id, conversation_id=conv.id, name="new history", created_at=datetime.now(UTC))
        w.add_branch(branch)
        return branch.id, None
    msg_id, branch_id, seq = row
    newest = _newest(w.conn, scope, conv.id, branch_id)
    if newest is not None and int(newest.seq) == seq:
        return branch_id, msg_id
    reuse = _empty_fork(w.conn, scope, conv.id, branch_id, seq)
    if reuse is not None:
        return reuse, msg_id
    fork = Branch(
        id=new_id("br"), tenant_id=scope.tenant_id, conversation_id=conv.id, parent_branch_id=branch_id, fork_message_id=msg_id,
        fork_seq=seq, name=f"fork at {msg_id}", created_at=datetime.now(UTC),
    )
    w.add_branch(fork)
    return fork.id, msg_id


def _authority(m: ImportedMessage) -> AuthorityLevel:
    if m.role is Role.USER and m.kind is MessageKind.CHAT:
        return AuthorityLevel.USER
    return AuthorityLevel.OLD_CONVERSATION


def _write(w: Writer, rec: Recorder, conv: Conversation, branch_id: str, parent_id: str | None, m: ImportedMessage, key: str, blob_key: str | None, calls: dict[str, ToolCall], extra: dict[str, Any], run_id: str | None = None) -> Message:
    from contextledger.policy.pinning import pin_constraints_in

    scope = rec.scope
    now = datetime.now(UTC)
    seq = w.allocate_seq(conv.id)
    parts: list[Part] = list(m.parts)
    role, kind = m.role, m.kind
    result = _result_of(m)
    if result is not None and role is not Role.TOOL:
        role, kind = Role.TOOL, MessageKind.CHAT
    call = None
    if result is not None:
        call = calls.get(result.call_id) or next(iter(rec.store.tool_calls(scope, conv.id, call_ids=[result.call_id], conn=w.conn)), None)
        if call is None or call.status not in (ToolCallStatus.PENDING, ToolCallStatus.AWAITING_APPROVAL):
            # a result for no open call of this conversation: kept as an observation
            role, kind, call = Role.USER, MessageKind.OBSERVATION, None
            parts = [TextPart(text=result.text or ""), *result.images]
    art_id = new_id("art") if call is not None and result is not None else None
    if art_id is not None and result is not None:
        parts = [result.model_copy(update={"artifact_id": art_id, "text": None if blob_key else result.text})]
    metadata = {**m.metadata, **extra, **({"model": m.model} if m.model else {})}
    # the same screen as every importer: secrets redacted, the exact parts kept restricted
    screened, privacy, metadata = screen_message(parts, PrivacyClass.INTERNAL, metadata, rec.runtime.put_restricted_blob)
    msg = Message(
        id=new_id("msg"), tenant_id=scope.tenant_id, conversation_id=conv.id, branch_id=branch_id, seq=seq, parent_message_id=parent_id,
        role=role, kind=kind, parts=screened, authority=_authority(m), speaker_label=m.speaker_label, content_key=key, model_run_id=run_id,
        token_count=message_token_count(screened), metadata=metadata, created_at=m.created_at or now, privacy_class=privacy,
    )
    w.add_message(msg)
    if call is not None and result is not None and art_id is not None:
        rec.write_result(w, conv, call, (result.text or "").encode("utf-8", "surrogatepass"), blob_key=blob_key, is_error=result.is_error, result_message=msg, artifact_id=art_id, observed_at=m.created_at)
        calls.pop(call.call_id, None)  # answered: a later result for it reads the recorded status
    elif role is Role.ASSISTANT:
        for c in rec.add_calls(w, msg):
            calls[c.call_id] = c
    elif role is Role.USER and kind is MessageKind.CHAT:
        pin_constraints_in(w, msg)
    return msg


def delta_base(ledger: Ledger, scope: Scope, conversation: Conversation) -> tuple[str, tuple[str, str, int] | None]:
    """``(root key, base)`` of a request that sends only new messages: they continue the
    newest message of the conversation's active branch (``base`` = its id, branch, seq;
    ``None`` for an empty conversation), chained to its key."""
    store = ledger.store
    with store.reader() as c:
        segments = store.lineage(scope, conversation.active_branch_id, conn=c)
        head = store.messages(scope, conversation.id, segments, last=1, conn=c)
    if not head:
        return root_key(conversation.id), None
    m = head[0]
    return m.content_key or f"msg:{m.id}", (m.id, m.branch_id, m.seq)


def record_chain(
    ledger: Ledger, scope: Scope, conversation_id: str, messages: Sequence[ImportedMessage], keys: Sequence[str], *,
    tools: list[dict[str, Any]] | None = None, extra_metadata: dict[str, Any] | None = None, base: tuple[str, str, int] | None = None,
    model_run: ModelRun | None = None,
) -> ChainPosition:
    """Record the messages of ``messages`` whose chain keys are not recorded yet (see the
    module docstring); ``tools`` replaces the conversation's declared tools when they
    differ; ``extra_metadata`` is added to the newly recorded messages.  ``base`` is the
    recorded message the chain continues (:func:`delta_base`); without it a chain starts
    at the conversation's start.  ``model_run`` (the generation that produced the new
    messages) is recorded with them, on their branch, when anything new is recorded.

    Raises:
        NotFoundError: unknown conversation.
    """
    store = ledger.store
    with store.reader() as c:
        m0, row0 = matched_prefix(c, scope, conversation_id, keys)
        conv0 = store.get_conversation(scope, conversation_id, c)
        row0 = row0 if row0 is not None else base
        at_head = row0 is None or _is_newest(c, scope, conversation_id, row0)
    tools_changed = tools is not None and tools != conv0.metadata.get("tools")
    if m0 == len(keys) and not tools_changed and at_head:
        return ChainPosition(conversation_id=conversation_id, branch_id=row0[1] if row0 else conv0.active_branch_id, head_message_id=row0[0] if row0 else None, head_key=keys[-1] if keys else root_key(conversation_id), recorded=0)
    blob_keys = _put_blobs(ledger, messages[m0:])
    rec = Recorder(ledger, scope)
    with store.writer(scope) as w:
        w.allocate_seq(conversation_id, 0)  # take the conversation's write lock first (PostgreSQL row lock)
        m, row = matched_prefix(w.conn, scope, conversation_id, keys)
        row = row if row is not None else base
        conv = store.get_conversation(scope, conversation_id, w.conn)
        branch_id, parent = (conv.active_branch_id, None) if row is None and m == len(keys) else _branch_for(w, scope, conv, row)
        calls: dict[str, ToolCall] = {}
        run_id = None
        if model_run is not None and m < len(keys):
            w.add_model_run(model_run.model_copy(update={"branch_id": branch_id}))
            run_id = model_run.id
        for msg, key in zip(messages[m:], keys[m:], strict=True):
            parent = _write(w, rec, conv, branch_id, parent, msg, key, blob_keys.get(id(msg)), calls, extra_metadata or {}, run_id).id
        update: dict[str, Any] = {}
        if branch_id != conv.active_branch_id and m < len(keys):
            update["active_branch_id"] = branch_id
        if tools is not None and tools != conv.metadata.get("tools"):
            update["metadata"] = {**conv.metadata, "tools": tools}
        if update:
            w.update_conversation(conv.model_copy(update=update))
    head_key = keys[-1] if keys else root_key(conversation_id)
    return ChainPosition(conversation_id=conversation_id, branch_id=branch_id, head_message_id=parent, head_key=head_key, recorded=len(keys) - m)
