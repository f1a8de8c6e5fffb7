"""Links between memories: file staleness, supersession, conflicts, provenance repair.

Pure functions over ToolMemory values (storing the results is the store's job).

* File staleness (seed 001 §6 problem 3): a file read is stale once a later write of the
  same path, or a later read of the same view showing other content, exists; test results
  are tied to the file versions known when they ran.
* Supersession and conflicts (seed 000 §4.8) are *directed*: ``new.supersedes`` lists the
  old ids the current memory replaces, ``old.superseded_by`` names its successor.  Selection
  drops the *old* memory and keeps the successor — the inverted bug the seed warns about is
  dropping the successor.
* Provenance rank: ``user_stated`` > ``tool_observed`` > ``model_derived``; a lower-ranked
  memory never supersedes a higher one, it is linked as a conflict instead.
* Provenance repair (seed 000 §9.4): a broken reference is re-pointed only to an existing
  artifact holding the same evidence (same call id, tool and sha256), never to an invented
  id; otherwise the memory is marked unverifiable.
* Audience and lineage (seed 000 §4.9, §4.10): :func:`plan_links` links a new memory only
  to earlier memories whose whole audience also sees it (:func:`audience`,
  :func:`reaches`), and writes a link on the earlier, shared record only when both lie on
  the same branch; a link to inherited history is kept on the new memory alone (see
  :mod:`contextledger.memory.linking` for the rule and its reasons).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from contextledger.errors import InputError
from contextledger.handles import artifact_handle, memory_handle
from contextledger.memory.paths import changes_files, files_written, same_file, written_paths
from contextledger.memory.paths import memory_paths as _paths
from contextledger.records.enums import (
    OmissionReason,
    PromotionPolicy,
    ProvenanceRank,
    ResolutionState,
    ToolCallStatus,
    Visibility,
)
from contextledger.records.models import ToolArtifact, ToolMemory

__all__ = [
    "LINEAGE_STALE_KEY", "PROVENANCE_ORDER", "LinkPlan", "add_conflict",
    "annotate_test_file_versions", "audience", "conflict_marks", "file_staleness",
    "lineage_stale_ids", "lost_payload_note", "plan_links", "reaches", "repair_provenance",
    "resolve_write", "select_current", "stale_note", "supersede",
]

PROVENANCE_ORDER: dict[ProvenanceRank, int] = {
    ProvenanceRank.USER_STATED: 0,
    ProvenanceRank.TOOL_OBSERVED: 1,
    ProvenanceRank.MODEL_DERIVED: 2,
}
"""Provenance ranks, strongest first (lower number = higher rank)."""

_WRITE_KINDS = frozenset({"file_write", "generated_file"})
MAX_FILE_VERSIONS = 50


def _ordered(memories: Iterable[ToolMemory]) -> list[ToolMemory]:
    return sorted(memories, key=lambda m: (m.seq, m.id))


def _is_write(memory: ToolMemory) -> bool:
    return (
        (memory.payload.get("extractor") in _WRITE_KINDS or bool(files_written(memory)))
        and changes_files(memory)
    )


def _is_read(memory: ToolMemory) -> bool:
    return memory.payload.get("extractor") == "file_read" and memory.status != ToolCallStatus.FAILED


def _content_hash(memory: ToolMemory) -> str | None:
    for key in ("content_sha256", "new_content_sha256"):
        value = memory.payload.get(key)
        if isinstance(value, str):
            return value
    handle = memory.payload.get("file")
    if isinstance(handle, dict) and isinstance(handle.get("content_sha256"), str):
        return str(handle["content_sha256"])
    return None


def file_staleness(memories: Sequence[ToolMemory]) -> dict[str, str]:
    """Map each stale file-read memory id to the id of the memory that made it stale.

    A read (extractor ``file_read``) of path *p* at sequence *s* is stale when a memory
    with a higher sequence number (ties broken by id) either writes *p* (extractor
    ``file_write`` / ``generated_file``, or a shell run's ``files_written``, that changed it:
    :func:`~contextledger.memory.paths.changes_files`; the path spelled either way, :func:`same_file`) or reads *p*
    again with the same ``line_range`` and a different ``content_sha256``.  Reads of
    different ranges are not compared (their hashes cover different text).  The first
    such memory is reported.
    """
    ordered = _ordered(memories)
    result: dict[str, str] = {}
    for i, read in enumerate(ordered):
        if not _is_read(read):
            continue
        paths = set(_paths(read))
        if not paths:
            continue
        for later in ordered[i + 1 :]:
            if later.seq == read.seq and later.id <= read.id:
                continue
            if _is_write(later) and any(same_file(p, q) for p in paths for q in written_paths(later)):
                result[read.id] = later.id
                break
            if not paths.intersection(_paths(later)):
                continue
            if (
                _is_read(later)
                and later.payload.get("line_range") == read.payload.get("line_range")
                and _content_hash(later) is not None
                and _content_hash(later) != _content_hash(read)
            ):
                result[read.id] = later.id
                break
    return result


def annotate_test_file_versions(memories: Sequence[ToolMemory]) -> list[ToolMemory]:
    """Tie each test-run memory to the file versions known when it ran.

    Returns ``memories`` in their given order, with every ``test_run`` memory's payload
    gaining ``file_versions``: ``{path: version}`` for every path a file memory with a
    lower sequence number touched, where *version* is the last known content hash
    (``"sha256:…"``) or, when the last memory of that path carries no hash, that memory's
    id.  Paths are sorted; at most 50 are kept (the most recently touched).
    """
    ordered = _ordered(memories)
    updated: dict[str, ToolMemory] = {}
    latest: dict[str, tuple[int, str]] = {}
    for position, memory in enumerate(ordered):
        if memory.payload.get("extractor") == "test_run":
            recent = sorted(latest.items(), key=lambda kv: kv[1][0])[-MAX_FILE_VERSIONS:]
            versions = {path: version for path, (_, version) in sorted(recent)}
            payload = {**memory.payload, "file_versions": versions}
            updated[memory.id] = memory.model_copy(update={"payload": payload})
            continue
        if _is_read(memory) or _is_write(memory):
            version = _content_hash(memory) or memory.id
            for path in _paths(memory):
                latest[path] = (position, version)
    return [updated.get(m.id, m) for m in memories]


def supersede(new: ToolMemory, old: ToolMemory) -> tuple[ToolMemory, ToolMemory]:
    """Link ``new`` as the successor of ``old``.

    Returns ``(new with old.id appended to supersedes, old with superseded_by=new.id and
    resolution_state superseded)``.

    Raises:
        InputError: same memory, different tenants, or ``old`` already superseded by
            another memory.
    """
    if new.id == old.id:
        raise InputError("a memory cannot supersede itself")
    if new.tenant_id != old.tenant_id:
        raise InputError("memories of different tenants cannot be linked")
    if old.superseded_by is not None and old.superseded_by != new.id:
        raise InputError(f"memory {old.id} is already superseded by {old.superseded_by}")
    supersedes = new.supersedes if old.id in new.supersedes else (*new.supersedes, old.id)
    return (
        new.model_copy(update={"supersedes": supersedes}),
        old.model_copy(
            update={"superseded_by": new.id, "resolution_state": ResolutionState.SUPERSEDED}
        ),
    )


def add_conflict(a: ToolMemory, b: ToolMemory) -> tuple[ToolMemory, ToolMemory]:
    """Link ``a`` and ``b`` as conflicting (symmetric ``conflicts_with``); both become
    ``conflicted`` unless already superseded.

    Raises:
        InputError: same memory or different tenants.
    """
    if a.id == b.id:
        raise InputError("a memory cannot conflict with itself")
    if a.tenant_id != b.tenant_id:
        raise InputError("memories of different tenants cannot be linked")

    def linked(m: ToolMemory, other: str) -> ToolMemory:
        conflicts = m.conflicts_with if other in m.conflicts_with else (*m.conflicts_with, other)
        update: dict[str, Any] = {"conflicts_with": conflicts}
        if m.resolution_state != ResolutionState.SUPERSEDED:
            update["resolution_state"] = ResolutionState.CONFLICTED
        return m.model_copy(update=update)

    return linked(a, b.id), linked(b, a.id)


def resolve_write(new: ToolMemory, existing: ToolMemory) -> Literal["supersede", "conflict"]:
    """How a new memory about the same subject relates to an existing one.

    ``"supersede"`` when ``new``'s provenance rank is at least ``existing``'s;
    ``"conflict"`` when it is lower (a model-derived memory never replaces a tool
    observation, nor a tool observation a user statement).
    """
    if PROVENANCE_ORDER[new.provenance_rank] > PROVENANCE_ORDER[existing.provenance_rank]:
        return "conflict"
    return "supersede"



# -- audience and lineage of links ---------------------------------------------------------

LINEAGE_STALE_KEY = "makes_stale"
"""Payload key of a new memory listing the ids of earlier reads it makes stale on its own
lineage only (reads of history it inherits from an ancestor branch): the shared record of
such a read is left unchanged, so the link cannot reach the ancestor branch or siblings."""

_LINK_READ_KINDS = frozenset({"file_read", "file_search"})
_LINK_WRITE_KINDS = frozenset({"file_write", "generated_file"})


def audience(memory: ToolMemory) -> frozenset[str | None] | None:
    """Who may see ``memory`` in a model request: ``None`` for everyone on its lineage,
    else the set of viewers — participant ids, with ``None`` standing for the shared view
    (a request assembled for no participant).

    Mirrors the assembly's visibility, ownership and promotion evaluators
    (:mod:`contextledger.assembly.families`):

    * ``branch`` / ``conversation`` visibility → everyone;
    * ``participant_private`` → the owner and ``shared_with_participants`` (never the
      shared view);
    * ``audit_only`` → the owner (nobody when it has none);
    * promotion ``not_promoted`` / ``audit_only`` → at most the owner (``None`` when the
      owner is ``None``: the shared view).
    """
    owner = memory.owner_participant_id
    vis = memory.visibility_scope
    who: frozenset[str | None] | None
    if vis is Visibility.PARTICIPANT_PRIVATE:
        who = frozenset(x for x in (owner, *memory.shared_with_participants) if x is not None)
    elif vis is Visibility.AUDIT_ONLY:
        who = frozenset({owner}) if owner is not None else frozenset()
    else:
        who = None
    if memory.promotion_policy in (PromotionPolicy.NOT_PROMOTED, PromotionPolicy.AUDIT_ONLY):
        who = frozenset({owner}) if who is None else who & {owner}
    return who


def reaches(new: ToolMemory, old: ToolMemory) -> bool:
    """Whether every viewer who may see ``old`` may also see ``new``
    (:func:`audience` of ``old`` ⊆ that of ``new``).  Only then may ``new`` supersede ``old``
    or make it stale: otherwise a viewer of ``old`` would lose it, or see it marked,
    because of a record they must not know exists (seed 000 §4.9)."""
    wide = audience(new)
    if wide is None:
        return True
    narrow = audience(old)
    return narrow is not None and narrow <= wide


def stale_note(ref: str) -> str:
    """``"file changed later (m45)"``: a read made stale by memory ``ref`` (its handle)."""
    return f"file changed later ({ref})"


_STALE_NOTE = re.compile(r"file changed later \(([^)]+)\)")


def lineage_stale_ids(memory: ToolMemory) -> tuple[str, ...]:
    """Ids listed under :data:`LINEAGE_STALE_KEY` in ``memory``'s payload (empty when
    none)."""
    ids = memory.payload.get(LINEAGE_STALE_KEY)
    if not isinstance(ids, list):
        return ()
    return tuple(x for x in ids if isinstance(x, str))


@dataclass(frozen=True, kw_only=True)
class LinkPlan:
    """The outcome of :func:`plan_links`: ``new`` (the new memory with its ``supersedes``,
    ``conflicts_with`` and :data:`LINEAGE_STALE_KEY` links; the same object when nothing
    changed) and ``updated`` (earlier memories whose stored record changes, ``(seq, id)``
    order)."""

    new: ToolMemory
    updated: tuple[ToolMemory, ...]


def _link_kind(m: ToolMemory) -> str:
    return str(m.payload.get("kind") or m.payload.get("extractor") or "")


def _view_hash(m: ToolMemory) -> str | None:
    h = m.payload.get("content_sha256") or m.payload.get("content_hash") or m.payload.get("new_content_hash")
    return str(h) if h else None


def _writes_file(m: ToolMemory) -> bool:
    """A write or edit of the file that changed it (:func:`~contextledger.memory.paths.
    changes_files`: a failed or rejected attempt changes nothing, unless it reports that
    the file changed meanwhile — "modified since read").  A shell run that wrote files
    (``files_written``) writes them too."""
    return (_link_kind(m) in _LINK_WRITE_KINDS or bool(files_written(m))) and changes_files(m)


def plan_links(new: ToolMemory, earlier: Sequence[ToolMemory]) -> LinkPlan:
    """Link ``new`` to the earlier memories of its subject on its lineage.

    ``earlier`` must hold the memories with ``new``'s ``subject_key`` on ``new``'s branch
    lineage (any order; ``new`` itself and memories with ``seq >= new.seq`` are ignored).
    For each earlier memory *old*, oldest first:

    * nothing is linked unless :func:`reaches` ``(new, old)`` — a participant-private,
      audit-only or unpromoted memory never supersedes or stales one that others see;
      a conflict also needs ``reaches(old, new)`` (both sides are marked);
    * *old* already superseded on this lineage (its ``superseded_by`` is among
      ``earlier``, or an earlier memory lists it in ``supersedes``) is skipped;
    * a read (``file_read`` / ``file_search``) becomes stale when ``new`` is a write
      (``file_write`` / ``generated_file`` that changed it; a failed attempt only when it
      reports the file changed meanwhile) or a read of the
      same view (same ``line_range`` and ``pattern``) with another content hash; a write
      of one kind becomes stale when ``new`` writes the file with the other kind;
    * otherwise, for the same kind (and, for reads, the same view), ``new`` supersedes
      *old* (:func:`supersede`) or, when its provenance rank is lower, conflicts with it
      (:func:`add_conflict`).

    Where the link is stored: when *old* lies on ``new``'s branch, on both records
    (``old.superseded_by`` / ``resolution_state`` ``stale`` with :func:`stale_note` /
    ``conflicts_with``); when *old* is history ``new``'s branch inherits from an
    ancestor, on ``new`` only (``new.supersedes``, ``new.conflicts_with``, ``new``'s
    :data:`LINEAGE_STALE_KEY` list) — *old*'s record is shared with the ancestor branch
    and its other descendants, where ``new`` does not exist.

    Returns:
        the :class:`LinkPlan` to store.
    """
    on_lineage = {m.id for m in earlier}
    named_here = on_lineage | {memory_handle(m) for m in earlier}  # what stale notes name
    superseded_here = {o for m in earlier for o in m.supersedes}
    stale_here = {o for m in earlier for o in lineage_stale_ids(m)}
    current = new
    updated: list[ToolMemory] = []
    stales = list(lineage_stale_ids(new))
    new_kind = _link_kind(new)
    for old in _ordered(earlier):
        if old.id == new.id or old.seq >= new.seq:
            continue
        successor = old.superseded_by
        if successor in on_lineage or old.id in superseded_here or (successor is None and old.resolution_state is ResolutionState.SUPERSEDED):
            continue
        if not reaches(new, old):
            continue
        shared = old.branch_id == new.branch_id
        old_kind = _link_kind(old)
        # the same view of the file: same line range, and for a search inside the file
        # the same pattern (reads have none)
        same_view = new.payload.get("line_range") == old.payload.get("line_range") and new.payload.get("pattern") == old.payload.get("pattern")
        if _made_stale(old_kind, new_kind, new, old, same_view):
            if shared:
                if old.resolution_state is not ResolutionState.STALE:
                    note = stale_note(memory_handle(new))
                    updated.append(old.model_copy(update={"resolution_state": ResolutionState.STALE, "limits": f"{old.limits}; {note}" if old.limits else note}))
            elif not _stale_on(old, named_here, stale_here) and old.id not in stales:
                stales.append(old.id)
            continue
        if old_kind != new_kind or (new_kind in _LINK_READ_KINDS and not same_view):
            continue
        if shared and successor is not None:
            # superseded by a memory off this lineage (a link recorded across branches):
            # on this branch it is current until ``new``
            old = old.model_copy(update={"superseded_by": None, "resolution_state": ResolutionState.CURRENT})
        if resolve_write(current, old) == "supersede":
            if shared:
                current, linked = supersede(current, old)
                updated.append(linked)
            elif old.id not in current.supersedes:
                current = current.model_copy(update={"supersedes": (*current.supersedes, old.id)})
        elif reaches(old, new):
            current, linked = add_conflict(current, old)
            if shared:
                updated.append(linked)
    if stales != list(lineage_stale_ids(new)):
        current = current.model_copy(update={"payload": {**current.payload, LINEAGE_STALE_KEY: stales}})
    return LinkPlan(new=current, updated=tuple(updated))


def _made_stale(old_kind: str, new_kind: str, new: ToolMemory, old: ToolMemory, same_view: bool) -> bool:
    """A read made stale by a later write or by a read of the same view showing other
    content; a write or creation made stale by a later write of the other kind (an
    edit after a creation, a re-creation after edits): the text it carries is no longer
    what the file says (writes of one kind supersede each other instead)."""
    if old_kind in _LINK_READ_KINDS:
        return _writes_file(new) or (new_kind in _LINK_READ_KINDS and same_view and _view_hash(new) != _view_hash(old))
    return old_kind in _LINK_WRITE_KINDS and new_kind != old_kind and _writes_file(new)


def _stale_on(old: ToolMemory, named_here: set[str], stale_here: set[str]) -> bool:
    """Whether ``old`` is already stale on the lineage of ``named_here`` (ids, handles): one lists
    it under :data:`LINEAGE_STALE_KEY`, or it is stale and its note names one (or none)."""
    if old.id in stale_here:
        return True
    if old.resolution_state is not ResolutionState.STALE:
        return False
    named = _STALE_NOTE.findall(old.limits or "")
    return not named or any(n in named_here for n in named)


def _successor_present(memory: ToolMemory, present: dict[str, ToolMemory]) -> str | None:
    if memory.superseded_by is not None and memory.superseded_by in present:
        return memory.superseded_by
    for other in present.values():
        if memory.id in other.supersedes and other.id != memory.id:
            return other.id
    return None


def select_current(
    memories: Sequence[ToolMemory],
    *,
    include_conflicts_when_uncertain: bool,
    comparable_confidence_delta: float = 0.1,
) -> tuple[tuple[str, ...], dict[str, str]]:
    """Choose the memories that are current among ``memories``.

    Rules (seed 000 §4.8):

    * a memory whose successor is among ``memories`` (its ``superseded_by``, or a memory
      whose ``supersedes`` lists it) is omitted with reason ``"superseded"``; the
      successor stays.  A successor outside the candidate set (another branch) does not
      hide it.
    * for a live conflict (both sides present and not superseded) both sides are kept
      when ``include_conflicts_when_uncertain`` is set or their confidences differ by at
      most ``comparable_confidence_delta``; otherwise the weaker side — lower confidence,
      then lower provenance rank, then older (lower seq) — is omitted with reason
      ``"low_confidence"``.  Kept conflict pairs are reported by :func:`conflict_marks`.

    Returns:
        ``(selected ids ordered by (seq, id), {omitted id: reason})``.
    """
    present = {m.id: m for m in memories}
    omitted: dict[str, str] = {}
    for memory in memories:
        if _successor_present(memory, present) is not None:
            omitted[memory.id] = OmissionReason.SUPERSEDED.value
    live = {mid: m for mid, m in present.items() if mid not in omitted}

    def strength(m: ToolMemory) -> tuple[float, int, int, str]:
        return (m.confidence, -PROVENANCE_ORDER[m.provenance_rank], m.seq, m.id)

    for a in _ordered(live.values()):
        for other_id in sorted(a.conflicts_with):
            b = live.get(other_id)
            if b is None or a.id in omitted or b.id in omitted:
                continue
            close = abs(a.confidence - b.confidence) <= comparable_confidence_delta + 1e-12
            if include_conflicts_when_uncertain or close:
                continue
            weaker = a if strength(a) < strength(b) else b
            omitted[weaker.id] = OmissionReason.LOW_CONFIDENCE.value
    selected = tuple(m.id for m in _ordered(present.values()) if m.id not in omitted)
    return selected, omitted


def conflict_marks(
    memories: Sequence[ToolMemory], selected_ids: Iterable[str]
) -> dict[str, tuple[str, ...]]:
    """For each selected memory, the selected memories it conflicts with (sorted ids);
    memories without a selected counterpart are absent.  The assembler marks these."""
    chosen = set(selected_ids)
    by_id = {m.id: m for m in memories}
    marks: dict[str, set[str]] = {}
    for mid in chosen:
        memory = by_id.get(mid)
        if memory is None:
            continue
        for other in memory.conflicts_with:
            if other in chosen:
                marks.setdefault(mid, set()).add(other)
                marks.setdefault(other, set()).add(mid)
    return {k: tuple(sorted(v)) for k, v in sorted(marks.items())}


def lost_payload_note(call_id: str | None) -> str:
    """``"(raw payload lost; produced by call_004)"``, or ``"(raw payload lost; producing
    call unknown)"`` when no call id is recorded (an id is never invented)."""
    return f"(raw payload lost; produced by {call_id})" if call_id else "(raw payload lost; producing call unknown)"


