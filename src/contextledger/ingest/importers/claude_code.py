"""Importer for Claude Code session JSON Lines (format ``"claude-code"``).

A session file (CLI 1.x to 2.1.x) holds one record per line: ``user`` / ``assistant``
records whose ``message.content`` is a string or a list of blocks (``text``,
``thinking``, ``tool_use``, ``tool_result``, ``image``), plus ``progress`` and ``system``
lines and metadata lines (:data:`METADATA_TYPES`: ``summary``,
``file-history-snapshot``, ``queue-operation``, ``attachment``, ``ai-title``,
``permission-mode``, ``last-prompt`` …) that may come first.  The same records saved as
one JSON array (as hooks write ``logs/chat.json``) are read alike.  ``uuid`` /
``parentUuid`` link the records into a tree.  The importer produces a *tree* transcript
(``tree=True``):

* assistant records sharing one ``message.id`` are one model turn and become one assistant
  message with all their blocks in file order, even when Claude Code wrote tool-result
  records between them (SOURCES.md "Known quirks": turns split around tool results);
* each ``tool_result`` block becomes its own ``Role.TOOL`` message, in block order; other
  blocks of the same user record follow as one user message;
* the results of a turn, and the progress/system/snapshot records that hang beside them,
  are chained after the turn, so only genuine forks (a record continued twice) remain
  forks; the active branch is the one leading to the newest record;
* records repeated by a resumed session (same ``uuid``, or same type, timestamp and
  payload) are kept once; a note says how many repeats were folded;
* ``isSidechain`` records and ``<session>/subagents/agent-*.jsonl`` files become child
  subagent participants (``"subagent:agent-<id>"``); the Task result that carries the
  child's final report gets ``metadata["child_report_for"]``;
* ``summary`` → ``MessageKind.SUMMARY``, ``progress`` → ``PROGRESS``, ``isMeta`` user
  records, system lines and the other metadata lines → ``META``, ``isCompactSummary``
  user records → ``COMPACTION``; a record of an unknown type (or without one) is kept as
  ``META`` with a note, never refused.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from contextledger.ingest.importers.anthropic_blocks import AnthropicBlocks, json_text
from contextledger.ingest.importers.build import MAIN, first_user_title
from contextledger.ingest.importers.call_ids import CallIdRegistry
from contextledger.ingest.importers.common import (
    Source,
    describe_json,
    fail,
    iter_jsonl,
    parse_timestamp,
    read_source,
    source_key,
    type_of,
)
from contextledger.ingest.transcript import ImportedMessage, ImportedParticipant, ImportedTranscript
from contextledger.records.enums import MessageKind, Role, RuntimeKind
from contextledger.records.parts import (
    Part,
    TextPart,
    ToolResultPart,
)

__all__ = ["CONVERSATION_TYPES", "FORMAT", "METADATA_TYPES", "RECORD_TYPES", "parse_claude_code", "subagent_files"]

FORMAT = "claude-code"
CONVERSATION_TYPES = frozenset({"user", "assistant", "system", "progress"})
"""Record ``type`` values that carry the conversation (CLI 1.x to 2.1.x)."""
METADATA_TYPES = frozenset(
    {
        "summary", "file-history-snapshot", "queue-operation", "attachment", "ai-title", "custom-title",
        "permission-mode", "last-prompt", "mode", "pr-link", "bridge-session", "agent-name", "tag",
    }
)
"""Record ``type`` values of session metadata lines (titles, prompts, modes, snapshots,
attachments); any of them may open a file."""
RECORD_TYPES = CONVERSATION_TYPES | METADATA_TYPES
"""Every known record ``type`` of Claude Code session files."""

_ENVELOPE = frozenset(
    {
        "parentUuid", "logicalParentUuid", "uuid", "sessionId", "cwd", "gitBranch", "version",
        "userType", "isSidechain", "timestamp", "slug", "type", "agentId", "isMeta", "level", "subtype",
    }
)
_TASK_TOOLS = frozenset({"Task", "Agent"})
_FINGERPRINTED = frozenset({"user", "assistant", "system"})


@dataclass(eq=False)
class _Node:
    """One kept record (or one merged assistant turn) of the record tree."""

    order: int
    key: str
    participant: str
    raw_parent: str | None
    conversational: bool
    location: str
    timestamp: datetime | None = None
    session: str | None = None
    messages: list[ImportedMessage] = field(default_factory=list)
    call_ids: set[str] = field(default_factory=set)
    answers: set[str] = field(default_factory=set)
    results_only: bool = False
    parent: _Node | None = None
    children: list[_Node] = field(default_factory=list)


def subagent_files(main: Path) -> list[Path]:
    """``<dir>/<stem>/subagents/agent-*.jsonl`` beside ``<dir>/<stem>.jsonl``, sorted."""
    folder = main.parent / main.stem / "subagents"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("agent-*.jsonl") if p.is_file())


def _detach(node: _Node) -> None:
    if node.parent is not None:
        node.parent.children.remove(node)
    node.parent = None


def _attach(node: _Node, parent: _Node) -> None:
    _detach(node)
    node.parent = parent
    parent.children.append(node)


def _has_conversation(node: _Node) -> bool:
    stack = [node]
    while stack:
        current = stack.pop()
        if current.conversational:
            return True
        stack.extend(current.children)
    return False


def _subtree(node: _Node) -> list[_Node]:
    out: list[_Node] = []
    stack = [node]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(current.children)
    return sorted(out, key=lambda n: n.order)


class _Builder:
    """Accumulates records of one session (and its subagent files) into a node tree."""

    def __init__(self, main: Source) -> None:
        self.main = main
        self.notes: list[str] = []
        self.skipped: list[str] = []
        self.registry = CallIdRegistry(self.notes)
        self.blocks = AnthropicBlocks(main.path, self.registry, self.notes, separator=": ")
        self.nodes: list[_Node] = []
        self.by_uuid: dict[str, _Node] = {}
        self.groups: dict[tuple[str, str], _Node] = {}
        self.fingerprints: dict[tuple[str, str, str, str], _Node] = {}
        self.participants: dict[str, ImportedParticipant] = {}
        self.sidechain_of: dict[str, str] = {}
        self.last_node: dict[tuple[str, str | None], _Node] = {}
        self.sessions: list[str] = []
        self._session: str | None = None
        self.task_prompts: dict[str, str] = {}
        self.session_id: str | None = None
        self.version: str | None = None
        self.has_main = True
        self._order = 0
        self._repeats: dict[str, list[int]] = {}

    # ----------------------------------------------------------------- participants

    def _add_participant(self, key: str, parent: str | None) -> None:
        if key not in self.participants:
            runtime = RuntimeKind.CHAT if key == MAIN else RuntimeKind.SUBAGENT_CHILD
            name = key.split(":", 1)[1] if ":" in key else key
            self.participants[key] = ImportedParticipant(
                key=key, name=name, runtime_kind=runtime, parent_key=parent, provider="anthropic"
            )

    def _participant_for(self, record: dict[str, Any], fixed: str | None) -> str:
        if fixed is not None:
            return fixed
        if record.get("isSidechain") is not True:
            return MAIN
        parent = record.get("parentUuid")
        if isinstance(parent, str) and parent in self.sidechain_of:
            key = self.sidechain_of[parent]
        else:
            agent = record.get("agentId")
            count = sum(1 for k in self.participants if k != MAIN) + 1
            key = f"subagent:agent-{agent}" if isinstance(agent, str) and agent else f"subagent:sidechain-{count}"
            self._add_participant(key, MAIN if self.has_main else None)
        uuid = record.get("uuid")
        if isinstance(uuid, str):
            self.sidechain_of[uuid] = key
        return key

    # ----------------------------------------------------------------- reading

    def read_file(self, source: Source, label: str, fixed_participant: str | None, array: list[Any] | None = None) -> None:
        """Add every record of ``source`` (or of ``array``, the JSON-array form: locations
        ``"record N"``); ``label`` prefixes locations of non-main files."""
        unit = "line" if array is None else "record"
        records = list(iter_jsonl(source, self.notes, self.skipped, label=label)) if array is None else list(enumerate(array, start=1))
        if fixed_participant is None and label == "":
            conversational = [r for _, r in records if isinstance(r, dict) and r.get("type") in ("user", "assistant")]
            if conversational and all(r.get("isSidechain") is True for r in conversational):
                self.has_main = False
                agent = next((r.get("agentId") for r in conversational if isinstance(r.get("agentId"), str)), None)
                stem = source.path.stem
                name = stem if stem.startswith("agent-") else f"agent-{agent}" if agent else stem
                fixed_participant = f"subagent:{name}"
                self._add_participant(fixed_participant, None)
            else:
                self._add_participant(MAIN, None)
        elif fixed_participant is not None:
            self._add_participant(fixed_participant, MAIN if self.has_main else None)
        for line_no, record in records:
            self._add_record(record, f"{label}{unit} {line_no}", label, line_no, fixed_participant)
        repeats = self._repeats.pop(label, [])
        if repeats:
            self.notes.append(
                f"{label}{unit}s {repeats[0]}-{repeats[-1]}: {len(repeats)} records repeat earlier "
                "records (resumed session) and were kept once"
            )

    def _new_node(self, key: str, participant: str, raw_parent: str | None, conversational: bool, location: str, timestamp: datetime | None) -> _Node:
        self._order += 1
        node = _Node(
            order=self._order, key=key, participant=participant, raw_parent=raw_parent,
            conversational=conversational, location=location, timestamp=timestamp, session=self._session,
        )
        self.nodes.append(node)
        self.by_uuid[key] = node
        self.last_node[(participant, self._session)] = node
        return node

    def _fingerprint(self, participant: str, record: dict[str, Any]) -> tuple[str, str, str, str] | None:
        rtype = type_of(record)
        stamp = record.get("timestamp")
        if rtype not in _FINGERPRINTED or not isinstance(stamp, str):
            return None
        message = record.get("message")
        if isinstance(message, dict):
            payload: Any = [message.get("id"), message.get("content")]
        else:
            payload = record.get("data", record.get("content", record.get("subtype")))
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()
        return (participant, str(rtype), stamp, digest)

    def _add_record(self, record: Any, location: str, label: str, line_no: int, fixed: str | None) -> None:
        path = self.main.path
        if not isinstance(record, dict):
            fail(path, location, f"expected a JSON object, found {describe_json(record)}")
        rtype = record.get("type")
        if not isinstance(rtype, str):
            self.notes.append(f"{location}: record without a 'type' kept as meta")
            rtype = "untyped"
        participant = self._participant_for(record, fixed)
        session = record.get("sessionId")
        self._session = session if isinstance(session, str) and session else self._session
        if self._session is not None and self._session not in self.sessions:
            self.sessions.append(self._session)
        if self.session_id is None and self._session is not None:
            self.session_id = self._session
        if self.version is None and isinstance(record.get("version"), str):
            self.version = record["version"]
        uuid = record.get("uuid") if isinstance(record.get("uuid"), str) and record.get("uuid") else None
        if uuid is not None and uuid in self.by_uuid:
            self._repeats.setdefault(label, []).append(line_no)
            return
        fingerprint = self._fingerprint(participant, record)
        if fingerprint is not None and fingerprint in self.fingerprints:
            if uuid is not None:
                self.by_uuid[uuid] = self.fingerprints[fingerprint]
            self._repeats.setdefault(label, []).append(line_no)
            return
        timestamp = parse_timestamp(record.get("timestamp"))
        raw_parent = record.get("parentUuid") if isinstance(record.get("parentUuid"), str) else None
        if raw_parent is None and isinstance(record.get("logicalParentUuid"), str):
            raw_parent = record["logicalParentUuid"]
        if uuid is None:
            previous = self.last_node.get((participant, self._session))
            raw_parent = previous.key if previous is not None else None
            key = f"{label.strip()}:line:{line_no}" if label else f"line:{line_no}"
        else:
            key = uuid
        if rtype == "assistant":
            node = self._assistant(record, key, participant, raw_parent, location, timestamp, line_no)
        elif rtype == "user":
            node = self._new_node(key, participant, raw_parent, True, location, timestamp)
            self._user(node, record)
        else:
            node = self._new_node(key, participant, raw_parent, False, location, timestamp)
            node.messages.append(self._side_message(record, rtype, key, participant, location, timestamp))
        if uuid is not None:
            self.by_uuid[uuid] = node
        if fingerprint is not None:
            self.fingerprints[fingerprint] = node

    # ----------------------------------------------------------------- assistant

    def _assistant(self, record: dict[str, Any], key: str, participant: str, raw_parent: str | None, location: str, timestamp: datetime | None, line_no: int) -> _Node:
        message = record.get("message")
        if not isinstance(message, dict):
            fail(self.main.path, location, "assistant record has no 'message' object")
        message_id = message.get("id") if isinstance(message.get("id"), str) else None
        group = self.groups.get((participant, message_id)) if message_id else None
        if group is not None:
            turn = group.messages[0]
            turn.metadata.setdefault("merged_lines", [int(turn.source_ref.rsplit(" ", 1)[-1])]).append(line_no)
            turn.parts.extend(self._assistant_parts(message.get("content"), group, location, turn.attachments))
            self.last_node[(participant, self._session)] = group
            return group
        node = self._new_node(key, participant, raw_parent, True, location, timestamp)
        model = message.get("model") if isinstance(message.get("model"), str) else None
        turn = ImportedMessage(
            key=key, role=Role.ASSISTANT, participant_key=participant, source_ref=location,
            created_at=timestamp, model=model,
        )
        if message_id:
            turn.metadata["message_id"] = message_id
            self.groups[(participant, message_id)] = node
        if record.get("isApiErrorMessage") is True:
            turn.metadata["api_error"] = True
        turn.parts.extend(self._assistant_parts(message.get("content"), node, location, turn.attachments))
        node.messages.append(turn)
        return node

    def _assistant_parts(self, content: Any, node: _Node, location: str, attachments: dict[str, bytes]) -> list[Part]:
        def on_call(raw_id: str | None, call_id: str, name: str, arguments: Any) -> None:
            if raw_id:
                node.call_ids.add(raw_id)
            if name in _TASK_TOOLS and isinstance(arguments, dict) and isinstance(arguments.get("prompt"), str):
                self.task_prompts[call_id] = arguments["prompt"]

        return self.blocks.assistant_parts(content, location, attachments, on_call)

    # ----------------------------------------------------------------- user

    def _user(self, node: _Node, record: dict[str, Any]) -> None:
        path = self.main.path
        location = node.location
        message = record.get("message")
        if not isinstance(message, dict):
            fail(path, location, "user record has no 'message' object")
        kind = MessageKind.CHAT
        if record.get("isCompactSummary") is True:
            kind = MessageKind.COMPACTION
        elif record.get("isMeta") is True:
            kind = MessageKind.META
        texts: list[Part] = []
        attachments: dict[str, bytes] = {}
        results: list[ImportedMessage] = []
        for j, block in enumerate(self.blocks.blocks(message.get("content"), location)):
            where = self.blocks.where(location, j)
            if block.get("type") == "tool_result":
                results.append(self._tool_result(node, record, block, where))
                continue
            part = self.blocks.user_part(block, where, attachments)
            if part is not None:
                texts.append(part)
        node.results_only = bool(results) and not texts
        node.messages.extend(results)
        if texts or not results:
            node.messages.append(
                ImportedMessage(
                    key=node.key, role=Role.USER, kind=kind, parts=texts, attachments=attachments,
                    participant_key=node.participant, source_ref=location, created_at=node.timestamp,
                )
            )
        for i, msg in enumerate(node.messages):
            msg.key = node.key if i == 0 else f"{node.key}#{i}"

    def _tool_result(self, node: _Node, record: dict[str, Any], block: dict[str, Any], where: str) -> ImportedMessage:
        raw_id, text, images, attachments, is_error = self.blocks.result(block, where)
        if raw_id:
            node.answers.add(raw_id)
        call_id = self.registry.result(raw_id, where)
        metadata: dict[str, Any] = {}
        if call_id is None:
            self.notes.append(f"{where}: tool result for call {raw_id!r} answers no earlier call; kept as an observation")
            metadata["orphan_call_id"] = raw_id
            if is_error:
                metadata["is_error"] = True
            return ImportedMessage(
                key=node.key, role=Role.USER, kind=MessageKind.OBSERVATION, parts=[TextPart(text=text), *images],
                attachments=attachments, participant_key=node.participant, source_ref=node.location,
                created_at=node.timestamp, metadata=metadata,
            )
        outcome = record.get("toolUseResult")
        if isinstance(outcome, dict) and isinstance(outcome.get("agentId"), str):
            metadata["agent_id"] = outcome["agentId"]
        return ImportedMessage(
            key=node.key, role=Role.TOOL,
            parts=[ToolResultPart(call_id=call_id, text=text, is_error=is_error, images=tuple(images))],
            attachments=attachments, participant_key=node.participant, source_ref=node.location,
            created_at=node.timestamp, metadata=metadata,
        )

    # ----------------------------------------------------------------- other records

    def _side_message(self, record: dict[str, Any], rtype: str, key: str, participant: str, location: str, timestamp: datetime | None) -> ImportedMessage:
        role = Role.SYSTEM
        kind = MessageKind.META
        metadata: dict[str, Any] = {"record_type": rtype}
        if rtype == "summary":
            kind = MessageKind.SUMMARY
            text = str(record.get("summary") or "")
            if isinstance(record.get("leafUuid"), str):
                metadata["leaf_uuid"] = record["leafUuid"]
        elif rtype == "progress":
            kind = MessageKind.PROGRESS
            data = record.get("data")
            text = json_text(data)
            if isinstance(data, dict) and isinstance(data.get("type"), str):
                metadata["progress_type"] = data["type"]
            for source_key, meta_key in (("toolUseID", "tool_use_id"), ("parentToolUseID", "parent_tool_use_id")):
                if isinstance(record.get(source_key), str):
                    metadata[meta_key] = record[source_key]
        elif rtype == "system":
            content = record.get("content")
            text = content if isinstance(content, str) else json_text({k: v for k, v in record.items() if k not in _ENVELOPE})
            for source_key in ("subtype", "level"):
                if isinstance(record.get(source_key), str):
                    metadata[source_key] = record[source_key]
        elif rtype == "file-history-snapshot":
            text = json_text(record.get("snapshot"))
            if isinstance(record.get("messageId"), str):
                metadata["message_id"] = record["messageId"]
        elif rtype == "queue-operation":
            role = Role.USER
            content = record.get("content")
            text = content if isinstance(content, str) else ""
            if isinstance(record.get("operation"), str):
                metadata["operation"] = record["operation"]
        else:
            if rtype not in METADATA_TYPES and rtype != "untyped":
                self.notes.append(f"{location}: unknown record type {rtype!r} kept as meta")
            attachment = record.get("attachment")
            if rtype == "attachment" and isinstance(attachment, dict) and isinstance(attachment.get("type"), str):
                metadata["attachment_type"] = attachment["type"]
            text = json_text({k: v for k, v in record.items() if k not in _ENVELOPE})
        return ImportedMessage(
            key=key, role=role, kind=kind, parts=[TextPart(text=text)], participant_key=participant,
            source_ref=location, created_at=timestamp, metadata=metadata,
        )

    # ----------------------------------------------------------------- tree

    def link(self) -> dict[str, _Node]:
        """Resolve parents, join extra roots, splice side records; return virtual roots."""
        roots: dict[str, _Node] = {}
        for key in self.participants:
            roots[key] = _Node(order=0, key="", participant=key, raw_parent=None, conversational=False, location="")
        missing: list[_Node] = []
        quiet: set[int] = set()
        for node in self.nodes:
            parent = self.by_uuid.get(node.raw_parent) if node.raw_parent else None
            if node.raw_parent and parent is None:
                missing.append(node)
                quiet.add(id(node))
            if parent is not None and (parent.participant != node.participant or parent.order >= node.order):
                quiet.add(id(node))
                parent = None
            _attach(node, parent if parent is not None else roots[node.participant])
        if missing:
            self.notes.append(
                f"{missing[0].location}: {len(missing)} record(s) name a parent that is not in the "
                f"file (first: {missing[0].raw_parent}); linked to the record before them"
            )
        for key, root in roots.items():
            starts = [n for n in sorted(root.children, key=lambda n: n.order) if _has_conversation(n)]
            for extra in starts[1:]:
                # a root continues the record before it of its own session; the first
                # root of another session (lines of two sessions interleaved in one
                # file) stays a root: its own branch, never turns of the other session
                previous = max(
                    (n for n in self.nodes if n.participant == key and n.session == extra.session and n.order < extra.order),
                    key=lambda n: n.order, default=None,
                )
                if previous is None:
                    self.notes.append(f"{extra.location}: session {extra.session} starts its own branch (its lines are interleaved with another session's)")
                    continue
                if id(extra) not in quiet:
                    self.notes.append(f"{extra.location}: a second conversation root was linked after {previous.location}")
                _attach(extra, previous)
        everything = [*roots.values(), *self.nodes]
        changed = True
        while changed:
            changed = False
            for node in everything:
                changed = self._splice(node) or changed
        return roots

    def _splice(self, node: _Node) -> bool:
        """Chain results and side-only subtrees of ``node`` in file order; True if changed."""
        if len(node.children) < 2:
            return False
        kids = sorted(node.children, key=lambda n: n.order)
        inline = [k for k in kids if self._answers(k, node) or not _has_conversation(k)]
        if not inline:
            return False
        units: list[tuple[_Node, _Node, list[_Node]]] = []
        for kid in inline:
            if kid.conversational:
                units.append((kid, kid, list(kid.children)))
            else:
                chain = _subtree(kid)
                for a, b in pairwise(chain):
                    _attach(b, a)
                units.append((chain[0], chain[-1], []))
        rest = [k for k in kids if not any(k is head for head, _, _ in units)]
        previous = node
        for head, tail, _ in units:
            _attach(head, previous)
            previous = tail
        for _, tail, continuations in units:
            for child in continuations:
                if child is not previous and child.parent is tail:
                    _attach(child, previous)
        for child in rest:
            _attach(child, previous)
        return True

    @staticmethod
    def _answers(kid: _Node, node: _Node) -> bool:
        return kid.results_only and bool(kid.answers) and kid.answers <= node.call_ids

    # ----------------------------------------------------------------- output

    def emit(self, roots: dict[str, _Node]) -> tuple[list[ImportedMessage], str | None]:
        """Messages in parent-before-child order and the active leaf message key."""
        messages: list[ImportedMessage] = []
        heap: list[tuple[int, int, _Node]] = []
        for root in roots.values():
            for child in root.children:
                heapq.heappush(heap, (child.order, id(child), child))
        while heap:
            _, _, node = heapq.heappop(heap)
            parent = node.parent
            parent_key = parent.messages[-1].key if parent is not None and parent.messages else None
            for message in node.messages:
                message.parent_key = parent_key
                parent_key = message.key
                messages.append(message)
            for child in node.children:
                heapq.heappush(heap, (child.order, id(child), child))
        active_participant = MAIN if self.has_main else next(iter(self.participants))
        candidates = [n for n in self.nodes if n.participant == active_participant and n.messages]
        if not candidates:
            return messages, None
        newest = max(candidates, key=lambda n: (n.timestamp is not None, n.timestamp or datetime.min, n.order))
        leaf = newest
        while leaf.children:
            leaf = max(leaf.children, key=lambda n: n.order)
        return messages, leaf.messages[-1].key

    def link_reports(self, messages: list[ImportedMessage]) -> None:
        """Mark Task results that carry a child's final report (``child_report_for``)."""
        by_prompt: dict[str, str] = {}
        for message in messages:
            if message.participant_key != MAIN and message.role is Role.USER and message.parent_key is None:
                text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart))
                by_prompt.setdefault(text, message.participant_key)
        for message in messages:
            agent = message.metadata.pop("agent_id", None)
            if message.role is not Role.TOOL:
                continue
            target: str | None = None
            if isinstance(agent, str) and f"subagent:agent-{agent}" in self.participants:
                target = f"subagent:agent-{agent}"
            else:
                part = message.parts[0]
                prompt = self.task_prompts.get(part.call_id) if isinstance(part, ToolResultPart) else None
                if prompt is not None:
                    target = by_prompt.get(prompt)
            if target is not None:
                message.metadata["child_report_for"] = target


