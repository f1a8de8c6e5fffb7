"""The invalid-UTF-8 scan of a text file with stray bytes: every invalid sequence found,
at its byte offset and line, across the scan's chunk boundaries (the same answer as
decoding the rest of the file again after each bad sequence)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextledger.ingest.importers import lenient_utf8 as L

_PIECES = st.sampled_from([b"a", b"\n", b"\xc3\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x99\x82", b"\xe9", b"\xff", b"\xc3", b"\xe2\x82", b"\x80"])


def _reference(data: bytes) -> list[int]:
    offsets, start = [], 0
    while True:
        try:
            data[start:].decode("utf-8")
            return offsets
        except UnicodeDecodeError as exc:
            offsets.append(start + exc.start)
            start += exc.end


@settings(max_examples=200, deadline=None)
@given(st.lists(_PIECES, max_size=400), st.integers(min_value=1, max_value=7))
def test_offsets_and_lines_match_the_reference_across_chunk_boundaries(pieces: list[bytes], chunk: int) -> None:
    data = b"".join(pieces)
    old = L._CHUNK
    L._CHUNK = chunk  # tiny chunks: every multi-byte sequence is split somewhere
    try:
        offsets = L.invalid_offsets(data)
    finally:
        L._CHUNK = old
    assert offsets == _reference(data)
    assert L._line_numbers(data, offsets) == [data.count(b"\n", 0, o) + 1 for o in offsets]


def test_the_limit_stops_the_scan_at_the_end_of_its_chunk() -> None:
    data = b"\xff" * (3 * L._CHUNK)
    assert L.invalid_offsets(data, limit=10) == list(range(L._CHUNK))
    assert len(L.invalid_offsets(data)) == 3 * L._CHUNK
