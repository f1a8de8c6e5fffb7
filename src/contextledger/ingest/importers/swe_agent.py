"""Importer for SWE-agent and mini-swe-agent trajectories (format ``"swe-agent"``).

Sources, in order of preference (the first present is used):

* ``history`` (SWE-agent ``.traj``): what the model saw; OpenAI-style messages, some with
  ``tool_calls`` and ``role: tool`` results linked by ``tool_call_ids``; assistant turns of
  text-action runs carry the command in ``action``.
* ``messages`` (mini-swe-agent): OpenAI-style with ``tool_calls``; a final ``role: exit``
  message is kept as ``MessageKind.META``.
* ``trajectory`` as a list of ``{role: system|user|ai, text}`` turns (nebius), commands in
  the last fenced block of each ``ai`` turn.
* ``trajectory`` as a list of ``{action, observation, response, thought}`` steps (used only
  when there is no ``history``; with a ``history`` that ends on an unanswered action, the
  last step's observation is that action's result: SWE-agent adds an observation to the
  history only when it builds the next query).

Every step's observation is its call's result; the last action of a trajectory that
ends with it takes its result from the recorded exit (:mod:`.episode_end`: exit status and
submission; status ``unknown`` when no exit is recorded); any other text action no
observation answers is named in the notes (``"history[4]: action 'edit' has no result"``).

``info`` (exit status, submission, model stats) and the other top-level keys are kept in
``ImportedTranscript.metadata``; ``metadata["exit_status"]`` is lifted out of ``info`` when
present there.
"""

from __future__ import annotations

from typing import Any

from contextledger.ingest.importers.build import (
    first_model,
    first_user_title,
    main_participant,
    top_level_metadata,
)
from contextledger.ingest.importers.call_ids import CallIdRegistry
from contextledger.ingest.importers.common import (
    Source,
    describe_json,
    fail,
    parse_timestamp,
    source_key,
)
from contextledger.ingest.importers.episode_end import answer_final_action, episode_end
from contextledger.ingest.importers.openai_messages import OpenAIMessageConverter
from contextledger.ingest.importers.text_actions import (
    TextAction,
    assistant_text,
    fenced_action,
    mark_text_actions,
    note_unanswered_actions,
    shell_action,
)
from contextledger.ingest.transcript import ImportedMessage, ImportedTranscript
from contextledger.records.enums import MessageKind, Role
from contextledger.records.parts import Part, TextPart, ToolCallPart

__all__ = ["FORMAT", "parse_swe_agent"]

FORMAT = "swe-agent"
_NEBIUS_ROLES: dict[str, Role] = {"system": Role.SYSTEM, "user": Role.USER, "ai": Role.ASSISTANT, "assistant": Role.ASSISTANT}


def _has_calls(messages: list[ImportedMessage]) -> bool:
    return any(isinstance(p, ToolCallPart) for m in messages for p in m.parts)


def _final_step(items: list[Any], steps: list[Any] | None) -> tuple[int, Any] | None:
    """``(index, observation)`` of the last trajectory step when ``items`` (the history)
    ends with that step's action unanswered: SWE-agent appends a step's observation to the
    history only when it builds the next query, so the observation of the final step
    (``submit`` …) is in ``trajectory`` alone.  ``None`` when the history answers its last
    action, the last step has no string observation, or the actions differ."""
    if not steps or not isinstance(steps[-1], dict) or not isinstance(steps[-1].get("observation"), str):
        return None
    last = next((i for i in range(len(items) - 1, -1, -1) if isinstance(items[i], dict) and items[i].get("role") == "assistant"), None)
    if last is None or items[last].get("is_demo") is True:
        return None
    if any(isinstance(item, dict) and item.get("role") in ("user", "tool") for item in items[last + 1:]):
        return None
    action, step_action = items[last].get("action"), steps[-1].get("action")
    if isinstance(action, str) and isinstance(step_action, str) and action.strip() != step_action.strip():
        return None
    return len(steps) - 1, steps[-1]["observation"]


def _from_openai_list(
    source: Source, key: str, items: list[Any], registry: CallIdRegistry, notes: list[str], steps: list[Any] | None = None
) -> list[ImportedMessage]:
    converter = OpenAIMessageConverter(
        source.path, registry, notes, extra_roles={"exit": (Role.SYSTEM, MessageKind.META)}
    )
    messages: list[ImportedMessage] = []
    for i, item in enumerate(items):
        message = converter.convert(item, f"msg:{i}", f"{key}[{i}]")
        messages.append(message)
        extra = item.get("extra")
        if isinstance(extra, dict):
            response = extra.get("response")
            if isinstance(response, dict):
                if isinstance(response.get("model"), str):
                    message.model = response["model"]
                message.created_at = parse_timestamp(response.get("created"))
            if isinstance(extra.get("exit_status"), str):
                message.metadata["exit_status"] = extra["exit_status"]
        if item.get("is_demo") is True:
            message.metadata["is_demo"] = True
        if isinstance(item.get("action"), str) and message.role is Role.ASSISTANT:
            message.metadata["source_action"] = item["action"]
    final = _final_step(items, steps)
    if final is not None:
        index, observation = final
        calls = [p for p in messages[-1].parts if isinstance(p, ToolCallPart)] if messages[-1].role is Role.ASSISTANT else []
        last_calls = [p for m in messages if m.role is Role.ASSISTANT for p in m.parts if isinstance(p, ToolCallPart)]
        reply: dict[str, Any] = {"role": "user", "content": observation}
        if last_calls:
            if len(calls) != 1:
                calls = []
            reply = {"role": "tool", "tool_call_id": calls[0].call_id, "content": observation} if calls else {}
        if reply:
            messages.append(converter.convert(reply, f"step:{index}:observation", f"trajectory[{index}].observation"))
    if not _has_calls(messages):
        def extract(message: ImportedMessage) -> TextAction | None:
            given = message.metadata.pop("source_action", None)
            if isinstance(given, str):
                return shell_action(given)
            return fenced_action(assistant_text(message))

        mark_text_actions(messages, extract)
    else:
        for message in messages:
            message.metadata.pop("source_action", None)
    return messages


