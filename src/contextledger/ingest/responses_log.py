"""A conversation's OpenAI Responses item history, kept in the ledger as it grows.

:class:`ResponsesLog` records Responses input items into one conversation through the
:class:`~contextledger.ingest.recorder.Recorder`, each item as it is added, and gives the
exact items back in order.  An agent-framework session stands on it (seed 000 §4.2:
everything is recorded before any reduction; the transcript is never rewritten).

Items are read by the Responses importer's converter
(:class:`~contextledger.ingest.importers.responses_items.ResponsesItems`, the one
mapping of item shapes), one item at a time, and its messages are recorded:

* a user, system or developer message → a message record (user constraints are pinned
  by the recorder); an assistant message → an assistant record;
* a client tool call (``function_call``, ``custom_tool_call``, ``shell_call`` …) → an
  assistant record holding the call; its output → the call's raw result (a ToolArtifact
  and its derived ToolMemory, the output text byte for byte); a server-side call
  (``web_search_call`` …) → the call and its result;
* reasoning and item types the converter keeps as meta → an ``audit_only`` record:
  evidence, never shown to a model (a reasoning item is valid only as the API issued it);
  an output answering no recorded call → an observation (as the importer keeps it, with
  a note in :attr:`ResponsesLog.notes`);
* every record keeps the exact item it was made from (message ``metadata`` / artifact
  ``provider_metadata`` under :data:`ITEMS_KEY`), so :meth:`ResponsesLog.items` returns
  it unchanged.

Item identity (nothing recorded twice, nothing merged): a call by its ``call_id``, an
output by its call's ``call_id``, another item with an ``id`` by that id (except a
placeholder id, :data:`PLACEHOLDER_IDS`), a message by the sha256 of its canonical JSON
and how many equal messages came before it.  :meth:`ResponsesLog.append` takes new items;
:meth:`ResponsesLog.sync` takes a whole history and records only what is missing.

Every item is its own record, so removal is exact — and recorded, never silent:
:meth:`ResponsesLog.pop` moves the conversation to a branch forked just before the last
item, :meth:`ResponsesLog.clear` to a new empty branch; the old branch keeps every
record, and a PolicyDecision (family ``retention``) says who removed what.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from contextledger.errors import ImportFormatError, InputError
from contextledger.ids import new_id
from contextledger.ingest.importers.call_ids import CallIdRegistry
from contextledger.ingest.importers.common import type_of
from contextledger.ingest.importers.responses_items import (
    CALL_ITEMS,
    OUTPUT_ITEMS,
    SERVER_ITEMS,
    ResponsesItems,
)
from contextledger.ingest.recorder import Recorder, ToolCallSpec
from contextledger.ingest.transcript import ImportedMessage
from contextledger.providers.base import WireMessage
from contextledger.providers.openai_chat import CallIdMap
from contextledger.providers.openai_responses import (
    OPENAI_RESPONSES_CALL_ID_MAX_LENGTH,
    assistant_items,
    output_item,
    user_item,
)
from contextledger.records.enums import MessageKind, PolicyFamily, Role, Visibility
from contextledger.records.models import Branch, Message
from contextledger.records.parts import TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from contextledger.store.base import Scope

if TYPE_CHECKING:
    from contextledger.runtime import HasRuntime

__all__ = ["ITEMS_KEY", "KEYS_KEY", "PART_KEY", "PLACEHOLDER_IDS", "ResponsesLog", "item_keys", "item_kind"]

ITEMS_KEY = "responses_items"
"""Metadata key holding the exact items a record was made from."""
KEYS_KEY = "responses_item_keys"
"""Metadata key holding the identity keys of those items."""
PART_KEY = "responses_item_part"
"""Metadata key of a record made from the same item as the record before it (the result
of a server-side call): the key of that item."""
PLACEHOLDER_IDS = frozenset({"__fake_id__"})
"""Item ids that identify nothing (the OpenAI Agents SDK gives this one to every item a
non-Responses model produced); such items are keyed by content."""

_CALLS = frozenset(CALL_ITEMS) | SERVER_ITEMS


def item_kind(item: Mapping[str, Any]) -> str | None:
    """An item's type: ``type``, else ``"message"`` for an object with a ``role``."""
    kind = type_of(dict(item)) if isinstance(item, Mapping) else None
    return kind if kind is not None else ("message" if isinstance(item, Mapping) and "role" in item else None)


def _digest(item: Mapping[str, Any]) -> str:
    canonical = json.dumps(item, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:24]


