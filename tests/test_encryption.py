"""Encryption at rest of restricted payloads on both backends: nothing restricted is
stored in clear (files, blob table, rows), rehydration verifies and decrypts, a missing
or wrong key is a clear error, rotation re-seals every payload."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from contextledger.cli.common import EXIT_BACKEND
from contextledger.cli.main import app
from contextledger.errors import IntegrityError
from contextledger.ledger import Ledger
from contextledger.records.enums import PrivacyClass
from contextledger.security.crypto import (
    Keyring,
    MissingKeyError,
    is_sealed,
    open_sealed,
    parse_keys,
    seal,
    sealed_key_id,
)
from contextledger.security.rotate import rotate_keys, sealed_references
from test_secrets import DOTENV, GITHUB, SECRETS, _record_dotenv

KEY_A = ("ka", bytes(range(32)))
KEY_B = ("kb", bytes(range(32, 64)))


def test_seal_and_open() -> None:
    ring = Keyring((KEY_A,))
    env = seal(b"top secret", ring)
    assert is_sealed(env) and b"top secret" not in env and sealed_key_id(env) == "ka"
    assert open_sealed(env, Keyring((KEY_B, KEY_A))) == b"top secret"
    with pytest.raises(MissingKeyError, match="'ka', which is not configured"):
        open_sealed(env, Keyring((KEY_B,)))
    tampered = env[:-1] + bytes([env[-1] ^ 1])
    with pytest.raises(IntegrityError, match="authentication failed"):
        open_sealed(tampered, ring)
    assert parse_keys(f"ka:{base64.b64encode(KEY_A[1]).decode()}, kb:{base64.b64encode(KEY_B[1]).decode()}", source="t").keys == (KEY_A, KEY_B)


def _all_stored_bytes(led: Ledger, tmp_path: Path) -> bytes:
    """Every byte the ledger wrote: blob files, the blob table, every row's body."""
    out = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.suffix not in (".db", ".db-wal", ".db-shm"))
    with led.store.engine.connect() as conn:
        for table in led.store.engine.dialect.get_table_names(conn):
            for row in conn.execute(sa.text(f'SELECT * FROM "{table}"')):
                out += repr(tuple(row)).encode()
    return out


def test_restricted_payloads_are_sealed_at_rest(backend_url: str, tmp_path: Path) -> None:
    led = Ledger.open(backend_url, blobs=tmp_path / "blobs", keys=Keyring((KEY_A,)))
    try:
        conv_id, art_id, _ = _record_dotenv(led)
        stored = _all_stored_bytes(led, tmp_path)
        for secret in (*SECRETS, GITHUB):
            assert secret.encode() not in stored
        refs = sealed_references(led)
        assert {k for k, *_ in refs} == {"artifact", "message"}
        art = led.store.get_artifact(led.scope(), art_id)
        assert is_sealed(led.store.blobs.get_raw(art.blob_key or ""))
        assert led.rehydrate(art_id, reveal=True) == DOTENV.encode()
    finally:
        led.close()
    # the same ledger without the key: a clear error naming the key
    led = Ledger.open(backend_url, blobs=tmp_path / "blobs", keys=Keyring((KEY_B,)))
    try:
        with pytest.raises(MissingKeyError, match="'ka'"):
            led.rehydrate(art_id, reveal=True)
        # assembling never needs the key: nothing restricted is read back for a request
        led.assemble(conv_id, provider="anthropic")
    finally:
        led.close()


