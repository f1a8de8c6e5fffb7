"""The record-time hooks of secret classification (:mod:`contextledger.security.secrets`).

Two calls, made where text enters the ledger:

* :func:`screen_message` — before a Message is written (recorder and importers): text,
  reasoning and tool-call arguments are redacted; when anything was found the message is
  ``secret_like`` and its exact original parts are kept as a restricted payload (blob
  store, encrypted at rest when a key is configured), named in ``metadata["secrets"]``.
* :func:`screen_result` — before a tool result is written: the classification of the raw
  text, from which the artifact's privacy class, the inline/blob decision and the memory's
  redacted source text follow (see ``Recorder.write_result``).

Nothing here talks to a provider; a ``secret_like`` record reaches one only as its
redacted form (seed 000 §8 R3, R12).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contextledger.records.enums import PrivacyClass
from contextledger.records.models import Message, ToolArtifact, ToolMemory
from contextledger.records.parts import Part, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from contextledger.security.secrets import Screening, redact_json_text, screen_text

__all__ = [
    "MAX_REDACTED_BYTES",
    "RAW_PARTS_CONTENT_TYPE",
    "REDACTED_TEXT_KEY",
    "SECRETS_KEY",
    "RawStore",
    "ScreenedResult",
    "credential_shaped",
    "holds_secrets",
    "raise_privacy",
    "redacted_form",
    "screen_message",
    "screen_result",
    "screen_stored_message",
    "screen_text",
    "screen_tool_result",
    "strip_secrets",
]

REDACTED_TEXT_KEY = "redacted_text"
"""ToolMemory payload key: a secret-like result's text with every secret replaced by its
marker (kept up to :data:`MAX_REDACTED_BYTES`)."""

MAX_REDACTED_BYTES = 65536
"""Largest redacted result text kept in a memory (a larger one is summarised only)."""

SECRETS_KEY = "secrets"
"""Message metadata key: ``{"found": [{"type", "fingerprint"}], "raw_blob_key": …}``."""

RAW_PARTS_CONTENT_TYPE = "application/vnd.contextledger.parts+json"
"""What the blob named by ``metadata["secrets"]["raw_blob_key"]`` holds: the message's
original parts as JSON (``[part.model_dump(mode="json"), …]``)."""

_STRICTER = frozenset({PrivacyClass.SECRET_LIKE, PrivacyClass.GOOGLE_USER_DATA, PrivacyClass.OAUTH_DERIVED})


RawStore = Callable[[bytes], str]
"""Where the exact original of a redacted record goes (the ledger's restricted blob
store); returns the key to find it again."""


def raise_privacy(declared: PrivacyClass) -> PrivacyClass:
    """The class of a record in which a secret was found: ``secret_like``, unless the
    caller declared a class that is already never sent raw (kept as declared)."""
    return declared if declared in _STRICTER else PrivacyClass.SECRET_LIKE


def holds_secrets(record: ToolArtifact | Message) -> bool:
    """Whether ``record`` is one whose raw text must never be matched or shown outside
    an explicit reveal: ``secret_like``, or a secret was found in it (a record declared
    with a stricter class keeps that class, with the findings in its metadata)."""
    if record.privacy_class is PrivacyClass.SECRET_LIKE:
        return True
    meta = record.provider_metadata if isinstance(record, ToolArtifact) else record.metadata
    return SECRETS_KEY in meta


_BARE_TOKEN = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/=-]{20,}(?![A-Za-z0-9+/=_-])")


def credential_shaped(token: str, *, min_runs: float = 0.6) -> bool:
    """Whether a bare token reads as a random credential: letters of both cases and
    digits, in short runs (character-class runs per character at least ``min_runs``:
    random base64 has about 0.67, an identifier such as ``getUserById2FromDatabase``
    0.5, ``HTTPServerV2ConfigBuilder`` 0.3).  Hexadecimal strings (hashes) are not."""
    if not (any(c.isupper() for c in token) and any(c.islower() for c in token) and any(c.isdigit() for c in token)):
        return False
    if all(c in "0123456789abcdefABCDEF" for c in token):
        return False
    runs = 1 + sum(_class(a) != _class(b) for a, b in itertools.pairwise(token))
    return runs >= min_runs * len(token)


def _class(c: str) -> int:
    return 0 if c.islower() else 1 if c.isupper() else 2 if c.isdigit() else 3


def strip_secrets(text: str) -> str:
    """``text`` without what reads as a secret: the spans :func:`screen_text` finds and
    bare :func:`credential_shaped` tokens of 20+ base64 characters without ``_`` (record
    and call ids such as ``toolu_01…`` are kept).  For
    search and why-not queries: a secret typed into a query is never matched against
    anything (the ledger indexes only redacted text, and a query's fragments must not
    confirm a guess either)."""
    findings = screen_text(text).findings
    pieces: list[str] = []
    pos = 0
    for f in findings:
        pieces.append(text[pos : f.start])
        pos = f.end
    pieces.append(text[pos:])
    return _BARE_TOKEN.sub(lambda m: "" if credential_shaped(m.group(0)) else m.group(0), " ".join(pieces))


def _screen_part(part: Part) -> tuple[Part, Screening | None]:
    if isinstance(part, TextPart | ThinkingPart):
        s = screen_text(part.text)
        return (part.model_copy(update={"text": s.text}), s) if s.secret else (part, None)
    if isinstance(part, ToolCallPart):
        s = redact_json_text(part.arguments_json)
        return (part.model_copy(update={"arguments_json": s.text}), s) if s.secret else (part, None)
    return part, None


def screen_message(
    parts: Sequence[Part],
    privacy_class: PrivacyClass,
    metadata: Mapping[str, Any] | None,
    keep_raw: RawStore,
) -> tuple[tuple[Part, ...], PrivacyClass, dict[str, Any]]:
    """Redact the secrets in a message's parts (tool results excepted: they are screened
    with their artifact).  Returns the parts to store, the privacy class and the metadata;
    unchanged when nothing was found.  When something was, ``keep_raw`` receives the
    original parts (JSON) and the metadata names them under :data:`SECRETS_KEY`."""
    out: list[Part] = []
    found: list[Screening] = []
    for p in parts:
        q, s = _screen_part(p)
        out.append(q)
        if s is not None:
            found.append(s)
    meta = dict(metadata or {})
    if not found:
        return tuple(parts), privacy_class, meta
    raw = json.dumps([p.model_dump(mode="json") for p in parts], ensure_ascii=False, sort_keys=True).encode("utf-8", "surrogatepass")
    summary: dict[tuple[str, str], None] = {}
    for s in found:
        for item in s.summary():
            summary.setdefault((item["type"], item["fingerprint"]), None)
    meta[SECRETS_KEY] = {"found": [{"type": t, "fingerprint": f} for t, f in summary], "raw_blob_key": keep_raw(raw), "raw_content_type": RAW_PARTS_CONTENT_TYPE}
    return tuple(out), raise_privacy(privacy_class), meta


_MEMO: OrderedDict[str, Screening | None] = OrderedDict()
_MEMO_SIZE = 64
_MEMO_LOCK = threading.Lock()


def screen_result(raw: bytes) -> Screening | None:
    """The classification of a tool result's raw bytes: ``None`` for a binary payload or
    when nothing was found.  Memoised by the payload's SHA-256 (the blob decision and the
    artifact row of one result ask for the same bytes; a result is scanned once)."""
    digest = hashlib.sha256(raw).hexdigest()
    with _MEMO_LOCK:
        if digest in _MEMO:
            _MEMO.move_to_end(digest)
            return _MEMO[digest]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        found = None
    else:
        s = screen_text(text)
        found = s if s.secret else None
    with _MEMO_LOCK:
        _MEMO[digest] = found
        while len(_MEMO) > _MEMO_SIZE:
            _MEMO.popitem(last=False)
    return found


def redacted_form(artifact: Any, memory: Any, max_bytes: int, evaluator: Any, reason: Any) -> str | None:
    """The redacted text that may stand for a ``secret_like`` artifact's raw payload in a
    request (its memory's :data:`REDACTED_TEXT_KEY`: the result as recorded with each
    secret replaced by its marker; the raw payload never leaves the ledger), when it
    exists and fits ``max_bytes`` — the assembly evaluator then records the artifact as
    shaped for ``reason``; otherwise ``None``."""
    if memory is None or artifact.privacy_class is not PrivacyClass.SECRET_LIKE:
        return None
    text = memory.payload.get(REDACTED_TEXT_KEY)
    if not isinstance(text, str) or len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        return None
    from contextledger.records.enums import Shape

    evaluator.shape_record(artifact.id, "artifact", Shape.EXTRACT, reason, "secrets redacted; the rest of the payload shown")
    return text


@dataclass(frozen=True)
class ScreenedResult:
    """A tool result after classification (:func:`screen_tool_result`): ``text`` is what
    its memory is derived from (the redacted text of a secret-like result)."""

    screening: Screening | None
    text: str | None

    def artifact(self, art: ToolArtifact, declared: PrivacyClass) -> ToolArtifact:
        """The row to store: ``secret_like`` with the kinds and fingerprints found."""
        if self.screening is None:
            return art
        return art.model_copy(update={"privacy_class": raise_privacy(declared), "provider_metadata": {**art.provider_metadata, SECRETS_KEY: self.screening.summary()}})

    def memory(self, mem: ToolMemory) -> ToolMemory:
        """The memory, holding the redacted text (when small enough) to stand for the raw
        payload in a request (:func:`redacted_form`)."""
        if self.screening is None or len(self.screening.text) > MAX_REDACTED_BYTES:
            return mem
        return mem.model_copy(update={"payload": {**mem.payload, REDACTED_TEXT_KEY: self.screening.text}})


def screen_tool_result(raw: bytes, text: str | None, blob_key: str | None, message: Message | None, keep_raw: RawStore) -> tuple[str | None, str | None, Message | None, ScreenedResult]:
    """Classify a tool result before it is written: ``(blob key, inline text, result
    message, screened)``.  A secret-like result is never inline (its payload goes to
    ``keep_raw``, the restricted store) and its message carries no copy of it."""
    screening = screen_result(raw)
    if screening is None:
        return blob_key, text if blob_key is None else None, message, ScreenedResult(screening=None, text=text)
    if message is not None:
        message = message.model_copy(update={"parts": tuple(p.model_copy(update={"text": None}) if isinstance(p, ToolResultPart) else p for p in message.parts)})
    return blob_key or keep_raw(raw), None, message, ScreenedResult(screening=screening, text=screening.text)


def screen_stored_message(msg: Message, keep_raw: RawStore | None, count_tokens: Callable[[Sequence[Part]], int]) -> Message:
    """:func:`screen_message` on an already built message (importers): the message
    itself when nothing was found (or ``keep_raw`` is ``None``: a message screened
    elsewhere, as a tool result with its artifact), else its redacted copy (token count
    recomputed)."""
    if keep_raw is None:
        return msg
    parts, privacy, meta = screen_message(msg.parts, msg.privacy_class, msg.metadata, keep_raw)
    if SECRETS_KEY not in meta:
        return msg
    return msg.model_copy(update={"parts": parts, "privacy_class": privacy, "metadata": meta, "token_count": count_tokens(parts)})
