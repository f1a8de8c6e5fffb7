"""Importer for Codex CLI rollouts (format ``"codex-rollout"``).

Codex writes one session to ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``.
Two layouts exist:

* **envelope** (from September 2025): every line is ``{"timestamp", "type", "payload"}``
  with ``type`` one of ``session_meta``, ``response_item``, ``event_msg``,
  ``turn_context``, ``compacted`` (later also ``world_state``,
  ``inter_agent_communication`` …);
* **bare** (earlier): the first line is the session meta ``{"id", "timestamp",
  "instructions", "git"}``, then bare response items, with ``{"record_type": "state"}``
  bookkeeping lines between them.

Conversion:

* ``response_item`` payloads are Responses items (``message``, ``reasoning``,
  ``function_call`` / ``function_call_output``, ``custom_tool_call`` (apply_patch) /
  ``custom_tool_call_output``, ``local_shell_call``, ``web_search_call`` …) and go
  through :class:`~contextledger.ingest.importers.responses_items.ResponsesItems`;
  encrypted reasoning is kept, never sent; ``ghost_snapshot`` and encrypted
  ``compaction`` items are kept as ``META``;
* the session's ``base_instructions`` (``{"text": …}`` or a string; ``instructions`` in
  the bare layout) become the conversation's system prompt, a ``Role.SYSTEM`` chat message
  at its head (trusted like any imported system prompt): Codex sends them as the
  ``instructions`` of every request; the rest of the session meta is kept as ``META``;
* ``event_msg`` lines are ``PROGRESS`` records, except a ``user_message`` event whose
  text no ``response_item`` user message carries (some Codex builds record the prompt
  only as an event): it becomes the user's chat message;
* a tool output that reports a non-zero exit (``Process exited with code N`` of the
  unified exec tools, ``metadata.exit_code`` of the JSON shell output) is an error, and so
  is the result of a call whose ``exec_command_end`` has a non-zero ``exit_code``
  (unless that result only says the process is still running), whose
  ``patch_apply_end`` has ``success: false`` or whose ``mcp_tool_call_end`` failed;
* ``turn_context`` (its ``model`` names the model of the following turns) and any
  record type not listed here are kept as ``META``; ``compacted`` becomes a
  ``COMPACTION`` message holding the summary.
"""

from __future__ import annotations

import json
import re
from typing import Any

from contextledger.ingest.importers.build import first_model, main_participant
from contextledger.ingest.importers.call_ids import CallIdRegistry
from contextledger.ingest.importers.common import (
    Source,
    describe_json,
    fail,
    iter_jsonl,
    parse_timestamp,
    source_key,
    title_of,
    type_of,
)
from contextledger.ingest.importers.responses_items import ResponsesItems
from contextledger.ingest.transcript import ImportedMessage, ImportedTranscript
from contextledger.limits import loads_json
from contextledger.records.enums import MessageKind, Role
from contextledger.records.parts import TextPart, ToolResultPart

__all__ = ["FORMAT", "RECORD_TYPES", "base_instructions_of", "is_bare_meta", "parse_codex_rollout"]

FORMAT = "codex-rollout"
RECORD_TYPES = frozenset(
    {
        "session_meta", "response_item", "event_msg", "turn_context", "compacted", "world_state",
        "inter_agent_communication", "inter_agent_communication_metadata",
    }
)
"""Envelope ``type`` values of Codex rollout lines."""

_QUIET_ITEMS = frozenset({"ghost_snapshot", "compaction", "compaction_summary"})
_EXITED = re.compile(r"^Process exited with code (-?\d+)\s*$", re.M)
_RUNNING = re.compile(r"^Process running with session ID ", re.M)
_BIG_EVENT_FIELDS = ("aggregated_output", "formatted_output", "stdout", "stderr")


def is_bare_meta(value: Any) -> bool:
    """True for the first line of a bare-layout rollout (``{"id", "timestamp", ...}``
    without ``type``)."""
    return (
        isinstance(value, dict)
        and "type" not in value
        and isinstance(value.get("id"), str)
        and isinstance(value.get("timestamp"), str)
        and ("instructions" in value or "git" in value or len(value) == 2)
    )


def base_instructions_of(meta: dict[str, Any]) -> str | None:
    """The system prompt a session meta records: ``base_instructions`` (``{"text": str}``
    in codex-rs ``SessionMeta``, or a bare string), else the earlier ``instructions``
    string; ``None`` when neither holds non-blank text."""
    base = meta.get("base_instructions")
    for value in (base.get("text") if isinstance(base, dict) else base, meta.get("instructions")):
        if isinstance(value, str) and value.strip():
            return value
    return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(c["text"] for c in content if isinstance(c, dict) and isinstance(c.get("text"), str))
    return ""


