"""OpenAI Responses items → neutral messages (shared by the Responses and Codex importers).

A Responses conversation is a flat list of typed items (``input`` of a request, ``output``
of a response, ``response_item`` payloads of a Codex rollout):

* ``message`` (``role`` user / assistant / system / developer; ``content`` a string or
  ``input_text`` / ``output_text`` / ``input_image`` / ``input_file`` / ``refusal`` parts);
  a bare ``{"role", "content"}`` object is a message too;
* ``reasoning`` (``summary``, ``content``, ``encrypted_content``): kept as a
  ``ThinkingPart`` (the encrypted content byte for byte in ``signature``), never sent;
* client tool calls and their outputs, linked by ``call_id``: ``function_call`` /
  ``function_call_output``, ``custom_tool_call`` / ``custom_tool_call_output`` (the free
  text ``input`` is kept as ``{"input": text}``), ``local_shell_call`` /
  ``local_shell_call_output``, ``shell_call`` / ``shell_call_output``,
  ``apply_patch_call`` / ``apply_patch_call_output``, ``computer_call`` /
  ``computer_call_output``;
* server-side tool calls that carry their own result (``web_search_call``,
  ``file_search_call``, ``code_interpreter_call``, ``image_generation_call``,
  ``mcp_call``): a call followed by a ``Role.TOOL`` message with the result;
* anything else (``item_reference``, ``mcp_list_tools``, ``compaction`` …) is kept as a
  ``MessageKind.META`` system message with a note.

Consecutive model-side items (reasoning, assistant text, calls) form one assistant turn;
an input-side item (a user/system/developer message or a tool output) ends it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contextledger.ingest.importers.call_ids import CallIdRegistry
from contextledger.ingest.importers.common import describe_json, fail, image_from_base64, type_of
from contextledger.ingest.importers.openai_messages import content_to_parts
from contextledger.ingest.transcript import ImportedMessage
from contextledger.records.enums import MessageKind, Role
from contextledger.records.parts import (
    ImagePart,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["CALL_ITEMS", "OUTPUT_ITEMS", "SERVER_ITEMS", "ResponsesItems"]

CALL_ITEMS: dict[str, tuple[str | None, str]] = {
    "function_call": (None, "arguments"),
    "custom_tool_call": (None, "input"),
    "local_shell_call": ("local_shell", "action"),
    "shell_call": ("shell", "action"),
    "apply_patch_call": ("apply_patch", "operation"),
    "computer_call": ("computer", "action"),
}
"""Client tool-call item types → (fixed tool name or ``None`` for the item's ``name``,
the key holding the arguments)."""

OUTPUT_ITEMS = frozenset(
    {
        "function_call_output", "custom_tool_call_output", "local_shell_call_output",
        "shell_call_output", "apply_patch_call_output", "computer_call_output",
    }
)
"""Item types that carry a client tool call's output."""

SERVER_ITEMS = frozenset(
    {"web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call", "mcp_call"}
)
"""Server-side tool calls whose item also holds the result."""

_ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT, "system": Role.SYSTEM, "developer": Role.DEVELOPER}
_SERVER_ARGUMENTS = ("arguments", "action", "queries", "code", "container_id", "server_label", "name")
_SKIP_IN_RESULT = frozenset({"type", "id", "call_id", *_SERVER_ARGUMENTS})


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _safe_key(key: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in key)


