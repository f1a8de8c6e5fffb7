"""Importer for Aider chat histories (format ``"aider-history"``).

Aider appends every session to ``.aider.chat.history.md`` (its ``InputOutput`` class):

* ``# aider chat started at 2025-07-15 11:38:37`` opens a session;
* ``#### text`` lines are what the user typed (one line each; a multi-line prompt is a run
  of them).  Aider ends each with the two-space Markdown line break, but the prefix alone
  marks the line (Aider's own reader of this file, ``split_chat_history_markdown``, goes
  by ``#### `` only), so a history whose trailing spaces an editor stripped reads the same;
* ``> text`` starts a tool line — aider's own output (startup banner, token counts,
  "Applied edit to F", "Commit …", "Running CMD", confirmation prompts, errors); a
  multi-line one continues on lines without ``>`` up to the line that ends with the
  two-space break;
* everything else is the assistant's reply, with reasoning wrapped in
  ``<thinking-content-…>`` tags (kept as ``ThinkingPart``, never sent).

Conversion (one conversation per file; each session starts with a ``META`` marker and
its messages carry the session's start time):

* the assistant's *edit blocks* become tool calls of its message, in order:
  SEARCH/REPLACE blocks (``aider_search_replace`` with ``path`` / ``search`` /
  ``replace``), whole-file blocks of the ``whole`` edit format (``aider_whole_file`` with
  ``path`` / ``content``) and unified diffs of the ``udiff`` format (``aider_udiff`` with
  ``path`` / ``diff``); their results come from the tool lines that follow ("Applied
  edit to F" and the commit; a SEARCH block named in a "failed to match" error, or an
  edit no line confirms, is a failed result);
* each ``Running CMD`` line after the reply is a shell call (``aider_run`` with
  ``command``) whose result says whether its output was added to the chat (Aider does
  not write command output to this file, so the call's status is ``unknown``: the
  history does not say whether it succeeded);
* ``/run CMD``, ``!CMD`` and ``/test CMD`` typed by the user are kept as the user's
  message followed by an observation of the command (its output when the history holds
  it: older Aider versions echoed it as tool lines; without it, status ``unknown``);
* answers to confirmation prompts and the remaining tool lines are ``META``.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from contextledger.ingest.importers.aider_blocks import EditBlock, find_edit_blocks, split_thinking
from contextledger.ingest.importers.build import first_user_title, main_participant
from contextledger.ingest.importers.call_ids import CallIdRegistry
from contextledger.ingest.importers.common import Source, parse_timestamp, source_key
from contextledger.ingest.transcript import ImportedMessage, ImportedTranscript
from contextledger.records.enums import MessageKind, Role
from contextledger.records.parts import Part, TextPart, ThinkingPart, ToolCallPart, ToolResultPart

__all__ = ["FORMAT", "parse_aider_history"]

FORMAT = "aider-history"

_SESSION = re.compile(r"^# aider chat started at (.+?)\s*$")
_CONFIRM = re.compile(r"\?\s.*\[(?:Yes|No)\]:\s*\S*\s*$")
_MODEL = re.compile(r"^(?:Main model|Model): (\S+) with (\S+) edit format")
_APPLIED = re.compile(r"^Applied edit to (.+?)\s*$")
_NOT_APPLIED = re.compile(r"^Did not apply edit to (.+?)(?: \(--dry-run\))?\s*$")
_NO_MATCH = re.compile(r"SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in (.+)")
_OTHERS_APPLIED = re.compile(r"The other \d+ SEARCH/REPLACE blocks? (?:were|was) applied successfully")
_RUNNING = re.compile(r"^Running (.+?)\s*$")
_ADDED_OUTPUT = re.compile(r"^Added \d+ lines? of output to the chat\.")
_COMMIT = re.compile(r"^Commit [0-9a-f]{7,} ")
_FENCE = re.compile(r"^\s*(```+|~~~+)")
_USER_COMMAND = re.compile(r"^(?:/(run|test)\s+|!)(.+)$", re.S)


@dataclass
class _Block:
    """A run of lines of one kind: ``session``, ``user``, ``tool`` or ``assistant``."""

    kind: str
    text: str
    line: int


def _strip_break(line: str) -> str:
    return line[:-2] if line.endswith("  ") else line


def _is_user_line(line: str) -> bool:
    """A typed line: ``#### text`` (with or without the two-space break: a ``#### ``
    heading in a reply reads as typed, as Aider itself reads it), a bare ``####`` (blank
    input), or ``####text`` ending in the two-space break."""
    return line.startswith("#### ") or (line.startswith("####") and (line.endswith("  ") or not line[4:].strip()))


