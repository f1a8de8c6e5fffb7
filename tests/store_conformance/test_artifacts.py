"""Raw payloads: inline up to the threshold (4096 bytes by default, seed 001 §6 problem 2),
content-addressed blobs above it; exact bytes back, verified against sha256."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from contextledger.errors import IntegrityError, NotFoundError
from contextledger.ledger import Ledger
from contextledger.records.models import ToolArtifact
from contextledger.store import schema as S
from contextledger.store.base import Scope
from contextledger.store.blobs import LocalBlobStore, sha256_key
from contextledger.store.sql import DEFAULT_INLINE_THRESHOLD_BYTES, SqlStore

from .test_contract import requires


def _record(store: SqlStore, scope: Scope, payloads: list[bytes]) -> list[ToolArtifact]:
    rec = Ledger(store).recorder(scope)
    conv = rec.start_conversation(title="payloads")
    out = []
    for i, raw in enumerate(payloads):
        rec.record_assistant(conv.id, tool_calls=[{"call_id": f"c{i}", "tool_name": "Bash", "arguments": {"command": f"cat f{i}"}}])
        _, art, _ = rec.record_tool_result(conv.id, f"c{i}", raw)
        out.append(art)
    return out


def _blob_path(root: Path, key: str) -> Path:
    digest = key.split(":", 1)[1]
    return root / digest[:2] / digest[2:4] / digest


def test_inline_up_to_threshold_blob_above(store: SqlStore, scope_a: Scope, tmp_path: Path) -> None:
    requires(store, "blob_payloads")
    assert store.inline_threshold_bytes == DEFAULT_INLINE_THRESHOLD_BYTES == 4096
    at_limit = b"a" * 4096
    above = ("é" * 2049).encode()  # 4098 bytes of valid UTF-8
    binary = bytes(range(256)) * 20  # 5120 bytes, not UTF-8
    arts = _record(store, scope_a, [at_limit, above, binary])
    inline, blob, bin_blob = (store.get_artifact(scope_a, a.id) for a in arts)
    assert (inline.blob_key, inline.inline_text, inline.size_bytes) == (None, "a" * 4096, 4096)
    assert (blob.blob_key, blob.inline_text, blob.size_bytes) == (sha256_key(above), None, 4098)
    assert (bin_blob.blob_key, bin_blob.content_type, bin_blob.size_bytes) == (sha256_key(binary), "application/octet-stream", 5120)
    assert _blob_path(tmp_path / "blobs", sha256_key(above)).read_bytes() == above
    for art, raw in zip((inline, blob, bin_blob), (at_limit, above, binary), strict=True):
        assert art.sha256 == sha256_key(raw)
        assert store.read_artifact_bytes(scope_a, art.id) == raw
        assert store.read_artifact_bytes(scope_a, art) == raw


def test_small_binary_payload_round_trips(store: SqlStore, scope_a: Scope) -> None:
    [art] = _record(store, scope_a, [b"\xff\xfe\x00"])
    assert store.read_artifact_bytes(scope_a, art.id) == b"\xff\xfe\x00"


def test_threshold_is_configurable(backend_url: str, tmp_path: Path, scope_a: Scope) -> None:
    small = SqlStore(backend_url, LocalBlobStore(tmp_path / "b64"), inline_threshold_bytes=64)
    try:
        requires(small, "blob_payloads")
        a64, a65 = _record(small, scope_a, [b"x" * 64, b"y" * 65])
        assert (a64.blob_key, a64.inline_text) == (None, "x" * 64)
        assert (a65.blob_key, a65.inline_text) == (sha256_key(b"y" * 65), None)
        assert small.read_artifact_bytes(scope_a, a65.id) == b"y" * 65
    finally:
        small.close()


def test_tampered_blob_is_an_integrity_error(store: SqlStore, scope_a: Scope, tmp_path: Path) -> None:
    requires(store, "blob_payloads")
    raw = b"line\n" * 2000
    [art] = _record(store, scope_a, [raw])
    assert art.blob_key is not None
    path = _blob_path(tmp_path / "blobs", art.blob_key)
    path.write_bytes(raw.replace(b"line", b"LINE", 1))
    with pytest.raises(IntegrityError) as err:
        store.read_artifact_bytes(scope_a, art.id)
    assert (err.value.record_id, err.value.expected) == (art.id, sha256_key(raw))
    assert err.value.actual == sha256_key(raw.replace(b"line", b"LINE", 1))
    path.unlink()
    with pytest.raises(IntegrityError) as err:
        store.read_artifact_bytes(scope_a, art.id)
    assert (err.value.record_id, err.value.expected, err.value.actual) == (art.id, sha256_key(raw), None)


def test_tampered_inline_row_is_an_integrity_error(store: SqlStore, scope_a: Scope) -> None:
    [art] = _record(store, scope_a, [b"exit code 0"])
    body = art.model_dump(mode="json") | {"inline_text": "exit code 1"}
    with store.writer(scope_a) as w:
        w.conn.execute(sa.update(S.tool_artifacts).where(S.tool_artifacts.c.id == art.id).values(body=body))
    with pytest.raises(IntegrityError) as err:
        store.read_artifact_bytes(scope_a, art.id)
    assert (err.value.record_id, err.value.expected, err.value.actual) == (art.id, sha256_key(b"exit code 0"), sha256_key(b"exit code 1"))


def test_unknown_artifact_is_not_found(store: SqlStore, scope_a: Scope) -> None:
    with pytest.raises(NotFoundError) as err:
        store.read_artifact_bytes(scope_a, "art_missing")
    assert (err.value.kind, err.value.record_id) == ("artifact", "art_missing")
