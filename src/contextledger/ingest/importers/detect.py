"""Format detection for transcript files.

Detection looks at content, not file names:

* a JSON document is classified by its top-level shape and keys (a Claude Code record
  array, a Gemini CLI session, a tau2-bench simulation, a SWE-agent trajectory, a
  provider request body or message list);
* a JSON Lines file by its first *decisive* record: records that several formats share
  or that only carry metadata are skipped (a Claude Code session may open with
  ``last-prompt``, ``permission-mode``, ``summary`` or ``file-history-snapshot`` lines;
  a bare-layout Codex rollout with its session meta and ``record_type`` lines), up to
  :data:`SCAN_RECORDS` records;
* an Aider chat history by its ``# aider chat started at`` header (or ``####`` prompt
  lines).

A format that is recognised but not supported (OpenHands event streams) is named in the
error, so that a user learns what the file is rather than reading a parse failure.
"""

from __future__ import annotations

import json
from typing import Any

from contextledger.ingest.importers.bodies import (
    RESPONSES_ITEM_TYPES,
    detect_body_provider,
    message_list_dialect,
)
from contextledger.ingest.importers.claude_code import CONVERSATION_TYPES, RECORD_TYPES
from contextledger.ingest.importers.codex_rollout import RECORD_TYPES as CODEX_RECORD_TYPES
from contextledger.ingest.importers.codex_rollout import is_bare_meta
from contextledger.ingest.importers.common import (
    Source,
    describe_json,
    fail,
    looks_like_aider,
    parse_json_document,
    split_exchange,
    type_of,
)
from contextledger.ingest.importers.gemini_cli import (
    is_gemini_contents,
    is_gemini_record,
    is_gemini_session,
)
from contextledger.ingest.importers.openai_chat import LIST_KEYS
from contextledger.ingest.importers.tau2_bench import is_tau2_document
from contextledger.limits import MAX_JSON_DEPTH, JsonDepthError, loads_json

__all__ = [
    "SCAN_RECORDS",
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
    "codex-rollout",
    "aider-history",
    "gemini-cli",
    "tau2-bench",
)
UNSUPPORTED_FORMATS: tuple[str, ...] = ("openhands-events",)
SCAN_RECORDS = 50
"""Most JSON Lines records looked at before a file is declared unrecognised."""

_BODY_FORMATS = {"openai-chat": "openai-chat", "openai-responses": "openai-responses", "anthropic": "anthropic-messages"}
_CLAUDE_KEYS = ("uuid", "sessionId", "leafUuid", "messageId", "operation", "message")


class Detected:
    """Result of detection: the format and, for JSON documents, the parsed document.

    Attributes:
        format: one of :data:`SUPPORTED_FORMATS`.
        document: the parsed JSON value, or ``None`` for a JSON Lines or text file.
    """

    __slots__ = ("document", "format")

    def __init__(self, format: str, document: Any | None) -> None:
        self.format = format
        self.document = document


def _unsupported(source: Source, name: str, what: str) -> None:
    fail(source.path, None, f"{what} ({name}) is recognised, but this format is not supported yet")


def _is_claude_record(value: Any) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        return False
    kind = value["type"]
    if kind in CONVERSATION_TYPES:
        return any(k in value for k in _CLAUDE_KEYS)
    return kind in RECORD_TYPES


def _is_codex_record(value: Any) -> bool:
    return isinstance(value, dict) and (
        (type_of(value) in CODEX_RECORD_TYPES and "payload" in value) or is_bare_meta(value)
    )


def _is_openhands_event(value: Any) -> bool:
    return isinstance(value, dict) and value.get("source") in ("agent", "user", "environment") and (
        "action" in value or "observation" in value
    )


def _record_format(value: Any) -> str | None:
    """The format a JSON Lines record decides, or ``None`` when it decides nothing."""
    if not isinstance(value, dict):
        return None
    if _is_codex_record(value):
        return "codex-rollout"
    if _is_claude_record(value):
        return "claude-code"
    if is_gemini_record(value):
        return "gemini-cli"
    if type_of(value) in RESPONSES_ITEM_TYPES:
        return "openai-responses"
    if "role" in value:
        return "openai-chat"
    if _is_openhands_event(value):
        return "openhands-events"
    return None


def _describe_record(value: Any) -> str:
    if isinstance(value, dict):
        return f"an object with keys {', '.join(repr(k) for k in list(value)[:8])}"
    return describe_json(value)


