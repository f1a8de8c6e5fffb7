"""Write a parsed :class:`ImportedTranscript` to the store in one transaction.

* Tree transcripts (Claude Code): the path to the active leaf becomes the root branch;
  every other child of a node starts a branch forked at that node (no copying).
* Every tool call becomes a ToolCall; every result a ToolArtifact (raw bytes kept whole,
  in the blob store above the inline threshold) with its derived ToolMemory.  Calls that
  never got a result stay ``pending``.
* Text-action observations (SWE-agent style) become a ToolCall + ToolArtifact for the
  observation, linked to the assistant message that issued the action.
* Imported text is untrusted: only a system message at the head of the transcript may
  reach the system slot, and only with ``trust_system_prompt``.
* Participant boundaries (seed 000 §4.9, §4.14): a child subagent's records (sidechains,
  ``subagents/agent-*.jsonl``) are ``audit_only``; the main participant's records are
  ``branch`` context.  A tool result whose message carries ``child_report_for`` (the
  Task tool's final report) is the *promoted child report*: a PolicyDecision of family
  ``promotion`` with actor ``"import"`` links it to the child participant, so a parent
  assembly shows the report and never the child's raw records.

Re-importing the same bytes finds the existing conversation (content key) and writes
nothing.
"""

from __future__ import annotations

import errno
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contextledger.errors import ImportFormatError, InputError
from contextledger.ids import new_id
from contextledger.limits import loads_json, storable_text
from contextledger.records.enums import (
    AuthorityLevel,
    MessageKind,
    PolicyFamily,
    Role,
    RuntimeIsolationPolicy,
    RuntimeKind,
    ToolCallStatus,
    Visibility,
)
from contextledger.records.models import (
    Branch,
    Conversation,
    Message,
    Participant,
    PolicyDecision,
    ToolCall,
    ToolMemory,
)
from contextledger.records.parts import ImagePart, Part, TextPart, ToolResultPart
from contextledger.retrieval.index import batched_vectors, index_records
from contextledger.security.screen import screen_stored_message, screen_text
from contextledger.store.base import Scope
from contextledger.store.blobs import sha256_key

if TYPE_CHECKING:
    from contextledger.ingest.transcript import ImportedMessage, ImportedTranscript
    from contextledger.runtime import HasRuntime

__all__ = ["ImportResult", "import_path", "load_transcript"]


@dataclass(kw_only=True)
class ImportResult:
    """What one import created (or found).

    Attributes:
        created: ``False`` when the same content was imported before (nothing written).
        notes: recorded handling of source faults.
    """

    conversation_id: str
    path: str
    format: str
    created: bool
    messages: int = 0
    tool_calls: int = 0
    artifacts: int = 0
    pending_calls: int = 0
    branches: int = 1
    participants: int = 1
    promoted_reports: int = 0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (``contextledger import --json``)."""
        return {
            "conversation_id": self.conversation_id,
            "path": self.path,
            "format": self.format,
            "created": self.created,
            "messages": self.messages,
            "tool_calls": self.tool_calls,
            "artifacts": self.artifacts,
            "pending_calls": self.pending_calls,
            "branches": self.branches,
            "participants": self.participants,
            "promoted_reports": self.promoted_reports,
            "notes": self.notes,
        }


def import_path(source: HasRuntime, path: Path, *, format: str, scope: Scope, trust_system_prompt: bool = True) -> ImportResult:
    """Parse ``path`` with the importers and load it (see module docstring).

    Raises:
        ImportFormatError: unreadable or malformed file, or a transcript without a single
            message (``{"messages": []}``: nothing to import, nothing written).
    """
    from contextledger.ingest.importers import parse_file

    try:
        path.stat()
    except OSError as exc:  # missing, a dangling symlink, a symlink loop, a folder without permission …
        raise ImportFormatError(str(path), None, unopenable_reason(path, exc)) from None
    if path.is_dir():
        raise ImportFormatError(str(path), None, "is a folder (Is a directory); give a transcript file")
    transcript = parse_file(path, format)
    if not transcript.messages:
        raise ImportFormatError(str(path), None, f"holds no messages ({transcript.format}): nothing to import")
    try:
        return load_transcript(source, transcript, scope=scope, trust_system_prompt=trust_system_prompt)
    except ImportFormatError:
        raise
    except InputError as exc:  # a record the store refuses (a limit): named with its file
        raise ImportFormatError(str(path), None, str(exc)) from None


def unopenable_reason(path: Path, exc: OSError) -> str:
    """Why ``path`` cannot be opened, in one phrase with the system's own words:
    ``"no such file"``, ``"dangling symlink to /gone (No such file or directory)"``,
    ``"symlink loop (Too many levels of symbolic links)"``, ``"a folder on its path cannot be
    searched (Permission denied)"``."""
    from contextledger.errors import os_error_cause

    own = (exc.strerror or "").strip()
    if exc.errno == errno.ENOENT:
        if not path.is_symlink():
            return "no such file"
        try:
            target = str(path.readlink())
        except OSError:
            target = "?"
        return f"dangling symlink to {target} ({own or 'No such file or directory'})"
    if exc.errno == errno.EACCES:  # stat needs only search permission on the folders
        return f"a folder on its path cannot be searched ({own or 'Permission denied'})"
    cause = os_error_cause(exc)
    return f"{cause} ({own})" if own and own.lower() != cause.lower() else cause