def _identity(item: Mapping[str, Any]) -> str | None:
    kind = item_kind(item)
    call_id = item.get("call_id")
    if kind in CALL_ITEMS and isinstance(call_id, str) and call_id:
        return f"call:{call_id}"
    if kind in OUTPUT_ITEMS and isinstance(call_id, str) and call_id:
        return f"output:{call_id}"
    item_id = item.get("id")
    if kind != "message" and isinstance(item_id, str) and item_id and item_id not in PLACEHOLDER_IDS:
        return f"id:{kind}:{item_id}"
    return None


def item_keys(items: Sequence[Mapping[str, Any]], seen: Mapping[str, int] | None = None) -> list[str]:
    """The identity key of each item (module docstring).  ``seen`` counts equal
    messages already in the history before ``items`` (by digest); not modified."""
    counts = dict(seen or {})
    keys: list[str] = []
    for item in items:
        key = _identity(item)
        if key is None:
            digest = _digest(item)
            n = counts.get(digest, 0)
            counts[digest] = n + 1
            key = f"content:{digest}:{n}"
        keys.append(key)
    return keys


class ResponsesLog:
    """The Responses item history of one conversation's active branch (module docstring).

    Args:
        source: the ledger (or its runtime) to record into.
        conversation_id: an existing conversation (see :meth:`start` for a new one).
        scope: the tenant scope (default: the ledger's default tenant).
        actor: who removes items, as written on the PolicyDecisions of :meth:`pop` and
            :meth:`clear`.

    Raises:
        NotFoundError: (on first use) unknown conversation.
    """

    def __init__(self, source: HasRuntime, conversation_id: str, *, scope: Scope | None = None, actor: str = "responses log") -> None:
        self.runtime = source.runtime
        self.scope = scope or self.runtime.scope()
        self.conversation_id = conversation_id
        self.actor = actor
        self.recorder = Recorder(self.runtime, self.scope)
        self.notes: list[str] = []
        self._keys: set[str] | None = None
        self._digests: dict[str, int] = {}
        self._registry = CallIdRegistry(self.notes)

    @classmethod
    def start(cls, source: HasRuntime, *, scope: Scope | None = None, title: str = "", system_prompt: str | None = None, metadata: Mapping[str, Any] | None = None, actor: str = "responses log") -> ResponsesLog:
        """A log on a new conversation (``system_prompt``: the application's own
        instruction, the only text that reaches the system slot)."""
        scope = scope or source.runtime.scope()
        conv = Recorder(source.runtime, scope).start_conversation(title=title, system_prompt=system_prompt, metadata=metadata)
        return cls(source, conv.id, scope=scope, actor=actor)

    # -- reading --------------------------------------------------------------------------
    def _messages(self) -> list[Message]:
        store = self.runtime.store
        conv = store.get_conversation(self.scope, self.conversation_id)
        segments = store.lineage(self.scope, conv.active_branch_id)
        return [m for m in store.messages(self.scope, self.conversation_id, segments) if m.role is not Role.SYSTEM or ITEMS_KEY in m.metadata]

    def _load_keys(self) -> set[str]:
        """The identity keys on the active branch; the call-id registry replayed from them."""
        if self._keys is None:
            keys: list[str] = []
            for m in self._messages():
                keys.extend(m.metadata.get(KEYS_KEY) or [])
                keys.extend(f"call:{p.call_id}" for p in m.parts if isinstance(p, ToolCallPart) and f"call:{p.call_id}" not in keys)
                keys.extend(f"output:{p.call_id}" for p in m.parts if isinstance(p, ToolResultPart))
            self._keys = set(keys)
            self._digests = {}
            self._registry = CallIdRegistry(self.notes)
            for key in keys:
                kind, _, rest = key.partition(":")
                if kind == "content":
                    digest = rest.split(":")[0]
                    self._digests[digest] = self._digests.get(digest, 0) + 1
                elif kind == "call":
                    self._registry.call(rest, "history")
                elif kind == "output":
                    self._registry.result(rest, "history")
        return self._keys

    def _entries(self) -> list[tuple[Message, str | None, list[dict[str, Any]]]]:
        """``(record, item key or None, items it gives)`` for the active branch, in order;
        the result record of a server-side call gives no item (its call's item holds it)."""
        store = self.runtime.store
        messages = self._messages()
        call_ids = [p.call_id for m in messages if m.role is Role.TOOL for p in m.parts if isinstance(p, ToolResultPart)]
        arts = {a.message_id: a for a in store.artifacts(self.scope, self.conversation_id, call_ids=call_ids)} if call_ids else {}
        ids = CallIdMap(OPENAI_RESPONSES_CALL_ID_MAX_LENGTH)
        out: list[tuple[Message, str | None, list[dict[str, Any]]]] = []
        for m in messages:
            art = arts.get(m.id)
            meta = art.provider_metadata if art is not None else m.metadata
            if PART_KEY in meta:
                out.append((m, str(meta[PART_KEY]), []))
            elif ITEMS_KEY in meta:
                kept = [dict(i) for i in meta[ITEMS_KEY]]
                if art is not None and "output" not in kept[0]:
                    kept[0]["output"] = self._raw_text(art)
                out.append((m, (meta.get(KEYS_KEY) or [None])[0], kept))
            elif art is not None:
                out.append((m, None, [output_item(ToolResultPart(call_id=art.call_id, text=self._raw_text(art), is_error=art.is_error), ids)]))
            elif m.role is Role.ASSISTANT:
                out.append((m, None, assistant_items(WireMessage(role="assistant", parts=tuple(p for p in m.parts if not isinstance(p, ThinkingPart))), ids)))
            elif m.role is not Role.TOOL:
                item = user_item(WireMessage(role="user", parts=m.parts))
                out.append((m, None, [{**item, "role": m.role.value} if m.role is not Role.USER else item]))
        return out

    def _raw_text(self, art: Any) -> str:
        if art.inline_text is not None:
            return str(art.inline_text)
        return self.runtime.store.read_artifact_bytes(self.scope, art).decode("utf-8", errors="replace")

    def items(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The history as Responses items, oldest first (the latest ``limit`` when given).

        Records made by this log give back their exact items; other records of the
        conversation (recorded directly) are rendered as the Responses serializer renders
        them.
        """
        out = [item for _, _, items in self._entries() for item in items]
        if limit is None:
            return out
        return out[-limit:] if limit > 0 else []

    # -- recording ------------------------------------------------------------------------
    def append(self, items: Sequence[Mapping[str, Any]], *, failed_calls: Collection[str] = ()) -> int:
        """Record ``items`` as the newest part of the history, in order; items already
        recorded (same identity) are skipped.  Returns how many were recorded.

        ``failed_calls``: call ids whose outputs report a failure (the item format has
        no error flag; a framework that knows passes it here).

        Raises:
            InputError: a malformed item (named ``items[k]``).
        """
        self._load_keys()
        return self._record(items, item_keys(items, self._digests), failed_calls)

    def sync(
        self,
        history: Sequence[Mapping[str, Any]],
        *,
        identified_only: bool = False,
        keys: Sequence[str | None] | None = None,
        failed_calls: Collection[str] = (),
    ) -> int:
        """Record the items of ``history`` — the whole item history, oldest first, as a
        framework passes it to the model — that are not recorded yet.  Returns how many
        were recorded.

        Args:
            identified_only: consider only items with an identity of their own (calls,
                outputs, items with an id): for a history that may be a window of the log.
            keys: identity keys chosen by the caller (e.g. a framework's own message
                ids), one per item; ``None`` entries take the default identity.
            failed_calls: as for :meth:`append`.
        """
        self._load_keys()
        defaults = item_keys(history)
        chosen = [k or d for k, d in zip(keys, defaults, strict=True)] if keys is not None else defaults
        if identified_only:
            kept = [(i, k) for i, k in zip(history, chosen, strict=True) if not k.startswith("content:")]
            return self._record([i for i, _ in kept], [k for _, k in kept], failed_calls)
        return self._record(history, chosen, failed_calls)

    def _record(self, items: Sequence[Mapping[str, Any]], keys: list[str], failed_calls: Collection[str]) -> int:
        known = self._load_keys()
        n = 0
        for k, (item, key) in enumerate(zip(items, keys, strict=True)):
            if key in known:
                continue
            converter = ResponsesItems(f"conversation {self.conversation_id}", self._registry, self.notes)
            try:
                converter.item(dict(item), key, f"items[{k}]")
            except ImportFormatError as exc:
                raise InputError(f"items[{k}]: {exc.reason}") from None
            converter.close()
            meta: dict[str, Any] = {ITEMS_KEY: [dict(item)], KEYS_KEY: [key]}
            for message in converter.messages:
                self._record_message(message, dict(item), meta, item.get("call_id") in failed_calls)
                meta = {PART_KEY: key}  # a server call's result: part of the call's item
            known.add(key)
            if key.startswith("content:"):
                digest = key.split(":")[1]
                self._digests[digest] = self._digests.get(digest, 0) + 1
            n += 1
        return n

    def _record_message(self, m: ImportedMessage, item: dict[str, Any], meta: dict[str, Any], failed: bool) -> None:
        for raw in m.attachments.values():
            self.runtime.store.blobs.put(raw)
        calls = [p for p in m.parts if isinstance(p, ToolCallPart)]
        result = next((p for p in m.parts if isinstance(p, ToolResultPart)), None)
        if result is not None:
            if ITEMS_KEY in meta:  # the output text is the artifact itself
                meta = {**meta, ITEMS_KEY: [{k: v for k, v in item.items() if k != "output"} if isinstance(item.get("output"), str) else item]}
            self.recorder.record_tool_result(self.conversation_id, result.call_id, result.text or "", is_error=result.is_error or failed, provider_metadata=meta)
        elif calls:
            text = "\n".join(p.text for p in m.parts if isinstance(p, TextPart))
            specs = [ToolCallSpec(call_id=c.call_id, tool_name=c.tool_name, arguments=c.arguments_json) for c in calls]
            self.recorder.record_assistant(self.conversation_id, text=text, tool_calls=specs, metadata=meta)
        elif m.kind is MessageKind.META or any(isinstance(p, ThinkingPart) for p in m.parts) or not m.parts:
            # reasoning and meta items: evidence only, never sent to a model
            self.recorder.record_message(self.conversation_id, Role.ASSISTANT, list(m.parts) or [TextPart(text=f"[{item_kind(item)} item]")], kind=MessageKind.META, visibility=Visibility.AUDIT_ONLY, metadata=meta)
        else:  # messages, and an output answering no recorded call (kept as an observation)
            self.recorder.record_message(self.conversation_id, m.role, list(m.parts), kind=m.kind, metadata=meta)

    # -- removal (recorded, never silent) ------------------------------------------------
    def pop(self) -> dict[str, Any] | None:
        """Remove the newest item from the history and return it (``None`` when empty).

        The conversation moves to a branch forked before the item's records; they stay
        on the old branch, and a PolicyDecision ``session_pop`` names both branches.  (A
        recorded call id stays taken: a call popped and added again with the same call
        id is recorded under a renamed id.)
        """
        entries = self._entries()
        while entries and not entries[-1][2] and entries[-1][1] is None:
            entries.pop()  # records that give no item (none are made by this log)
        if not entries:
            return None
        key = next((k for _, k, items in reversed(entries) if items), None)
        drop = len(entries) - 1
        while drop > 0 and key is not None and entries[drop - 1][1] == key:
            drop -= 1  # every record of the item
        popped: dict[str, Any] = next(items for _, _, items in reversed(entries) if items)[-1]
        first = entries[drop][0]
        old_branch = self.runtime.store.get_conversation(self.scope, self.conversation_id).active_branch_id
        new_branch = self.recorder.fork(self.conversation_id, entries[drop - 1][0].id, name="history before a removed item").id if drop > 0 else self._empty_branch("history before a removed item")
        self._keys = None
        self.recorder.record_decision(
            self.conversation_id, family=PolicyFamily.RETENTION, decision="session_pop", record_id=first.id, actor=self.actor,
            reason=f"the newest item was removed from the history; its record stays on branch {old_branch}",
            detail={"from_branch": old_branch, "to_branch": new_branch, "item_type": item_kind(popped)},
        )
        return popped

    def clear(self) -> None:
        """Empty the history: the conversation moves to a new empty branch; every record
        stays on the old one, and a PolicyDecision ``session_clear`` says so."""
        old_branch = self.runtime.store.get_conversation(self.scope, self.conversation_id).active_branch_id
        new_branch = self._empty_branch("cleared")
        self._keys = None
        self.recorder.record_decision(
            self.conversation_id, family=PolicyFamily.RETENTION, decision="session_clear", record_id=old_branch, actor=self.actor,
            reason=f"the history was cleared; its records stay on branch {old_branch}",
            detail={"from_branch": old_branch, "to_branch": new_branch},
        )

    def _empty_branch(self, name: str) -> str:
        """A new root branch (inheriting nothing), made active; the conversation's system
        prompt, if any, is recorded on it again."""
        store = self.runtime.store
        conv = store.get_conversation(self.scope, self.conversation_id)
        lineage = store.lineage(self.scope, conv.active_branch_id)
        head = [m for m in store.messages(self.scope, self.conversation_id, lineage, roles=[Role.SYSTEM.value]) if ITEMS_KEY not in m.metadata]
        branch = Branch(id=new_id("br"), tenant_id=self.scope.tenant_id, conversation_id=conv.id, name=name, created_at=datetime.now(UTC))
        with store.writer(self.scope) as w:
            w.add_branch(branch)
            w.update_conversation(conv.model_copy(update={"active_branch_id": branch.id}))
            if head:
                system = head[0].model_copy(update={"id": new_id("msg"), "branch_id": branch.id, "seq": w.allocate_seq(conv.id), "parent_message_id": None})
                w.add_message(system)
        return branch.id
