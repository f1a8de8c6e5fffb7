"""Transcript importers: parse real agent transcript files into an ImportedTranscript.

Importers only parse; :mod:`contextledger.ingest.loader` writes the result to the store in
one transaction.  Supported formats:

* ``"openai-chat"``: OpenAI Chat Completions messages (JSON array, JSON Lines, or an object
  holding the list under ``messages`` / ``traj`` / ``history`` / ``conversation``);
* ``"claude-code"``: Claude Code session JSON Lines, with ``<session>/subagents/`` folded in;
* ``"swe-agent"``: SWE-agent ``.traj`` and mini-swe-agent ``.traj.json`` trajectories;
* ``"openai-responses"``: OpenAI Responses request bodies, response objects, item arrays
  and JSON Lines of items;
* ``"anthropic-messages"``: Anthropic Messages request bodies (and bare message arrays).

A logged exchange ``{"request": body, "response": reply}`` of the three API formats is read
as the request followed by the reply.  :func:`parse_request_body` parses an already
decoded body of any of the three API formats, independent of files.

Codex CLI rollouts and Aider chat histories are recognised and rejected with an
:class:`~contextledger.errors.ImportFormatError` whose reason ends in
``"is not supported yet"``.  Every fault in an input file raises ``ImportFormatError`` with
the file, a precise location and a one-sentence reason.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contextledger.errors import ImportFormatError
from contextledger.ingest.importers.anthropic_messages import parse_anthropic_file
from contextledger.ingest.importers.bodies import (
    BODY_PROVIDERS,
    detect_body_provider,
    parse_request_body,
)
from contextledger.ingest.importers.claude_code import parse_claude_code
from contextledger.ingest.importers.common import (
    Source,
    content_key_of,
    parse_json_document,
    read_source,
    split_exchange,
)
from contextledger.ingest.importers.detect import (
    SUPPORTED_FORMATS,
    UNSUPPORTED_FORMATS,
    detect_source,
)
from contextledger.ingest.importers.openai_chat import parse_chat_body, parse_openai_chat
from contextledger.ingest.importers.openai_responses import parse_responses_file
from contextledger.ingest.importers.swe_agent import parse_swe_agent
from contextledger.ingest.transcript import ImportedTranscript
from contextledger.limits import loads_json

__all__ = [
    "BODY_PROVIDERS",
    "SUPPORTED_FORMATS",
    "UNSUPPORTED_FORMATS",
    "detect_body_provider",
    "detect_format",
    "parse_file",
    "parse_request_body",
]


def _document_for(source: Source, format: str) -> Any | None:
    """The parsed JSON document for ``format``, or ``None`` when the file is JSON Lines."""
    if format == "claude-code":
        return None
    if format == "swe-agent":
        return parse_json_document(source)
    try:
        document = loads_json(source.text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            return None
        return parse_json_document(source)
    if isinstance(document, dict) and "role" in document:
        return None
    return document


def detect_format(path: Path) -> str:
    """Return the format of the transcript at ``path`` (one of :data:`SUPPORTED_FORMATS`).

    Raises:
        ImportFormatError: the file is empty, binary, not JSON, of an unknown shape (the
            reason names what was seen and what was expected), or a recognised but
            unsupported format (``codex-rollout``, ``aider-history``: reason ends in
            ``"is not supported yet"``).
    """
    return detect_source(read_source(Path(path))).format


def parse_file(path: Path, format: str = "auto") -> ImportedTranscript:
    """Parse the transcript at ``path`` into an :class:`ImportedTranscript`.

    Args:
        path: the transcript file.  For a Claude Code session ``<dir>/<id>.jsonl``, the
            files ``<dir>/<id>/subagents/agent-*.jsonl`` are folded in as child subagent
            participants.
        format: ``"auto"`` (detect from content) or one of :data:`SUPPORTED_FORMATS`.

    Raises:
        ImportFormatError: any fault in the file (see :func:`detect_format`), an unknown
            ``format`` argument (reason names the supported formats), or content that does
            not match the given format.
    """
    file_path = Path(path)
    source = read_source(file_path)
    if format == "auto":
        detected = detect_source(source)
        chosen, document = detected.format, detected.document
    elif format in SUPPORTED_FORMATS:
        chosen = format
        document = _document_for(source, format)
    else:
        supported = ", ".join(SUPPORTED_FORMATS)
        raise ImportFormatError(str(file_path), None, f"unknown format {format!r}: expected 'auto' or one of {supported}")
    if chosen == "claude-code":
        return parse_claude_code(source)
    if chosen == "swe-agent":
        return parse_swe_agent(source, document)
    if chosen == "openai-responses":
        return parse_responses_file(source, document)
    if chosen == "anthropic-messages":
        return parse_anthropic_file(source, document if document is not None else parse_json_document(source))
    if isinstance(document, dict):
        body, response = split_exchange(document)
        return parse_chat_body(body, response=response, path=source.name, content_key=content_key_of([source.data]))
    return parse_openai_chat(source, document)
