"""The Recorder: record what an agent loop produces, as it produces it.

Each public method is one recording transaction (its keyword documents included; a
message's vector is inserted after the commit, in a transaction of its own).  The records
fall in two tiers: what must be durable (:mod:`contextledger.ingest.durable`: messages,
calls, artifacts, statuses) and what is derived from it
(:mod:`contextledger.ingest.derivation`: memory, links, terms, retrieval documents,
vectors).  Tool results are recorded tier by tier through the derivation queue
(:mod:`contextledger.ingest.results`, :mod:`contextledger.ingest.drain`).  Model runs,
skill states, checkpoints and decisions are :mod:`contextledger.ingest.run_state`.

Example::

    ledger = Ledger.open()
    rec = ledger.recorder()
    conv = rec.start_conversation(title="fix login", system_prompt="You are a coding agent.")
    rec.record_message(conv.id, "user", "Login redirect fails; find the cause.")
    msg, calls = rec.record_assistant(conv.id, text="Running the tests.",
                                      tool_calls=[{"call_id": "c1", "tool_name": "Bash",
                                                   "arguments": {"command": "pytest -q"}}])
    rec.record_tool_result(conv.id, "c1", "1 failed, 12 passed ...", is_error=False)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from contextledger.errors import InputError, NotFoundError
from contextledger.ids import new_id
from contextledger.ingest.durable import (
    TERMINAL_RUN_STATUSES,
    ToolCallSpec,
    message_token_count,
    pending_calls,
)
from contextledger.ingest.results import ResultRecording
from contextledger.ingest.run_state import RunStateRecording
from contextledger.records.enums import (
    AuthorityLevel,
    MessageKind,
    PrivacyClass,
    Role,
    RuntimeIsolationPolicy,
    RuntimeKind,
    Visibility,
)
from contextledger.records.models import (
    Branch,
    Conversation,
    Message,
    Participant,
    ToolCall,
)
from contextledger.records.parts import Part, TextPart, ToolCallPart, ToolResultPart
from contextledger.retrieval.index import embed_indexed, index_records
from contextledger.security.screen import screen_message, screen_text
from contextledger.store.base import Scope
from contextledger.store.sql import Writer

if TYPE_CHECKING:
    from contextledger.runtime import HasRuntime

__all__ = ["TERMINAL_RUN_STATUSES", "Recorder", "ToolCallSpec", "message_token_count"]


def _now() -> datetime:
    return datetime.now(UTC)





class Recorder(ResultRecording, RunStateRecording):
    """Records messages, model runs, tool calls and tool results for one tenant scope.

    Obtain one from :meth:`contextledger.ledger.Ledger.recorder`.  All methods raise
    :class:`~contextledger.errors.NotFoundError` for unknown conversations, branches or
    call ids, and :class:`~contextledger.errors.InputError` for invalid arguments.
    """

    def __init__(self, source: HasRuntime, scope: Scope) -> None:
        self.runtime = source.runtime
        self.store = self.runtime.store
        self.scope = scope
        self._participants: dict[str, Participant] = {}

    # -- ownership defaults (seed 000 §4.9) --------------------------------------------
    def participant(self, conversation_id: str, participant_id: str) -> Participant:
        """The participant ``participant_id`` of ``conversation_id`` (cached per recorder).

        Raises:
            NotFoundError: no such participant in the conversation.
        """
        p = self._participants.get(participant_id)
        if p is None or p.conversation_id != conversation_id:
            found = [x for x in self.store.participants(self.scope, conversation_id) if x.id == participant_id]
            if not found:
                raise NotFoundError("participant", participant_id)
            p = found[0]
            self._participants[participant_id] = p
        return p

    def remember_participants(self, participants: Sequence[Participant]) -> None:
        """Seed the participant cache with records written in an open transaction
        (the importer writes participants and their results in one transaction)."""
        for p in participants:
            self._participants[p.id] = p

    def is_child(self, conversation_id: str, participant_id: str | None) -> bool:
        """Whether ``participant_id`` is a child subagent (its state is audit-only)."""
        if participant_id is None:
            return False
        p = self.participant(conversation_id, participant_id)
        return p.runtime_kind is RuntimeKind.SUBAGENT_CHILD or p.isolation_policy is RuntimeIsolationPolicy.CHILD_AUDIT_ONLY

    def default_visibility(self, conversation_id: str, participant_id: str | None, *, run_state: bool) -> Visibility:
        """The visibility a record gets when the caller names none (seed 000 §4.9, §4.14).

        * no owning participant: ``branch``;
        * a child subagent's records: ``audit_only`` until promoted;
        * run state (a turn that requests tool calls, tool results) of a participant
          with ``participant`` isolation: ``participant_private`` — visible to its owner
          and the continuation that needs it, never to siblings;
        * everything else (finalised visible output, ``shared`` isolation): ``branch``.
        """
        if participant_id is None:
            return Visibility.BRANCH
        if self.is_child(conversation_id, participant_id):
            return Visibility.AUDIT_ONLY
        p = self.participant(conversation_id, participant_id)
        if run_state and p.isolation_policy is RuntimeIsolationPolicy.PARTICIPANT:
            return Visibility.PARTICIPANT_PRIVATE
        return Visibility.BRANCH

    def _runtime_kind(self, conversation_id: str, participant_id: str | None, given: RuntimeKind | None) -> RuntimeKind:
        if given is not None:
            return given
        return RuntimeKind.SUBAGENT_CHILD if self.is_child(conversation_id, participant_id) else RuntimeKind.CHAT

    # -- conversations, branches, participants -------------------------------------
    def start_conversation(
        self,
        *,
        title: str = "",
        system_prompt: str | None = None,
        user_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        runtime_kind: RuntimeKind = RuntimeKind.CHAT,
    ) -> Conversation:
        """Create a conversation with its root branch (and a trusted system message).

        ``system_prompt`` is the application's own instruction: it is recorded with
        authority ``system`` and is the only text that reaches the system slot.
        """
        now = _now()
        conv_id = new_id("conv")
        branch = Branch(id=new_id("br"), tenant_id=self.scope.tenant_id, conversation_id=conv_id, name="main", runtime_kind=runtime_kind, created_at=now)
        conv = Conversation(
            id=conv_id,
            tenant_id=self.scope.tenant_id,
            user_id=user_id or self.scope.user_id,
            title=screen_text(title).text,
            root_branch_id=branch.id,
            active_branch_id=branch.id,
            metadata=dict(metadata or {}),
            created_at=now,
        )
        with self.store.writer(self.scope) as w:
            w.add_conversation(conv, branch)
            if system_prompt:
                self._add_message(w, conv, branch.id, Role.SYSTEM, [TextPart(text=system_prompt)], authority=AuthorityLevel.SYSTEM)
        return conv

    def add_participant(
        self,
        conversation_id: str,
        name: str,
        *,
        provider: str | None = None,
        model: str | None = None,
        role_label: str | None = None,
        runtime_kind: RuntimeKind = RuntimeKind.CHAT,
        parent_participant_id: str | None = None,
        tool_names: Sequence[str] = (),
        isolation_policy: RuntimeIsolationPolicy = RuntimeIsolationPolicy.PARTICIPANT,
    ) -> Participant:
        """Register a participant (model/persona, debate speaker, moderator, subagent)."""
        self.store.get_conversation(self.scope, conversation_id)
        p = Participant(
            id=new_id("part"),
            tenant_id=self.scope.tenant_id,
            conversation_id=conversation_id,
            name=name,
            provider=provider,
            model=model,
            role_label=role_label,
            runtime_kind=runtime_kind,
            parent_participant_id=parent_participant_id,
            isolation_policy=isolation_policy,
            tool_names=tuple(sorted(tool_names)),
            created_at=_now(),
        )
        with self.store.writer(self.scope) as w:
            w.add_participant(p)
        return p

    def fork(self, conversation_id: str, at_message_id: str, *, name: str = "", runtime_kind: RuntimeKind = RuntimeKind.CHAT, activate: bool = True) -> Branch:
        """Create a branch that inherits history up to and including ``at_message_id``
        (no copying: a lineage pointer and a fork sequence number, seed 000 §4.10)."""
        conv = self.store.get_conversation(self.scope, conversation_id)
        msgs = self.store.messages(self.scope, conversation_id, ids=[at_message_id])
        if not msgs:
            raise NotFoundError("message", at_message_id)
        at = msgs[0]
        branch = Branch(
            id=new_id("br"),
            tenant_id=self.scope.tenant_id,
            conversation_id=conversation_id,
            parent_branch_id=at.branch_id,
            fork_message_id=at.id,
            fork_seq=at.seq,
            name=name,
            runtime_kind=runtime_kind,
            created_at=_now(),
        )
        with self.store.writer(self.scope) as w:
            w.add_branch(branch)
            if activate:
                w.update_conversation(conv.model_copy(update={"active_branch_id": branch.id}))
        return branch

    def regenerate(self, conversation_id: str, message_id: str) -> Branch:
        """Start a sibling branch for a new answer to the turn before ``message_id``.

        The new branch forks at the message preceding ``message_id`` on its path, so the
        old answer stays on its branch and never enters the new one's context.
        """
        msgs = self.store.messages(self.scope, conversation_id, ids=[message_id])
        if not msgs:
            raise NotFoundError("message", message_id)
        if msgs[0].parent_message_id is None:
            raise InputError(f"message {message_id} has no predecessor to regenerate from")
        return self.fork(conversation_id, msgs[0].parent_message_id, name=f"regenerate {message_id}")

    def branch_send(self, conversation_id: str, parent_message_id: str, text: str, *, participant_id: str | None = None) -> tuple[Branch, Message]:
        """Send ``text`` on a new branch under the explicit ``parent_message_id``
        (seed 000 §4.13 branch send): the branch inherits only that lineage."""
        branch = self.fork(conversation_id, parent_message_id, name="branch send", runtime_kind=RuntimeKind.BRANCH_SEND)
        msg = self.record_message(conversation_id, Role.USER, text, branch_id=branch.id, participant_id=participant_id, runtime_kind=RuntimeKind.BRANCH_SEND)
        return branch, msg

    # -- messages ----------------------------------------------------------------------
    def _head(self, w: Writer, conv_id: str, branch_id: str) -> Message | None:
        segs = self.store.lineage(self.scope, branch_id, conn=w.conn)
        last = self.store.messages(self.scope, conv_id, segs, last=1, conn=w.conn)
        return last[0] if last else None

    def _add_message(
        self,
        w: Writer,
        conv: Conversation,
        branch_id: str,
        role: Role,
        parts: Sequence[Part],
        *,
        kind: MessageKind = MessageKind.CHAT,
        participant_id: str | None = None,
        model_run_id: str | None = None,
        visibility: Visibility = Visibility.BRANCH,
        privacy_class: PrivacyClass = PrivacyClass.INTERNAL,
        authority: AuthorityLevel | None = None,
        runtime_kind: RuntimeKind = RuntimeKind.CHAT,
        speaker_label: str | None = None,
        content_key: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        seq: int | None = None,
        parent_message_id: str | None = None,
        created_at: datetime | None = None,
        source_ref: str | None = None,
        index: bool = True,
    ) -> Message:
        if seq is None:
            head = self._head(w, conv.id, branch_id)
            parent_message_id = head.id if head else None
            seq = w.allocate_seq(conv.id)
        if authority is None:
            authority = {Role.SYSTEM: AuthorityLevel.SYSTEM, Role.DEVELOPER: AuthorityLevel.SYSTEM, Role.USER: AuthorityLevel.USER}.get(role, AuthorityLevel.OLD_CONVERSATION)
        parts, privacy_class, metadata = screen_message(parts, privacy_class, metadata, self.runtime.put_restricted_blob)
        msg = Message(
            id=new_id("msg"),
            tenant_id=self.scope.tenant_id,
            conversation_id=conv.id,
            branch_id=branch_id,
            seq=seq,
            parent_message_id=parent_message_id,
            role=role,
            kind=kind,
            parts=tuple(parts),
            participant_id=participant_id,
            model_run_id=model_run_id,
            visibility=visibility,
            privacy_class=privacy_class,
            authority=authority,
            runtime_kind=runtime_kind,
            speaker_label=speaker_label,
            content_key=content_key,
            source_ref=source_ref,
            token_count=message_token_count(parts),
            metadata=dict(metadata or {}),
            created_at=created_at or _now(),
        )
        if w.add_message(msg) and index:
            index_records(w, [msg], encoder=None)  # its vector after the commit (embed_after)
        return msg

    def record_message(
        self,
        conversation_id: str,
        role: Role | str,
        content: str | Sequence[Part],
        *,
        branch_id: str | None = None,
        participant_id: str | None = None,
        kind: MessageKind = MessageKind.CHAT,
        visibility: Visibility | None = None,
        privacy_class: PrivacyClass = PrivacyClass.INTERNAL,
        speaker_label: str | None = None,
        runtime_kind: RuntimeKind | None = None,
        content_key: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        model_run_id: str | None = None,
    ) -> Message:
        """Append a message to a branch (default: the conversation's active branch).

        ``content`` is plain text or typed parts.  A ``content_key`` makes the call
        idempotent: recording the same key twice returns the first message.
        ``visibility`` defaults to ``audit_only`` for a child subagent's messages and
        ``branch`` otherwise (a participant's private notes pass ``participant_private``);
        ``runtime_kind`` defaults to ``subagent_child`` for a child, else ``chat``.

        Raises:
            InputError: a system message from this method (use ``start_conversation``)
                with tool parts, or an unknown role.
        """
        role = Role(role)
        parts: list[Part] = [TextPart(text=content)] if isinstance(content, str) else list(content)
        if any(isinstance(p, (ToolCallPart, ToolResultPart)) for p in parts):
            raise InputError("record tool calls with record_assistant and results with record_tool_result")
        conv = self.store.get_conversation(self.scope, conversation_id)
        if content_key is not None:
            existing = self._by_content_key(conversation_id, content_key)
            if existing is not None:
                return existing
        vis = visibility or self.default_visibility(conversation_id, participant_id, run_state=False)
        rk = self._runtime_kind(conversation_id, participant_id, runtime_kind)
        with self.store.writer(self.scope) as w:
            msg = self._add_message(
                w, conv, self._branch_of(conv, branch_id), role, parts, kind=kind, participant_id=participant_id,
                model_run_id=model_run_id, visibility=vis, privacy_class=privacy_class, speaker_label=speaker_label,
                runtime_kind=rk, content_key=content_key, metadata=metadata,
            )
        embed_indexed(self.store, self.scope, [msg])
        self._pin_user_constraints(msg)
        return msg

    def _by_content_key(self, conversation_id: str, content_key: str) -> Message | None:
        import sqlalchemy as sa

        from contextledger.store import schema as S

        t = S.messages
        rows = self.store._rows(
            sa.select(t.c.body).where(t.c.tenant_id == self.scope.tenant_id, t.c.conversation_id == conversation_id, t.c.content_key == content_key),
            Message,
        )
        return rows[0] if rows else None

    def _pin_user_constraints(self, msg: Message) -> None:
        if msg.role is not Role.USER or msg.visibility is not Visibility.BRANCH:
            return
        from contextledger.policy.pinning import pin_user_constraints

        pin_user_constraints(self.store, self.scope, msg)

    def record_assistant(
        self,
        conversation_id: str,
        *,
        text: str = "",
        tool_calls: Sequence[ToolCallSpec | Mapping[str, Any]] = (),
        branch_id: str | None = None,
        participant_id: str | None = None,
        model_run_id: str | None = None,
        speaker_label: str | None = None,
        visibility: Visibility | None = None,
        runtime_kind: RuntimeKind | None = None, metadata: Mapping[str, Any] | None = None,
    ) -> tuple[Message, list[ToolCall]]:
        """Record an assistant turn and the tool calls it requested (status pending).

        ``visibility`` defaults by ownership (seed 000 §4.9): a child subagent's turn is ``audit_only``;
        a participant's turn that requests tool calls is run state, ``participant_private``; finalised
        text output is ``branch`` context.  ``metadata`` (e.g. the provider items) is kept on the message.

        Re-recording a provider ``call_id`` already recorded in the conversation is
        idempotent: the existing call is returned and nothing is duplicated.

        Raises:
            InputError: a turn with neither text nor tool calls, or duplicate call ids in it.
        """
        specs = [s if isinstance(s, ToolCallSpec) else ToolCallSpec(**dict(s)) for s in tool_calls]
        if not text and not specs:
            raise InputError("an assistant turn needs text or tool calls")
        ids = [s.call_id for s in specs]
        if len(set(ids)) != len(ids):
            raise InputError(f"duplicate call ids in one turn: {ids}")
        with self.store.reader() as c:  # one read transaction for both look-ups
            existing = self.store.tool_calls(self.scope, conversation_id, call_ids=ids, conn=c) if ids else []
            conv = self.store.get_conversation(self.scope, conversation_id, c)
        if existing and len(existing) == len(ids):
            msgs = self.store.messages(self.scope, conversation_id, ids=[existing[0].message_id])
            return msgs[0], existing
        if existing:
            raise InputError(f"call ids already recorded in another turn: {[c.call_id for c in existing]}")
        parts: list[Part] = []
        if text:
            parts.append(TextPart(text=text))
        parts.extend(ToolCallPart(call_id=s.call_id, tool_name=s.tool_name, arguments_json=s.arguments_json) for s in specs)
        vis = visibility or self.default_visibility(conversation_id, participant_id, run_state=bool(specs))
        rk = self._runtime_kind(conversation_id, participant_id, runtime_kind)
        with self.store.writer(self.scope) as w:
            msg = self._add_message(
                w, conv, self._branch_of(conv, branch_id), Role.ASSISTANT, parts, participant_id=participant_id,
                model_run_id=model_run_id, speaker_label=speaker_label, visibility=vis, runtime_kind=rk, metadata=metadata,
            )
            calls = self.add_calls(w, msg)
        embed_indexed(self.store, self.scope, [msg])
        return msg, calls

    def add_calls(self, w: Writer, msg: Message) -> list[ToolCall]:
        """Insert a ToolCall row (pending) for every ToolCallPart of ``msg``; returns the
        recorded calls in part order: for a ``call_id`` the conversation holds already (one
        id is one call) the recorded row, never an unsaved one."""
        calls = []
        for call in pending_calls(msg):
            if not w.add_tool_call(call):
                call = self.store.tool_calls(self.scope, msg.conversation_id, call_ids=[call.call_id], conn=w.conn)[0]
            calls.append(call)
        return calls
