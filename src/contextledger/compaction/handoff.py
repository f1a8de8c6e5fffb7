"""The handoff template of a compaction summary, its validation and its rendering.

Seed 001 §10 ("圧縮サマリーの書き方"): a compact summary is a *handoff document*, not a
story of what happened.  Seed 001 §6 problem 5 lists what it must keep (goal, constraints
that must not be broken, current phase, files read, files modified, failed attempts,
latest test result, next step) and §4.6 adds the source range and artifact references
(summary drift must not rewrite constraints, failure causes or open problems).

A handoff document is a JSON-serialisable mapping with exactly these keys:

==========================  =============================================================
key                          value
==========================  =============================================================
``user_goal``               ``{"text", "message_id", "truncated", "later_requests": [...]}``
``hard_constraints``        list of ``{"text" (verbatim), "rule_id", "source", "origin",
                            "strength"}``
``current_state``           ``{"stopped_at", "unresolved_calls", "checkpoint",
                            "skill_state"}``
``verified_facts``          list of ``{"fact", "tool", "memory_id", "seq",
                            "source_refs": [memory id, artifact ids…]}``
``files_read``              list of ``{"path", "staleness", "read", "memory_id",
                            "artifact_id", "seq"}``; ``staleness`` is ``"current"`` or
                            starts with ``"stale: "``
``files_modified``          list of ``{"path", "change", "reason", "writes",
                            "memory_ids", "artifact_ids"}``
``failed_attempts``         list of ``{"tool", "attempt", "error", "status", "memory_id",
                            "artifact_id", "seq"}``
``latest_verification``     ``{"command", "result", "evidence", "memory_id",
                            "artifact_id", "seq"}``
``next_step``               ``{"text", "message_id", "plan"}``: the newest user request
                            and the assistant's last stated plan (``{"text",
                            "message_id"}`` or :data:`NONE_RECORDED`); ``{"text",
                            "message_id"}`` (the plan) when no user request was recorded
``source_range``            ``{"from_seq", "to_seq"}`` (inclusive sequence numbers)
``omitted`` (optional)      section name → how many entries were left out by a cap
``prose`` (optional)        model-written notes; only ever *added* by a summariser
==========================  =============================================================

A section with nothing to say holds the string :data:`NONE_RECORDED`; it is never
omitted and never empty.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from contextledger.errors import InputError
from contextledger.handles import HANDLE_PATTERN, not_shown

__all__ = [
    "HANDOFF_FORMAT",
    "HANDOFF_SECTIONS",
    "NONE_RECORDED",
    "SECTION_TITLES",
    "HandoffError",
    "render_handoff",
    "validate_handoff",
]

HANDOFF_FORMAT = "contextledger.handoff/1"
"""Value of ``metadata["handoff_format"]`` on every compaction message this package writes."""

HANDOFF_SECTIONS: tuple[str, ...] = (
    "user_goal",
    "hard_constraints",
    "current_state",
    "verified_facts",
    "files_read",
    "files_modified",
    "failed_attempts",
    "latest_verification",
    "next_step",
)
"""The mandatory sections, in template order (seed 001 §10)."""

SECTION_TITLES: Mapping[str, str] = {
    "user_goal": "User goal",
    "hard_constraints": "Hard constraints",
    "current_state": "Current state",
    "verified_facts": "Verified facts",
    "files_read": "Files read",
    "files_modified": "Files modified",
    "failed_attempts": "Failed attempts",
    "latest_verification": "Latest verification",
    "next_step": "Next step",
}
"""Heading of each section in the rendered text."""

NONE_RECORDED = "none recorded"
"""The explicit value of a section (or field) with nothing to report."""

_OPTIONAL_KEYS = frozenset({"source_range", "omitted", "prose"})


class HandoffError(InputError):
    """A handoff document breaks the template.

    Attributes:
        section: the offending section or key (``None`` when the document itself is not a
            mapping).
        reason: what is wrong, in one sentence.
    """

    def __init__(self, section: str | None, reason: str) -> None:
        self.section = section
        self.reason = reason
        where = f"handoff section {section!r}" if section else "handoff document"
        super().__init__(f"{where}: {reason}")


def _empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, Mapping | Sequence):
        return len(value) == 0
    return False


def _entries(section: str, value: Any, required: Sequence[str]) -> None:
    """Check a list section: every entry a mapping with non-empty ``required`` fields."""
    if isinstance(value, str):
        if value != NONE_RECORDED:
            raise HandoffError(section, f"a list section holds entries or {NONE_RECORDED!r}, not {value[:40]!r}")
        return
    if not isinstance(value, list):
        raise HandoffError(section, f"expected a list of entries or {NONE_RECORDED!r}, got {type(value).__name__}")
    for i, entry in enumerate(value):
        if not isinstance(entry, Mapping):
            raise HandoffError(section, f"entry {i} is not a mapping")
        for key in required:
            if _empty(entry.get(key)):
                raise HandoffError(section, f"entry {i} has no {key!r}")


def validate_handoff(doc: Mapping[str, Any]) -> None:
    """Reject a document that breaks the handoff template.

    Checks, in order: ``doc`` is a mapping; every section of :data:`HANDOFF_SECTIONS` is
    present and non-empty (an empty section must say :data:`NONE_RECORDED`); list
    sections hold mappings with their identifying fields (constraints a ``text``, facts
    their ``source_refs``, files a ``path`` and a ``staleness`` of ``"current"`` or
    ``"stale: …"``); ``source_range`` has integer ``from_seq`` ≤ ``to_seq``; no key other
    than the sections, ``source_range``, ``omitted`` and ``prose`` (a string) is present.

    Raises:
        HandoffError: naming the first offending section and why.
    """
    if not isinstance(doc, Mapping):
        raise HandoffError(None, f"expected a mapping, got {type(doc).__name__}")
    for name in HANDOFF_SECTIONS:
        if name not in doc:
            raise HandoffError(name, f"mandatory section is missing (write {NONE_RECORDED!r} when there is nothing to report)")
        if _empty(doc[name]):
            raise HandoffError(name, f"section is empty; write {NONE_RECORDED!r} explicitly")
    _entries("hard_constraints", doc["hard_constraints"], ("text",))
    _entries("verified_facts", doc["verified_facts"], ("fact", "source_refs"))
    _entries("files_read", doc["files_read"], ("path", "staleness"))
    _entries("files_modified", doc["files_modified"], ("path", "change"))
    _entries("failed_attempts", doc["failed_attempts"], ("error",))
    files = doc["files_read"]
    if isinstance(files, list):
        for i, entry in enumerate(files):
            staleness = str(entry["staleness"])
            if staleness != "current" and not staleness.startswith("stale: "):
                raise HandoffError("files_read", f"entry {i} has staleness {staleness!r}; expected 'current' or 'stale: …'")
    for name in ("user_goal", "current_state", "latest_verification", "next_step"):
        value = doc[name]
        if isinstance(value, str) and value != NONE_RECORDED:
            raise HandoffError(name, f"expected a mapping or {NONE_RECORDED!r}")
    rng = doc.get("source_range")
    if not isinstance(rng, Mapping):
        raise HandoffError("source_range", "the source range {from_seq, to_seq} is missing")
    lo, hi = rng.get("from_seq"), rng.get("to_seq")
    if not isinstance(lo, int) or not isinstance(hi, int) or lo > hi:
        raise HandoffError("source_range", f"expected integers from_seq <= to_seq, got {lo!r}..{hi!r}")
    extra = sorted(set(doc) - set(HANDOFF_SECTIONS) - _OPTIONAL_KEYS)
    if extra:
        raise HandoffError(extra[0], "unknown key; only the template sections, source_range, omitted and prose are allowed")
    if "prose" in doc and not isinstance(doc["prose"], str):
        raise HandoffError("prose", "prose must be a string")


# -- rendering ----------------------------------------------------------------------------

_SKIP_FIELDS = frozenset({"text", "fact", "path", "seq"})


_HANDLES: dict[str, str] = {}


def _h(ref: Any, handles: Mapping[str, str]) -> str:
    """``ref`` as the payload names it: its handle when ``handles`` has one."""
    return handles.get(str(ref), str(ref))


_IS_HANDLE = re.compile(HANDLE_PATTERN)


def _cite(names: Sequence[str]) -> str:
    """``names`` joined for a ``[…]`` source list: the memory and artifact handles last,
    marked as not shown (:func:`contextledger.handles.not_shown` — the summary stands in
    for the records it covers; an assembly that does show one drops the mark)."""
    unique = list(dict.fromkeys(names))
    handles = [n for n in unique if _IS_HANDLE.fullmatch(n)]
    others = [n for n in unique if not _IS_HANDLE.fullmatch(n)]
    return ", ".join(others + ([not_shown(handles)] if handles else []))


def _refs(entry: Mapping[str, Any], handles: Mapping[str, str] = _HANDLES) -> str:
    ids: list[str] = []
    for key in ("memory_id", "artifact_id", "message_id"):
        v = entry.get(key)
        if isinstance(v, str) and v:
            ids.append(v)
    for key in ("memory_ids", "artifact_ids"):
        v = entry.get(key)
        if isinstance(v, list):
            ids.extend(str(x) for x in v)
    return f" [{_cite([_h(i, handles) for i in ids])}]" if ids else ""


def _render_entry(section: str, entry: Mapping[str, Any], handles: Mapping[str, str] = _HANDLES) -> str:
    if section == "hard_constraints":
        return f"- {entry['text']} (source: {_h(entry.get('source') or entry.get('rule_id'), handles)})"
    if section == "verified_facts":
        return f"- {entry['fact']} [{_cite([_h(r, handles) for r in entry['source_refs']])}]"
    if section == "files_read":
        return f"- {entry['path']} — {entry['staleness']}; {entry.get('read', '')}{_refs(entry, handles)}"
    if section == "files_modified":
        reason = entry.get("reason") or NONE_RECORDED
        return f"- {entry['path']} — {entry['change']}; reason: {reason}{_refs(entry, handles)}"
    if section == "failed_attempts":
        return f"- {entry.get('tool', '?')} {entry.get('attempt', '')} → {entry.get('status', 'failed')}: {entry['error']}{_refs(entry, handles)}"
    body = "; ".join(f"{k}: {v}" for k, v in entry.items() if k not in _SKIP_FIELDS)
    return f"- {body}"


def _render_mapping(section: str, value: Mapping[str, Any], handles: Mapping[str, str] = _HANDLES) -> list[str]:
    lines: list[str] = []
    if section == "user_goal":
        lines.append(str(value.get("text", NONE_RECORDED)))
        later = value.get("later_requests")
        if isinstance(later, list) and later:
            lines.append("Later requests:")
            lines.extend(f"- {r.get('text')} [{_h(r.get('message_id'), handles)}]" for r in later if isinstance(r, Mapping))
        return lines
    if section == "next_step":
        return _render_next_step(value, handles)
    for key, item in value.items():
        if key in ("memory_id", "artifact_id", "message_id", "seq"):
            continue
        if isinstance(item, list):
            lines.append(f"{key}:")
            for sub in item:
                lines.append(f"  - {_flat(sub)}")
        else:
            lines.append(f"{key}: {_flat(item)}")
    refs = _refs(value, handles)
    if refs:
        lines.append(f"sources:{refs}")
    return lines


def _render_next_step(value: Mapping[str, Any], handles: Mapping[str, str]) -> list[str]:
    """``Latest user request: …`` and ``Last stated plan: …`` lines (with their handles);
    the plain text of a document without a ``plan`` key."""
    text = f"{value.get('text', NONE_RECORDED)}{_refs(value, handles)}"
    if "plan" not in value:
        return [text]
    plan = value["plan"]
    said = f"{plan.get('text', NONE_RECORDED)}{_refs(plan, handles)}" if isinstance(plan, Mapping) else str(plan)
    return [f"Latest user request: {text}", f"Last stated plan: {said}"]


def _flat(value: Any) -> str:
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {_flat(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_flat(v) for v in value)
    return str(value)


def render_handoff(doc: Mapping[str, Any], handles: Mapping[str, str] | None = None) -> str:
    """The text a model sees for a handoff document.

    ``handles`` maps a cited record id to what the text names it by (``m12``, ``a12``,
    ``message 12``: :mod:`contextledger.handles`); ids without one are quoted as they are.

    Layout: a header naming the covered sequence range and that every covered record
    stays rehydratable, then one ``<Title>:`` block per section in template order
    (entries as ``- …`` lines with their record handles or ids in brackets, :data:`NONE_RECORDED`
    for empty sections), then ``Notes (model-written, unverified):`` when ``prose`` is set.

    Raises:
        HandoffError: ``doc`` is not a valid handoff (see :func:`validate_handoff`).
    """
    validate_handoff(doc)
    handles = handles or _HANDLES
    rng = doc["source_range"]
    out = [
        f"[contextledger handoff summary of seq {rng['from_seq']}-{rng['to_seq']}; "
        "every covered record remains in the ledger and can be rehydrated by its handle]"
    ]
    omitted = doc.get("omitted") or {}
    for name in HANDOFF_SECTIONS:
        value = doc[name]
        out.append("")
        out.append(f"{SECTION_TITLES[name]}:")
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, list):
            out.extend(_render_entry(name, e, handles) for e in value)
        else:
            out.extend(_render_mapping(name, value, handles))
        if isinstance(omitted, Mapping) and omitted.get(name):
            out.append(f"(+{omitted[name]} older entries kept in the ledger)")
    prose = doc.get("prose")
    if isinstance(prose, str) and prose.strip():
        out.append("")
        out.append("Notes (model-written, unverified):")
        out.append(prose.strip())
    return "\n".join(out)
