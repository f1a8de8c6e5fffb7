"""Format detection for transcript files.

Detection looks at content, not file names: a JSON document is classified by its top-level
shape and keys, a JSON Lines file by its first parseable record.  Codex CLI rollouts and
Aider chat histories are recognised and rejected with a "not supported yet" error so that a
user learns what the file is rather than reading a parse failure.
"""

from __future__ import annotations

import json
import re
from typing import Any

from contextledger.ingest.importers.bodies import (
    RESPONSES_ITEM_TYPES,
    detect_body_provider,
    message_list_dialect,
)
from contextledger.ingest.importers.claude_code import RECORD_TYPES
from contextledger.ingest.importers.common import (
    Source,
    describe_json,
    fail,
    parse_json_document,
    split_exchange,
)
from contextledger.ingest.importers.openai_chat import LIST_KEYS
from contextledger.limits import loads_json

__all__ = [
    "CODEX_RECORD_TYPES",
    "SUPPORTED_FORMATS",
    "UNSUPPORTED_FORMATS",
    "Detected",
    "detect_source",
]

SUPPORTED_FORMATS: tuple[str, ...] = (
    "openai-chat",
    "claude-code",
    "swe-agent",
    "openai-responses",
    "anthropic-messages",
)
UNSUPPORTED_FORMATS: tuple[str, ...] = ("codex-rollout", "aider-history")
CODEX_RECORD_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_BODY_FORMATS = {"openai-chat": "openai-chat", "openai-responses": "openai-responses", "anthropic": "anthropic-messages"}
_AIDER_HEADER = re.compile(r"^# aider chat started at ", re.M)
_SCAN_LINES = 50


class Detected:
    """Result of detection: the format and, for JSON documents, the parsed document.

    Attributes:
        format: one of :data:`SUPPORTED_FORMATS`.
        document: the parsed JSON value, or ``None`` for a JSON Lines file.
    """

    __slots__ = ("document", "format")

    def __init__(self, format: str, document: Any | None) -> None:
        self.format = format
        self.document = document


def _unsupported(source: Source, name: str, what: str) -> None:
    fail(source.path, None, f"{what} ({name}) is recognised, but this format is not supported yet")


def _is_claude_record(value: Any) -> bool:
    if not isinstance(value, dict) or value.get("type") not in RECORD_TYPES:
        return False
    return any(k in value for k in ("uuid", "sessionId", "leafUuid", "messageId", "operation"))


def _is_codex_record(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") in CODEX_RECORD_TYPES and "payload" in value


def _classify_record(source: Source, value: Any, line_no: int) -> str:
    if _is_claude_record(value):
        return "claude-code"
    if _is_codex_record(value):
        _unsupported(source, "codex-rollout", "Codex CLI rollout")
    if isinstance(value, dict) and value.get("type") in RESPONSES_ITEM_TYPES:
        return "openai-responses"
    if isinstance(value, dict) and "role" in value:
        return "openai-chat"
    what = f"an object with keys {', '.join(repr(k) for k in list(value)[:8])}" if isinstance(value, dict) else describe_json(value)
    fail(
        source.path,
        f"line {line_no}",
        f"unrecognised JSON Lines record: found {what}; expected a Claude Code record "
        "(type user/assistant/...) or a chat message with 'role'",
    )


def _looks_swe_agent(document: dict[str, Any]) -> bool:
    if isinstance(document.get("trajectory_format"), str) and document["trajectory_format"].startswith("mini-swe-agent"):
        return True
    history = document.get("history")
    if isinstance(history, list) and history:
        if any(k in document for k in ("trajectory", "info", "environment")):
            return True
        first = history[0]
        if isinstance(first, dict) and any(k in first for k in ("agent", "message_type", "action")):
            return True
    trajectory = document.get("trajectory")
    if isinstance(trajectory, list) and trajectory and isinstance(trajectory[0], dict):
        first = trajectory[0]
        if "action" in first or "observation" in first or ("role" in first and ("text" in first or "system_prompt" in first)):
            return True
    messages = document.get("messages")
    return isinstance(messages, list) and any(isinstance(m, dict) and m.get("role") == "exit" for m in messages)


def _classify_document(source: Source, document: Any) -> str:
    if isinstance(document, list):
        if not document:
            fail(source.path, None, "JSON array is empty: expected a list of chat messages")
        first = document[0]
        if isinstance(first, dict) and ("role" in first or first.get("type") in RESPONSES_ITEM_TYPES):
            return _BODY_FORMATS[detect_body_provider(document, source.name)]
        fail(source.path, "[0]", f"expected chat messages with a 'role', found {describe_json(first)}"
             + (f" with keys {', '.join(repr(k) for k in list(first)[:8])}" if isinstance(first, dict) else ""))
    if isinstance(document, dict):
        if _is_claude_record(document):
            return "claude-code"
        if _is_codex_record(document):
            _unsupported(source, "codex-rollout", "Codex CLI rollout")
        if _looks_swe_agent(document):
            return "swe-agent"
        body, _ = split_exchange(document)
        if "input" in body and not isinstance(body.get("messages"), list):
            return "openai-responses"
        if body.get("object") == "response" and isinstance(body.get("output"), list):
            return "openai-responses"
        if isinstance(body.get("messages"), list):
            return _BODY_FORMATS[message_list_dialect(body["messages"], has_system_field=isinstance(body.get("system"), str | list))]
        if any(isinstance(document.get(k), list) for k in LIST_KEYS):
            return "openai-chat"
        found = ", ".join(repr(k) for k in list(document)[:12]) or "none"
        expected = ", ".join(repr(k) for k in LIST_KEYS)
        fail(
            source.path,
            None,
            f"JSON object has no message list: found keys {found}; expected one of {expected} "
            "(chat) or 'history' / 'trajectory' (SWE-agent)",
        )
    fail(source.path, None, f"expected a JSON array or object of messages, found {describe_json(document)}")


def _first_records(text: str) -> list[tuple[int, Any]]:
    found: list[tuple[int, Any]] = []
    for line_no, line in enumerate(text.split("\n", _SCAN_LINES)[:_SCAN_LINES], start=1):
        if not line.strip():
            continue
        try:
            found.append((line_no, loads_json(line)))
        except json.JSONDecodeError:
            continue
        if found:
            break
    return found


def detect_source(source: Source) -> Detected:
    """Detect the format of an already-read file.

    Raises:
        ImportFormatError: the format is recognised but unsupported (Codex rollout, Aider
            history: reason ends with ``"is not supported yet"``), the content is not JSON
            (reason quotes how the file starts), or the JSON has an unknown shape (reason
            names what was found and what was expected).
    """
    text = source.text
    stripped = text.lstrip()
    head = stripped[:4096]
    if _AIDER_HEADER.search(head):
        _unsupported(source, "aider-history", "Aider chat history")
    if not stripped.startswith(("{", "[")):
        fail(source.path, None, f"not a JSON or JSON Lines transcript: starts with {stripped[:40]!r}")
    try:
        document = loads_json(text)
    except json.JSONDecodeError as exc:
        multi_line = stripped.startswith("{") and stripped.count("\n", 0, 1 << 20) >= 1
        if multi_line and (exc.msg == "Extra data" or exc.lineno == 1):
            records = _first_records(text)
            if records:
                line_no, value = records[0]
                return Detected(_classify_record(source, value, line_no), None)
        parse_json_document(source)
        raise
    kind = _classify_document(source, document)
    if kind == "claude-code":
        return Detected(kind, None)
    return Detected(kind, document)
