"""Explicit limits on hostile input, and the text that storage cannot hold.

Every JSON text that comes from outside (transcript files, tool-call arguments, tool
results that look like JSON) is parsed with :func:`loads_json`, which refuses nesting
deeper than :data:`MAX_JSON_DEPTH` levels with a :class:`JsonDepthError` — a
:class:`json.JSONDecodeError`, so every caller that already treats invalid JSON as text
keeps working.  Without the limit, one deeply nested tool-call argument made every later
operation on its conversation fail with ``RecursionError`` (the interpreter's limit
depends on how deep the caller's stack already is, so it is no limit at all).

:func:`storable_text` replaces what no backend can store as text: NUL (PostgreSQL text
and ``jsonb`` refuse it) and lone UTF-16 surrogates (not encodable as UTF-8; JSON
transcripts can carry them as ``"\\ud800"`` escapes).  Raw tool-result *bytes* are
never altered: a payload that is not clean UTF-8 text is kept whole in the blob store.

The limits (also listed in README "Security"):

========================  ==============  ==============================================
limit                     value           what happens above it
========================  ==============  ==============================================
``MAX_JSON_DEPTH``        100 levels      transcript line/document: import refused with
                                          one line naming file and line; tool-call
                                          arguments or a JSON-looking result: treated as
                                          opaque text (kept exact, never parsed)
``MAX_TRANSCRIPT_BYTES``  1 GiB           import refused before a regular file is read;
                                          a device, FIFO or stream is read up to one
                                          byte more, then refused the same way
``MAX_PAYLOAD_BYTES``     256 MiB         one recorded tool result or message text:
                                          :class:`~contextledger.errors.InputError`
``SCAN_HEAD_CHARS`` +     48 + 16 KiB     per-record scans (constraints, titles, index
``SCAN_TAIL_CHARS``                       terms, embeddings) read head and tail only
========================  ==============  ==============================================
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_PAYLOAD_BYTES",
    "MAX_TRANSCRIPT_BYTES",
    "JsonDepthError",
    "json_depth_exceeds",
    "loads_json",
    "payload_bytes",
    "scan_window",
    "storable_text",
    "utf8_bytes",
]

MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays/objects accepted in any JSON text from outside."""

MAX_TRANSCRIPT_BYTES = 1 << 30
"""Largest transcript file imported (bytes)."""

MAX_PAYLOAD_BYTES = 256 << 20
"""Largest single tool result or message text recorded (bytes, UTF-8)."""


SCAN_HEAD_CHARS = 48 * 1024
"""Characters of a record's head that a per-record scan reads (constraints, titles,
index terms, embeddings)."""
SCAN_TAIL_CHARS = 16 * 1024
"""Characters of a record's tail that a per-record scan reads."""


def scan_window(text: str) -> str:
    """What a per-record scan reads of ``text``: all of it up to
    ``SCAN_HEAD_CHARS + SCAN_TAIL_CHARS`` characters, else its head and its tail
    (cut at line breaks when one is near) joined by a blank line, so a task stated
    before a pasted multi-megabyte log and a request after it are both seen while the
    work stays bounded by the window, not by the record.  Token counts and secret
    screening are not scans in this sense: they read every character."""
    if len(text) <= SCAN_HEAD_CHARS + SCAN_TAIL_CHARS:
        return text
    head = text[:SCAN_HEAD_CHARS]
    if (nl := head.rfind("\n")) >= SCAN_HEAD_CHARS // 2:
        head = head[:nl]
    tail = text[-SCAN_TAIL_CHARS:]
    if 0 <= (nl := tail.find("\n")) < SCAN_TAIL_CHARS // 2:
        tail = tail[nl + 1 :]
    return f"{head}\n\n{tail}"


class JsonDepthError(json.JSONDecodeError):
    """JSON text nested deeper than the limit (a :class:`json.JSONDecodeError`, so code
    that treats invalid JSON as opaque text treats it the same way)."""

    def __init__(self, doc: str, max_depth: int) -> None:
        super().__init__(f"nesting deeper than {max_depth} levels", doc, 0)
        self.max_depth = max_depth


def json_depth_exceeds(value: Any, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Whether the parsed JSON ``value`` nests arrays/objects deeper than ``max_depth``
    (a scalar has depth 0, ``[]`` depth 1).  Iterative: safe on any depth."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        t = type(v)
        if t is dict:
            children: Any = v.values()
        elif t is list:
            children = v
        else:
            continue
        depth += 1
        if depth > max_depth:
            return True
        stack.extend((c, depth) for c in children if type(c) is dict or type(c) is list)
    return False


def loads_json(text: str, *, max_depth: int = MAX_JSON_DEPTH, replace_surrogates: bool = False, **kwargs: Any) -> Any:
    """``json.loads(text, **kwargs)`` that refuses nesting deeper than ``max_depth``.

    The check costs nothing for texts with at most ``max_depth`` opening brackets (they
    cannot nest deeper); otherwise the parsed value's containers are walked once.  With
    ``replace_surrogates``, lone surrogates that ``"\\ud800"`` escapes put into strings
    become U+FFFD (for values that go on to a provider payload or to stdout, where no
    UTF-8 encoder accepts them); texts without such an escape are not walked.

    Raises:
        JsonDepthError: nested deeper than ``max_depth`` (also when the interpreter's own
            recursion limit stopped the parser first).
        json.JSONDecodeError: not valid JSON.
    """
    try:
        value = json.loads(text, **kwargs)
    except RecursionError:
        raise JsonDepthError(text, max_depth) from None
    if text.count("{") + text.count("[") > max_depth and json_depth_exceeds(value, max_depth):
        raise JsonDepthError(text, max_depth)
    if replace_surrogates and _SURROGATE_ESCAPE.search(text):
        value = _without_surrogates(value)
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _without_surrogates(value: Any) -> Any:
    # recursion is bounded: callers pass values of at most MAX_JSON_DEPTH levels
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_surrogates(v) for v in value]
    return value


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def storable_text(text: str) -> tuple[str, int]:
    """``text`` with every NUL and lone UTF-16 surrogate replaced by U+FFFD, and how many
    were replaced.  (In a Python ``str`` a valid surrogate *pair* is already one code
    point, so every surrogate left is lone.)  Costs one scan for NUL; non-ASCII text is
    checked for surrogates by encoding it."""
    if "\x00" not in text:
        if text.isascii():
            return text, 0
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            pass
        else:
            return text, 0
    return _UNSTORABLE.subn("\ufffd", text)


def utf8_bytes(text: str) -> bytes:
    """``text`` as UTF-8 bytes; lone surrogates (which no UTF-8 encoder accepts) become
    U+FFFD.  Every other character, NUL included, is kept."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text).encode("utf-8")


def payload_bytes(payload: str | bytes, what: str) -> bytes:
    """``payload`` as bytes (:func:`utf8_bytes` for text), within :data:`MAX_PAYLOAD_BYTES`.

    Raises:
        InputError: larger than the limit (``what`` names the payload).
    """
    from contextledger.errors import InputError

    raw = payload if isinstance(payload, bytes) else utf8_bytes(payload)
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise InputError(f"{what} is {len(raw):,} bytes, above the {MAX_PAYLOAD_BYTES:,}-byte limit")
    return raw