def _path_to(leaf: str | None, parent: dict[str, str | None]) -> list[str]:
    path: list[str] = []
    seen: set[str] = set()
    while leaf is not None and leaf not in seen:
        seen.add(leaf)
        path.append(leaf)
        leaf = parent.get(leaf)
    return list(reversed(path))


class _ImportedConcurrently(Exception):
    """Raised inside the import's transaction (rolling it back, nothing written yet) when
    a concurrent import of the same content committed first."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(conversation_id)
        self.conversation_id = conversation_id


def load_transcript(source: HasRuntime, t: ImportedTranscript, *, scope: Scope, trust_system_prompt: bool = True) -> ImportResult:
    """Write ``t`` in one transaction; on any error nothing is left behind.  A concurrent
    import of the same content that commits first makes this one a re-import
    (``created=False``), as a serial re-import is.

    Raises:
        ImportFormatError: structural problems the parser let through (unknown parent).
    """
    try:
        return _load(source, t, scope=scope, trust_system_prompt=trust_system_prompt)
    except _ImportedConcurrently as done:  # another import of the same content won the race: as a re-import
        return ImportResult(conversation_id=done.conversation_id, path=t.path, format=t.format, created=False,
                            notes=["already imported: same content key (by a concurrent import); nothing written"])


def _load(source: HasRuntime, t: ImportedTranscript, *, scope: Scope, trust_system_prompt: bool = True) -> ImportResult:
    """:func:`load_transcript`'s transaction (raises :class:`_ImportedConcurrently`)."""
    from contextledger.ingest.recorder import Recorder, message_token_count
    from contextledger.policy.pinning import pin_constraints_in

    rt = source.runtime
    store = rt.store
    _replace_unstorable(t)
    if t.content_key:
        existing = store.find_conversation_by_content_key(scope, t.content_key)
        if existing is not None:
            return ImportResult(conversation_id=existing.id, path=t.path, format=t.format, created=False, notes=["already imported: same content key; nothing written"])

    now = datetime.now(UTC)
    keys = [m.key for m in t.messages]
    index = {k: i for i, k in enumerate(keys)}
    if len(index) != len(keys):
        raise ImportFormatError(t.path, None, "duplicate message keys in parsed transcript")

    # parent links: explicit for trees, list order otherwise
    parent: dict[str, str | None] = {}
    for i, m in enumerate(t.messages):
        if t.tree:
            if m.parent_key is not None and m.parent_key not in index:
                raise ImportFormatError(t.path, m.source_ref or None, f"parent {m.parent_key!r} not found")
            parent[m.key] = m.parent_key
        else:
            parent[m.key] = m.parent_key if m.parent_key is not None else (keys[i - 1] if i else None)

    # branch assignment: active path first, then forks
    children: dict[str | None, list[str]] = defaultdict(list)
    for k in keys:
        children[parent[k]].append(k)
    active_leaf = t.active_leaf_key if t.tree and t.active_leaf_key in index else (keys[-1] if keys else None)
    active_path = set(_path_to(active_leaf, parent))

    conv_id = new_id("conv")
    root_branch = Branch(id=new_id("br"), tenant_id=scope.tenant_id, conversation_id=conv_id, name="main", created_at=now)
    branch_of: dict[str, str] = {}
    branches: list[Branch] = [root_branch]
    seq_of = {k: i + 1 for i, k in enumerate(keys)}  # file order; forks come after their parent

    def assign(node: str, branch_id: str) -> None:
        # iterative DFS; the child on the active path (else the first) continues the branch
        stack: list[tuple[str, str]] = [(node, branch_id)]
        while stack:
            k, b = stack.pop()
            branch_of[k] = b
            kids = children.get(k, [])
            if not kids:
                continue
            cont = next((c for c in kids if c in active_path), kids[0])
            for c in reversed(kids):
                if c == cont:
                    stack.append((c, b))
                else:
                    nb = Branch(
                        id=new_id("br"), tenant_id=scope.tenant_id, conversation_id=conv_id, parent_branch_id=b,
                        fork_message_id=None, fork_seq=seq_of[k], name=f"fork at {k}", created_at=now,
                    )
                    branches.append(nb)
                    stack.append((c, nb.id))

    roots = children.get(None, [])
    if roots:
        main_root = next((r for r in roots if r in active_path), roots[0])
        assign(main_root, root_branch.id)
        for r in roots:
            if r != main_root:
                nb = Branch(id=new_id("br"), tenant_id=scope.tenant_id, conversation_id=conv_id, parent_branch_id=None, name=f"root {r}", created_at=now)
                branches.append(nb)
                assign(r, nb.id)

    # participants
    parts_by_key: dict[str, Participant] = {}
    for ip in t.participants or []:
        parts_by_key[ip.key] = Participant(
            id=new_id("part"), tenant_id=scope.tenant_id, conversation_id=conv_id, name=ip.key if ip.key != "main" else (ip.name or "main"),
            provider=ip.provider, model=ip.model, runtime_kind=ip.runtime_kind,
            isolation_policy=RuntimeIsolationPolicy.CHILD_AUDIT_ONLY if ip.runtime_kind == RuntimeKind.SUBAGENT_CHILD else RuntimeIsolationPolicy.PARTICIPANT,
            created_at=now,
        )
    for ip in t.participants or []:
        if ip.parent_key and ip.parent_key in parts_by_key:
            parts_by_key[ip.key] = parts_by_key[ip.key].model_copy(update={"parent_participant_id": parts_by_key[ip.parent_key].id})
    child_keys = {k for k, p in parts_by_key.items() if p.runtime_kind == RuntimeKind.SUBAGENT_CHILD}

    conv = Conversation(
        id=conv_id, tenant_id=scope.tenant_id, user_id=scope.user_id, title=t.title[:200], root_branch_id=root_branch.id,
        active_branch_id=branch_of.get(active_leaf or "", root_branch.id), source=f"import:{t.format}", source_path=t.path,
        content_key=t.content_key or None, metadata={"import_notes": list(t.notes), "tools": list(t.tools), **{k: v for k, v in t.metadata.items() if k != "skipped_raw_lines"}},
        created_at=now,
    )

    # large payloads to the blob store first (content addressed; safe if we roll back)
    blob_keys: dict[str, str | None] = {}
    for m in t.messages:
        for p in m.parts:
            if isinstance(p, ToolResultPart) and p.text is not None:
                blob_keys[f"{m.key}:{p.call_id}"] = rt.put_blob_if_large(p.text.encode("utf-8"))
        if m.kind == MessageKind.OBSERVATION:
            text = "\n".join(p.text for p in m.parts if isinstance(p, TextPart))
            blob_keys[f"{m.key}:obs"] = rt.put_blob_if_large(text.encode("utf-8"))
        for attachment_key, data in m.attachments.items():
            if sha256_key(data) != attachment_key:
                raise ImportFormatError(t.path, m.source_ref or None, f"attachment hash mismatch for {attachment_key}")
            store.blobs.put(data)
    for m in t.messages:
        for p in m.parts:
            if isinstance(p, ImagePart) and p.blob_key and p.blob_key not in m.attachments and not store.blobs.exists(p.blob_key):
                raise ImportFormatError(t.path, m.source_ref or None, f"image {p.blob_key} has no bytes")

    rec = Recorder(rt, scope)
    rec.remember_participants(list(parts_by_key.values()))
    result = ImportResult(conversation_id=conv_id, path=t.path, format=t.format, created=True, notes=list(t.notes))
    with store.writer(scope) as w, batched_vectors(w):  # the import's embeddings in batches, at its end
        if not w.add_conversation(conv, root_branch):
            other = store.find_conversation_by_content_key(scope, t.content_key)
            if other is None:
                raise ImportFormatError(t.path, None, "imported concurrently, and the other import is not visible")
            raise _ImportedConcurrently(other.id)
        for b in branches[1:]:
            w.add_branch(b)
        for participant_record in parts_by_key.values():
            w.add_participant(participant_record)
        w.allocate_seq(conv_id, len(keys))
        calls: dict[str, ToolCall] = {}
        msg_ids: dict[str, str] = {}
        action_calls: dict[str, ToolCall] = {}
        obs_n = 0
        first_non_system = next((i for i, m in enumerate(t.messages) if m.role not in (Role.SYSTEM, Role.DEVELOPER)), len(t.messages))
        # a record without a timestamp takes the previous record's time (never the
        # import time: the default ``now`` of an assembly is the newest record's time)
        last_time: datetime = next((m.created_at for m in t.messages if m.created_at is not None), None) or _undated_time(t.path, now)
        for i, im in enumerate(t.messages):
            if im.created_at is not None:
                last_time = im.created_at
            participant = parts_by_key.get(im.participant_key)
            pid = participant.id if participant else None
            is_child = im.participant_key in child_keys
            branch_id = branch_of.get(im.key, root_branch.id)
            parts: list[Part] = list(im.parts)
            authority = _authority(im, i, first_non_system, trust_system_prompt)
            visibility = Visibility.AUDIT_ONLY if is_child else Visibility.BRANCH
            msg = screen_stored_message(Message(
                id=new_id("msg"), tenant_id=scope.tenant_id, conversation_id=conv_id, branch_id=branch_id, seq=seq_of[im.key],
                parent_message_id=msg_ids.get(parent[im.key] or ""), role=im.role, kind=im.kind, parts=tuple(parts),
                participant_id=pid, visibility=visibility, authority=authority,
                runtime_kind=RuntimeKind.SUBAGENT_CHILD if is_child else RuntimeKind.CHAT, speaker_label=im.speaker_label,
                source_ref=im.source_ref or None, token_count=message_token_count(parts),
                metadata={**im.metadata, "untrusted": True, **({"model": im.model} if im.model else {})},
                created_at=im.created_at or last_time,
            ), None if im.role is Role.TOOL or im.kind == MessageKind.OBSERVATION else rt.put_restricted_blob, message_token_count)  # results: write_result
            msg_ids[im.key] = msg.id
            if im.role is Role.TOOL:
                results = [p for p in im.parts if isinstance(p, ToolResultPart)]
                if len(results) != 1:
                    raise ImportFormatError(t.path, im.source_ref or None, f"a tool message must hold exactly one result, found {len(results)}")
                res = results[0]
                call = calls.pop(res.call_id, None)
                if call is None:
                    raise ImportFormatError(t.path, im.source_ref or None, f"tool result for unknown call id {res.call_id!r}")
                bkey = blob_keys.get(f"{im.key}:{res.call_id}")
                art_id = new_id("art")
                part = res.model_copy(update={"artifact_id": art_id, "text": None if bkey else res.text})
                msg = msg.model_copy(update={"parts": (part,), "token_count": message_token_count([part]), "parent_message_id": msg.parent_message_id})
                msg, _, mem = rec.write_result(
                    w, conv, call, (res.text or "").encode("utf-8"), blob_key=bkey, is_error=res.is_error, result_message=msg,
                    artifact_id=art_id, visibility=visibility, observed_at=msg.created_at,  # the dated message, never the write time
                    status=_recorded_status(im),
                )
                w.add_message(msg)
                result.messages += 1
                result.artifacts += 1
                report_for = im.metadata.get("child_report_for")
                child = parts_by_key.get(report_for) if isinstance(report_for, str) else None
                if child is not None and not is_child:
                    w.add_decision(_report_decision(msg, art_id, mem, child, now))
                    result.promoted_reports += 1
                continue
            if im.kind == MessageKind.OBSERVATION and im.role is Role.USER:
                text = "\n".join(p.text for p in im.parts if isinstance(p, TextPart))
                pending_call = action_calls.pop(im.participant_key, None)
                action = str(im.metadata.get("action") or "")
                if pending_call is not None:
                    call = pending_call
                    action = action or str(loads_json(call.arguments_json).get("action", ""))
                else:
                    # an observation with no action before it: its own synthetic call
                    obs_n += 1
                    call = _action_call(msg, obs_n, str(im.metadata.get("action_tool") or "action"), action)
                    w.add_tool_call(call)
                    result.tool_calls += 1
                bkey = blob_keys.get(f"{im.key}:obs")
                art_id = new_id("art")
                part = ToolResultPart(call_id=call.call_id, artifact_id=art_id, text=None if bkey else text)
                msg = msg.model_copy(update={"parts": (part,), "token_count": message_token_count([part])})
                msg, _, _ = rec.write_result(
                    w, conv, call, text.encode("utf-8"), blob_key=bkey, result_message=msg, artifact_id=art_id,
                    visibility=visibility, observed_at=msg.created_at, action_text=action or None, status=_recorded_status(im),
                )
                w.add_message(msg)
                result.messages += 1
                result.artifacts += 1
                continue
            index_records(w, [msg] if w.add_message(msg) else [])
            result.messages += 1
            if im.role is Role.USER and not is_child:
                pin_constraints_in(w, msg)
            if im.role is Role.ASSISTANT:
                new_calls = rec.add_calls(w, msg)
                for c in new_calls:
                    calls[c.call_id] = c
                result.tool_calls += len(new_calls)
                if im.metadata.get("action") and not new_calls:
                    # a text action is a tool call too: pending until its observation
                    obs_n += 1
                    action_call = _action_call(msg, obs_n, str(im.metadata.get("action_tool") or "action"), str(im.metadata["action"]))
                    w.add_tool_call(action_call)
                    if im.participant_key in action_calls:
                        result.pending_calls += 1  # the earlier action never got an observation
                    action_calls[im.participant_key] = action_call
                    result.tool_calls += 1
        result.pending_calls += len(calls) + len(action_calls)
        result.branches = len(branches)
        result.participants = max(1, len(parts_by_key))
    return result


