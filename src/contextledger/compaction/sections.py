"""Deterministic builders of each handoff section from runtime-graph records.

Every function here is pure: records in, JSON-serialisable section out, ordered by
``(seq, id)`` — no clock except the explicit ``now``, no randomness, no dependence on dict
order.  Which records feed which section (seed 001 §10, §6 problem 5):

* ``user_goal``: the first user chat message of the lineage in the user's own words
  (injected text removed), verbatim (capped), plus the later user requests inside the
  covered range;
* ``hard_constraints``: see :func:`hard_constraints`;
* ``current_state``: the last covered unit, unresolved calls, latest checkpoint and skill
  state;
* ``verified_facts``: current memories (not stale at ``now``, not superseded, not failed)
  other than file reads/writes, with their memory and artifact ids;
* ``files_read`` / ``files_modified``: file-read and applied file-write memories by path;
* ``failed_attempts``: failed/abandoned calls, rejected writes, commands that failed;
* ``latest_verification``: the newest test run, else the newest command with an exit code;
* ``next_step``: the newest user request of the lineage (covered or in the raw tail), with
  the final sentence (code fences skipped) of the last covered assistant text as its
  plan when no covered request came after that text;

Only records another participant may see feed a section: branch/conversation visibility,
not ``not_promoted``/``audit_only``, privacy class ``public``/``internal``/``user_data``
(seed 000 §4.9, §8 R3, R11) — the compaction message is branch-visible.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from contextledger.compaction.boundary import Boundary
from contextledger.compaction.handoff import NONE_RECORDED
from contextledger.compaction.text import cap_text, message_text, one_line, prose_text
from contextledger.ingest.preambles import user_text
from contextledger.memory.freshness import is_stale, staleness_deadline
from contextledger.memory.links import file_staleness
from contextledger.policy.constraints import extract_user_constraints, split_sentences
from contextledger.policy.rules import Rule
from contextledger.records.enums import (
    AuthorityLevel,
    MessageKind,
    PrivacyClass,
    PromotionPolicy,
    ResolutionState,
    Role,
    ToolCallStatus,
    Visibility,
)
from contextledger.records.models import (
    ContinuationCheckpoint,
    Message,
    SkillState,
    ToolCall,
    ToolMemory,
)

__all__ = [
    "MAX_FACTS",
    "MAX_FAILED_ATTEMPTS",
    "MAX_FILES",
    "MAX_GOAL_CHARS",
    "SHAREABLE_PRIVACY",
    "cap_text",
    "current_state",
    "failed_attempts",
    "files_modified",
    "files_read",
    "hard_constraints",
    "latest_verification",
    "message_text",
    "next_step",
    "shareable_memory",
    "shareable_message",
    "user_goal",
    "user_requests",
    "verified_facts",
]

MAX_GOAL_CHARS = 4000
"""Longest user goal kept verbatim (characters); the message id points at the rest."""
MAX_REQUEST_CHARS = 600
"""Longest later user request kept (characters)."""
MAX_LATER_REQUESTS = 10
"""Newest later user requests kept."""
MAX_FACTS = 25
"""Newest verified facts kept; older ones are counted in ``omitted``."""
MAX_FILES = 40
"""Most recently touched paths kept in ``files_read`` and ``files_modified`` each."""
MAX_FAILED_ATTEMPTS = 20
"""Newest failed attempts kept."""
MAX_LINE_CHARS = 300
"""Longest single fact, error, reason or attempt line (characters)."""
MAX_WRITES_CITED = 5
"""Newest writes of one path whose change and ids ``files_modified`` lists."""

VERIFY_COMMAND = re.compile(
    r"(?:^|&&|\|\||;|\|)\s*(?:\S+\s+){0,2}?(?:test|check|lint|build|compile|typecheck|mypy|ruff|"
    r"flake8|pylint|eslint|tsc|credo|clippy|vet|verify|make)(?=\s|$)",
    re.IGNORECASE,
)
"""A verification command when no test run was recognised: one of these words as the
first, second or third word of a command segment on the command's first line
(``mix test``, ``cargo build``, ``npm run lint``, ``mypy src``)."""

SHAREABLE_PRIVACY = frozenset({PrivacyClass.PUBLIC, PrivacyClass.INTERNAL, PrivacyClass.USER_DATA})
"""Privacy classes whose derived text may enter a branch-visible handoff."""

_SHARED_VISIBILITY = frozenset({Visibility.BRANCH, Visibility.CONVERSATION})
_WRITE_KINDS = frozenset({"file_write", "generated_file"})
_FILE_KINDS = frozenset({"file_read", "file_write", "generated_file"})
_CHANGED_BY = re.compile(r"file changed later \(([^)]+)\)")
_ARTIFACT_REF = re.compile(r" ?\[artifact [^\]]*\]")


def shareable_message(msg: Message) -> bool:
    """Whether ``msg`` may feed a branch-visible handoff."""
    return msg.visibility in _SHARED_VISIBILITY and msg.privacy_class in SHAREABLE_PRIVACY


def shareable_memory(mem: ToolMemory) -> bool:
    """Whether ``mem`` may feed a branch-visible handoff."""
    return (
        mem.visibility_scope in _SHARED_VISIBILITY
        and mem.promotion_policy not in (PromotionPolicy.NOT_PROMOTED, PromotionPolicy.AUDIT_ONLY)
        and mem.privacy_class in SHAREABLE_PRIVACY
    )


def _kind(mem: ToolMemory) -> str:
    return str(mem.payload.get("extractor") or "")


def _artifact(mem: ToolMemory) -> str | None:
    return mem.source_artifact_ids[0] if mem.source_artifact_ids else None


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _first_line(mem: ToolMemory) -> str:
    """The summary's first line without its artifact reference (ids are cited apart)."""
    return cap_text(_ARTIFACT_REF.sub("", mem.summary.split("\n", 1)[0]), MAX_LINE_CHARS)


