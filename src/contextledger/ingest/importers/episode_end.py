"""The last action of an agent trajectory that ends with it (SWE-agent, mini-swe-agent,
nebius): no observation follows, because the episode stopped there (``submit``, an exit
on cost, an error of the model API).

A trajectory that records how the episode ended gives that action its result:
``"exit status: <status>"`` and the submitted patch, when there is one (SWE-agent
``info.exit_status`` / ``info.submission``, mini-swe-agent's ``role: exit`` message,
nebius ``exit_status`` / ``generated_patch``).  A ``submitted`` episode's result is read
as any result; any other exit says nothing of the action's own outcome: status
``unknown``.  A trajectory that records no exit marks the action as the episode's end,
status ``unknown`` — never left pending, since no result will come.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contextledger.ingest.importers.call_ids import CallIdRegistry
from contextledger.ingest.transcript import ImportedMessage
from contextledger.records.enums import MessageKind, Role
from contextledger.records.parts import TextPart, ToolCallPart, ToolResultPart, parts_text

__all__ = ["NO_EXIT_TEXT", "EpisodeEnd", "answer_final_action", "episode_end"]

NO_EXIT_TEXT = "(the trajectory ends with this action; it records no result and no exit status)"
"""The result text of a final action when the trajectory records no exit."""


@dataclass(frozen=True)
class EpisodeEnd:
    """How a trajectory says its episode ended.

    Attributes:
        exit_status: ``"submitted"``, ``"Submitted"``, ``"exit_cost"`` … or ``None``.
        submission: the submitted patch text, or ``None``.
        where: the key it was read from (``"info.exit_status"``) for notes and
            ``source_ref``; ``""`` when nothing was recorded.
    """

    exit_status: str | None
    submission: str | None
    where: str


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def episode_end(document: Mapping[str, Any], messages: list[ImportedMessage]) -> EpisodeEnd:
    """The :class:`EpisodeEnd` of a SWE-agent family ``document``: ``info`` first, then
    the top-level ``exit_status`` / ``submission`` / ``generated_patch``, then the
    ``metadata["exit_status"]`` and text of a final ``META`` exit message in
    ``messages``."""
    info = document.get("info")
    sources: list[tuple[str, Mapping[str, Any]]] = [("info", info)] if isinstance(info, Mapping) else []
    sources.append(("", document))
    for prefix, source in sources:
        status = _text(source.get("exit_status"))
        patch = _text(source.get("submission")) or _text(source.get("generated_patch"))
        if status is not None or patch is not None:
            return EpisodeEnd(status, patch, f"{prefix}.exit_status" if prefix else "exit_status")
    last = messages[-1] if messages else None
    if last is not None and last.kind is MessageKind.META and isinstance(last.metadata.get("exit_status"), str):
        return EpisodeEnd(last.metadata["exit_status"], _text(parts_text(last.parts)), last.source_ref or last.key)
    return EpisodeEnd(None, None, "")


def _result_text(end: EpisodeEnd) -> str:
    lines = [f"exit status: {end.exit_status}"] if end.exit_status else []
    if end.submission:
        lines.append(end.submission)
    return "\n".join(lines) or NO_EXIT_TEXT


def _final_action(messages: list[ImportedMessage]) -> int | None:
    """Index of the last assistant message when it holds an action (tool calls or a text
    action) that nothing after it answers (only ``SYSTEM`` / ``META`` messages follow)."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role is Role.ASSISTANT:
            acts = any(isinstance(p, ToolCallPart) for p in m.parts) or bool(m.metadata.get("action"))
            return i if acts and m.metadata.get("is_demo") is not True else None
        if m.role in (Role.USER, Role.TOOL):
            return None
    return None


def answer_final_action(messages: list[ImportedMessage], end: EpisodeEnd, registry: CallIdRegistry, notes: list[str]) -> int:
    """Give the unanswered last action of ``messages`` its result from ``end`` (module
    docstring), inserted right after it; return how many results were added (one per
    tool call, one for a text action, 0 when the last action is answered).

    A note names what was done: ``"history[4]: action 'submit' ends the trajectory;
    result from info.exit_status 'submitted'"``, or ``"…; no exit recorded, status
    unknown"``.
    """
    index = _final_action(messages)
    if index is None:
        return 0
    message = messages[index]
    text = _result_text(end)
    status = {} if end.exit_status and end.exit_status.strip().lower() == "submitted" else {"result_status": "unknown"}
    where = end.where or message.source_ref or message.key
    calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
    added: list[ImportedMessage] = []
    for k, call in enumerate(calls):
        answered = registry.result(call.call_id, where) or call.call_id
        added.append(ImportedMessage(
            key=f"{message.key}:end:{k}", role=Role.TOOL, parts=[ToolResultPart(call_id=answered, text=text)],
            participant_key=message.participant_key, source_ref=where, created_at=message.created_at, metadata=dict(status),
        ))
    if not calls:
        added.append(ImportedMessage(
            key=f"{message.key}:end", role=Role.USER, kind=MessageKind.OBSERVATION, parts=[TextPart(text=text)],
            participant_key=message.participant_key, source_ref=where, created_at=message.created_at,
            metadata={"action": message.metadata["action"], "action_tool": message.metadata.get("action_tool") or "action", **status},
        ))
    messages[index + 1:index + 1] = added
    tool = calls[0].tool_name if calls else message.metadata.get("action_tool") or "action"
    how = f"result from {end.where} {end.exit_status!r}" if end.exit_status else (f"result from {end.where}" if end.where else "no exit recorded")
    if status:
        how += ", status unknown"
    notes.append(f"{message.source_ref or message.key}: action {tool!r} ends the trajectory; {how}")
    return len(added)