def _is_tool_line(line: str) -> bool:
    """A tool line: ``> text`` or a bare ``>`` (``>>>>>>> REPLACE`` is not one)."""
    return line.startswith("> ") or line.rstrip() == ">"


def _starts_block(line: str) -> bool:
    return _is_user_line(line) or _is_tool_line(line) or _SESSION.match(line) is not None


def _tool_block(lines: list[str], i: int) -> tuple[str, int]:
    """The text of the tool block starting at ``lines[i]`` and the index after it."""
    first = lines[i][1:]
    out = [first[1:] if first.startswith(" ") else first]
    if lines[i].endswith("  ") or lines[i].rstrip() == ">":
        return _strip_break(out[0]), i + 1
    j = i + 1
    while j < len(lines):
        line = lines[j]
        if _starts_block(line):
            break
        out.append(line)
        j += 1
        if line.endswith("  "):
            return _strip_break("\n".join(out)), j
    # no line break closed it (older histories): the block ends at its first blank line
    for k, line in enumerate(out[1:], start=1):
        if not line.strip():
            return "\n".join(out[:k]), i + k
    return "\n".join(out), j


def _assistant_end(lines: list[str], i: int) -> int:
    """The index after the reply starting at ``lines[i]``: the next typed, tool or session
    line outside a fenced block."""
    fence: str | None = None
    while i < len(lines):
        line = lines[i]
        marker = _FENCE.match(line)
        if marker and (fence is None or marker.group(1).startswith(fence)):
            fence = marker.group(1) if fence is None else None
        elif fence is None and _starts_block(line):
            return i
        i += 1
    return i