def parse_claude_code(source: Source, *, fold_subagents: bool = True, array: list[Any] | None = None) -> ImportedTranscript:
    """Parse a Claude Code session file (and its ``subagents/`` folder when present).

    Args:
        source: the main session file.
        fold_subagents: read ``<stem>/subagents/agent-*.jsonl`` beside the file as child
            participants.
        array: the records of the JSON-array form (``logs/chat.json`` as hooks write it);
            ``None`` for JSON Lines.

    Raises:
        ImportFormatError: a record that is not an object (location ``"line 12"``,
            ``"record 12"`` in the array form, or
            ``"<stem>/subagents/agent-x.jsonl line 3"``), a user or
            assistant record without ``message``, malformed content blocks, or a line that
            is not JSON (other than a truncated last line, which is skipped with a note).
    """
    builder = _Builder(source)
    builder.read_file(source, "", None, array)
    extra_sources: list[Source] = []
    if fold_subagents and builder.has_main and array is None:
        for sub_path in subagent_files(source.path):
            sub = read_source(sub_path)
            extra_sources.append(sub)
            label = f"{source.path.stem}/subagents/{sub_path.name} "
            builder.read_file(sub, label, f"subagent:{sub_path.stem}")
    builder.registry.finish()
    roots = builder.link()
    messages, active = builder.emit(roots)
    builder.link_reports(messages)
    title_owner = MAIN if builder.has_main else next(iter(builder.participants))
    metadata: dict[str, Any] = {}
    if builder.session_id:
        metadata["session_id"] = builder.session_id
    if len(builder.sessions) > 1:
        metadata["session_ids"] = builder.sessions
    if builder.version:
        metadata["claude_code_version"] = builder.version
    if extra_sources:
        metadata["subagent_files"] = [str(s.path.relative_to(source.path.parent)) for s in extra_sources]
    if builder.skipped:
        metadata["skipped_raw_lines"] = builder.skipped
    for participant in builder.participants.values():
        participant.model = next(
            (m.model for m in messages if m.participant_key == participant.key and m.model and not m.model.startswith("<")),
            None,
        )
    everything = sorted([source, *extra_sources], key=lambda s: str(s.path))
    return ImportedTranscript(
        format=FORMAT,
        path=source.name,
        title=first_user_title(messages, title_owner),
        messages=messages,
        participants=list(builder.participants.values()),
        tree=True,
        active_leaf_key=active,
        notes=builder.notes,
        content_key=source_key(everything),
        metadata=metadata,
    )
