"""``compact``: write one compaction message (a handoff summary) on a branch.

DESIGN.md "Compaction", seed 001 §4.6, §6 problem 5 and §10.  The compaction is an
*additional* node of the lineage: nothing is deleted or rewritten, every covered message,
call, artifact and memory stays in the store and can still be rehydrated by id or by the handle the summary names it with
(:meth:`contextledger.ledger.Ledger.rehydrate`).  The assembler places the compaction's
text in place of the covered units and keeps the raw recent tail beside it.

Example::

    from contextledger.compaction import compact
    c = compact(ledger, ledger.scope(), conv_id, keep_recent_units=6)
    print(c.from_seq, c.to_seq, c.message.parts[0].text)
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import sqlalchemy as sa

from contextledger.compaction.build import (
    HandoffPlan,
    build_handoff,
    latest_compaction,
    source_refs,
)
from contextledger.compaction.handoff import (
    HANDOFF_FORMAT,
    HANDOFF_SECTIONS,
    HandoffError,
    render_handoff,
    validate_handoff,
)
from contextledger.errors import InputError
from contextledger.handles import not_shown
from contextledger.ids import new_id
from contextledger.ingest.recorder import message_token_count
from contextledger.policy.rules import Rule
from contextledger.records.enums import AuthorityLevel, MessageKind, Role, Visibility
from contextledger.records.models import Message
from contextledger.records.parts import TextPart
from contextledger.store import schema as S
from contextledger.store.base import Scope
from contextledger.textcut import cut_index

if TYPE_CHECKING:
    from contextledger.runtime import HasRuntime
    from contextledger.store.sql import SqlStore

__all__ = [
    "DEFAULT_KEEP_RECENT_UNITS",
    "MAX_PROSE_CHARS",
    "Compaction",
    "HandoffSummarizer",
    "add_prose",
    "compact",
    "document_of",
]

DEFAULT_KEEP_RECENT_UNITS = 6
"""Conversational units (user message, assistant reply, tool exchange) left raw."""

MAX_PROSE_CHARS = 4000
"""Longest model-written prose kept (characters)."""


@runtime_checkable
class HandoffSummarizer(Protocol):
    """Optional model that writes prose notes for a handoff document.

    It receives a deep copy of the deterministic document; whatever it returns is only
    ever *added* as ``prose`` (seed 001 §4.6: summary drift must not rewrite constraints,
    failures or open problems), never replaces a section.
    """

    def summarize_handoff(self, document: Mapping[str, Any]) -> str:
        """Prose notes for ``document`` (may be empty)."""
        ...


@dataclass(frozen=True, kw_only=True)
class Compaction:
    """A written compaction.

    Attributes:
        message: the compaction message (role ``user``, kind ``compaction``, authority
            ``summary``) holding the rendered handoff text as its only part.
        document: the handoff document (also in ``message.metadata["sections"]``,
            ``["covers"]`` and ``["prose"]``).
        from_seq / to_seq: inclusive covered sequence range.
        previous_compaction_id: the compaction it builds on, or ``None``.
        source_refs: record ids cited by the document.
        covered_units / kept_units: units covered, conversational units left raw.
    """

    message: Message
    document: dict[str, Any]
    from_seq: int
    to_seq: int
    previous_compaction_id: str | None
    source_refs: tuple[str, ...]
    covered_units: int
    kept_units: int

    @property
    def id(self) -> str:
        """The compaction message id."""
        return self.message.id

    @classmethod
    def from_message(cls, message: Message) -> Compaction:
        """Rebuild a :class:`Compaction` from its stored message.

        Raises:
            InputError: ``message`` is not a compaction written by this package.
            HandoffError: its stored document breaks the template.
        """
        meta = message.metadata
        if message.kind != MessageKind.COMPACTION or meta.get("handoff_format") != HANDOFF_FORMAT:
            raise InputError(f"message {message.id} is not a {HANDOFF_FORMAT} compaction")
        doc = document_of(message)
        covers = meta["covers"]
        return cls(
            message=message,
            document=doc,
            from_seq=int(covers["from_seq"]),
            to_seq=int(covers["to_seq"]),
            previous_compaction_id=meta.get("previous_compaction_id"),
            source_refs=tuple(meta.get("source_refs") or ()),
            covered_units=int(covers.get("covered_units", 0)),
            kept_units=int(covers.get("kept_units", 0)),
        )


def document_of(message: Message) -> dict[str, Any]:
    """The handoff document stored on a compaction message (sections in template order,
    ``source_range`` from ``covers``, then ``omitted`` and ``prose`` when present).

    Raises:
        HandoffError: a mandatory section is missing from the stored metadata.
    """
    meta = message.metadata
    sections = meta.get("sections") or {}
    covers = meta.get("covers") or {}
    doc: dict[str, Any] = {name: sections[name] for name in HANDOFF_SECTIONS if name in sections}
    doc["source_range"] = {"from_seq": covers.get("from_seq"), "to_seq": covers.get("to_seq")}
    if meta.get("omitted"):
        doc["omitted"] = meta["omitted"]
    if isinstance(meta.get("prose"), str):
        doc["prose"] = meta["prose"]
    validate_handoff(doc)
    return doc


def add_prose(document: Mapping[str, Any], summarizer: HandoffSummarizer) -> dict[str, Any]:
    """``document`` plus ``prose`` written by ``summarizer`` (stripped, at most
    :data:`MAX_PROSE_CHARS`); unchanged when the summariser returns only whitespace.

    Raises:
        HandoffError: the summariser changed the document it was given (it gets a deep
            copy; the check guards summarisers that return by mutating shared state).
    """
    before = copy.deepcopy(dict(document))
    given = copy.deepcopy(before)
    text = summarizer.summarize_handoff(given)
    if given != before:
        raise HandoffError("prose", "the summariser modified the handoff document; it may only add prose")
    out = copy.deepcopy(before)
    out.pop("prose", None)
    cleaned = text.strip() if isinstance(text, str) else ""
    if cleaned:
        out["prose"] = cleaned[: cut_index(cleaned, MAX_PROSE_CHARS)]
    return out


_RECORD_ID = re.compile(r"\b(?:msg|mem|art)_[0-9A-HJKMNP-TV-Z]{26}\b")
"""A message, memory or artifact id (ULID body) inside rendered text."""


def cited_handles(store: SqlStore, scope: Scope, conversation_id: str, doc: Mapping[str, Any]) -> dict[str, str]:
    """``{record id: handle}`` for every message, memory and artifact ``doc`` cites
    (:func:`~contextledger.compaction.build.source_refs`, the messages its hard
    constraints come from, and any id its rendered text quotes, e.g. in a staleness note): ``message 12``, ``m12``, ``a12`` — a payload never quotes a
    random record id (:mod:`contextledger.handles`)."""
    ids = set(source_refs(doc)) | set(_RECORD_ID.findall(render_handoff(doc)))
    constraints = doc.get("hard_constraints")
    if isinstance(constraints, list):
        ids.update(str(c["source"]) for c in constraints if isinstance(c, Mapping) and c.get("source"))
    out: dict[str, str] = {}
    tables = ((S.messages, "message "), (S.tool_memories, "m"), (S.tool_artifacts, "a"))
    with store.reader() as conn:
        for t, prefix in tables:
            wanted = sorted(i for i in ids if i.startswith({"message ": "msg_", "m": "mem_", "a": "art_"}[prefix]))
            if wanted:
                stmt = sa.select(t.c.id, t.c.seq).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id, t.c.id.in_(wanted))
                out.update({str(r.id): f"{prefix}{int(r.seq)}" for r in conn.execute(stmt)})
    return out


def _cited_ids(text: str, handles: Mapping[str, str]) -> str:
    """``text`` with each record id it still quotes (a staleness note's ``changed by
    mem_…``) named by its handle, a memory's or artifact's marked as not shown
    (:func:`contextledger.handles.not_shown`)."""

    def name(m: re.Match[str]) -> str:
        handle = handles.get(m[0])
        if handle is None:
            return m[0]
        return handle if handle.startswith("message ") else not_shown([handle])

    return _RECORD_ID.sub(name, text)


def _write(store: SqlStore, scope: Scope, plan: HandoffPlan, doc: dict[str, Any], now: datetime) -> Message:
    snap = plan.snapshot
    handles = cited_handles(store, scope, snap.conversation.id, doc)
    text = _cited_ids(render_handoff(doc, handles), handles)
    parts = (TextPart(text=text),)
    metadata: dict[str, Any] = {
        "handoff_format": HANDOFF_FORMAT,
        "covers": {
            "from_seq": plan.boundary.from_seq,
            "to_seq": plan.boundary.to_seq,
            "covered_units": len(plan.boundary.covered),
            "kept_units": len(plan.boundary.kept),
        },
        "sections": {name: doc[name] for name in HANDOFF_SECTIONS},
        "source_refs": list(plan.source_refs),
        "previous_compaction_id": plan.previous_compaction_id,
        "built_at": now.astimezone(UTC).isoformat(),
    }
    if doc.get("omitted"):
        metadata["omitted"] = doc["omitted"]
    if "prose" in doc:
        metadata["prose"] = doc["prose"]
    with store.writer(scope) as w:
        current = latest_compaction(store, scope, snap.conversation.id, snap.segments)
        if (current.id if current else None) != plan.previous_compaction_id:
            raise InputError(
                f"another compaction ({current.id if current else None}) was written on this lineage "
                "while this one was built; build it again"
            )
        head = store.messages(scope, snap.conversation.id, snap.segments, last=1, conn=w.conn)
        seq = w.allocate_seq(snap.conversation.id)
        msg = Message(
            id=new_id("msg"),
            tenant_id=scope.tenant_id,
            conversation_id=snap.conversation.id,
            branch_id=snap.branch_id,
            seq=seq,
            parent_message_id=head[0].id if head else None,
            role=Role.USER,
            kind=MessageKind.COMPACTION,
            parts=parts,
            visibility=Visibility.BRANCH,
            privacy_class=plan.privacy_class,
            authority=AuthorityLevel.SUMMARY,
            token_count=message_token_count(parts),
            metadata=metadata,
            created_at=now,
        )
        w.add_message(msg)
    return msg


def compact(
    source: HasRuntime,
    scope: Scope,
    conversation_id: str,
    *,
    branch_id: str | None = None,
    keep_recent_units: int = DEFAULT_KEEP_RECENT_UNITS,
    summarizer: HandoffSummarizer | None = None,
    now: datetime | None = None,
    extra_rules: Sequence[Rule] = (),
) -> Compaction:
    """Compact everything before the last ``keep_recent_units`` conversational units of
    the lineage into one handoff message, written in one transaction.

    Args:
        source: the runtime (or a ``Ledger``) whose store is compacted.
        branch_id: the branch to compact (default: the conversation's active branch);
            the message is written on it, so only its lineage (and branches forked from
            it later) sees the compaction.
        keep_recent_units: user messages, assistant replies and tool exchanges left raw
            after the summary (default 6).
        summarizer: optional model adding ``prose``; sections stay deterministic.
        now: evaluation time for staleness (timezone-aware; default: the current time).
            Pass it to make the sections reproducible.
        extra_rules: project rules to keep verbatim among the hard constraints.

    Returns:
        The written :class:`Compaction`.

    Raises:
        NotFoundError: unknown conversation or branch.
        InputError: naive ``now``, negative ``keep_recent_units``, nothing to compact, or
            a concurrent compaction of the same lineage.
        HandoffError: the document breaks the template (never written).
    """
    store = source.runtime.store
    now = now or datetime.now(UTC)
    plan = build_handoff(
        store, scope, conversation_id, branch_id=branch_id, keep_recent_units=keep_recent_units, now=now, extra_rules=extra_rules
    )
    doc = plan.document if summarizer is None else add_prose(plan.document, summarizer)
    validate_handoff(doc)
    msg = _write(store, scope, plan, doc, now)
    return Compaction(
        message=msg,
        document=doc,
        from_seq=plan.boundary.from_seq,
        to_seq=plan.boundary.to_seq,
        previous_compaction_id=plan.previous_compaction_id,
        source_refs=plan.source_refs,
        covered_units=len(plan.boundary.covered),
        kept_units=len(plan.boundary.kept),
    )
