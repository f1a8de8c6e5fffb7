"""Text files that are UTF-8 but for a few invalid bytes.

A transcript written as UTF-8 may carry a stray byte of another encoding (one Latin-1
``é`` pasted into one line).  Such a file is text, not binary: it is decoded with
replacement (each invalid sequence becomes U+FFFD) when the invalid sequences are few —
at most :data:`MAX_INVALID_SHARE` of the file's bytes and of its lines.  A file with more
is refused as binary, as is any file with a NUL byte (checked before this module)."""

from __future__ import annotations

import codecs
import threading
from pathlib import Path

MAX_INVALID_SHARE = 0.01
"""Largest share (of the file's bytes, and of its lines) that invalid UTF-8 sequences may
take for a file still to be read as text with replacement characters."""

_SHOWN = 5
"""How many bad places a warning names before "…"."""


def invalid_offsets(data: bytes, limit: int | None = None) -> list[int]:
    """Byte offsets (0-based) of each invalid UTF-8 sequence in ``data``, in order, in one
    pass (an incremental decoder over 64 KiB chunks with a recording error handler:
    linear in the file's size however many bytes are bad); with a ``limit``, the scan
    stops at the end of the chunk in which it was passed (the caller only needs to know it
    was exceeded)."""
    offsets: list[int] = []
    decoder = codecs.getincrementaldecoder("utf-8")(errors=_RECORD)
    base = 0
    for start in range(0, len(data), _CHUNK):
        chunk = data[start : start + _CHUNK]
        final = start + _CHUNK >= len(data)
        _SEEN.offsets, _SEEN.base = offsets, base - len(decoder.getstate()[0])
        decoder.decode(chunk, final)
        base += len(chunk)
        if limit is not None and len(offsets) > limit:
            break
    return offsets


_CHUNK = 64 * 1024
"""Bytes decoded per step of the scan."""
_RECORD = "contextledger-record-offsets"


class _Seen(threading.local):
    """Where the error handler records (per thread: imports may run side by side)."""

    offsets: list[int]
    base: int = 0


_SEEN = _Seen()


def _record(exc: UnicodeError) -> tuple[str, int]:
    assert isinstance(exc, UnicodeDecodeError)
    _SEEN.offsets.append(_SEEN.base + exc.start)
    return "\ufffd", exc.end


codecs.register_error(_RECORD, _record)


def decode_mostly_utf8(path: Path, data: bytes) -> tuple[str, str] | None:
    """``(text, note)`` for ``data`` with few invalid UTF-8 sequences, else ``None``.

    ``text`` has U+FFFD for each invalid sequence; ``note`` is one line naming the file,
    the 1-based line numbers and the byte offsets, for the import's notes (nothing is
    printed: the caller shows the notes).
    ``None`` means the invalid sequences exceed :data:`MAX_INVALID_SHARE` of the bytes
    or of the lines: the caller refuses the file as binary.
    """
    offsets = invalid_offsets(data, limit=int(MAX_INVALID_SHARE * len(data)))
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    line_of = _line_numbers(data, offsets)
    bad_lines = set(line_of)
    if len(offsets) > MAX_INVALID_SHARE * len(data) or len(bad_lines) > max(1.0, MAX_INVALID_SHARE * lines):
        return None
    text = data.decode("utf-8", "replace").removeprefix("\ufeff")
    more = " …" if len(offsets) > _SHOWN else ""
    where = ", ".join(f"line {line} byte {off}" for line, off in zip(line_of[:_SHOWN], offsets[:_SHOWN], strict=True))
    return text, f"{path}: {len(offsets)} invalid UTF-8 sequence(s) ({where}{more}) decoded as U+FFFD"


def _line_numbers(data: bytes, offsets: list[int]) -> list[int]:
    """The 1-based line number of each of the ascending byte ``offsets`` in ``data``,
    counted in one pass (each stretch of ``data`` between two offsets once)."""
    out: list[int] = []
    line, pos = 1, 0
    for off in offsets:
        line += data.count(b"\n", pos, off)
        pos = off
        out.append(line)
    return out