def split_blocks(text: str) -> Iterator[_Block]:
    """The blocks of a history, in order (blank reply runs dropped)."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if _SESSION.match(line):
            yield _Block("session", line, i + 1)
            i += 1
        elif _is_user_line(line):
            start = i
            typed: list[str] = []
            while i < len(lines) and _is_user_line(lines[i]):
                body = lines[i][4:]
                typed.append(_strip_break(body[1:] if body.startswith(" ") else body))
                i += 1
            yield _Block("user", "\n".join(typed), start + 1)
        elif _is_tool_line(line):
            body, nxt = _tool_block(lines, i)
            yield _Block("tool", body, i + 1)
            i = nxt
        else:
            start = i
            i = max(_assistant_end(lines, i), i + 1)
            chunk = "\n".join(lines[start:i]).strip("\n")
            if chunk.strip():
                yield _Block("assistant", chunk, start + 1)


@dataclass
class _Turn:
    """The assistant message being completed by the tool lines that follow it."""

    message: ImportedMessage
    edits: list[tuple[EditBlock, str]] = field(default_factory=list)
    applied: set[str] = field(default_factory=set)
    refused: dict[str, str] = field(default_factory=dict)
    failed_search: list[tuple[str, str]] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)
    commands: list[tuple[str, str, bool]] = field(default_factory=list)


class _History:
    """Builds the messages of one history file."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.notes: list[str] = list(source.notes)
        self.registry = CallIdRegistry(self.notes)
        self.messages: list[ImportedMessage] = []
        self.edit_format = ""
        self.model: str | None = None
        self.started: datetime | None = None
        self.turn: _Turn | None = None
        self.command: ImportedMessage | None = None
        self.sessions = 0

    def add(self, block: _Block) -> None:
        where = f"line {block.line}"
        key = f"line:{block.line}"
        if block.kind == "session":
            self.finish_turn()
            self.sessions += 1
            self.started = parse_timestamp(_SESSION.match(block.text).group(1).replace(" ", "T", 1))  # type: ignore[union-attr]
            self._meta(block.text.lstrip("# "), key, where, "session")
        elif block.kind == "user":
            self.finish_turn()
            self._user(block.text, key, where)
        elif block.kind == "assistant":
            self.finish_turn()
            self._assistant(block.text, key, where)
        else:
            self._tool(block.text, key, where)

    def _meta(self, text: str, key: str, where: str, what: str) -> None:
        self.messages.append(
            ImportedMessage(
                key=key, role=Role.SYSTEM, kind=MessageKind.META, parts=[TextPart(text=text)], source_ref=where,
                created_at=self.started, metadata={"aider": what},
            )
        )

    def _user(self, text: str, key: str, where: str) -> None:
        if (_CONFIRM.search(text) and "\n" not in text) or not text.strip():
            self._meta(text, key, where, "confirmation" if text.strip() else "blank input")
            return
        self.messages.append(ImportedMessage(key=key, role=Role.USER, parts=[TextPart(text=text)], source_ref=where, created_at=self.started))
        command = _USER_COMMAND.match(text.strip())
        if command:
            tool = command.group(1) or "run"
            self.command = ImportedMessage(
                key=f"{key}#output", role=Role.USER, kind=MessageKind.OBSERVATION, parts=[], source_ref=where,
                created_at=self.started, metadata={"action": command.group(2).strip(), "action_tool": f"aider_{tool}"},
            )

    def _assistant(self, text: str, key: str, where: str) -> None:
        thinking, reply = split_thinking(text)
        message = ImportedMessage(key=key, role=Role.ASSISTANT, source_ref=where, created_at=self.started, model=self.model)
        message.parts.extend(ThinkingPart(text=t) for t in thinking)
        if reply.strip():
            message.parts.append(TextPart(text=reply))
        turn = _Turn(message)
        for k, block in enumerate(find_edit_blocks(reply, self.edit_format)):
            call_id = self.registry.call(f"aider_{key.split(':')[1]}_{k}", where)
            message.parts.append(ToolCallPart(call_id=call_id, tool_name=block.tool, arguments_json=block.arguments_json()))
            turn.edits.append((block, call_id))
        self.messages.append(message)
        self.turn = turn

    def _tool(self, text: str, key: str, where: str) -> None:
        first = text.split("\n", 1)[0]
        model = _MODEL.match(first)
        if model:
            self.model, self.edit_format = model.group(1), model.group(2)
        if self.command is not None and not _CONFIRM.search(first):
            if not (_ADDED_OUTPUT.match(first) or first.startswith(("Add ", "Running "))):
                self.command.parts.append(TextPart(text=text))
                return
            self.command.metadata["added_to_chat"] = first
        if self.turn is not None:
            _record_outcome(self.turn, text, first)
        if text.strip():
            self._meta(text, key, where, "tool")

    def finish_turn(self) -> None:
        """Append the results of the finished turn's edits and commands, then any command
        observation of the user."""
        if self.command is not None:
            if not self.command.parts:
                note = self.command.metadata.get("added_to_chat") or "not added to the chat"
                self.command.parts.append(TextPart(text=f"(output not recorded in the history; {note})"))
                self.command.metadata["result_status"] = "unknown"
            self.messages.append(self.command)
            self.command = None
        turn, self.turn = self.turn, None
        if turn is None:
            return
        for block, call_id in turn.edits:
            self._edit_result(turn, block, call_id)
        for k, (command, added, was_added) in enumerate(turn.commands):
            call_id = self.registry.call(f"aider_run_{turn.message.key.split(':')[1]}_{k}", turn.message.source_ref)
            turn.message.parts.append(ToolCallPart(call_id=call_id, tool_name="aider_run", arguments_json=_json({"command": command})))
            text = f"ran `{command}`; " + (added if was_added else "output not recorded in the history")
            self._result(turn, call_id, text, is_error=False, unknown=True)

    def _edit_result(self, turn: _Turn, block: EditBlock, call_id: str) -> None:
        key = _path_key(block.path)
        failure = next((t for t, path in turn.failed_search if path == key and block.search and block.search.strip() in t), None)
        if failure is not None:
            self._result(turn, call_id, failure, is_error=True)
        elif key in turn.refused:
            self._result(turn, call_id, turn.refused[key], is_error=True)
        elif key in turn.applied or any(_OTHERS_APPLIED.search(t) for t, _ in turn.failed_search):
            self._result(turn, call_id, "\n".join([f"Applied edit to {block.path}", *turn.commits]), is_error=False)
        else:
            self._result(turn, call_id, f"not applied: the history records no 'Applied edit to {block.path}'", is_error=True)

    def _result(self, turn: _Turn, call_id: str, text: str, *, is_error: bool, unknown: bool = False) -> None:
        """Append the result of ``call_id``; ``unknown``: the history does not say how the
        call ended (``metadata["result_status"] = "unknown"``)."""
        answered = self.registry.result(call_id, turn.message.source_ref) or call_id
        parts: list[Part] = [ToolResultPart(call_id=answered, text=text, is_error=is_error)]
        n = sum(1 for m in self.messages if m.key.startswith(f"{turn.message.key}#"))
        self.messages.append(
            ImportedMessage(
                key=f"{turn.message.key}#{n + 1}", role=Role.TOOL, parts=parts, source_ref=turn.message.source_ref, created_at=self.started,
                metadata={"result_status": "unknown"} if unknown else {},
            )
        )


