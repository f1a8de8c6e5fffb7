"""An incremental Server-Sent Events parser (WHATWG HTML §9.2 event stream).

The proxy hands every upstream chunk to the client unchanged and, beside it, feeds the
chunk to :class:`SseParser` to learn the answer it must record.  Chunks may split lines
and multi-byte characters anywhere.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["SseEvent", "SseParser"]

_EOL = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class SseEvent:
    """One dispatched event: its ``event`` name (``"message"`` when none) and ``data``
    (the ``data:`` lines joined with ``"\\n"``)."""

    event: str
    data: str


class SseParser:
    """Feed bytes with :meth:`feed`; iterate the events completed so far."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._event = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> Iterator[SseEvent]:
        """The events completed by ``chunk``."""
        self._buffer += self._decoder.decode(chunk)
        start = 0
        for match in _EOL.finditer(self._buffer):
            if match.group() == "\r" and match.end() == len(self._buffer):
                break  # a CR that may be the first half of CRLF
            event = self._line(self._buffer[start:match.start()])
            start = match.end()
            if event is not None:
                yield event
        self._buffer = self._buffer[start:]

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = SseEvent(self._event or "message", "\n".join(self._data))
            self._event, self._data = "", []
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None
