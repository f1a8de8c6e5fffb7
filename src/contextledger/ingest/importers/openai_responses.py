"""Importer for OpenAI Responses item lists (format ``"openai-responses"``).

Accepted inputs (decoded JSON, independent of files):

* a request body ``{"model", "instructions", "input", "tools", ...}`` as sent to ``POST
  /v1/responses``; ``input`` is a string (one user message) or a list of items;
* a response object ``{"object": "response", "output": [...], ...}``;
* a bare list of items (``input`` and ``output`` items in conversation order).

Items are converted by :class:`~contextledger.ingest.importers.responses_items.ResponsesItems`;
``instructions`` become the system message; function tools become function schemas,
custom tools a function with one string argument ``input``, built-in tools
(``web_search``, ``file_search``, ``local_shell``, ``mcp`` …) are listed in
``metadata["builtin_tools"]``.  ``previous_response_id`` and the other request
parameters are kept in ``metadata``: history held by the server is not available here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from contextledger.ingest.importers.build import first_model, first_user_title, main_participant
from contextledger.ingest.importers.call_ids import CallIdRegistry
from contextledger.ingest.importers.common import (
    REQUEST_BODY,
    Source,
    describe_json,
    fail,
    iter_jsonl,
    json_content_key,
    source_key,
    split_exchange,
)
from contextledger.ingest.importers.openai_messages import content_to_parts
from contextledger.ingest.importers.responses_items import ResponsesItems
from contextledger.ingest.transcript import ImportedMessage, ImportedTranscript
from contextledger.records.enums import Role

__all__ = ["FORMAT", "parse_openai_responses", "parse_responses_file", "responses_tools"]

FORMAT = "openai-responses"
_BODY_KEYS = ("input", "instructions", "tools", "output")
_CUSTOM_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"input": {"type": "string"}},
    "required": ["input"],
}


def responses_tools(tools: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(function schemas, built-in tools)`` of a Responses ``tools`` array.

    ``{"type": "function", "name", "description", "parameters"}`` becomes ``{"type":
    "function", "function": {...}}``; ``{"type": "custom", "name", ...}`` a function whose
    one argument ``input`` is the free text; other tools are returned as given.
    """
    functions: list[dict[str, Any]] = []
    builtin: list[dict[str, Any]] = []
    if not isinstance(tools, list):
        return functions, builtin
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        kind = tool.get("type")
        if kind in ("function", "custom") and isinstance(tool.get("name"), str):
            parameters = tool.get("parameters") if kind == "function" else _CUSTOM_PARAMETERS
            function: dict[str, Any] = {"name": tool["name"], "parameters": parameters if isinstance(parameters, dict) else {"type": "object", "properties": {}}}
            if isinstance(tool.get("description"), str):
                function["description"] = tool["description"]
            functions.append({"type": "function", "function": function})
        else:
            builtin.append(dict(tool))
    return functions, builtin


def _instructions(converter: ResponsesItems, value: Any, path: str) -> None:
    if value is None or value == "":
        return
    if isinstance(value, str):
        parts, attachments = content_to_parts(value, path, "instructions", converter.notes)
        converter.messages.append(ImportedMessage(key="instructions", role=Role.SYSTEM, parts=parts, attachments=attachments, source_ref="instructions"))
    elif isinstance(value, list):  # a response object echoes instructions as items
        for i, item in enumerate(value):
            converter.item(item, f"instructions:{i}", f"instructions[{i}]")
    else:
        fail(path, "instructions", f"expected a string or an array of items, found {describe_json(value)}")


def _input_items(body: Mapping[str, Any], path: str) -> Sequence[Any]:
    value = body.get("input")
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if isinstance(value, list):
        return value
    fail(path, "input", f"expected a string or an array of items, found {describe_json(value)}")