def _recorded_status(im: ImportedMessage) -> ToolCallStatus | None:
    """The status an importer read from the transcript for the result ``im`` carries
    (``metadata["result_status"]``: ``"unknown"`` when the transcript does not record the
    outcome), or ``None`` to read the status from the result itself."""
    value = im.metadata.get("result_status")
    return ToolCallStatus.UNKNOWN if value == ToolCallStatus.UNKNOWN.value else None


def _undated_time(path: str, fallback: datetime) -> datetime:
    """The time of the records of a transcript that carries no timestamp at all: the
    file's modification time in whole seconds (the same for every import of the file, so
    the ages and ``observed`` times a payload shows do not depend on when it was
    imported), else ``fallback`` (the import time; e.g. a request body)."""
    try:
        return datetime.fromtimestamp(int(Path(path).stat().st_mtime), UTC)
    except (OSError, ValueError, OverflowError):
        return fallback


_SURROGATE = re.compile("[\ud800-\udfff]")


def _scrub(value: Any) -> tuple[Any, int, int]:
    """``value`` with lone surrogates and NUL characters replaced by U+FFFD, and how many
    of each were replaced."""
    if isinstance(value, str):
        if "\x00" not in value and (value.isascii() or storable_text(value)[1] == 0):
            return value, 0, 0
        value, n_surrogates = _SURROGATE.subn("\ufffd", value)
        value, n_nul = value.replace("\x00", "\ufffd"), value.count("\x00")
        return value, n_surrogates, n_nul
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        ns = nn = 0
        for k, v in value.items():
            out[k], s, n = _scrub(v)
            ns, nn = ns + s, nn + n
        return out, ns, nn
    if isinstance(value, list):
        items = [_scrub(v) for v in value]
        return [v for v, _, _ in items], sum(s for _, s, _ in items), sum(n for _, _, n in items)
    return value, 0, 0


