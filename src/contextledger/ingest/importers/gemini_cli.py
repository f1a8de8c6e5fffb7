"""Importer for Gemini CLI sessions (format ``"gemini-cli"``).

Gemini CLI records a chat under ``~/.gemini/tmp/<project>/chats/`` (its
``ChatRecordingService``), in one of three shapes:

* ``session-*.json`` — one ``ConversationRecord`` ``{"sessionId", "projectHash",
  "startTime", "lastUpdated", "messages": [...], "summary"?}``;
* ``session-*.jsonl`` — an append-only log: a metadata line, then message records that
  are *upserts* (a message is written again, whole, each time its tool calls, results or
  token counts change), ``{"$rewindTo": id}`` (drop that message and every later one)
  and ``{"$set": {...}}`` metadata patches (``messages`` in a patch replaces the history);
* checkpoints / API history — a list of Gemini API ``Content`` objects
  ``{"role": "user" | "model", "parts": [...]}`` (bare, or under ``history``).

A message record is ``{"id", "timestamp", "type", "content"}`` with ``type`` ``user``,
``gemini``, ``info``, ``error`` or ``warning``; ``content`` is a string or a list of
parts (``text``, ``inlineData`` …); a ``gemini`` record carries ``thoughts`` (kept as
``ThinkingPart``, never sent), ``model``, ``tokens`` and ``toolCalls`` — each ``{"id",
"name", "args", "result", "status"}`` with ``result`` a list of ``functionResponse``
parts.  A call becomes a ``ToolCallPart`` of the assistant message and its result a
``Role.TOOL`` message after it; a call still scheduled or executing stays unanswered.
Rewound messages stay in the ledger on a side branch (the transcript is a tree whose
active leaf is the newest surviving message); ``info`` / ``error`` / ``warning`` records
are ``META``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from contextledger.ingest.importers.build import first_model, first_user_title, main_participant
from contextledger.ingest.importers.call_ids import CallIdRegistry
from contextledger.ingest.importers.common import (
    Source,
    describe_json,
    fail,
    image_from_base64,
    iter_jsonl,
    parse_timestamp,
    source_key,
    type_of,
)
from contextledger.ingest.transcript import ImportedMessage, ImportedTranscript
from contextledger.records.enums import MessageKind, Role
from contextledger.records.parts import (
    ImagePart,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["FORMAT", "MESSAGE_TYPES", "is_gemini_contents", "is_gemini_record", "is_gemini_session", "parse_gemini_cli"]

FORMAT = "gemini-cli"
MESSAGE_TYPES = frozenset({"user", "gemini", "info", "error", "warning"})
"""``type`` values of Gemini CLI message records."""

_FINAL_STATUSES = frozenset({"success", "error", "cancelled"})
_FAILED_STATUSES = frozenset({"error", "cancelled"})


def is_gemini_record(value: Any) -> bool:
    """True for one line of a Gemini CLI JSONL session (metadata, message, patch, rewind)."""
    if not isinstance(value, dict):
        return False
    if "$rewindTo" in value or "$set" in value:
        return True
    if type_of(value) in MESSAGE_TYPES and isinstance(value.get("id"), str) and "content" in value and "message" not in value:
        return True
    return isinstance(value.get("sessionId"), str) and "projectHash" in value


def is_gemini_session(document: Mapping[str, Any]) -> bool:
    """True for a whole-file Gemini CLI session or a checkpoint ``{"history": [...]}``."""
    messages = document.get("messages")
    if isinstance(messages, list) and ("projectHash" in document or any(is_gemini_record(m) for m in messages[:20])):
        return True
    history = document.get("history")
    return isinstance(history, list) and bool(history) and is_gemini_contents(history)


def is_gemini_contents(items: list[Any]) -> bool:
    """True for a list of Gemini API ``Content`` objects (``role`` user/model + ``parts``)."""
    heads = [i for i in items[:20] if isinstance(i, dict)]
    return bool(heads) and all(isinstance(i.get("parts"), list) and i.get("role") in ("user", "model") for i in heads)


@dataclass
class _Log:
    """Replays a session log: the newest version of each record and the active chain."""

    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    locations: dict[str, str] = field(default_factory=dict)
    parents: dict[str, str | None] = field(default_factory=dict)
    chain: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    rewinds: int = 0

    def upsert(self, record: dict[str, Any], location: str) -> None:
        """A message record: an update of a live message replaces it whole; a new one (or
        one written again after a rewind) follows the current chain."""
        mid = record["id"]
        if mid in self.chain:
            self.records[mid] = record
            return
        self.records.pop(mid, None)
        self.records[mid] = record
        self.parents[mid] = self.chain[-1] if self.chain else None
        self.locations[mid] = location
        self.chain.append(mid)

    def rewind(self, target: Any) -> None:
        """Drop ``target`` and every later message from the chain (all of it when the
        target is unknown)."""
        self.rewinds += 1
        self.chain = self.chain[: self.chain.index(target)] if target in self.chain else []

    def replace(self, messages: list[Any], location: str) -> None:
        """A ``$set`` of ``messages``: the given records become the whole chain."""
        self.chain = []
        for i, message in enumerate(messages):
            if isinstance(message, dict) and isinstance(message.get("id"), str):
                self.upsert(message, f"{location}.messages[{i}]")


class _Converter:
    """Turns message records (or API contents) into ImportedMessages."""

    def __init__(self, source: Source) -> None:
        self.path = source.path
        self.notes: list[str] = []
        self.registry = CallIdRegistry(self.notes)

    # ----------------------------------------------------------------- parts

    def parts(self, content: Any, where: str, attachments: dict[str, bytes]) -> list[Part]:
        """Parts of a ``PartListUnion`` (string, part, or list of them)."""
        if content is None:
            return []
        items = content if isinstance(content, list) else [content]
        out: list[Part] = []
        for j, item in enumerate(items):
            at = f"{where}[{j}]" if isinstance(content, list) else where
            if isinstance(item, str):
                if item:
                    out.append(TextPart(text=item))
            elif not isinstance(item, dict):
                fail(self.path, at, f"expected a part object or a string, found {describe_json(item)}")
            elif isinstance(item.get("text"), str):
                text = item["text"]
                out.append(ThinkingPart(text=text) if item.get("thought") is True else TextPart(text=text))
            elif isinstance(item.get("inlineData"), dict) and isinstance(item["inlineData"].get("data"), str):
                data = item["inlineData"]
                image, raw = image_from_base64(data["data"], str(data.get("mimeType") or "application/octet-stream"), self.path, at)
                attachments[image.blob_key or ""] = raw
                out.append(image)
            elif item:
                out.append(TextPart(text=json.dumps(item, ensure_ascii=False)))
        return out

    def response_text(self, result: Any, where: str, attachments: dict[str, bytes]) -> tuple[str, list[ImagePart], bool]:
        """``(text, images, is_error)`` of a tool result (``functionResponse`` parts)."""
        items = result if isinstance(result, list) else [result]
        texts: list[str] = []
        images: list[ImagePart] = []
        failed = False
        for j, item in enumerate(items):
            response = item.get("functionResponse") if isinstance(item, dict) else None
            if isinstance(response, dict):
                body = response.get("response")
                if isinstance(body, dict) and isinstance(body.get("error"), str):
                    texts.append(body["error"])
                    failed = True
                elif isinstance(body, dict) and isinstance(body.get("output"), str):
                    texts.append(body["output"])
                elif body is not None:
                    texts.append(json.dumps(body, ensure_ascii=False))
                continue
            for part in self.parts(item, f"{where}[{j}]", attachments):
                if isinstance(part, TextPart | ThinkingPart):
                    texts.append(part.text)
                elif isinstance(part, ImagePart):
                    images.append(part)
        return "\n".join(texts), images, failed

    # ----------------------------------------------------------------- records

    def record(self, record: dict[str, Any], key: str, location: str) -> list[ImportedMessage]:
        """The messages of one Gemini CLI message record (assistant turn + its results)."""
        kind = type_of(record)
        stamp = parse_timestamp(record.get("timestamp"))
        attachments: dict[str, bytes] = {}
        parts = self.parts(record.get("content"), f"{location}.content", attachments)
        if kind == "user":
            return [ImportedMessage(key=key, role=Role.USER, parts=parts, attachments=attachments, source_ref=location, created_at=stamp)]
        if kind != "gemini":
            if kind not in MESSAGE_TYPES:
                self.notes.append(f"{location}: message of type {kind!r} kept as meta")
            return [
                ImportedMessage(
                    key=key, role=Role.SYSTEM, kind=MessageKind.META, parts=parts or [TextPart(text="")],
                    attachments=attachments, source_ref=location, created_at=stamp, metadata={"gemini_type": kind},
                )
            ]
        model = record.get("model") if isinstance(record.get("model"), str) else None
        turn = ImportedMessage(key=key, role=Role.ASSISTANT, source_ref=location, created_at=stamp, model=model, attachments=attachments)
        thoughts = record.get("thoughts")
        for thought in thoughts if isinstance(thoughts, list) else []:
            if isinstance(thought, dict):
                text = ": ".join(str(thought[k]) for k in ("subject", "description") if thought.get(k))
                turn.parts.append(ThinkingPart(text=text))
        turn.parts.extend(parts)
        out = [turn]
        calls = record.get("toolCalls")
        for j, call in enumerate(calls if isinstance(calls, list) else []):
            out.extend(self._call(turn, call, f"{location}.toolCalls[{j}]", f"{key}#tool{j}", stamp))
        return out

    def _call(self, turn: ImportedMessage, call: Any, where: str, key: str, stamp: Any) -> list[ImportedMessage]:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            fail(self.path, where, "tool call has no 'name'")
        raw_id = call.get("id") if isinstance(call.get("id"), str) else None
        call_id = self.registry.call(raw_id, where)
        args = call.get("args") if call.get("args") is not None else {}
        turn.parts.append(ToolCallPart(call_id=call_id, tool_name=call["name"], arguments_json=json.dumps(args, ensure_ascii=False, separators=(",", ":"))))
        status = call.get("status")
        result = call.get("result")
        if result is None and status not in _FINAL_STATUSES:
            return []  # still scheduled / executing / awaiting approval: unanswered
        attachments: dict[str, bytes] = {}
        text, images, failed = self.response_text(result, f"{where}.result", attachments) if result is not None else ("", [], False)
        if not text and isinstance(call.get("resultDisplay"), str):
            text = call["resultDisplay"]
        if not text:
            text = f"[{status}]"
        answered = self.registry.result(raw_id or None, where) or call_id
        part = ToolResultPart(call_id=answered, text=text, is_error=failed or status in _FAILED_STATUSES, images=tuple(images))
        return [ImportedMessage(key=key, role=Role.TOOL, parts=[part], attachments=attachments, source_ref=where, created_at=stamp)]

    def contents(self, items: list[Any], location: str) -> list[ImportedMessage]:
        """Messages of a list of Gemini API ``Content`` objects."""
        out: list[ImportedMessage] = []
        for i, item in enumerate(items):
            where = f"{location}[{i}]"
            if not isinstance(item, dict) or item.get("role") not in ("user", "model"):
                fail(self.path, where, "expected a Content object with role 'user' or 'model'")
            raw_parts = item.get("parts")
            parts: list[Any] = raw_parts if isinstance(raw_parts, list) else []
            attachments: dict[str, bytes] = {}
            if item["role"] == "model":
                turn = ImportedMessage(key=f"content:{i}", role=Role.ASSISTANT, source_ref=where, attachments=attachments)
                for j, part in enumerate(parts):
                    call = part.get("functionCall") if isinstance(part, dict) else None
                    if isinstance(call, dict):
                        self._call(turn, {**call, "status": "scheduled"}, f"{where}.parts[{j}]", "", None)
                    else:
                        turn.parts.extend(self.parts(part, f"{where}.parts[{j}]", attachments))
                out.append(turn)
                continue
            texts: list[Part] = []
            for j, part in enumerate(parts):
                response = part.get("functionResponse") if isinstance(part, dict) else None
                if isinstance(response, dict):
                    out.append(self._function_response(part, response, f"{where}.parts[{j}]", f"content:{i}#{j}"))
                else:
                    texts.extend(self.parts(part, f"{where}.parts[{j}]", attachments))
            if texts:
                out.append(ImportedMessage(key=f"content:{i}", role=Role.USER, parts=texts, attachments=attachments, source_ref=where))
        return out

    def _function_response(self, part: dict[str, Any], response: dict[str, Any], where: str, key: str) -> ImportedMessage:
        attachments: dict[str, bytes] = {}
        text, images, failed = self.response_text([part], where, attachments)
        raw_id = response.get("id") if isinstance(response.get("id"), str) else None
        call_id = self.registry.result(raw_id, where)
        if call_id is None:
            self.notes.append(f"{where}: function response {response.get('name')!r} answers no earlier call; kept as an observation")
            return ImportedMessage(key=key, role=Role.USER, kind=MessageKind.OBSERVATION, parts=[TextPart(text=text)], source_ref=where)
        result = ToolResultPart(call_id=call_id, text=text, is_error=failed, images=tuple(images))
        return ImportedMessage(key=key, role=Role.TOOL, parts=[result], attachments=attachments, source_ref=where)


def _replay(source: Source, lines: Iterable[tuple[int, Any]], log: _Log, notes: list[str]) -> None:
    for line_no, value in lines:
        location = f"line {line_no}"
        if not isinstance(value, dict):
            fail(source.path, location, f"expected a JSON object, found {describe_json(value)}")
        if "$rewindTo" in value:
            log.rewind(value["$rewindTo"])
        elif "$set" in value:
            patch = value["$set"]
            if not isinstance(patch, dict):
                fail(source.path, location, f"'$set' must be an object, found {describe_json(patch)}")
            log.metadata.update({k: v for k, v in patch.items() if k != "messages"})
            if isinstance(patch.get("messages"), list):
                log.replace(patch["messages"], location)
        elif isinstance(value.get("id"), str) and "type" in value:
            log.upsert(value, location)
        elif isinstance(value.get("sessionId"), str):
            log.metadata.update({k: v for k, v in value.items() if k != "messages"})
            if isinstance(value.get("messages"), list):
                log.replace(value["messages"], location)
        else:
            notes.append(f"{location}: record with keys {', '.join(repr(k) for k in list(value)[:6])} kept out (not a Gemini CLI record)")


def _emit(converter: _Converter, log: _Log) -> tuple[list[ImportedMessage], str | None]:
    messages: list[ImportedMessage] = []
    last_key: dict[str, str] = {}
    for mid, record in log.records.items():
        produced = converter.record(record, mid, log.locations[mid])
        parent = log.parents.get(mid)
        parent_key = last_key.get(parent) if parent is not None else None
        if parent is not None and parent_key is None and messages:
            parent_key = messages[-1].key  # its parent was written again later: follow file order
        for message in produced:
            message.parent_key = parent_key
            parent_key = message.key
        last_key[mid] = parent_key or mid
        messages.extend(produced)
    active = last_key.get(log.chain[-1]) if log.chain else None
    return messages, active


def parse_gemini_cli(source: Source, document: Any | None) -> ImportedTranscript:
    """Parse a Gemini CLI session: a whole-file JSON session, a JSONL session log
    (``document`` is ``None``) or a list of API contents (bare or under ``history``).

    Raises:
        ImportFormatError: a record or part that is not an object, a tool call without a
            name, a ``$set`` that is not an object, malformed base64 image data (location
            ``"line 12"`` / ``"messages[3].toolCalls[0]"``).
    """
    converter = _Converter(source)
    metadata: dict[str, Any] = {}
    tree = False
    active: str | None = None
    skipped: list[str] = []
    if isinstance(document, list) or (isinstance(document, dict) and not isinstance(document.get("messages"), list)):
        items = document if isinstance(document, list) else document.get("history")
        location = "history" if isinstance(document, dict) else ""
        messages = converter.contents(items if isinstance(items, list) else [], location)
        if isinstance(document, dict):
            metadata.update({k: v for k, v in document.items() if k != "history"})
    else:
        log = _Log()
        if document is None:
            _replay(source, iter_jsonl(source, converter.notes, skipped), log, converter.notes)
            tree = True
        elif not isinstance(document, dict):
            fail(source.path, None, f"expected a Gemini CLI session object or history list, found {describe_json(document)}")
        else:
            log.metadata.update({k: v for k, v in document.items() if k != "messages"})
            for i, record in enumerate(document["messages"]):
                if not isinstance(record, dict) or not isinstance(record.get("id"), str):
                    fail(source.path, f"messages[{i}]", "expected a message record with an 'id'")
                log.upsert(record, f"messages[{i}]")
        messages, active = _emit(converter, log)
        metadata.update(log.metadata)
        if log.rewinds:
            converter.notes.append(f"{log.rewinds} rewind(s): the rewound messages are kept on a side branch")
    converter.registry.finish()
    if skipped:
        metadata["skipped_raw_lines"] = skipped
    model = first_model(messages)
    return ImportedTranscript(
        format=FORMAT,
        path=source.name,
        title=str(metadata.get("summary") or "") or first_user_title(messages),
        messages=messages,
        participants=[main_participant(model, "google")],
        tree=tree,
        active_leaf_key=active if tree else None,
        notes=converter.notes,
        content_key=source_key([source]),
        metadata=metadata,
    )