@pytest.mark.parametrize("privacy", [PrivacyClass.USER_DATA, PrivacyClass.GOOGLE_USER_DATA, PrivacyClass.OAUTH_DERIVED, PrivacyClass.SECRET_LIKE])
def test_results_of_a_sealed_class_are_sealed_at_rest_however_small(backend_url: str, tmp_path: Path, privacy: PrivacyClass) -> None:
    led = Ledger.open(backend_url, blobs=tmp_path / "blobs", keys=Keyring((KEY_A,)))
    try:
        rec = led.recorder()
        conv = rec.start_conversation(title="mail")
        rec.record_message(conv.id, "user", "summarise my inbox")
        rec.record_assistant(conv.id, text="reading", tool_calls=[
            {"call_id": "c1", "tool_name": "gmail_read", "arguments": {"q": "inbox"}},
            {"call_id": "c2", "tool_name": "Bash", "arguments": {"command": "date"}},
        ])
        _, art, _ = rec.record_tool_result(conv.id, "c1", "From: Ana <ana@example.org> Subject: MAILBODY-7731", privacy_class=privacy)
        _, plain, _ = rec.record_tool_result(conv.id, "c2", "Tue Dec  1 10:00:00 UTC 2026")
        assert art.inline_text is None and art.blob_key is not None and art.privacy_class == privacy
        assert is_sealed(led.store.blobs.get_raw(art.blob_key))
        assert b"MAILBODY-7731" not in led.store.blobs.get_raw(art.blob_key)
        assert plain.inline_text == "Tue Dec  1 10:00:00 UTC 2026" and plain.blob_key is None  # internal stays inline
        assert led.rehydrate(art.id, reveal=True) == b"From: Ana <ana@example.org> Subject: MAILBODY-7731"
        assert art.id in {r[2] for r in sealed_references(led)}
    finally:
        led.close()


def test_rotation_reseals_every_payload(backend_url: str, tmp_path: Path) -> None:
    key_file = tmp_path / "keys"
    key_file.write_text(Keyring((KEY_A,)).render())
    led = Ledger.open(backend_url, blobs=tmp_path / "blobs", keys=None)
    led.store.blobs.keys = lambda: parse_keys(key_file.read_text(), source=str(key_file))  # type: ignore[attr-defined]
    try:
        _, art_id, _ = _record_dotenv(led)
        before = {r[3] for r in sealed_references(led)}
        report = rotate_keys(led, key_file=key_file)
        # the .env result, the user message and the assistant turn whose arguments held a token
        assert report["resealed"] == len(before) == 3 and report["sealed_by_key"] == {report["key_id"]: 3}
        assert report["written_to"] == str(key_file) and report["keys_value"] is None
        assert {r[3] for r in sealed_references(led)}.isdisjoint(before)  # old envelopes deleted, rows point to new ones
        for key in before:
            assert not led.store.blobs.exists(key)
        assert led.rehydrate(art_id, reveal=True) == DOTENV.encode()
    finally:
        led.close()
    # only the new key is needed now
    new_ring = parse_keys(key_file.read_text(), source="k")
    led = Ledger.open(backend_url, blobs=tmp_path / "blobs", keys=Keyring((new_ring.keys[0],)))
    try:
        assert led.rehydrate(art_id, reveal=True) == DOTENV.encode()
    finally:
        led.close()


def test_key_file_is_created_private_and_rotation_from_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTEXTLEDGER_KEYS", raising=False)
    led = Ledger.open(home=tmp_path)
    try:
        _, art_id, _ = _record_dotenv(led)
    finally:
        led.close()
    key_file = tmp_path / "keys"
    assert key_file.stat().st_mode & 0o777 == 0o600
    runner = CliRunner()
    res = runner.invoke(app, ["--home", str(tmp_path), "encryption", "rotate", "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["resealed"] == 3 and len(parse_keys(key_file.read_text(), source="k").keys) == 2
    # a wrong key from the environment: the error names the key, exit status 4
    monkeypatch.setenv("CONTEXTLEDGER_KEYS", "other:" + base64.b64encode(bytes(32)).decode())
    res = runner.invoke(app, ["--home", str(tmp_path), "rehydrate", art_id, "--reveal-secrets"])
    assert res.exit_code == EXIT_BACKEND and report["key_id"] in res.stderr and "Traceback" not in res.output