def _from_nebius(source: Source, items: list[Any]) -> list[ImportedMessage]:
    messages: list[ImportedMessage] = []
    for i, item in enumerate(items):
        where = f"trajectory[{i}]"
        if not isinstance(item, dict):
            fail(source.path, where, f"expected a turn object, found {describe_json(item)}")
        role_value = item.get("role")
        role = _NEBIUS_ROLES.get(role_value) if isinstance(role_value, str) else None
        if role is None:
            fail(source.path, where, f"unknown role {role_value!r}")
        text = item.get("text")
        if text is None and role is Role.SYSTEM:
            text = item.get("system_prompt")
        if text is not None and not isinstance(text, str):
            fail(source.path, f"{where}.text", f"expected a string, found {describe_json(text)}")
        parts: list[Part] = [TextPart(text=text)] if text else []
        messages.append(ImportedMessage(key=f"msg:{i}", role=role, parts=parts, source_ref=where))
    mark_text_actions(messages, lambda m: fenced_action(assistant_text(m)))
    return messages


def _from_steps(source: Source, items: list[Any]) -> list[ImportedMessage]:
    messages: list[ImportedMessage] = []
    for i, step in enumerate(items):
        where = f"trajectory[{i}]"
        if not isinstance(step, dict):
            fail(source.path, where, f"expected a step object, found {describe_json(step)}")
        action = step.get("action")
        response = step.get("response")
        thought = step.get("thought")
        text = response if isinstance(response, str) else thought if isinstance(thought, str) else ""
        assistant = ImportedMessage(key=f"step:{i}", role=Role.ASSISTANT, parts=[TextPart(text=text)] if text else [], source_ref=where)
        if isinstance(action, str):
            assistant.metadata["source_action"] = action
        messages.append(assistant)
        observation = step.get("observation")
        if isinstance(observation, str):
            messages.append(
                ImportedMessage(key=f"step:{i}:observation", role=Role.USER, parts=[TextPart(text=observation)], source_ref=f"{where}.observation")
            )

    def extract(message: ImportedMessage) -> TextAction | None:
        given = message.metadata.pop("source_action", None)
        return shell_action(given) if isinstance(given, str) else None

    mark_text_actions(messages, extract)
    return messages


def _nonempty_list(source: Source, document: dict[str, Any], key: str) -> list[Any] | None:
    value = document.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        fail(source.path, key, f"expected an array, found {describe_json(value)}")
    return value if value else None


def parse_swe_agent(source: Source, document: Any) -> ImportedTranscript:
    """Parse a SWE-agent ``.traj`` or mini-swe-agent ``.traj.json`` document.

    Raises:
        ImportFormatError: the document is not an object, has none of ``history``,
            ``messages``, ``trajectory`` (reason names the keys found), or holds a turn with
            an unknown role (location ``"history[3]"`` / ``"trajectory[3]"``).
    """
    if not isinstance(document, dict):
        fail(source.path, None, f"expected a JSON object with 'history', 'messages' or 'trajectory', found {describe_json(document)}")
    notes: list[str] = []
    registry = CallIdRegistry(notes)
    history = _nonempty_list(source, document, "history")
    chat = _nonempty_list(source, document, "messages")
    trajectory = _nonempty_list(source, document, "trajectory")
    used: tuple[str, ...]
    if history is not None:
        messages = _from_openai_list(source, "history", history, registry, notes, trajectory)
        used = ("history", "trajectory")
    elif chat is not None:
        messages = _from_openai_list(source, "messages", chat, registry, notes)
        used = ("messages",)
    elif trajectory is not None:
        first = trajectory[0]
        if isinstance(first, dict) and "role" in first:
            messages = _from_nebius(source, trajectory)
        else:
            messages = _from_steps(source, trajectory)
        used = ("trajectory",)
    else:
        found = ", ".join(repr(k) for k in list(document)[:12]) or "none"
        fail(source.path, None, f"SWE-agent trajectory has no turns: found keys {found}; expected a non-empty 'history', 'messages' or 'trajectory'")
    answer_final_action(messages, episode_end(document, messages), registry, notes)
    registry.finish()
    note_unanswered_actions(messages, notes)
    metadata = top_level_metadata(document, used)
    info = document.get("info")
    if isinstance(info, dict) and "exit_status" in info and "exit_status" not in metadata:
        metadata["exit_status"] = info["exit_status"]
    model = first_model(messages)
    if model is None:
        for key in ("model_name", "model"):
            if isinstance(document.get(key), str):
                model = document[key]
                break
    return ImportedTranscript(
        format=FORMAT,
        path=source.name,
        title=first_user_title(messages),
        messages=messages,
        participants=[main_participant(model)],
        notes=notes,
        content_key=source_key([source]),
        metadata=metadata,
    )