def _path_key(path: str) -> str:
    """The spelling of a path two aider lines are compared in: forward slashes, ``.`` and
    ``..`` folded (``.\\packages\\a.ts`` and ``packages/a.ts`` name one file; aider on
    Windows reports ``Applied edit to packages\\a.ts`` for a block headed ``packages/a.ts``)."""
    return posixpath.normpath(path.strip().replace("\\", "/")) if path.strip() else ""


def _record_outcome(turn: _Turn, text: str, first: str) -> None:
    """Note what one tool line says about the turn's edits and commands (paths by
    :func:`_path_key`)."""
    applied, refused, running = _APPLIED.match(first), _NOT_APPLIED.match(first), _RUNNING.match(first)
    no_match = _NO_MATCH.search(text)
    if applied:
        turn.applied.add(_path_key(applied.group(1)))
    elif refused:
        turn.refused[_path_key(refused.group(1))] = first
    elif running:
        turn.commands.append((running.group(1), "", False))
    elif _ADDED_OUTPUT.match(first) and turn.commands:
        turn.commands[-1] = (turn.commands[-1][0], first, True)
    elif _COMMIT.match(first):
        turn.commits.append(first)
    elif no_match:
        turn.failed_search.append((text, _path_key(no_match.group(1))))


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def parse_aider_history(source: Source) -> ImportedTranscript:
    """Parse an Aider ``.aider.chat.history.md`` file.

    A file that is not UTF-8 was decoded as Latin-1 by :func:`~.common.read_source`
    (:data:`~.common.LATIN1_FALLBACK`); its note (the first bad byte) leads the notes.

    Raises:
        ImportFormatError: never for the Markdown itself (every line has a reading);
            only the file-level errors of :func:`~.common.read_source`.
    """
    history = _History(source)
    for block in split_blocks(source.text):
        history.add(block)
    history.finish_turn()
    history.registry.finish()
    messages = history.messages
    return ImportedTranscript(
        format=FORMAT,
        path=source.name,
        title=first_user_title(messages),
        messages=messages,
        participants=[main_participant(history.model)],
        notes=history.notes,
        content_key=source_key([source]),
        metadata={"sessions": history.sessions, "edit_format": history.edit_format or None},
    )
