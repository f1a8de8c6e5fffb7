"""Reading, JSON decoding and small content helpers shared by the transcript importers.

Every fault in an input file is reported as
:class:`~contextledger.errors.ImportFormatError` ``(path, location, reason)``; nothing here
lets a ``JSONDecodeError``, ``UnicodeDecodeError`` or ``binascii.Error`` escape.  Files are
read once into memory (bytes for the content hash, one decoded ``str`` for parsing) and
JSON Lines are split with ``str.find`` so a 50 MB line costs one linear pass.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import hashlib
import json
import mimetypes
import re
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import unquote_to_bytes

from contextledger.errors import ImportFormatError
from contextledger.ingest.preambles import strip_wrappers, user_text
from contextledger.limits import JsonDepthError, loads_json, scan_window
from contextledger.records.parts import ImagePart

__all__ = [
    "AIDER_HEADER",
    "AIDER_PROMPT",
    "LATIN1_FALLBACK",
    "REQUEST_BODY",
    "TITLE_MAX_CHARS",
    "Source",
    "command_title",
    "content_key_of",
    "describe_json",
    "fail",
    "image_from_base64",
    "image_from_url",
    "iter_jsonl",
    "json_content_key",
    "looks_like_aider",
    "make_title",
    "parse_json_document",
    "parse_timestamp",
    "read_source",
    "source_key",
    "split_exchange",
    "title_of",
    "type_of",
]

REQUEST_BODY = "<request body>"
"""The path label of a transcript parsed from a decoded request body rather than a file."""

TITLE_MAX_CHARS = 80
"""Longest transcript title, in characters."""


@dataclass(frozen=True)
class Source:
    """One input file, read once.

    Attributes:
        path: the file.
        data: its raw bytes (hashed for ``content_key``).
        text: the bytes decoded as UTF-8 (a leading byte-order mark removed), or as
            Latin-1 for a text transcript that is not UTF-8 (:data:`LATIN1_FALLBACK`),
            CRLF line endings read as LF (JSON treats both as whitespace, RFC 8259 §2; a
            Markdown history's lines are the same lines).
        notes: how the file was read when that is not plain UTF-8 (``"byte 40: not valid
            UTF-8 …; decoded as Latin-1"``); :func:`~contextledger.ingest.importers.parse_file`
            puts them first in the transcript's notes, whatever its format.
        lossy: ``text`` replaced invalid bytes (U+FFFD), so it does not determine ``data``;
            the identity of such a file is its bytes (:func:`source_key`).
    """

    path: Path
    data: bytes
    text: str
    notes: tuple[str, ...] = ()
    lossy: bool = False

    @property
    def identity(self) -> bytes:
        """What identifies the file's content: ``text`` UTF-8 encoded (its line endings
        already LF, :func:`decode_source`), so one transcript saved with CRLF line endings,
        a byte-order mark, or as UTF-16 / UTF-32 is the same import.  For a plain UTF-8
        file with LF line endings this is ``data`` itself; for a ``lossy`` decoding it is
        ``data``."""
        if self.lossy:
            return self.data
        return self.text.encode("utf-8", "surrogatepass")

    @property
    def name(self) -> str:
        """The path as given, used in error messages."""
        return str(self.path)


def fail(path: Path | str, location: str | None, reason: str) -> NoReturn:
    """Raise :class:`ImportFormatError` for ``path`` (shorthand used by every importer)."""
    raise ImportFormatError(str(path), location, reason)


_READ_CHUNK = 1 << 20


def read_source(path: Path) -> Source:
    """Read and decode ``path`` — a regular file, or a device, FIFO or process
    substitution (``<(…)``) read as a stream.

    Raises:
        ImportFormatError: the file cannot be read (location ``None``), is empty or holds
            only whitespace (``"file is empty"``), contains a NUL byte (location
            ``"byte N"``, reason ``"binary file: NUL byte"``) or is not UTF-8 (location
            ``"byte N"`` of the first bad byte; an Aider chat history is decoded as
            Latin-1 instead, :data:`LATIN1_FALLBACK`), or is larger than
            :data:`~contextledger.limits.MAX_TRANSCRIPT_BYTES` (a regular file checked
            before reading, any other stopped once it has given one byte more: memory
            never grows past the limit).
    """
    from contextledger.limits import MAX_TRANSCRIPT_BYTES

    limit = MAX_TRANSCRIPT_BYTES
    try:
        st = path.stat()
        if st.st_size > limit:
            fail(path, None, f"file is {st.st_size:,} bytes, above the {limit:,}-byte limit of one transcript")
        if stat.S_ISREG(st.st_mode) and st.st_size > 0:
            data = path.read_bytes()
            if len(data) > limit:  # grew after the stat
                fail(path, None, f"file is {len(data):,} bytes, above the {limit:,}-byte limit of one transcript")
        else:  # a stream (or a file the kernel reports as empty, /proc): read at most limit + 1 bytes
            buf = bytearray()
            with path.open("rb") as fh:
                while chunk := fh.read(min(_READ_CHUNK, limit + 1 - len(buf))):
                    buf += chunk
                    if len(buf) > limit:
                        fail(path, None, f"file is more than {limit:,} bytes, above the {limit:,}-byte limit of one transcript")
            data = bytes(buf)
    except OSError as exc:
        fail(path, None, f"cannot read file: {exc.strerror or exc}")
    return decode_source(path, data)


_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def wide_encoding(data: bytes) -> str | None:
    """The UTF-16 / UTF-32 codec of ``data``, or ``None`` for UTF-8 (or a binary file).

    A byte-order mark decides (UTF-32 marks are checked first: ``FF FE 00 00`` also starts
    with UTF-16 LE's); without one, the pattern of zero bytes in the first four bytes does,
    as RFC 4627 §3 detects the encoding of JSON text (its first two characters are ASCII):
    ``00 00 00 xx`` UTF-32 BE, ``00 xx 00 xx`` UTF-16 BE, ``xx 00 00 00`` UTF-32 LE,
    ``xx 00 xx 00`` UTF-16 LE.
    """
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return codec
    head = data[:4]
    if len(head) < 4:
        return None
    zero = [b == 0 for b in head]
    patterns = {
        (True, True, True, False): "utf-32-be",
        (True, False, True, False): "utf-16-be",
        (False, True, True, True): "utf-32-le",
        (False, True, False, True): "utf-16-le",
    }
    return patterns.get((zero[0], zero[1], zero[2], zero[3]))


def _lf(text: str) -> str:
    """``text`` with CRLF line endings as LF (a lone CR, a terminal's carriage return
    inside output, is kept)."""
    return text.replace("\r\n", "\n") if "\r\n" in text else text


def decode_source(path: Path, data: bytes) -> Source:
    """Validate and decode already-read bytes (see :func:`read_source` for the errors)."""
    if not data.strip():
        fail(path, None, "file is empty")
    wide = wide_encoding(data)
    if wide is not None:
        try:
            text = data.decode(wide)
        except UnicodeDecodeError as exc:
            fail(path, f"byte {exc.start}", f"not valid {wide.upper()} ({exc.reason})")
        text = _lf(text.removeprefix("\ufeff"))
        if not text.strip():
            fail(path, None, "file is empty")
        return Source(path=path, data=data, text=text)
    nul = data.find(b"\x00")
    if nul >= 0:
        fail(path, f"byte {nul}", "binary file: NUL byte")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _latin1_source(path, data, exc)
    return Source(path=path, data=data, text=_lf(text.removeprefix("\ufeff")))


AIDER_HEADER = re.compile(r"^# aider chat started at ", re.M)
"""The line that opens each session of an Aider chat history."""
AIDER_PROMPT = re.compile(r"\A(?:#### |> )")
"""How an Aider chat history without a session header starts (a prompt or a tool line)."""

LATIN1_FALLBACK = "latin-1"
"""The codec of a text transcript (an Aider chat history: Markdown written by the
platform's default encoding) that is not valid UTF-8.  Latin-1 (ISO-8859-1) gives every
byte a character, so the file imports whole; the first bad UTF-8 byte is named in the
import's notes.  JSON transcripts must be UTF-8 (RFC 8259 §8.1) and never fall back."""


def looks_like_aider(text: str) -> bool:
    """Whether ``text`` (a whole decoded file) is an Aider chat history: a session header
    in its first 4,096 characters, or a start on a prompt or tool line."""
    stripped = text.lstrip()
    return AIDER_HEADER.search(stripped[:4096]) is not None or AIDER_PROMPT.match(stripped) is not None


def _latin1_source(path: Path, data: bytes, exc: UnicodeDecodeError) -> Source:
    """The :class:`Source` of a file that is not UTF-8: decoded as Latin-1 when it is a
    text transcript (:func:`looks_like_aider`), with a note naming the first bad byte;
    else with U+FFFD replacement when its invalid sequences are few
    (:mod:`~contextledger.ingest.importers.lenient_utf8`, a note naming the places).

    Raises:
        ImportFormatError: any other file (location ``"byte N"``, reason ``"binary file:
            not valid UTF-8 (…)"``).
    """
    text = data.decode(LATIN1_FALLBACK)
    if not looks_like_aider(text):
        from contextledger.ingest.importers.lenient_utf8 import decode_mostly_utf8

        lenient = decode_mostly_utf8(path, data)
        if lenient is not None:
            return Source(path=path, data=data, text=_lf(lenient[0]), notes=(lenient[1],), lossy=True)
        fail(path, f"byte {exc.start}", f"binary file: not valid UTF-8 ({exc.reason})")
    note = f"byte {exc.start}: not valid UTF-8 ({exc.reason}); the file was decoded as Latin-1 (ISO-8859-1)"
    return Source(path=path, data=data, text=_lf(text), notes=(note,))


def content_key_of(chunks: Iterable[bytes]) -> str:
    """``sha256:<hex>`` of the concatenation of ``chunks``."""
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def source_key(sources: Iterable[Source]) -> str:
    """The ``content_key`` of a transcript read from ``sources`` (in order):
    ``sha256:<hex>`` of their decoded content (:attr:`Source.identity`), not their bytes,
    so a re-encoded copy of an imported file (CRLF, BOM, UTF-16) is recognised as the
    same import."""
    return content_key_of(s.identity for s in sources)


def type_of(value: Any) -> str | None:
    """``value["type"]`` when ``value`` is an object whose ``type`` is a string, else
    ``None`` (a hostile ``"type": [..]`` must not reach a set lookup)."""
    if isinstance(value, dict):
        kind = value.get("type")
        return kind if isinstance(kind, str) else None
    return None


def json_content_key(path: Path | str, *values: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON (sorted keys, compact) of ``values``.

    The idempotency key of a transcript parsed from decoded request bodies; ``None``
    values are skipped.

    Raises:
        ImportFormatError: a value JSON cannot encode, or nesting too deep.
    """
    chunks: list[bytes] = []
    for value in values:
        if value is None:
            continue
        try:
            text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            fail(path, None, f"body is not JSON data: {exc}")
        except RecursionError:
            fail(path, None, "body nesting too deep")
        chunks.append(text.encode("utf-8", "surrogatepass"))
    return content_key_of(chunks)


def describe_json(value: Any) -> str:
    """Name the JSON type of ``value`` for error messages (``"an array"``, ``"a string"``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def parse_json_document(source: Source) -> Any:
    """Parse the whole file as one JSON value.

    Raises:
        ImportFormatError: location ``"line L, column C"``, reason ``"invalid JSON: <msg>"``.
    """
    try:
        return loads_json(source.text)
    except JsonDepthError as exc:
        fail(source.path, None, f"invalid JSON: {exc.msg}")
    except json.JSONDecodeError as exc:
        fail(source.path, f"line {exc.lineno}, column {exc.colno}", f"invalid JSON: {exc.msg}")


def _looks_incomplete(line: str, exc: json.JSONDecodeError) -> bool:
    """True when ``line`` failed only because it stops early (a partially written record)."""
    return exc.msg.startswith("Unterminated string") or exc.pos >= len(line.rstrip())


def iter_jsonl(
    source: Source,
    notes: list[str],
    skipped_raw_lines: list[str],
    *,
    label: str = "",
) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, value)`` for every non-blank line of a JSON Lines file.

    Line numbers are 1-based.  A last line that is incomplete JSON (a write cut short) is
    skipped: a note naming the line and its size in bytes is appended to ``notes`` and the
    raw line to ``skipped_raw_lines``.

    Args:
        label: prefix for locations and notes (``"subagents/agent-x.jsonl "``) when the
            file is not the main one.

    Raises:
        ImportFormatError: any other line that is not valid JSON (location ``"line N"``).
    """
    text = source.text
    size = len(text)
    start = 0
    line_no = 0
    while start < size:
        end = text.find("\n", start)
        if end < 0:
            end = size
        line_no += 1
        line = text[start:end]
        next_start = end + 1
        if line.strip():
            try:
                value = loads_json(line)
            except JsonDepthError as exc:
                fail(source.path, f"{label}line {line_no}", f"invalid JSON: {exc.msg}")
            except json.JSONDecodeError as exc:
                is_last = not text[next_start:].strip()
                if is_last and _looks_incomplete(line, exc):
                    nbytes = len(line.encode("utf-8", "surrogatepass"))
                    notes.append(
                        f"{label}line {line_no}: skipped a truncated last line "
                        f"({nbytes} bytes of incomplete JSON)"
                    )
                    skipped_raw_lines.append(line)
                    return
                fail(
                    source.path,
                    f"{label}line {line_no}",
                    f"invalid JSON: {exc.msg} (column {exc.colno})",
                )
            yield line_no, value
        start = next_start


def parse_timestamp(value: Any) -> datetime | None:
    """Parse an ISO-8601 string (``Z`` allowed) or Unix seconds/milliseconds; else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = value / 1000.0 if value > 1e11 else float(value)
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


_WS = re.compile(r"\s+")


def make_title(text: str) -> str:
    """Collapse whitespace and cut to at most :data:`TITLE_MAX_CHARS` characters (only
    the head that can reach the title is read)."""
    flat = _WS.sub(" ", text[: TITLE_MAX_CHARS * 64]).strip()
    if len(flat) <= TITLE_MAX_CHARS:
        return flat
    return flat[: TITLE_MAX_CHARS - 1].rstrip() + "…"


_COMMAND = re.compile(r"<command-name>\s*([^<]*?)\s*</command-name>")
_COMMAND_ARGS = re.compile(r"<command-args>([^<]*)</command-args>")


def command_title(text: str) -> str:
    """The slash command a user turn records (``<command-name>``, e.g. ``"/init"``), or
    ``""``: the title of last resort for a session that holds no words of the user's."""
    command = _COMMAND.search(text)
    return make_title(command.group(1)) if command else ""


_TITLE_SCAN = 4096
"""Characters of a turn's own words read for its title (each line's wrapper tags
removed: a title is no quotation)."""


def title_of(text: str) -> str:
    """The title a user turn gives: its own words (client-injected blocks such as
    ``<system-reminder>``, ``<environment_context>`` or ``<command-message>`` and the
    wrapper tags at its ends such as ``<pr_description>`` removed by
    :func:`~contextledger.ingest.preambles.user_text`) through :func:`make_title`.
    A turn that only records a slash command with arguments is titled with what the user
    typed, the ``<command-name>`` and its ``<command-args>`` (``"/review src/parser.py"``);
    a bare command (``/clear``) gives none.  ``""`` when nothing of the user's is left
    (the caller then tries the next turn, then :func:`command_title`)."""
    text = scan_window(text)
    own = "\n".join(strip_wrappers(line) for line in user_text(text)[:_TITLE_SCAN].splitlines())
    if not own and (args := _COMMAND_ARGS.search(text)) is not None and args.group(1).strip():
        own = f"{command_title(text)} {args.group(1)}".strip()
    return make_title(own)


_B64_WS = re.compile(r"\s+")


def _decode_b64(data: str, path: Path | str, location: str) -> bytes:
    try:
        return base64.b64decode(_B64_WS.sub("", data), validate=True)
    except (binascii.Error, ValueError) as exc:
        fail(path, location, f"invalid base64 image data: {exc}")


def image_from_base64(
    data: str, media_type: str, path: Path | str, location: str
) -> tuple[ImagePart, bytes]:
    """Decode base64 image ``data`` into an :class:`ImagePart` and its bytes.

    ``blob_key`` is ``sha256:<hex>`` of the decoded bytes; ``size_bytes`` their length.

    Raises:
        ImportFormatError: the base64 text is invalid (reason ``"invalid base64 image data"``).
    """
    raw = _decode_b64(data, path, location)
    key = content_key_of([raw])
    return ImagePart(media_type=media_type or "application/octet-stream", blob_key=key, size_bytes=len(raw)), raw


def image_from_url(url: str, path: Path | str, location: str) -> tuple[ImagePart, bytes | None]:
    """Turn an image URL into an :class:`ImagePart`.

    A ``data:`` URL is decoded (bytes returned for the attachment map); any other URL is
    kept as ``ImagePart.url`` with a media type guessed from its extension.
    """
    if url.startswith("data:"):
        header, _, payload = url[5:].partition(",")
        fields = header.split(";")
        media_type = fields[0] or "application/octet-stream"
        if "base64" in fields[1:]:
            return image_from_base64(payload, media_type, path, location)
        raw = unquote_to_bytes(payload)
        key = content_key_of([raw])
        return ImagePart(media_type=media_type, blob_key=key, size_bytes=len(raw)), raw
    guessed, _ = mimetypes.guess_type(url.split("?", 1)[0])
    return ImagePart(media_type=guessed or "application/octet-stream", url=url), None


def split_exchange(document: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any] | None]:
    """``(request body, response or None)`` of a logged exchange ``{"request", "response"}``.

    A document without a ``request`` object (or one that holds its own ``messages`` /
    ``input``) is returned as the body itself.
    """
    request = document.get("request")
    if isinstance(request, Mapping) and "messages" not in document and "input" not in document:
        response = document.get("response")
        return request, response if isinstance(response, Mapping) else None
    return document, None
