"""Build a handoff document deterministically from the runtime graph (no writes).

:func:`build_handoff` reads one lineage snapshot (messages, tool calls, memories, rules,
checkpoints, skill states and the previous compaction) in a single read transaction,
finds the boundary of the raw recent tail (:mod:`.boundary`) and fills every section of
the template (:mod:`.handoff`) with :mod:`.sections`.  Same graph snapshot + same
``keep_recent_units`` + same ``now`` ⇒ an equal document (DESIGN.md "Compaction";
seed 001 §10).

A second compaction covers the lineage from its start again (``from_seq`` is the first
history sequence number, ``to_seq`` moves forward), so every section is re-derived from
the records themselves; hard constraints carried by the previous compaction are merged
in, so none is lost even if its source record were no longer readable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from contextledger.compaction.boundary import Boundary, find_boundary
from contextledger.compaction.handoff import (
    HANDOFF_FORMAT,
    HANDOFF_SECTIONS,
    NONE_RECORDED,
    validate_handoff,
)
from contextledger.compaction.sections.common import shareable_memory
from contextledger.compaction.sections.constraints import hard_constraints
from contextledger.compaction.sections.facts import verified_facts
from contextledger.compaction.sections.failures import failed_attempts
from contextledger.compaction.sections.files import files_modified, files_read
from contextledger.compaction.sections.goal import user_goal
from contextledger.compaction.sections.next_step import next_step
from contextledger.compaction.sections.state import current_state
from contextledger.compaction.sections.verification import latest_verification
from contextledger.errors import InputError
from contextledger.policy.rules import Rule
from contextledger.records.enums import MessageKind, PrivacyClass
from contextledger.records.models import (
    ContinuationCheckpoint,
    Conversation,
    Message,
    SkillState,
    ToolCall,
    ToolMemory,
)
from contextledger.store.base import LineageSegment, Scope
from contextledger.store.sql import SqlStore

__all__ = [
    "GraphSnapshot",
    "HandoffPlan",
    "build_handoff",
    "latest_compaction",
    "read_snapshot",
    "source_refs",
]


@dataclass(frozen=True, kw_only=True)
class GraphSnapshot:
    """The records of one lineage a compaction is built from (``seq`` order)."""

    conversation: Conversation
    branch_id: str
    segments: list[LineageSegment]
    messages: list[Message]
    calls: list[ToolCall]
    memories: list[ToolMemory]
    rules: list[dict[str, Any]]
    checkpoints: list[ContinuationCheckpoint]
    skill_states: list[SkillState]
    previous: Message | None


@dataclass(frozen=True, kw_only=True)
class HandoffPlan:
    """A built (validated, not yet written) compaction.

    Attributes:
        document: the handoff document (sections + ``source_range`` [+ ``omitted``]).
        boundary: covered units and the raw tail.
        snapshot: the records it was built from.
        source_refs: every record id the document cites, in order of first citation.
        privacy_class: ``user_data`` when a cited memory or message carries that class,
            else ``internal``.
    """

    document: dict[str, Any]
    boundary: Boundary
    snapshot: GraphSnapshot
    source_refs: tuple[str, ...]
    privacy_class: PrivacyClass

    @property
    def previous_compaction_id(self) -> str | None:
        """The compaction this one builds on."""
        return self.snapshot.previous.id if self.snapshot.previous is not None else None


def _in_lineage(rule: Mapping[str, Any], segments: Sequence[LineageSegment]) -> bool:
    b = rule.get("_branch_id")
    if b is None:
        return True
    seq = int(rule.get("_seq", 0))
    return any(s.branch_id == b and (s.max_seq is None or seq <= s.max_seq) for s in segments)


def latest_compaction(
    store: SqlStore, scope: Scope, conversation_id: str, segments: Sequence[LineageSegment]
) -> Message | None:
    """The newest compaction message written by this package on the lineage ``segments``
    (``kind == compaction`` and ``metadata["handoff_format"] == HANDOFF_FORMAT``;
    compaction summaries imported from other tools are ignored), or ``None``."""
    found = [
        m
        for m in store.messages(
            scope, conversation_id, list(segments), kinds=[MessageKind.COMPACTION.value]
        )
        if m.metadata.get("handoff_format") == HANDOFF_FORMAT
    ]
    return found[-1] if found else None


def read_snapshot(
    store: SqlStore, scope: Scope, conversation_id: str, branch_id: str | None = None
) -> GraphSnapshot:
    """Read the lineage of ``branch_id`` (default: the active branch) in one transaction.

    Raises:
        NotFoundError: unknown conversation or branch in scope.
    """
    with store.reader() as conn:
        conv = store.get_conversation(scope, conversation_id, conn)
        branch = branch_id or conv.active_branch_id
        store.get_branch(scope, branch, conn)
        segments = store.lineage(scope, branch, conn)
        messages = store.messages(scope, conversation_id, segments, conn=conn)
        calls = store.tool_calls(scope, conversation_id, segments, conn=conn)
        memories = store.memories(scope, conversation_id, segments, conn=conn)
        rules = [
            r for r in store.rule_bodies(scope, conversation_id, conn) if _in_lineage(r, segments)
        ]
        checkpoints = store.checkpoints(scope, conversation_id, segments, conn)
        skills = store.skill_states(scope, conversation_id, segments, conn)
    previous = [
        m
        for m in messages
        if m.kind == MessageKind.COMPACTION and m.metadata.get("handoff_format") == HANDOFF_FORMAT
    ]
    return GraphSnapshot(
        conversation=conv,
        branch_id=branch,
        segments=segments,
        messages=messages,
        calls=calls,
        memories=memories,
        rules=rules,
        checkpoints=checkpoints,
        skill_states=skills,
        previous=previous[-1] if previous else None,
    )


_REF_KEYS = ("message_id", "memory_id", "artifact_id", "memory_ids", "artifact_ids", "source_refs")


def source_refs(document: Mapping[str, Any]) -> tuple[str, ...]:
    """Every record id cited by ``document``'s sections (template order, first citation
    first): the values of ``message_id``, ``memory_id``, ``artifact_id``, ``memory_ids``,
    ``artifact_ids`` and ``source_refs`` fields at any depth."""
    out: list[str] = []

    def visit(value: Any) -> None:
        if isinstance(value, Mapping):
            for key in _REF_KEYS:
                v = value.get(key)
                if isinstance(v, str) and v:
                    out.append(v)
                elif isinstance(v, list):
                    out.extend(str(x) for x in v if isinstance(x, str) and x)
            for key, v in value.items():
                if key not in _REF_KEYS and isinstance(v, Mapping | list):
                    visit(v)
        elif isinstance(value, list):
            for v in value:
                visit(v)

    for name in HANDOFF_SECTIONS:
        visit(document.get(name))
    return tuple(dict.fromkeys(out))


def build_handoff(
    store: SqlStore,
    scope: Scope,
    conversation_id: str,
    *,
    branch_id: str | None = None,
    keep_recent_units: int,
    now: datetime,
    extra_rules: Sequence[Rule] = (),
) -> HandoffPlan:
    """Build and validate the handoff of everything before the raw recent tail.

    Args:
        keep_recent_units: conversational units left raw after the summary.
        now: timezone-aware evaluation time (file and memory staleness).
        extra_rules: project rules loaded by the caller (e.g. with
            :func:`~contextledger.policy.rules.load_rule_files`), kept verbatim among the
            hard constraints.

    Raises:
        NotFoundError: unknown conversation or branch.
        InputError: ``now`` is naive, ``keep_recent_units`` is negative, nothing would be
            covered, or nothing new since the previous compaction.
        HandoffError: the built document breaks the template (a bug, never silent).
    """
    if now.tzinfo is None or now.utcoffset() is None:
        raise InputError(f"now must be a timezone-aware datetime, got {now!r}")
    snap = read_snapshot(store, scope, conversation_id, branch_id)
    boundary = find_boundary(snap.messages, snap.calls, keep_recent_units)
    prev_sections = _previous_sections(snap, boundary, keep_recent_units)
    covered_calls = boundary.covered_call_ids
    covered_mems = [
        m
        for m in snap.memories
        if shareable_memory(m)
        and ((m.call_id in covered_calls) if m.call_id else m.seq <= boundary.to_seq)
    ]
    doc = _document(snap, boundary, covered_mems, prev_sections, now, extra_rules)
    validate_handoff(doc)
    refs = source_refs(doc)
    cited = set(refs)
    user_data = any(
        m.privacy_class is PrivacyClass.USER_DATA for m in covered_mems if m.id in cited
    ) or any(m.privacy_class is PrivacyClass.USER_DATA for m in snap.messages if m.id in cited)
    return HandoffPlan(
        document=doc,
        boundary=boundary,
        snapshot=snap,
        source_refs=refs,
        privacy_class=PrivacyClass.USER_DATA if user_data else PrivacyClass.INTERNAL,
    )


def _previous_sections(
    snap: GraphSnapshot, boundary: Boundary, keep_recent_units: int
) -> Mapping[str, Any]:
    """The sections of the previous compaction (empty when none).

    Raises:
        InputError: the previous compaction already covers the new range.
    """
    previous = snap.previous
    if previous is None:
        return {}
    covers = previous.metadata.get("covers") or {}
    prev_to = int(covers.get("to_seq", -1))
    if boundary.to_seq <= prev_to:
        raise InputError(
            f"nothing new to compact: compaction {previous.id} already covers up to seq {prev_to} "
            f"and keep_recent_units={keep_recent_units} ends the new range at seq {boundary.to_seq}"
        )
    sections: Mapping[str, Any] = previous.metadata.get("sections") or {}
    return sections


def _document(
    snap: GraphSnapshot,
    boundary: Boundary,
    covered_mems: list[ToolMemory],
    prev_sections: Mapping[str, Any],
    now: datetime,
    extra_rules: Sequence[Rule],
) -> dict[str, Any]:
    """The handoff document's sections (template order), with the per-section counts of
    entries left out by the section caps under ``omitted``."""
    covered_ids = boundary.covered_message_ids
    calls_by_id = {c.call_id: c for c in snap.calls}
    messages_by_id = {m.id: m for m in snap.messages}
    carried = prev_sections.get("hard_constraints")
    facts, facts_left = verified_facts(covered_mems, now)
    read, read_left = files_read(covered_mems, snap.memories, now)
    modified, modified_left = files_modified(covered_mems, calls_by_id, messages_by_id)
    failed, failed_left = failed_attempts(covered_mems, calls_by_id)
    constraints = hard_constraints(
        snap.rules,
        extra_rules,
        snap.messages,
        covered_ids,
        carried if isinstance(carried, list) else [],
    )
    doc: dict[str, Any] = {
        "user_goal": user_goal(snap.messages, covered_ids),
        "hard_constraints": constraints or NONE_RECORDED,
        "current_state": current_state(boundary, snap.calls, snap.checkpoints, snap.skill_states),
        "verified_facts": facts or NONE_RECORDED,
        "files_read": read or NONE_RECORDED,
        "files_modified": modified or NONE_RECORDED,
        "failed_attempts": failed or NONE_RECORDED,
        "latest_verification": latest_verification(covered_mems),
        "next_step": next_step(snap.messages, covered_ids),
        "source_range": {"from_seq": boundary.from_seq, "to_seq": boundary.to_seq},
    }
    left = (
        ("verified_facts", facts_left),
        ("files_read", read_left),
        ("files_modified", modified_left),
        ("failed_attempts", failed_left),
    )
    omitted = {k: v for k, v in left if v}
    if omitted:
        doc["omitted"] = omitted
    return doc
