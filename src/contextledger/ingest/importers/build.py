"""Small finishing steps every importer applies to its ImportedTranscript."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from contextledger.ingest.importers.common import command_title, title_of
from contextledger.ingest.transcript import ImportedMessage, ImportedParticipant
from contextledger.records.enums import MessageKind, Role, RuntimeKind
from contextledger.records.parts import parts_text

__all__ = ["MAIN", "first_model", "first_user_title", "main_participant", "normalize_tools", "top_level_metadata"]

MAIN = "main"
"""Key of the main participant."""


def first_user_title(messages: Iterable[ImportedMessage], participant_key: str = MAIN) -> str:
    """The title of the first user chat turn of ``participant_key`` with words of the
    user's own (:func:`~contextledger.ingest.importers.common.title_of`: injected
    preambles skipped), else the first slash command recorded
    (:func:`~contextledger.ingest.importers.common.command_title`), cut to 80
    characters; ``""`` when there is neither."""
    turns = [parts_text(m.parts) for m in messages if m.participant_key == participant_key and m.role is Role.USER and m.kind is MessageKind.CHAT]
    return next((t for t in map(title_of, turns) if t), "") or next((t for t in map(command_title, turns) if t), "")


def main_participant(model: str | None, provider: str | None = None) -> ImportedParticipant:
    """The ``"main"`` chat participant."""
    return ImportedParticipant(key=MAIN, name=MAIN, runtime_kind=RuntimeKind.CHAT, model=model, provider=provider)


def first_model(messages: Iterable[ImportedMessage], participant_key: str = MAIN) -> str | None:
    """The model of the first message of ``participant_key`` that names one."""
    for message in messages:
        if message.participant_key == participant_key and message.model:
            return message.model
    return None


def normalize_tools(tools: Any) -> list[dict[str, Any]]:
    """Tool schemas in OpenAI function format (``{"type": "function", "function": {...}}``).

    Bare ``{"name", "description", "parameters"}`` objects are wrapped; other items are
    dropped.
    """
    out: list[dict[str, Any]] = []
    if not isinstance(tools, list):
        return out
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        function = tool.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            out.append({**tool, "type": tool.get("type", "function")})
        elif isinstance(tool.get("name"), str):
            out.append({"type": "function", "function": dict(tool)})
    return out


def top_level_metadata(document: Mapping[str, Any], skip: Iterable[str]) -> dict[str, Any]:
    """The document's top-level keys other than ``skip`` (run info, exit status, reward)."""
    skipped = set(skip)
    return {key: value for key, value in document.items() if key not in skipped}