def _is_user_chat(msg: Message) -> bool:
    return msg.role is Role.USER and msg.kind == MessageKind.CHAT


def _ordered(memories: Iterable[ToolMemory]) -> list[ToolMemory]:
    return sorted(memories, key=lambda m: (m.seq, m.id))


# -- user goal --------------------------------------------------------------------------


def user_requests(messages: Sequence[Message]) -> list[tuple[Message, str]]:
    """``(message, the user's own words)`` of every user request in ``messages`` (seq
    order): shareable user chat messages with words of the user's once client-injected
    text is removed (:func:`~contextledger.ingest.preambles.user_text`), scaffold
    demonstrations (``is_demo``) left out."""
    own = [(m, user_text(message_text(m))) for m in messages if _is_user_chat(m) and shareable_message(m) and not m.metadata.get("is_demo")]
    return [(m, text) for m, text in own if text]


def user_goal(messages: Sequence[Message], covered_ids: frozenset[str]) -> dict[str, Any] | str:
    """The first user chat message of the lineage in the user's own words (verbatim up to
    :data:`MAX_GOAL_CHARS`) and the newest :data:`MAX_LATER_REQUESTS` other ones of the
    covered range.  The user's words only: client-injected text
    (:func:`~contextledger.ingest.preambles.user_text`: ``<system-reminder>``, Codex's
    ``<environment_context>`` …) is never quoted as theirs, a message of nothing else and a
    scaffold demonstration (``is_demo``) are no request."""
    users = user_requests(messages)
    if not users:
        return NONE_RECORDED
    first, text = users[0]
    later = [(m, t) for m, t in users[1:] if m.id in covered_ids][-MAX_LATER_REQUESTS:]
    return {
        "text": text if len(text) <= MAX_GOAL_CHARS else text[: MAX_GOAL_CHARS - 1] + "…",
        "message_id": first.id,
        "truncated": len(text) > MAX_GOAL_CHARS,
        "later_requests": [{"text": cap_text(t, MAX_REQUEST_CHARS), "message_id": m.id} for m, t in later],
    }


