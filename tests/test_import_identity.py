"""The identity of an import is the decoded content, not the bytes: one transcript saved
again with CRLF line endings, a UTF-8 byte-order mark, or as UTF-16 / UTF-32 with its
byte-order mark (RFC 8259 §8.1 JSON text; the Unicode standard's BOMs) is the same
import — a re-import says "already imported" and writes nothing.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import real_params
from contextledger.ingest.importers import parse_file
from contextledger.ledger import Ledger
from contextledger.records.parts import TextPart, ToolResultPart


def _crlf(text: str) -> bytes:
    return text.replace("\n", "\r\n").encode("utf-8")


def _bom(text: str) -> bytes:
    return codecs.BOM_UTF8 + text.encode("utf-8")


def _crlf_bom(text: str) -> bytes:
    return codecs.BOM_UTF8 + _crlf(text)


def _utf16(text: str) -> bytes:
    return text.encode("utf-16")  # with its BOM, native order


def _utf16be_crlf(text: str) -> bytes:
    return codecs.BOM_UTF16_BE + text.replace("\n", "\r\n").encode("utf-16-be")


def _utf32(text: str) -> bytes:
    return text.encode("utf-32")


ENCODINGS: dict[str, Callable[[str], bytes]] = {
    "crlf": _crlf, "bom": _bom, "crlf-bom": _crlf_bom, "utf-16": _utf16, "utf-16-be-crlf": _utf16be_crlf, "utf-32": _utf32,
}

_CLAUDE = "\n".join(json.dumps(r) for r in [
    {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s1", "timestamp": "2026-01-02T10:00:00Z",
     "message": {"role": "user", "content": "Fix the port in café.py"}},
    {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "s1", "timestamp": "2026-01-02T10:00:05Z",
     "message": {"id": "msg_1", "role": "assistant", "model": "claude-x", "content": [{"type": "text", "text": "Done."}]}},
]) + "\n"

_AIDER = "# aider chat started at 2026-01-02 10:00:00\n\n#### Fix the port  \n\nDone: the port is 8080.\n"

_CHAT = json.dumps([{"role": "user", "content": "Fix the port"}, {"role": "assistant", "content": "Done."}], indent=1)


def _texts(path: Path) -> list[tuple[str, str]]:
    transcript = parse_file(path)
    out: list[tuple[str, str]] = []
    for message in transcript.messages:
        text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart | ToolResultPart))
        out.append((message.role.value, text.replace("\r\n", "\n")))
    return out


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
@pytest.mark.parametrize(("name", "text"), [("s.jsonl", _CLAUDE), ("h.md", _AIDER), ("c.json", _CHAT)])
def test_a_reencoded_copy_is_the_same_import(tmp_path: Path, name: str, text: str, encoding: str) -> None:
    plain = tmp_path / "a" / name
    plain.parent.mkdir()
    plain.write_bytes(text.encode("utf-8"))
    copy = tmp_path / "b" / name
    copy.parent.mkdir()
    copy.write_bytes(ENCODINGS[encoding](text))
    assert copy.read_bytes() != plain.read_bytes()
    assert parse_file(copy).content_key == parse_file(plain).content_key
    assert _texts(copy) == _texts(plain)
    ledger = Ledger.open(home=tmp_path / "ledger")
    try:
        first = ledger.import_file(plain)
        again = ledger.import_file(copy)
        assert first.created and not again.created
        assert again.conversation_id == first.conversation_id
        assert again.notes == ["already imported: same content key; nothing written"]
        assert len(ledger.store.list_conversations(ledger.scope())) == 1
    finally:
        ledger.close()


def test_different_content_is_still_a_different_import(tmp_path: Path) -> None:
    one = tmp_path / "one.jsonl"
    one.write_text(_CLAUDE, encoding="utf-8")
    two = tmp_path / "two.jsonl"
    two.write_text(_CLAUDE.replace("Fix the port", "Fix the door"), encoding="utf-8")
    assert parse_file(one).content_key != parse_file(two).content_key


def test_a_plain_utf8_file_keeps_the_sha256_of_its_bytes(tmp_path: Path) -> None:
    import hashlib

    path = tmp_path / "s.jsonl"
    path.write_text(_CLAUDE, encoding="utf-8")
    assert parse_file(path).content_key == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("path", real_params("**/*.jsonl", "**/*.json", "**/*.md", "**/*.traj"), ids=lambda p: p.name if p else "real-data")
def test_every_real_transcript_reencoded_is_the_same_import(tmp_path: Path, path: Path) -> None:
    if path.name in ("manifest.json", "SOURCES.md"):
        pytest.skip("not a transcript")
    raw = path.read_bytes()
    plain = tmp_path / "plain" / path.name
    plain.parent.mkdir()
    plain.write_bytes(raw)
    expected = parse_file(plain)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        pytest.skip("not UTF-8 text: its decoding is not a re-encodable text")
    for encoding in ("crlf-bom", "utf-16"):
        copy = tmp_path / encoding / path.name
        copy.parent.mkdir()
        copy.write_bytes(ENCODINGS[encoding](text))
        again = parse_file(copy)
        assert again.content_key == expected.content_key, encoding
        assert len(again.messages) == len(expected.messages), encoding