def _classify_lines(source: Source, *, too_deep: bool = False) -> str:
    """The format of a JSON Lines file (its first decisive record).  ``too_deep``: the
    whole text failed to parse for its nesting depth; when no line parses either, that
    (or a line's own depth error) is the error, as with an explicit format."""
    first: tuple[int, Any] | None = None
    seen = lines = 0
    deep_line: int | None = None
    for line_no, line in enumerate(source.text.split("\n"), start=1):
        if seen >= SCAN_RECORDS:
            break
        if not line.strip():
            continue
        lines += 1
        try:
            value = loads_json(line)
        except JsonDepthError:
            deep_line = deep_line or line_no
            continue
        except json.JSONDecodeError:
            continue
        seen += 1
        first = first or (line_no, value)
        kind = _record_format(value)
        if kind == "openhands-events":
            _unsupported(source, kind, "OpenHands event stream")
        if kind is not None:
            return kind
    if first is None and too_deep and (lines == 1 or deep_line is None):
        parse_json_document(source)  # one document: the depth limit, without a line
    if first is None and deep_line is not None:
        fail(source.path, f"line {deep_line}", f"invalid JSON: nesting deeper than {MAX_JSON_DEPTH} levels")
    line_no, value = first if first is not None else (1, None)
    fail(
        source.path,
        f"line {line_no}",
        f"unrecognised JSON Lines record: found {_describe_record(value)}; expected a Claude Code record "
        "(type user/assistant/...), a Codex rollout line, a Gemini CLI message, a Responses item "
        "or a chat message with 'role'",
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


def _classify_list(source: Source, document: list[Any]) -> str:
    if not document:
        fail(source.path, None, "JSON array is empty: expected a list of chat messages")
    first = document[0]
    if _is_claude_record(first) or any(_is_claude_record(v) and type_of(v) in CONVERSATION_TYPES for v in document[:SCAN_RECORDS]):
        return "claude-code"
    if is_gemini_contents(document):
        return "gemini-cli"
    if isinstance(first, dict) and ("role" in first or type_of(first) in RESPONSES_ITEM_TYPES):
        return _BODY_FORMATS[detect_body_provider(document, source.name)]
    if _is_openhands_event(first):
        _unsupported(source, "openhands-events", "OpenHands event stream")
    fail(source.path, "[0]", f"expected chat messages with a 'role', found {describe_json(first)}"
         + (f" with keys {', '.join(repr(k) for k in list(first)[:8])}" if isinstance(first, dict) else ""))


def _classify_object(source: Source, document: dict[str, Any]) -> str:
    if _is_openhands_event(document):
        _unsupported(source, "openhands-events", "OpenHands event stream")
    if _is_claude_record(document):
        return "claude-code"
    if _is_codex_record(document):
        return "codex-rollout"
    if is_gemini_session(document):
        return "gemini-cli"
    if is_tau2_document(document):
        return "tau2-bench"
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


def _classify_document(source: Source, document: Any) -> str:
    if isinstance(document, list):
        return _classify_list(source, document)
    if isinstance(document, dict):
        return _classify_object(source, document)
    fail(source.path, None, f"expected a JSON array or object of messages, found {describe_json(document)}")


def detect_source(source: Source) -> Detected:
    """Detect the format of an already-read file.

    Raises:
        ImportFormatError: a recognised but unsupported format (reason names it and ends
            with ``"is not supported yet"``), content that is not JSON (reason quotes how
            the file starts), or JSON of an unknown shape (reason names what was found and
            what was expected).
    """
    text = source.text
    stripped = text.lstrip()
    if looks_like_aider(text):
        return Detected("aider-history", None)
    if not stripped.startswith(("{", "[")):
        fail(source.path, None, f"not a JSON or JSON Lines transcript: starts with {stripped[:40]!r}")
    try:
        document = loads_json(text)
    except json.JSONDecodeError as exc:
        # A record line may be longer than any fixed prefix (a pasted multi-megabyte log):
        # the first line break is looked for in the whole text (one C-level scan).
        multi_line = stripped.startswith("{") and "\n" in stripped
        if multi_line and (exc.msg == "Extra data" or exc.lineno == 1):
            return Detected(_classify_lines(source, too_deep=isinstance(exc, JsonDepthError)), None)
        parse_json_document(source)
        raise
    kind = _classify_document(source, document)
    if kind == "claude-code" and isinstance(document, dict):
        return Detected(kind, None)
    return Detected(kind, document)