# -- hard constraints -------------------------------------------------------------------


def _constraint(rule: Mapping[str, Any], origin: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "text": str(rule.get("text", "")),
        "rule_id": str(rule.get("id", "")),
        "source": str(rule.get("source_message_id") or rule.get("source") or ""),
        "origin": origin,
        "strength": str(rule.get("strength", "hard")),
    }
    if rule.get("source_message_id"):
        entry["message_id"] = str(rule["source_message_id"])
    return entry


def hard_constraints(
    rules: Sequence[Mapping[str, Any]],
    extra_rules: Sequence[Rule],
    messages: Sequence[Message],
    covered_ids: frozenset[str],
    carried: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """Every constraint the next model must still obey, verbatim; never capped.

    In order: pinned rules of the lineage (``origin "pinned"``; by the stating message's
    seq, then position in its text), other stored
    rules (``"project"``), ``extra_rules`` (``"project"``), constraints stated in covered
    user chat messages that were not pinned (re-extracted with
    :func:`~contextledger.policy.constraints.extract_user_constraints`, ``"stated"``),
    then entries of the previous compaction not already present (``"carried"``).
    Duplicates (same rule id, or the same verbatim text) are listed once.
    """
    out: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    seen_text: set[str] = set()

    def add(entry: dict[str, Any]) -> None:
        rid = entry["rule_id"]
        if not entry["text"].strip() or (rid and rid in seen_ids) or entry["text"] in seen_text:
            return
        if rid:
            seen_ids.add(rid)
        seen_text.add(entry["text"])
        out.append(entry)

    texts = {m.id: message_text(m) for m in messages}

    def position(rule: Mapping[str, Any]) -> tuple[int, int, str]:
        source = texts.get(str(rule.get("source_message_id") or ""), "")
        at = source.find(str(rule.get("text", ""))) if source else -1
        return (int(rule.get("_seq", 0)), at, str(rule.get("id")))

    ordered = sorted(rules, key=position)
    for r in ordered:
        if r.get("pinned"):
            add(_constraint(r, "pinned"))
    for r in ordered:
        if not r.get("pinned"):
            add(_constraint(r, "project"))
    for rule in sorted(extra_rules, key=lambda r: (r.order, r.id)):
        add(_constraint(rule.model_dump(mode="json"), "project"))
    for m in messages:
        if m.id in covered_ids and _is_user_chat(m) and m.authority is AuthorityLevel.USER:
            for rule in extract_user_constraints(message_text(m), message_id=m.id, order=m.seq):
                add(_constraint(rule.model_dump(mode="json"), "stated"))
    for entry in carried:
        if isinstance(entry, Mapping) and isinstance(entry.get("text"), str):
            kept = {
                "text": entry["text"],
                "rule_id": str(entry.get("rule_id", "")),
                "source": str(entry.get("source", "")),
                "origin": "carried",
                "strength": str(entry.get("strength", "hard")),
            }
            if entry.get("message_id"):
                kept["message_id"] = str(entry["message_id"])
            add(kept)
    return out


# -- current state ----------------------------------------------------------------------


def _args_text(call: ToolCall) -> str:
    return one_line(call.arguments_json, 160)


def _unit_line(boundary: Boundary) -> str:
    talk = [u for u in boundary.covered if u.kind in ("user", "assistant", "exchange", "observation")]
    if not talk:
        return NONE_RECORDED
    u = talk[-1]
    head = u.messages[0]
    if u.calls:
        calls = "; ".join(f"{c.tool_name}({_args_text(c)}) → {c.status.value}" for c in u.calls)
        text = prose_text(head, 200)
        said = f" after saying: {text}" if text else ""
        return f"seq {u.seq}: assistant called {calls}{said}"
    if head.role is Role.USER:  # the user's own words only: injected text is the client's
        words = cap_text(" ".join(split_sentences(user_text(message_text(head)))), MAX_LINE_CHARS)
        return f"seq {u.seq}: user said: {words}" if words else f"seq {u.seq}: client context (no words of the user's)"
    return f"seq {u.seq}: assistant replied: {prose_text(head, MAX_LINE_CHARS)}"


def current_state(
    boundary: Boundary,
    calls: Sequence[ToolCall],
    checkpoints: Sequence[ContinuationCheckpoint],
    skill_states: Sequence[SkillState],
) -> dict[str, Any]:
    """Where the task stopped at the end of the covered range.

    ``stopped_at`` describes the last covered conversational unit; ``unresolved_calls``
    lists covered calls still pending or awaiting approval; ``checkpoint`` / ``skill_state``
    are the newest shareable ones with ``seq`` ≤ ``to_seq``.  Absent values are
    :data:`NONE_RECORDED`.
    """
    covered_calls = boundary.covered_call_ids
    pending = [c for c in calls if c.call_id in covered_calls and c.status.unresolved]
    ckpts = [c for c in checkpoints if c.seq <= boundary.to_seq and c.visibility_scope in _SHARED_VISIBILITY]
    skills = [s for s in skill_states if s.seq <= boundary.to_seq and s.visibility_scope in _SHARED_VISIBILITY]
    checkpoint: dict[str, Any] | str = NONE_RECORDED
    if ckpts:
        c = ckpts[-1]
        checkpoint = {
            "checkpoint_id": c.id,
            "pending_call_ids": list(c.pending_call_ids),
            "subagent_batch_id": c.subagent_batch_id,
            "retry_contract": json.dumps(c.retry_contract, sort_keys=True),
            "state": json.dumps(c.state, sort_keys=True, ensure_ascii=False),
        }
    skill: dict[str, Any] | str = NONE_RECORDED
    if skills:
        s = skills[-1]
        skill = {
            "loaded_skills": list(s.loaded_skills),
            "active_profile": s.active_profile or NONE_RECORDED,
            "usable_tools": list(s.usable_tools),
        }
    return {
        "stopped_at": _unit_line(boundary),
        "unresolved_calls": [
            {"call_id": c.call_id, "tool": c.tool_name, "status": c.status.value, "arguments": _args_text(c)} for c in pending
        ]
        or NONE_RECORDED,
        "checkpoint": checkpoint,
        "skill_state": skill,
    }


# -- facts, files, failures, verification ------------------------------------------------


def _structurally_current(mem: ToolMemory) -> bool:
    return (
        mem.superseded_by is None
        and mem.resolution_state in (ResolutionState.CURRENT, ResolutionState.REPAIRED)
        and mem.status is ToolCallStatus.SUCCEEDED
    )


def verified_facts(covered: Sequence[ToolMemory], now: datetime) -> tuple[list[dict[str, Any]], int]:
    """Current facts with their sources, newest :data:`MAX_FACTS` in seq order, and how
    many current facts were left out."""
    facts = [
        m
        for m in _ordered(covered)
        if _kind(m) not in _FILE_KINDS
        and _structurally_current(m)
        and not _failed_payload(m)
        and not is_stale(m, now)
    ]
    kept = facts[-MAX_FACTS:]
    return (
        [
            {
                "fact": _first_line(m),
                "tool": m.source_tool,
                "memory_id": m.id,
                "seq": m.seq,
                "source_refs": [m.id, *m.source_artifact_ids],
            }
            for m in kept
        ],
        len(facts) - len(kept),
    )


def _path_of(mem: ToolMemory) -> str | None:
    path = mem.payload.get("path")
    if isinstance(path, str) and path:
        return path
    if mem.subject_key and mem.subject_key.startswith("file:"):
        return mem.subject_key[len("file:") :]
    return None


def _staleness(mem: ToolMemory, changed: Mapping[str, str], now: datetime) -> str:
    if mem.id in changed:
        return f"stale: changed by {changed[mem.id]}"
    if mem.resolution_state is ResolutionState.STALE:
        found = _CHANGED_BY.search(mem.limits or "")
        return f"stale: changed by {found.group(1)}" if found else "stale: marked stale in the ledger"
    deadline = staleness_deadline(mem)
    if deadline is not None and now >= deadline:
        return f"stale: observed {_iso(mem.observed_at)}, expired {_iso(deadline)}"
    return "current"


def files_read(covered: Sequence[ToolMemory], lineage: Sequence[ToolMemory], now: datetime) -> tuple[list[dict[str, Any]], int]:
    """The latest covered successful read of each path, with its staleness as of ``now``
    against the whole lineage (a write in the raw tail makes a covered read stale):
    ``"current"``, ``"stale: changed by <memory id>"`` or ``"stale: observed …, expired …"``.
    Newest :data:`MAX_FILES` paths (seq order of their latest read) and the number left out."""
    changed = file_staleness([m for m in lineage if shareable_memory(m)])
    latest: dict[str, ToolMemory] = {}
    for m in _ordered(covered):
        path = _path_of(m)
        if _kind(m) == "file_read" and m.status is ToolCallStatus.SUCCEEDED and path:
            latest[path] = m
    reads = sorted(latest.items(), key=lambda kv: (kv[1].seq, kv[1].id))
    kept = reads[-MAX_FILES:]
    return (
        [
            {
                "path": path,
                "staleness": _staleness(m, changed, now),
                "read": _first_line(m),
                "memory_id": m.id,
                "artifact_id": _artifact(m),
                "seq": m.seq,
            }
            for path, m in kept
        ],
        len(reads) - len(kept),
    )


def _applied_write(mem: ToolMemory) -> bool:
    return _kind(mem) in _WRITE_KINDS and mem.status is ToolCallStatus.SUCCEEDED and mem.payload.get("applied", True) is not False


def _change(mem: ToolMemory) -> str:
    """``"edit +3 -1"`` when line counts were parsed, else the summary's first line
    without the tool prefix and artifact reference."""
    p = mem.payload
    if p.get("added_lines") is not None or p.get("removed_lines") is not None:
        op = str(p.get("operation") or mem.source_tool)
        return f"{op} +{p.get('added_lines') if p.get('added_lines') is not None else '?'} -{p.get('removed_lines') if p.get('removed_lines') is not None else '?'}"
    return cap_text(_first_line(mem).split(": ", 1)[-1], 160)


def reason_of(call_id: str | None, calls_by_id: Mapping[str, ToolCall], messages_by_id: Mapping[str, Message]) -> str | None:
    """The final sentence of the assistant text that requested ``call_id``, if any."""
    call = calls_by_id.get(call_id or "")
    msg = messages_by_id.get(call.message_id) if call else None
    if msg is None or not shareable_message(msg):
        return None
    sentences = split_sentences(message_text(msg))
    return cap_text(sentences[-1], MAX_LINE_CHARS) if sentences else None


def files_modified(
    covered: Sequence[ToolMemory],
    calls_by_id: Mapping[str, ToolCall],
    messages_by_id: Mapping[str, Message],
) -> tuple[list[dict[str, Any]], int]:
    """Each path changed by an applied covered write (``file_write``/``generated_file``):
    the changes and memory/artifact ids of the newest :data:`MAX_WRITES_CITED` writes, the
    number of writes, and the reason (final sentence of the requesting assistant text,
    else :data:`NONE_RECORDED`)."""
    by_path: dict[str, list[ToolMemory]] = {}
    for m in _ordered(covered):
        if not _applied_write(m):
            continue
        paths = [p for p in m.payload.get("paths") or [] if isinstance(p, str) and p] or [p for p in [_path_of(m)] if p]
        for path in dict.fromkeys(paths):
            by_path.setdefault(path, []).append(m)
    items = sorted(by_path.items(), key=lambda kv: (kv[1][-1].seq, kv[1][-1].id, kv[0]))
    kept = items[-MAX_FILES:]
    out: list[dict[str, Any]] = []
    for path, mems in kept:
        last = mems[-1]
        cited = mems[-MAX_WRITES_CITED:]
        out.append(
            {
                "path": path,
                "change": "; ".join(_change(m) for m in cited),
                "writes": len(mems),
                "reason": reason_of(last.call_id, calls_by_id, messages_by_id) or NONE_RECORDED,
                "memory_ids": [m.id for m in cited],
                "artifact_ids": [a for m in cited for a in m.source_artifact_ids],
            }
        )
    return out, len(items) - len(kept)


def _failed_payload(mem: ToolMemory) -> bool:
    p = mem.payload
    if _kind(mem) in _WRITE_KINDS and p.get("applied") is False:
        return True
    return _kind(mem) == "command" and p.get("status") == "failed"


def _error_line(mem: ToolMemory) -> str:
    p = mem.payload
    for key in ("error_line", "error"):
        v = p.get(key)
        if isinstance(v, str) and v.strip():
            return cap_text(v, MAX_LINE_CHARS)
    lines = [ln for ln in mem.summary.split("\n") if ln.strip()]
    line = lines[1] if len(lines) > 1 else lines[0] if lines else "no error text recorded"
    return cap_text(_ARTIFACT_REF.sub("", line), MAX_LINE_CHARS)


def _attempt(mem: ToolMemory, calls_by_id: Mapping[str, ToolCall]) -> str:
    p = mem.payload
    for key in ("command", "path"):
        v = p.get(key)
        if isinstance(v, str) and v.strip():
            return one_line(v, 200)
    call = calls_by_id.get(mem.call_id or "")
    return _args_text(call) if call else NONE_RECORDED


def failed_attempts(covered: Sequence[ToolMemory], calls_by_id: Mapping[str, ToolCall]) -> tuple[list[dict[str, Any]], int]:
    """Covered failures, newest :data:`MAX_FAILED_ATTEMPTS` in seq order: failed or
    abandoned calls, rejected writes and commands whose output says they failed, each
    with its error line (superseded or not: a failure stays a failure)."""
    failed = [
        m
        for m in _ordered(covered)
        if m.status in (ToolCallStatus.FAILED, ToolCallStatus.ABANDONED) or _failed_payload(m)
    ]
    kept = failed[-MAX_FAILED_ATTEMPTS:]
    return (
        [
            {
                "tool": m.source_tool,
                "attempt": _attempt(m, calls_by_id),
                "error": _error_line(m),
                "status": m.status.value if m.status is not ToolCallStatus.SUCCEEDED else "failed",
                "memory_id": m.id,
                "artifact_id": _artifact(m),
                "seq": m.seq,
            }
            for m in kept
        ],
        len(failed) - len(kept),
    )


def _counts_text(counts: Any) -> str:
    if not isinstance(counts, Mapping) or not counts:
        return "no counts parsed"
    return ", ".join(f"{v} {k}" for k, v in counts.items())


_FROM_CALL = "call status; no exit code or summary in the output"
"""How a verification result read from the call's recorded status is marked."""


def _recorded_outcome(mem: ToolMemory, parsed: str) -> tuple[str, str | None]:
    """``(status, basis)``: the status parsed from the output (basis ``None``), or — when
    the output told nothing (``unknown``) — what the record itself says: the exit code's
    outcome, else the call's recorded status (basis :data:`_FROM_CALL`)."""
    if parsed not in ("", "unknown"):
        return parsed, None
    code = mem.payload.get("exit_code")
    if isinstance(code, int):
        return ("succeeded" if code == 0 else "failed"), None
    return mem.status.value, _FROM_CALL


def _test_verification(m: ToolMemory) -> dict[str, Any]:
    p = m.payload
    status, basis = _recorded_outcome(m, str(p.get("status") or ""))
    counts = _counts_text(p.get("counts"))
    if status in ("failed", "error") and not p.get("test"):
        evidence = _error_line(m)
    elif status in ("failed", "error"):
        where = f" ({p.get('file')})" if p.get("file") else ""
        evidence = f"{p.get('test')}: {p.get('error') or 'no message'}{where}"
    else:
        evidence = f"{status}: {counts}"
    return {
        "command": one_line(str(p.get("command") or m.source_tool), 200),
        "result": f"{status} ({basis or counts})",
        "evidence": cap_text(evidence, MAX_LINE_CHARS),
        "memory_id": m.id,
        "artifact_id": _artifact(m),
        "seq": m.seq,
    }


def _command_verification(m: ToolMemory) -> dict[str, Any]:
    p = m.payload
    code = p.get("exit_code")
    status, basis = _recorded_outcome(m, str(p.get("status") or ""))
    tail = [str(x) for x in p.get("tail") or []]
    failed = status == "failed" or (isinstance(code, int) and code != 0)
    evidence = _error_line(m) if failed else (cap_text(tail[-1], MAX_LINE_CHARS) if tail else "no output")
    return {
        "command": one_line(str(p.get("command") or m.source_tool), 200),
        "result": f"exit {code} ({status})" if isinstance(code, int) else (f"{status} ({basis})" if basis else status),
        "evidence": evidence,
        "memory_id": m.id,
        "artifact_id": _artifact(m),
        "seq": m.seq,
    }


def latest_verification(covered: Sequence[ToolMemory]) -> dict[str, Any] | str:
    """The newest covered test run (command, status with counts, first failure or the
    passing counts as proof); else the newest command matching :data:`VERIFY_COMMAND`;
    else the newest command with an exit code; else :data:`NONE_RECORDED`.

    ``result`` is the recorded outcome: the status parsed from the output; when the
    output gave none (``unknown``), the exit code's (``succeeded`` / ``failed``), else the
    call's recorded status marked ``(call status; no exit code or summary in the
    output)`` — never ``unknown`` for a call whose outcome was recorded."""
    ordered = _ordered(covered)
    tests = [m for m in ordered if _kind(m) == "test_run"]
    if tests:
        return _test_verification(tests[-1])
    commands = [m for m in ordered if _kind(m) == "command"]
    checks = [m for m in commands if VERIFY_COMMAND.search(str(m.payload.get("command") or "").split("\n", 1)[0])]
    coded = [m for m in commands if isinstance(m.payload.get("exit_code"), int)]
    if checks or coded:
        return _command_verification((checks or coded)[-1])
    return NONE_RECORDED


def _last_plan(messages: Sequence[Message], covered_ids: frozenset[str]) -> Message | None:
    """The last covered shareable assistant message with text outside code fences."""
    for m in reversed(messages):
        if m.id in covered_ids and m.role is Role.ASSISTANT and shareable_message(m) and split_sentences(message_text(m)):
            return m
    return None


def _plan_entry(msg: Message) -> dict[str, Any]:
    return {"text": cap_text(split_sentences(message_text(msg))[-1], MAX_LINE_CHARS), "message_id": msg.id}


def next_step(messages: Sequence[Message], covered_ids: frozenset[str]) -> dict[str, Any] | str:
    """What the next model is to do, led by the newest user request of the lineage
    (``messages``: covered range and raw tail, seq order; see :func:`user_requests`).

    Shape: ``{"text": <that request, one line, at most MAX_REQUEST_CHARS>, "message_id":
    <its id>, "plan": <plan> or NONE_RECORDED}``; ``plan`` is ``{"text", "message_id"}``:
    the final sentence (outside code fences, at most :data:`MAX_LINE_CHARS`) of the last
    covered shareable assistant text, kept only when no covered user request came after
    it (a request in the raw tail, such as "go ahead", leaves it standing).  Without any
    user request the plan alone is the next step (``{"text", "message_id"}``); without
    either, :data:`NONE_RECORDED`.
    """
    requests = user_requests(messages)
    last = _last_plan(messages, covered_ids)
    if not requests:
        return _plan_entry(last) if last is not None else NONE_RECORDED
    newest, text = requests[-1]
    answered = max((m.seq for m, _ in requests if m.id in covered_ids), default=-1)
    plan: dict[str, Any] | str = _plan_entry(last) if last is not None and last.seq > answered else NONE_RECORDED
    return {"text": one_line(text, MAX_REQUEST_CHARS), "message_id": newest.id, "plan": plan}
