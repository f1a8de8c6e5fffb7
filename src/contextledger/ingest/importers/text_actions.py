"""Text actions: agents that write their command into the assistant text.

SWE-agent (without function calling), SWE-smith, SWE-Play and the nebius trajectories do
not use structured tool calls: the assistant turn ends with a command (a fenced ``` block,
or an OpenHands ``<function=NAME><parameter=K>V</parameter></function>`` block) and the
environment's output comes back as the next *user* message.  The importer keeps the
assistant turn as plain text with ``metadata["action"]`` and turns the following user turn
into a ``MessageKind.OBSERVATION`` message that names the action.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from contextledger.ingest.transcript import ImportedMessage
from contextledger.records.enums import MessageKind, Role
from contextledger.records.parts import ToolCallPart, parts_text

__all__ = [
    "TextAction",
    "assistant_text",
    "fenced_action",
    "function_block_action",
    "has_function_block",
    "mark_text_actions",
    "note_unanswered_actions",
    "shell_action",
]

_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)(?:</function>|\Z)", re.S)
_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)(?:</parameter>|(?=<parameter=)|\Z)", re.S)
_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.S)


@dataclass(frozen=True)
class TextAction:
    """A command found in assistant text.

    Attributes:
        action: the command text (the fenced block body, the SWE-agent ``action`` field, or
            the whole ``<function=…>`` block).
        tool: the command's tool name (``<function=NAME>``; else the first word).
        args: parsed ``<parameter=…>`` values (OpenHands text actions only).
    """

    action: str
    tool: str
    args: dict[str, str] = field(default_factory=dict)


def has_function_block(text: str) -> bool:
    """True when ``text`` holds an OpenHands ``<function=NAME>`` block."""
    return _FUNCTION.search(text) is not None


def _strip_one_newline(value: str) -> str:
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def function_block_action(text: str) -> TextAction | None:
    """The last ``<function=NAME>…</function>`` block of ``text`` (an unclosed final
    block counts), with its ``<parameter=K>V</parameter>`` values; ``None`` if absent."""
    matches = list(_FUNCTION.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    args = {m.group(1): _strip_one_newline(m.group(2)) for m in _PARAMETER.finditer(last.group(2))}
    return TextAction(action=last.group(0).strip(), tool=last.group(1), args=args)


def shell_action(command: str) -> TextAction | None:
    """A SWE-agent command line (``"open foo.py 10"``); tool = its first word."""
    stripped = command.strip()
    if not stripped:
        return None
    return TextAction(action=stripped, tool=stripped.split(None, 1)[0])


def fenced_action(text: str) -> TextAction | None:
    """The last fenced ``` block of ``text`` as a SWE-agent command; ``None`` if absent."""
    matches = list(_FENCE.finditer(text))
    if not matches:
        return None
    return shell_action(matches[-1].group(1))


def mark_text_actions(
    messages: Sequence[ImportedMessage],
    extract: Callable[[ImportedMessage], TextAction | None],
) -> int:
    """Annotate text actions in place; return how many assistant turns carry one.

    Each assistant message whose action ``extract`` finds gets ``metadata["action"]``
    (plus ``"action_tool"`` and, when parsed, ``"action_args"``).  The user message that
    immediately follows it becomes ``MessageKind.OBSERVATION`` with ``metadata["action"]``
    and ``metadata["action_tool"]``.  Any other user message (the task statement, a reply
    to a turn without an action) stays ``CHAT``.
    """
    count = 0
    pending: TextAction | None = None
    for message in messages:
        if message.role is Role.ASSISTANT:
            pending = extract(message)
            if pending is not None:
                count += 1
                message.metadata["action"] = pending.action
                message.metadata["action_tool"] = pending.tool
                if pending.args:
                    message.metadata["action_args"] = dict(pending.args)
            continue
        if message.role is Role.USER and pending is not None and message.kind is MessageKind.CHAT:
            message.kind = MessageKind.OBSERVATION
            message.metadata["action"] = pending.action
            message.metadata["action_tool"] = pending.tool
        pending = None
    return count


def note_unanswered_actions(messages: Sequence[ImportedMessage], notes: list[str]) -> int:
    """Append ``"<source_ref>: action '<tool>' has no result"`` to ``notes`` for every text
    action (an assistant turn with ``metadata["action"]`` and no tool call) that no
    observation answers before the next action or the end; return how many.

    Mirrors how the loader pairs a text action with its observation (the next
    ``OBSERVATION`` user message), so each note names a call the import leaves pending.
    """
    count = 0
    pending: ImportedMessage | None = None

    def note(message: ImportedMessage) -> None:
        nonlocal count
        count += 1
        notes.append(f"{message.source_ref or message.key}: action {message.metadata.get('action_tool') or 'action'!r} has no result")

    for message in messages:
        if message.role is Role.ASSISTANT and message.metadata.get("action") and not any(isinstance(p, ToolCallPart) for p in message.parts):
            if pending is not None:
                note(pending)
            pending = message
        elif message.role is Role.USER and message.kind is MessageKind.OBSERVATION:
            pending = None
    if pending is not None:
        note(pending)
    return count


def assistant_text(message: ImportedMessage) -> str:
    """The text parts of ``message`` joined with newlines."""
    return parts_text(message.parts)
