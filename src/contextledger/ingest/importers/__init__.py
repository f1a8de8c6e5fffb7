"""Transcript importers: parse real agent transcript files into an ImportedTranscript.

Importers only parse; :mod:`contextledger.ingest.loader` writes the result to the store in
one transaction.  Supported formats (one parser module each):

* ``"openai-chat"``: OpenAI Chat Completions messages (JSON array, JSON Lines, or an object
  holding the list under ``messages`` / ``traj`` / ``history`` / ``conversation``);
* ``"claude-code"``: Claude Code session JSON Lines (CLI 1.x–2.1.x), with
  ``<session>/subagents/`` folded in, or the same records as one JSON array;
* ``"swe-agent"``: SWE-agent ``.traj`` and mini-swe-agent ``.traj.json`` trajectories;
* ``"openai-responses"``: OpenAI Responses request bodies, response objects, item arrays
  and JSON Lines of items;
* ``"anthropic-messages"``: Anthropic Messages request bodies (and bare message arrays);
* ``"codex-rollout"``: Codex CLI rollouts (envelope and bare layouts);
* ``"aider-history"``: Aider ``.aider.chat.history.md`` files;
* ``"gemini-cli"``: Gemini CLI sessions (JSON, JSONL logs, API content lists);
* ``"tau2-bench"``: tau2-bench simulation runs.

A logged exchange ``{"request": body, "response": reply}`` of the three API formats is read
as the request followed by the reply.  :func:`parse_request_body` parses an already
decoded body of any of the three API formats, independent of files.

Recognised but unsupported formats (:data:`UNSUPPORTED_FORMATS`) are refused with an
:class:`~contextledger.errors.ImportFormatError` that names them and ends in ``"is not
supported yet"``.  Every fault in an input file raises ``ImportFormatError`` with the file,
a precise location and a one-sentence reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contextledger.errors import ImportFormatError
from contextledger.ingest.importers.aider_history import parse_aider_history
from contextledger.ingest.importers.anthropic_messages import parse_anthropic_file
from contextledger.ingest.importers.bodies import (
    BODY_PROVIDERS,
    detect_body_provider,
    parse_request_body,
)
from contextledger.ingest.importers.claude_code import parse_claude_code
from contextledger.ingest.importers.codex_rollout import parse_codex_rollout
from contextledger.ingest.importers.common import (
    Source,
    fail,
    parse_json_document,
    read_source,
    source_key,
    split_exchange,
)
from contextledger.ingest.importers.detect import (
    SUPPORTED_FORMATS,
    UNSUPPORTED_FORMATS,
    detect_source,
)
from contextledger.ingest.importers.gemini_cli import parse_gemini_cli
from contextledger.ingest.importers.openai_chat import parse_chat_body, parse_openai_chat
from contextledger.ingest.importers.openai_responses import parse_responses_file
from contextledger.ingest.importers.swe_agent import parse_swe_agent
from contextledger.ingest.importers.tau2_bench import parse_tau2_bench
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

_LINE_FORMATS = frozenset({"codex-rollout", "aider-history"})


def _document_for(source: Source, format: str) -> Any | None:
    """The parsed JSON document for ``format``, or ``None`` when the file is JSON Lines
    (or Markdown)."""
    if format in _LINE_FORMATS:
        return None
    if format in ("swe-agent", "tau2-bench", "anthropic-messages"):
        return parse_json_document(source)
    try:
        document = loads_json(source.text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            return None
        return parse_json_document(source)
    if isinstance(document, dict) and ("role" in document or format == "claude-code"):
        return None
    return document


_SHARED_SHAPES = frozenset({"openai-chat", "anthropic-messages", "openai-responses"})
"""API formats whose request bodies and bare message arrays overlap: content detected as
one of them may be read as another on request."""


def _forced_document(source: Source, format: str) -> Any | None:
    """The document for a forced ``--format``, after checking the file is not plainly
    another format: when detection recognises the content as a different format (its
    own markers) and the two do not share shapes (:data:`_SHARED_SHAPES`), the file holds
    none of ``format``'s markers and is refused instead of being read as one message or
    as unknown records.  Content detection cannot place is left to ``format``'s parser,
    whose own errors name what is wrong.

    Raises:
        ImportFormatError: the content is another format (the reason names both).
    """
    try:
        detected = detect_source(source)
    except ImportFormatError:
        return _document_for(source, format)
    if detected.format != format and not {detected.format, format} <= _SHARED_SHAPES:
        raise ImportFormatError(
            str(source.path), None,
            f"--format {format}: none of its markers found; the content is {detected.format} (use --format {detected.format} or auto)",
        )
    return _document_for(source, format)


def _chat(source: Source, document: Any) -> ImportedTranscript:
    if isinstance(document, dict):
        body, response = split_exchange(document)
        return parse_chat_body(body, response=response, path=source.name, content_key=source_key([source]))
    return parse_openai_chat(source, document)


def _object(source: Source, document: Any, format: str) -> dict[str, Any]:
    if not isinstance(document, dict):
        fail(source.path, None, f"a {format} file holds one JSON object")
    return document


_PARSERS: dict[str, Callable[[Source, Any], ImportedTranscript]] = {
    "openai-chat": _chat,
    "claude-code": lambda s, d: parse_claude_code(s, array=d if isinstance(d, list) else None),
    "swe-agent": parse_swe_agent,
    "openai-responses": parse_responses_file,
    "anthropic-messages": parse_anthropic_file,
    "codex-rollout": lambda s, d: parse_codex_rollout(s),
    "aider-history": lambda s, d: parse_aider_history(s),
    "gemini-cli": parse_gemini_cli,
    "tau2-bench": lambda s, d: parse_tau2_bench(s, _object(s, d, "tau2-bench")),
}


def detect_format(path: Path) -> str:
    """Return the format of the transcript at ``path`` (one of :data:`SUPPORTED_FORMATS`).

    Raises:
        ImportFormatError: the file is empty, binary, not JSON, of an unknown shape (the
            reason names what was seen and what was expected), or a recognised but
            unsupported format (reason names it and ends in ``"is not supported yet"``).
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
        document = _forced_document(source, format)
    else:
        supported = ", ".join(SUPPORTED_FORMATS)
        raise ImportFormatError(str(file_path), None, f"unknown format {format!r}: expected 'auto' or one of {supported}")
    transcript = _PARSERS[chosen](source, document)
    # how the file was read (a stray invalid byte, a Latin-1 fallback) leads the notes of
    # every format; a parser that already copied them (Aider) keeps one copy
    transcript.notes[:0] = [n for n in source.notes if n not in transcript.notes]
    return transcript
