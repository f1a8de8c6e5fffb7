"""The output of a long-running command belongs to the command (seed 001 §6 problem 2:
a result's facts are kept; seed 000 §4.6).

Codex runs a command with ``exec_command``; when it outlives its ``yield_time_ms`` the
result says ``Process running with session ID N`` (and holds the output so far), and
the rest of the output arrives in the results of ``write_stdin`` calls naming
``session_id`` N.  A continuation's output is the command's output: its memory is
derived as the command's result (the command's tool and arguments: a ``sed -n`` read is
a read of its file, a test run a test run), naming the command's call; the running
result itself is a command still running, never a (empty) read.

The running command's memory carries :data:`SESSION_KEY` (``{"id", "tool",
"arguments_json", "call_id"}``) under the subject ``session:N``, so a continuation finds
its command by one indexed subject look-up (:func:`continued_command`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextledger.records.models import ToolCall, ToolMemory
    from contextledger.store.base import Scope
    from contextledger.store.sql import SqlStore, Writer

__all__ = ["CONTINUATION_TOOLS", "SESSION_KEY", "Command", "as_command", "command_output", "continued_command", "mark_command", "running_session", "session_subject"]

SESSION_KEY = "session"
"""Payload key of a running command's session (module docstring)."""

CONTINUATION_TOOLS = frozenset({"write_stdin"})
"""Tools whose result continues the output of the command of their ``session_id``."""

_RUNNING = re.compile(r"^Process running with session ID (\d+)\s*$", re.M)
_BANNER_CHARS = 600


@dataclass(frozen=True, kw_only=True)
class Command:
    """The command a continuation's output belongs to.

    Attributes:
        tool: its tool name (``exec_command``).
        arguments_json: its recorded arguments.
        call_id: its provider call id.
    """

    tool: str
    arguments_json: str
    call_id: str

    def payload(self, session: int) -> dict[str, Any]:
        """The :data:`SESSION_KEY` value of a result of this command still running."""
        return {"id": session, "tool": self.tool, "arguments_json": self.arguments_json, "call_id": self.call_id}


def running_session(text: str) -> int | None:
    """The session id a Codex result's banner says the process still runs under, else
    ``None`` (the banner is in the first few hundred characters)."""
    m = _RUNNING.search(text[:_BANNER_CHARS])
    return int(m.group(1)) if m else None


def command_output(text: str) -> bool:
    """Whether a continuation's result is command output (Codex's ``Chunk ID: …``
    banner), not a failure of the continuation itself ("write_stdin failed: stdin is
    closed …")."""
    return text.lstrip().startswith("Chunk ID: ")


def session_subject(session: int) -> str:
    """The subject key of a running command's memory."""
    return f"session:{session}"


def _session_of(call: ToolCall) -> int | None:
    if call.tool_name.strip().lower() not in CONTINUATION_TOOLS:
        return None
    try:
        args = json.loads(call.arguments_json)
    except ValueError:
        return None
    value = args.get("session_id") if isinstance(args, dict) else None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, str) and value.isdigit() else None


def as_command(tool: str, arguments_json: str, call_id: str, raw_text: str, continues: Command | None) -> tuple[Command, int | None]:
    """``(command, session)`` of a result: the command it is derived as — ``continues``
    when the result is its output (:func:`command_output`), else the result's own call —
    and the session the command still runs under (:func:`running_session`, else
    ``None``)."""
    if continues is not None and command_output(raw_text):
        return continues, running_session(raw_text)
    return Command(tool=tool, arguments_json=arguments_json, call_id=call_id), running_session(raw_text)


def mark_command(payload: dict[str, Any], subject: str | None, command: Command, call_id: str, session: int | None) -> str | None:
    """Mark in ``payload`` the command a result (of call ``call_id``) belongs to —
    ``continues_call`` when it is another call's — and, while it still runs, its
    session (:data:`SESSION_KEY`); returns the memory's subject (``session:N`` while
    running, else ``subject``)."""
    if command.call_id != call_id:
        payload["continues_call"] = command.call_id
    if session is None:
        return subject
    payload[SESSION_KEY] = command.payload(session)
    return session_subject(session)


def continued_command(store: SqlStore, w: Writer, scope: Scope, call: ToolCall) -> Command | None:
    """The command whose output the result of ``call`` continues (a ``write_stdin`` of a
    session an earlier command runs under, on ``call``'s lineage), else ``None``.  One
    indexed read of the session's memories, inside ``w``'s transaction."""
    session = _session_of(call)
    if session is None:
        return None
    segments = store.lineage(scope, call.branch_id, conn=w.conn)
    found: list[ToolMemory] = store.memories(scope, call.conversation_id, segments, subject_keys=[session_subject(session)], conn=w.conn)
    for m in sorted(found, key=lambda m: (m.seq, m.id), reverse=True):
        value = m.payload.get(SESSION_KEY)
        if m.seq < call.seq and isinstance(value, dict) and value.get("id") == session:
            return Command(tool=str(value["tool"]), arguments_json=str(value["arguments_json"]), call_id=str(value["call_id"]))
    return None