def _transcript(
    path: str,
    content_key: str,
    items: Iterable[tuple[str, str, Any]],
    *,
    request: Mapping[str, Any] | None = None,
    response: Mapping[str, Any] | None = None,
) -> ImportedTranscript:
    """Convert ``(key, location, item)`` triples (after the request's instructions) and the
    response's output items into one transcript."""
    notes: list[str] = []
    registry = CallIdRegistry(notes)
    metadata: dict[str, Any] = {}
    request = request or {}
    model = request.get("model") if isinstance(request.get("model"), str) else None
    converter = ResponsesItems(path, registry, notes, model)
    _instructions(converter, request.get("instructions"), path)
    for key, location, item in items:
        converter.item(item, key, location)
    if response is not None:
        if not isinstance(response, Mapping) or not isinstance(response.get("output"), list):
            fail(path, "response", "expected a response object with an 'output' array")
        if model is None and isinstance(response.get("model"), str):
            model = converter.model = response["model"]
        for i, item in enumerate(response["output"]):
            converter.item(item, f"output:{i}", f"output[{i}]")
        metadata["response"] = {k: v for k, v in response.items() if k != "output"}
    converter.close()
    registry.finish()
    functions, builtin = responses_tools(request.get("tools"))
    metadata.update({k: v for k, v in request.items() if k not in _BODY_KEYS})
    if builtin:
        metadata["builtin_tools"] = builtin
    messages = converter.messages
    return ImportedTranscript(
        format=FORMAT,
        path=path,
        title=first_user_title(messages),
        messages=messages,
        participants=[main_participant(model or first_model(messages), "openai")],
        tools=functions,
        notes=notes,
        content_key=content_key,
        metadata=metadata,
    )


def parse_openai_responses(
    body: Mapping[str, Any] | Sequence[Any],
    *,
    response: Mapping[str, Any] | None = None,
    path: str = REQUEST_BODY,
    content_key: str | None = None,
) -> ImportedTranscript:
    """Parse a Responses request body, a response object or a bare item list.

    Args:
        body: the decoded request body, response object or item list.
        response: the decoded response to ``body``; its ``output`` items are appended.
        path: the file name or label used in errors and as ``ImportedTranscript.path``.
        content_key: idempotency key; by default ``sha256`` of the canonical JSON of
            ``body`` and ``response``.

    Returns:
        a linear transcript of format ``"openai-responses"``; message keys
        ``"instructions"``, ``"item:<i>"`` (input), ``"output:<i>"`` (response output);
        ``source_ref`` ``"input[<i>]"`` / ``"output[<i>]"`` / ``"[<i>]"`` for a bare list.

    Raises:
        ImportFormatError: no ``input`` / ``output`` list, an item that is not an object,
            a message with an unknown role, a tool output without ``call_id``, malformed
            content (location names the item, e.g. ``"input[4]"``).
    """
    key = content_key or json_content_key(path, body, response)
    if isinstance(body, Mapping):
        if "input" not in body and isinstance(body.get("output"), list) and response is None:
            # a response object alone: its output items are the conversation
            request = {k: body[k] for k in ("model", "instructions") if k in body}
            return _transcript(path, key, [], request=request, response=body)
        items = _input_items(body, path)
        triples = ((f"item:{i}", f"input[{i}]", item) for i, item in enumerate(items))
        return _transcript(path, key, triples, request=body, response=response)
    if isinstance(body, Sequence) and not isinstance(body, str | bytes):
        triples = ((f"item:{i}", f"[{i}]", item) for i, item in enumerate(body))
        return _transcript(path, key, triples, response=response)
    fail(path, None, f"expected a request body, response object or item array, found {describe_json(body)}")


def parse_responses_file(source: Source, document: Any | None) -> ImportedTranscript:
    """Parse a file of Responses data: a request body, a response object, a logged
    ``{"request", "response"}`` exchange, a JSON array of items, or JSON Lines of items
    (``document`` is ``None``; locations ``"line 12"``).

    Raises:
        ImportFormatError: see :func:`parse_openai_responses`; bad JSON lines.
    """
    content_key = source_key([source])
    if document is None:
        notes: list[str] = []
        skipped: list[str] = []
        lines = list(iter_jsonl(source, notes, skipped))
        transcript = _transcript(source.name, content_key, ((f"line:{n}", f"line {n}", item) for n, item in lines))
        transcript.notes[:0] = notes
        if skipped:
            transcript.metadata["skipped_raw_lines"] = skipped
        return transcript
    if isinstance(document, Mapping):
        body, response = split_exchange(document)
        return parse_openai_responses(body, response=response, path=source.name, content_key=content_key)
    return parse_openai_responses(document, path=source.name, content_key=content_key)