def _norm(text: str) -> str:
    return " ".join(text.split())


class _Rollout:
    """The state of one rollout being read."""

    def __init__(self, source: Source, item_user_texts: set[str]) -> None:
        self.source = source
        self.item_user_texts = item_user_texts
        self.notes: list[str] = []
        self.registry = CallIdRegistry(self.notes)
        self.items = ResponsesItems(source.path, self.registry, self.notes)
        self.metadata: dict[str, Any] = {}
        self.session_seen = False
        self.failed_calls: dict[str, str] = {}
        self.skipped_state = 0

    # ----------------------------------------------------------------- lines

    def line(self, line_no: int, record: Any) -> None:
        location, key = f"line {line_no}", f"line:{line_no}"
        if not isinstance(record, dict):
            fail(self.source.path, location, f"expected a JSON object, found {describe_json(record)}")
        stamp = parse_timestamp(record.get("timestamp"))
        start = len(self.items.messages)
        kind = record.get("type")
        if "payload" in record and isinstance(kind, str):
            self._envelope(kind, record["payload"], key, location)
        elif "record_type" in record and kind is None:
            self.skipped_state += 1
        elif is_bare_meta(record) and not self.session_seen:
            self._session_meta(record, key, location)
        else:
            self._response_item(record, key, location)
        for message in self.items.messages[start:]:
            if message.created_at is None:
                message.created_at = stamp

    def _envelope(self, kind: str, payload: Any, key: str, location: str) -> None:
        if kind == "response_item":
            self._response_item(payload, key, location)
        elif kind == "event_msg":
            self._event(payload, key, location)
        elif kind == "session_meta":
            if self.session_seen:
                self.notes.append(f"{location}: a further session_meta (forked or resumed session) kept as meta")
                self.items.emit(self.items.meta(payload, key, location, {"record_type": kind}))
            else:
                self._session_meta(payload, key, location)
        elif kind == "compacted":
            summary = payload.get("message") if isinstance(payload, dict) else None
            self.items.close()
            self.items.emit(
                ImportedMessage(
                    key=key, role=Role.USER, kind=MessageKind.COMPACTION, parts=[TextPart(text=str(summary or ""))],
                    source_ref=location, metadata={"record_type": kind},
                )
            )
        else:
            if kind == "turn_context" and isinstance(payload, dict) and isinstance(payload.get("model"), str):
                self.items.model = payload["model"]
            elif kind not in RECORD_TYPES:
                self.notes.append(f"{location}: record type {kind!r} kept as meta")
            self.items.emit(self.items.meta(payload, key, location, {"record_type": kind}))

    def _session_meta(self, payload: Any, key: str, location: str) -> None:
        if not isinstance(payload, dict):
            fail(self.source.path, location, f"session_meta payload must be an object, found {describe_json(payload)}")
        self.session_seen = True
        rest = {k: v for k, v in payload.items() if k not in ("base_instructions", "instructions")}
        self.metadata.update(rest)
        self.items.emit(self.items.meta(rest, key, location, {"record_type": "session_meta"}))
        instructions = base_instructions_of(payload)
        if instructions:
            # Codex sends these as the ``instructions`` of every request: the session's
            # system prompt, at the head of the conversation
            self.items.emit(
                ImportedMessage(
                    key=f"{key}#instructions", role=Role.SYSTEM, kind=MessageKind.CHAT, parts=[TextPart(text=instructions)],
                    source_ref=location, metadata={"record_type": "session_meta", "instructions": True},
                )
            )

    def _response_item(self, item: Any, key: str, location: str) -> None:
        kind = type_of(item)
        if kind in _QUIET_ITEMS:
            self.items.emit(self.items.meta(item, key, location, {"item_type": kind}))
            return
        self.items.item(item, key, location)

    def _event(self, payload: Any, key: str, location: str) -> None:
        if not isinstance(payload, dict):
            fail(self.source.path, location, f"event_msg payload must be an object, found {describe_json(payload)}")
        kind = str(payload.get("type") or "")
        call_id = payload.get("call_id") if isinstance(payload.get("call_id"), str) else None
        if call_id and self._failed(kind, payload):
            self.failed_calls[call_id] = location
        if kind == "user_message" and isinstance(payload.get("message"), str):
            text = payload["message"]
            if _norm(text) not in self.item_user_texts:
                self.items.item({"type": "message", "role": "user", "content": text}, key, location)
                self.items.messages[-1].metadata["from_event"] = True
                return
        progress = {k: v for k, v in payload.items() if k not in _BIG_EVENT_FIELDS}
        self.items.emit(
            ImportedMessage(
                key=key, role=Role.SYSTEM, kind=MessageKind.PROGRESS, parts=[TextPart(text=json.dumps(progress, ensure_ascii=False))],
                source_ref=location, metadata={"record_type": "event_msg", "event_type": kind},
            )
        )

    @staticmethod
    def _failed(kind: str, payload: dict[str, Any]) -> bool:
        if kind == "exec_command_end":
            code = payload.get("exit_code")
            return isinstance(code, int) and code != 0
        if kind == "patch_apply_end":
            return payload.get("success") is False
        if kind == "mcp_tool_call_end":
            result = payload.get("result")
            return isinstance(result, dict) and ("Err" in result or result.get("Ok", {}).get("isError") is True)
        return False

    # ----------------------------------------------------------------- finish

    def mark_failures(self) -> None:
        """Set ``is_error`` on failed results: those that report a non-zero exit themselves
        (``Process exited with code N``, or ``metadata.exit_code`` of the JSON shell output)
        and those whose end event reported a failure, unless the result only says the
        process is still running (its exit then shows in a later ``write_stdin`` result)."""
        for message in self.items.messages:
            if message.role is not Role.TOOL or not message.parts:
                continue
            part = message.parts[0]
            if not isinstance(part, ToolResultPart) or part.is_error:
                continue
            text = part.text or ""
            by_event = part.call_id in self.failed_calls and not _RUNNING.search(text)
            if by_event or _exit_code(text) not in (None, 0):
                message.parts[0] = part.model_copy(update={"is_error": True})