def _replace_unstorable(t: ImportedTranscript) -> None:
    """Lone UTF-16 surrogates (``"\\ud800"`` escapes in a JSON transcript) cannot be
    stored as UTF-8, nor NUL characters (``"\\u0000"``) as PostgreSQL text: each becomes
    U+FFFD, and an import note names the records touched (the source file itself is not
    changed; see :mod:`contextledger.limits`)."""
    touched: dict[str, list[str]] = {"surrogates": [], "nul": []}
    for m in t.messages:
        ns = nn = 0
        parts = []
        for p in m.parts:
            clean, s, n = _scrub(p.model_dump())
            parts.append(type(p).model_validate(clean) if s or n else p)
            ns, nn = ns + s, nn + n
        meta, s, n = _scrub(m.metadata)
        ns, nn = ns + s, nn + n
        if ns or nn:
            m.parts = parts
            m.metadata = meta
        for kind, count in (("surrogates", ns), ("nul", nn)):
            if count:
                touched[kind].append(m.source_ref or m.key)
    t.title = screen_text(storable_text(t.title)[0]).text
    for kind, what in (("surrogates", "lone UTF-16 surrogates (not storable as UTF-8)"), ("nul", "NUL characters (not storable as PostgreSQL text)")):
        refs = touched[kind]
        if refs:
            shown = ", ".join(refs[:5]) + (f" and {len(refs) - 5} more" if len(refs) > 5 else "")
            t.notes.append(f"replaced {what} with U+FFFD in {shown}")