class ResponsesItems:
    """Accumulates the messages of one item list, in order.

    Args:
        path: the file or body label, for errors.
        registry: the transcript's call-id registry.
        notes: the transcript's notes.
        model: the model named by the request or session, set on assistant turns.

    Attributes:
        messages: the messages produced so far (an open turn is already in the list).
    """

    def __init__(self, path: Path | str, registry: CallIdRegistry, notes: list[str], model: str | None = None) -> None:
        self.path = path
        self.registry = registry
        self.notes = notes
        self.model = model
        self.messages: list[ImportedMessage] = []
        self._turn: ImportedMessage | None = None
        self._server_results: list[ImportedMessage] = []

    # ----------------------------------------------------------------- public

    def item(self, item: Any, key: str, location: str) -> None:
        """Convert one item.

        Args:
            item: the decoded item.
            key: a transcript-unique message key for it (``"item:3"``, ``"line:12"``).
            location: where it is, for errors and notes (``"input[3]"``, ``"line 12"``).

        Raises:
            ImportFormatError: not an object, a message with an unknown role or malformed
                content, a call without a name, a tool output without a call id.
        """
        if not isinstance(item, dict):
            fail(self.path, location, f"expected an item object, found {describe_json(item)}")
        kind = type_of(item)
        if kind is None and "role" in item and "type" not in item:
            kind = "message"
        if kind == "message":
            self._message(item, key, location)
        elif kind == "reasoning":
            self._reasoning(item, key, location)
        elif kind in CALL_ITEMS:
            self._call(item, str(kind), key, location)
        elif kind in OUTPUT_ITEMS:
            self._output(item, key, location)
        elif kind in SERVER_ITEMS:
            self._server_call(item, str(kind), key, location)
        else:
            what = f"item of type {kind!r}" if isinstance(kind, str) else "item without a 'type'"
            self.notes.append(f"{location}: {what} kept as meta")
            self.emit(self.meta(item, key, location, {"item_type": kind if isinstance(kind, str) else None}))

    def emit(self, message: ImportedMessage) -> None:
        """Append a message that does not end the open turn (progress, events, meta)."""
        self.messages.append(message)

    def close(self) -> None:
        """End the open assistant turn (its server-side results follow it)."""
        self._turn = None
        self.messages.extend(self._server_results)
        self._server_results.clear()

    def meta(self, item: Any, key: str, location: str, metadata: dict[str, Any]) -> ImportedMessage:
        """A ``META`` system message holding ``item`` as JSON text."""
        return ImportedMessage(
            key=key, role=Role.SYSTEM, kind=MessageKind.META, parts=[TextPart(text=json.dumps(item, ensure_ascii=False))],
            source_ref=location, metadata=metadata,
        )

    # ----------------------------------------------------------------- items

    def _turn_for(self, key: str, location: str) -> ImportedMessage:
        if self._turn is None:
            self._turn = ImportedMessage(key=key, role=Role.ASSISTANT, source_ref=location, model=self.model)
            self.messages.append(self._turn)
        return self._turn

    def _message(self, item: dict[str, Any], key: str, location: str) -> None:
        role_value = item.get("role")
        role = _ROLES.get(role_value) if isinstance(role_value, str) else None
        if role is None:
            reason = "message has no 'role'" if role_value is None else f"unknown role {role_value!r}"
            fail(self.path, location, reason)
        parts, attachments = content_to_parts(item.get("content"), self.path, location, self.notes)
        if role is Role.ASSISTANT:
            turn = self._turn_for(key, location)
            turn.parts.extend(parts)
            turn.attachments.update(attachments)
            return
        self.close()
        self.messages.append(ImportedMessage(key=key, role=role, parts=parts, attachments=attachments, source_ref=location))

    def _reasoning(self, item: dict[str, Any], key: str, location: str) -> None:
        texts: list[str] = []
        for field in ("summary", "content"):
            entries = item.get(field)
            if isinstance(entries, list):
                texts.extend(e["text"] for e in entries if isinstance(e, dict) and isinstance(e.get("text"), str))
        encrypted = item.get("encrypted_content")
        turn = self._turn_for(key, location)
        turn.parts.append(ThinkingPart(text="\n\n".join(texts), signature=encrypted if isinstance(encrypted, str) and encrypted else None))
        if isinstance(item.get("id"), str):
            turn.metadata.setdefault("reasoning_ids", []).append(item["id"])

    def _call(self, item: dict[str, Any], kind: str, key: str, location: str) -> None:
        fixed, argument_key = CALL_ITEMS[kind]
        name = fixed or item.get("name")
        if not isinstance(name, str) or not name:
            fail(self.path, location, f"{kind} has no 'name'")
        raw_id = item.get("call_id") if isinstance(item.get("call_id"), str) else item.get("id")
        call_id = self.registry.call(raw_id if isinstance(raw_id, str) else None, location)
        arguments = item.get(argument_key)
        if kind == "function_call":
            text = arguments if isinstance(arguments, str) else _compact(arguments if arguments is not None else {})
        elif kind == "custom_tool_call":
            text = _compact({"input": arguments})
        else:
            text = _compact(arguments if arguments is not None else {})
        turn = self._turn_for(key, location)
        turn.parts.append(ToolCallPart(call_id=call_id, tool_name=name, arguments_json=text))
        if kind != "function_call":
            turn.metadata.setdefault("call_item_types", {})[call_id] = kind

    def _output(self, item: dict[str, Any], key: str, location: str) -> None:
        self.close()
        raw_id = item.get("call_id") if isinstance(item.get("call_id"), str) else item.get("id")
        if not isinstance(raw_id, str) or not raw_id:
            fail(self.path, location, f"{item.get('type')} has no 'call_id'")
        text, images, attachments, is_error = self._output_content(item.get("output"), location)
        if item.get("status") in ("failed", "incomplete"):
            is_error = True
        call_id = self.registry.result(raw_id, location)
        if call_id is None:
            self.notes.append(f"{location}: tool output for call {raw_id!r} answers no earlier call; kept as an observation")
            self.messages.append(
                ImportedMessage(
                    key=key, role=Role.USER, kind=MessageKind.OBSERVATION, parts=[TextPart(text=text), *images],
                    attachments=attachments, source_ref=location, metadata={"orphan_call_id": raw_id},
                )
            )
            return
        result = ToolResultPart(call_id=call_id, text=text, is_error=is_error, images=tuple(images))
        self.messages.append(ImportedMessage(key=key, role=Role.TOOL, parts=[result], attachments=attachments, source_ref=location))

    def _output_content(self, output: Any, location: str) -> tuple[str, list[ImagePart], dict[str, bytes], bool]:
        """``(text, images, image bytes, is_error)`` of a tool output in any of its shapes."""
        if output is None:
            return "", [], {}, False
        if isinstance(output, str):
            return output, [], {}, False
        if isinstance(output, dict):
            if isinstance(output.get("content"), str | list):  # {"content", "success"} payloads
                text, images, attachments, _ = self._output_content(output["content"], location)
                return text, images, attachments, output.get("success") is False
            if isinstance(output.get("image_url"), str):  # computer_screenshot
                parts, attachments = content_to_parts([{"type": "input_image", "image_url": output["image_url"]}], self.path, f"{location}.output", self.notes)
                return "", [p for p in parts if isinstance(p, ImagePart)], attachments, False
            return json.dumps(output, ensure_ascii=False), [], {}, False
        if isinstance(output, list) and output and all(isinstance(o, dict) and ("stdout" in o or "stderr" in o) for o in output):
            return self._shell_output(output)
        parts, attachments = content_to_parts(output, self.path, f"{location}.output", self.notes)
        text = "\n".join(p.text for p in parts if isinstance(p, TextPart))
        return text, [p for p in parts if isinstance(p, ImagePart)], attachments, False

    @staticmethod
    def _shell_output(chunks: list[dict[str, Any]]) -> tuple[str, list[ImagePart], dict[str, bytes], bool]:
        texts: list[str] = []
        failed = False
        for chunk in chunks:
            for stream in ("stdout", "stderr"):
                if isinstance(chunk.get(stream), str) and chunk[stream]:
                    texts.append(chunk[stream])
            outcome = chunk.get("outcome")
            if isinstance(outcome, dict):
                code = outcome.get("exit_code")
                if outcome.get("type") == "timeout" or (isinstance(code, int) and code != 0):
                    failed = True
                    texts.append(f"[{outcome.get('type')} {code if code is not None else ''}]".replace(" ]", "]"))
        return "\n".join(texts), [], {}, failed

    def _server_call(self, item: dict[str, Any], kind: str, key: str, location: str) -> None:
        name = item.get("name") if kind == "mcp_call" and isinstance(item.get("name"), str) else kind.removesuffix("_call")
        raw = item.get("id") if isinstance(item.get("id"), str) and item.get("id") else f"{name}_{_safe_key(key)}"
        call_id = self.registry.call(raw, location)
        arguments = {k: item[k] for k in _SERVER_ARGUMENTS if k in item and k != "name"}
        if kind == "mcp_call" and isinstance(arguments.get("arguments"), str):
            text = arguments["arguments"]
        else:
            text = _compact(arguments)
        turn = self._turn_for(key, location)
        turn.parts.append(ToolCallPart(call_id=call_id, tool_name=name, arguments_json=text))
        turn.metadata.setdefault("call_item_types", {})[call_id] = kind
        result_fields = {k: v for k, v in item.items() if k not in _SKIP_IN_RESULT}
        images: list[ImagePart] = []
        attachments: dict[str, bytes] = {}
        if kind == "image_generation_call" and isinstance(result_fields.get("result"), str):
            image, raw_bytes = image_from_base64(result_fields.pop("result"), "image/png", self.path, f"{location}.result")
            images.append(image)
            attachments[image.blob_key or ""] = raw_bytes
        is_error = item.get("status") in ("failed", "incomplete") or bool(item.get("error"))
        answered = self.registry.result(raw, location) or call_id
        result = ToolResultPart(call_id=answered, text=json.dumps(result_fields, ensure_ascii=False), is_error=is_error, images=tuple(images))
        parts: list[Part] = [result]
        self._server_results.append(
            ImportedMessage(
                key=f"{key}#result", role=Role.TOOL, parts=parts, attachments=attachments, source_ref=location,
                metadata={"server_tool": True},
            )
        )