def _mark_lost(summary: str, call_id: str | None) -> str:
    """``summary`` with :func:`lost_payload_note` at the end of its first line (once)."""
    note = lost_payload_note(call_id)
    if note in summary:
        return summary
    first, sep, rest = summary.partition("\n")
    return f"{first} {note}{sep}{rest}"


def repair_provenance(
    memory: ToolMemory,
    *,
    artifact_exists: Callable[[str], bool],
    artifact_hash_ok: Callable[[str], bool],
    candidates: Sequence[ToolArtifact],
    max_attempts: int = 3,
) -> tuple[ToolMemory, Literal["ok", "repaired", "unverifiable"]]:
    """Check ``memory``'s provenance and repair it without fabricating ids.

    * every referenced artifact exists and its hash verifies → ``(memory, "ok")``,
      unchanged;
    * otherwise one repair attempt is made (``repair_attempts`` + 1): a candidate with the
      same tenant, ``call_id``, tool name and ``sha256`` (``payload["sha256"]``) that itself
      exists and verifies is looked for (first by ``(seq, id)``); each broken reference
      and source id is re-pointed to it, resolution ``repaired`` → ``"repaired"``;
    * no such candidate, no recorded sha256, or ``max_attempts`` already reached →
      resolution ``unverifiable`` → ``"unverifiable"`` (no attempt is counted past the
      limit; seed 000 §8 R8 bounds repair work).  The memory is then explicitly marked
      (seed 000 §9.2, §9.4: broken provenance is repaired or marked, never given a
      fabricated id): its summary's first line gains :func:`lost_payload_note` — the
      producing call id recorded on the memory (else on the broken artifact's row, if
      it is still there) — so every evidence line that renders the memory still cites
      the call that produced it and says its raw payload is no longer stored.
    """
    broken = [
        ref.artifact_id
        for ref in memory.provenance_refs
        if not artifact_exists(ref.artifact_id) or not artifact_hash_ok(ref.artifact_id)
    ]
    broken.extend(
        a
        for a in memory.source_artifact_ids
        if a not in broken and (not artifact_exists(a) or not artifact_hash_ok(a))
    )
    if not broken:
        return memory, "ok"
    producer = memory.call_id or next(
        (c.call_id for c in candidates if c.id in broken and c.call_id), None
    )
    if memory.repair_attempts >= max_attempts:
        return memory.model_copy(
            update={
                "resolution_state": ResolutionState.UNVERIFIABLE,
                "summary": _mark_lost(memory.summary, producer),
            }
        ), "unverifiable"
    attempts = memory.repair_attempts + 1
    digest = memory.payload.get("sha256")
    match: ToolArtifact | None = None
    if isinstance(digest, str) and memory.call_id is not None:
        for cand in sorted(candidates, key=lambda c: (c.seq, c.id)):
            if (
                cand.tenant_id == memory.tenant_id
                and cand.call_id == memory.call_id
                and cand.tool_name == memory.source_tool
                and cand.sha256 == digest
                and cand.id not in broken
                and artifact_exists(cand.id)
                and artifact_hash_ok(cand.id)
            ):
                match = cand
                break
    if match is None:
        return (
            memory.model_copy(
                update={
                    "resolution_state": ResolutionState.UNVERIFIABLE,
                    "repair_attempts": attempts,
                    "summary": _mark_lost(memory.summary, producer),
                }
            ),
            "unverifiable",
        )
    refs = tuple(
        ref.model_copy(update={"artifact_id": match.id}) if ref.artifact_id in broken else ref
        for ref in memory.provenance_refs
    )
    sources = tuple(
        dict.fromkeys(match.id if a in broken else a for a in memory.source_artifact_ids)
    )
    payload = dict(memory.payload)
    if payload.get("artifact") in broken:
        payload["artifact"] = match.id
    summary = memory.summary
    for old_ref in (*broken, artifact_handle(memory)):
        summary = summary.replace(f"[artifact {old_ref},", f"[artifact {artifact_handle(match)},")
    return (
        memory.model_copy(
            update={
                "summary": summary,
                "provenance_refs": refs,
                "source_artifact_ids": sources,
                "payload": payload,
                "resolution_state": ResolutionState.REPAIRED,
                "repair_attempts": attempts,
            }
        ),
        "repaired",
    )