def _report_decision(msg: Message, artifact_id: str, memory: ToolMemory, child: Participant, now: datetime) -> PolicyDecision:
    """The promotion decision linking a parent's Task result to the child it reports on
    (seed 000 §4.14: the child's final report is visible to the parent resume)."""
    return PolicyDecision(
        id=new_id("dec"), tenant_id=msg.tenant_id, conversation_id=msg.conversation_id, family=PolicyFamily.PROMOTION,
        decision="promote", record_id=msg.id, reason="promoted", actor="import",
        detail={
            "kind": "child_report",
            "why": "the Task tool result carries the child's final report",
            "child_participant_id": child.id,
            "child_participant": child.name,
            "artifact_id": artifact_id,
            "memory_ids": [memory.id],
            "source_ref": msg.source_ref,
        },
        created_at=now,
    )


def _authority(im: ImportedMessage, i: int, first_non_system: int, trust_system_prompt: bool) -> AuthorityLevel:
    if im.role in (Role.SYSTEM, Role.DEVELOPER):
        # only a chat system prompt at the head of the transcript is an instruction;
        # runtime bookkeeping lines (snapshots, hooks, progress) never are
        head = trust_system_prompt and i < first_non_system and im.kind == MessageKind.CHAT
        return AuthorityLevel.SYSTEM if head else AuthorityLevel.OLD_CONVERSATION
    if im.role is Role.USER and im.kind == MessageKind.CHAT:
        return AuthorityLevel.USER
    return AuthorityLevel.OLD_CONVERSATION


def _action_call(msg: Message, n: int, tool: str, action: str) -> ToolCall:
    """The synthetic ToolCall ``obs_<n>`` of a text action (or of an observation with no
    action before it), owned by ``msg``."""
    return ToolCall(
        id=new_id("call"), tenant_id=msg.tenant_id, conversation_id=msg.conversation_id, branch_id=msg.branch_id,
        message_id=msg.id, seq=msg.seq, call_index=0, call_id=f"obs_{n}", tool_name=_tool_name(tool),
        arguments_json=_json_args(action), participant_id=msg.participant_id, created_at=msg.created_at,
    )


def _tool_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:64]
    return cleaned or "action"


def _json_args(action: str) -> str:

    return json.dumps({"action": action}, ensure_ascii=False) if action else "{}"