def _exit_code(text: str) -> int | None:
    """The exit code a Codex tool output reports, if any."""
    match = _EXITED.search(text)
    if match:
        return int(match.group(1))
    if text.startswith("{") and ('"exit_code"' in text[:4096] or '"exit_code"' in text[-4096:]):
        try:
            value = loads_json(text)
        except json.JSONDecodeError:
            return None
        meta = value.get("metadata") if isinstance(value, dict) else None
        code = meta.get("exit_code") if isinstance(meta, dict) else None
        return code if isinstance(code, int) else None
    return None


def _user_texts_of(records: list[tuple[int, Any]]) -> set[str]:
    """Normalized texts of every ``response_item`` user message of the file."""
    out: set[str] = set()
    for _, record in records:
        if not isinstance(record, dict):
            continue
        item = record.get("payload") if record.get("type") == "response_item" else record
        if isinstance(item, dict) and item.get("type") == "message" and item.get("role") == "user":
            out.add(_norm(_text(item.get("content"))))
    return out


def _title(messages: list[ImportedMessage]) -> str:
    """The first user prompt: a ``user_message`` event's text when the rollout has one,
    else the first user chat message with words of the user's own (injected context
    such as ``<environment_context>`` or an ``AGENTS.md`` preamble skipped)."""
    candidates = [m for m in messages if m.role is Role.USER and m.kind is MessageKind.CHAT]
    for message in candidates:
        title = title_of("\n".join(p.text for p in message.parts if isinstance(p, TextPart)))
        if title:
            return title
    return ""


def parse_codex_rollout(source: Source) -> ImportedTranscript:
    """Parse a Codex CLI rollout file (either layout).

    Raises:
        ImportFormatError: a line that is not JSON (a truncated last line is skipped with a
            note), not an object, a malformed response item (location ``"line 12"``), or
            a ``session_meta`` / ``event_msg`` payload that is not an object.
    """
    notes: list[str] = []
    skipped: list[str] = []
    records = list(iter_jsonl(source, notes, skipped))
    rollout = _Rollout(source, _user_texts_of(records))
    rollout.notes.extend(notes)
    for line_no, record in records:
        rollout.line(line_no, record)
    rollout.items.close()
    rollout.registry.finish()
    rollout.mark_failures()
    if rollout.skipped_state:
        rollout.notes.append(f"{rollout.skipped_state} 'record_type' bookkeeping line(s) skipped")
    messages = rollout.items.messages
    metadata = dict(rollout.metadata)
    if skipped:
        metadata["skipped_raw_lines"] = skipped
    model = first_model(messages)
    return ImportedTranscript(
        format=FORMAT,
        path=source.name,
        title=_title(messages),
        messages=messages,
        participants=[main_participant(model, "openai")],
        notes=rollout.notes,
        content_key=source_key([source]),
        metadata=metadata,
    )
