"""Encryption at rest of restricted payloads (seed 000 §4.15: raw artifacts may be
"stored in a separate area"; §8 R3).

A restricted payload — the raw bytes of a tool result whose privacy class is in
:data:`SEALED_CLASSES` (``secret_like`` — found by the secret screen or declared —,
``user_data``, ``google_user_data``, ``oauth_derived``), the original parts of a message
whose secrets were redacted — is *sealed* before it reaches the blob store: AES-256-GCM (``cryptography``),
a fresh 96-bit nonce per payload, the envelope header as associated data::

    b"\\x00CLSEALED1\\x00" | key-id length (1 byte) | key id (ASCII) | nonce (12) | ciphertext+tag

The blob's content address is the SHA-256 of the envelope (the blob store verifies it);
the artifact's ``sha256`` stays the digest of the plaintext, verified after decryption.

Keys (:class:`Keyring`, first key seals, every key opens) come from, in order:

1. a key provider passed to ``Ledger.open(keys=…)`` (any callable returning a Keyring —
   a KMS or vault client);
2. ``CONTEXTLEDGER_KEYS``: ``id:base64key[,id:base64key…]`` (first = current);
3. the key file ``<home>/keys`` (same format, one entry per line, first = current),
   created with mode 0600 and one fresh key the first time a payload is sealed.

``contextledger encryption rotate`` adds a new current key and re-seals every sealed payload
with it (:func:`contextledger.security.rotate.rotate_keys`); a payload sealed with a key
no longer configured is a clear :class:`MissingKeyError` naming that key id.
"""

from __future__ import annotations

import base64
import os
import secrets as _random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextledger.errors import BackendError, IntegrityError
from contextledger.records.enums import PrivacyClass

__all__ = [
    "MAGIC",
    "SEALED_CLASSES",
    "KeyProvider",
    "Keyring",
    "MissingKeyError",
    "SealingBlobStore",
    "is_sealed",
    "key_file_provider",
    "open_sealed",
    "parse_keys",
    "seal",
    "sealed_key_id",
]

SEALED_CLASSES = frozenset({PrivacyClass.SECRET_LIKE, PrivacyClass.USER_DATA, PrivacyClass.GOOGLE_USER_DATA, PrivacyClass.OAUTH_DERIVED})
"""Privacy classes whose raw tool results are sealed at rest (never inline in a row)."""

MAGIC = b"\x00CLSEALED1\x00"
"""First bytes of every sealed payload."""

_NONCE_BYTES = 12
_KEY_BYTES = 32


class MissingKeyError(BackendError):
    """A payload is sealed with a key that is not configured (or no key is configured)."""


@dataclass(frozen=True)
class Keyring:
    """Encryption keys by id; ``keys[0]`` is the current key (it seals), every key opens."""

    keys: tuple[tuple[str, bytes], ...]

    def __post_init__(self) -> None:
        for key_id, key in self.keys:
            if not key_id or len(key_id) > 64 or not key_id.isascii() or ":" in key_id or "," in key_id:
                raise BackendError(f"invalid encryption key id {key_id!r}: 1-64 ASCII characters, no ':' or ','")
            if len(key) != _KEY_BYTES:
                raise BackendError(f"encryption key {key_id!r} must be {_KEY_BYTES} bytes (base64 of 32 random bytes), got {len(key)}")

    @property
    def current(self) -> tuple[str, bytes]:
        """``(id, key)`` that seals new payloads.

        Raises:
            MissingKeyError: the keyring is empty.
        """
        if not self.keys:
            raise MissingKeyError("no encryption key configured (CONTEXTLEDGER_KEYS, a key provider, or the key file under the ledger home)")
        return self.keys[0]

    def get(self, key_id: str) -> bytes:
        """The key ``key_id``.

        Raises:
            MissingKeyError: not in the keyring.
        """
        for kid, key in self.keys:
            if kid == key_id:
                return key
        raise MissingKeyError(f"the payload is sealed with encryption key {key_id!r}, which is not configured: add it to CONTEXTLEDGER_KEYS (or the key provider / key file)")

    def render(self) -> str:
        """``id:base64key`` lines (the key file format)."""
        return "".join(f"{kid}:{base64.b64encode(key).decode()}\n" for kid, key in self.keys)

    @staticmethod
    def new_key() -> tuple[str, bytes]:
        """A fresh random key and an id for it (``k`` + 12 hex digits)."""
        return f"k{_random.token_hex(6)}", _random.token_bytes(_KEY_BYTES)


KeyProvider = Callable[[], Keyring]
"""Returns the keyring to use (called when a key is needed: a provider may rotate)."""


def parse_keys(text: str, *, source: str) -> Keyring:
    """Parse ``id:base64key`` entries separated by commas or new lines.

    Raises:
        BackendError: a malformed entry (``source`` names where it came from).
    """
    keys: list[tuple[str, bytes]] = []
    entries = [e for line in text.splitlines() if not line.lstrip().startswith("#") for e in line.split(",")]
    for raw in entries:
        entry = raw.strip()
        if not entry:
            continue
        key_id, sep, b64 = entry.partition(":")
        try:
            key = base64.b64decode(b64.strip(), validate=True) if sep else b""
        except ValueError:
            key = b""
        if not sep or len(key) != _KEY_BYTES:
            raise BackendError(f"{source}: malformed key entry {key_id.strip()[:20]!r}: expected id:base64 of 32 bytes")
        keys.append((key_id.strip(), key))
    return Keyring(tuple(keys))


def key_file_provider(path: Path) -> KeyProvider:
    """A provider reading ``CONTEXTLEDGER_KEYS`` or else the key file ``path`` (created
    with mode 0600 and one fresh key when it does not exist yet)."""

    def provide() -> Keyring:
        env = os.environ.get("CONTEXTLEDGER_KEYS")
        if env:
            return parse_keys(env, source="CONTEXTLEDGER_KEYS")
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write("# contextledger encryption keys (id:base64); the first seals, all open\n" + Keyring((Keyring.new_key(),)).render())
        return parse_keys(path.read_text(encoding="utf-8"), source=str(path))

    return provide


def _aesgcm(key: bytes) -> object:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM(key)


def seal(plain: bytes, keyring: Keyring) -> bytes:
    """The sealed envelope of ``plain`` with the keyring's current key."""
    key_id, key = keyring.current
    header = MAGIC + bytes([len(key_id)]) + key_id.encode("ascii")
    nonce = _random.token_bytes(_NONCE_BYTES)
    return header + nonce + _aesgcm(key).encrypt(nonce, plain, header)  # type: ignore[attr-defined,no-any-return]


def is_sealed(data: bytes) -> bool:
    """Whether ``data`` is a sealed envelope."""
    return data.startswith(MAGIC)


def sealed_key_id(data: bytes) -> str:
    """The id of the key that sealed ``data``."""
    n = data[len(MAGIC)]
    return data[len(MAGIC) + 1 : len(MAGIC) + 1 + n].decode("ascii")


def open_sealed(data: bytes, keyring: Keyring, *, record: str = "payload") -> bytes:
    """The plaintext of a sealed envelope (verified by its GCM tag).

    Raises:
        MissingKeyError: the sealing key is not in ``keyring``.
        IntegrityError: the envelope was altered (authentication failed).
    """
    from cryptography.exceptions import InvalidTag

    n = data[len(MAGIC)]
    header_end = len(MAGIC) + 1 + n
    key_id = data[len(MAGIC) + 1 : header_end].decode("ascii", "replace")
    key = keyring.get(key_id)
    nonce = data[header_end : header_end + _NONCE_BYTES]
    try:
        return _aesgcm(key).decrypt(nonce, data[header_end + _NONCE_BYTES :], data[:header_end])  # type: ignore[attr-defined,no-any-return]
    except InvalidTag:
        raise IntegrityError(record, f"sealed with {key_id}", "authentication failed") from None


class SealingBlobStore:
    """A blob store that seals restricted payloads (:meth:`put_sealed`) and opens sealed
    ones on :meth:`get`; everything else is passed to ``inner`` unchanged.

    The keyring comes from ``keys`` once, and again when a payload names a key the
    cached keyring lacks (another process rotated the keys).
    """

    def __init__(self, inner: Any, keys: KeyProvider) -> None:
        self.inner = inner
        self.keys = keys
        self._keyring: Keyring | None = None

    def keyring(self, *, reload: bool = False) -> Keyring:
        """The current keyring (cached)."""
        if self._keyring is None or reload:
            self._keyring = self.keys()
        return self._keyring

    def put(self, data: bytes) -> str:
        """Store ``data`` as it is (not restricted)."""
        return str(self.inner.put(data))

    def put_sealed(self, data: bytes) -> str:
        """Seal ``data`` with the current key and store the envelope; returns its key.

        Raises:
            MissingKeyError: no key configured.
        """
        return str(self.inner.put(seal(data, self.keyring())))

    def get(self, key: str) -> bytes:
        """The bytes of ``key``, opened when sealed.

        Raises:
            MissingKeyError: sealed with a key that is not configured.
            IntegrityError: missing, altered, or failing authentication.
        """
        data = bytes(self.inner.get(key))
        if not is_sealed(data):
            return data
        try:
            return open_sealed(data, self.keyring(), record=key)
        except MissingKeyError:
            return open_sealed(data, self.keyring(reload=True), record=key)

    def get_raw(self, key: str) -> bytes:
        """The stored bytes of ``key`` (an envelope stays sealed)."""
        return bytes(self.inner.get(key))

    def exists(self, key: str) -> bool:
        """Whether ``key`` is stored."""
        return bool(self.inner.exists(key))

    def delete(self, key: str) -> None:
        """Remove ``key`` (missing keys are ignored)."""
        remove = getattr(self.inner, "delete", None)
        if remove is not None:
            remove(key)

    def __getattr__(self, name: str) -> Any:
        # the wrapped store's own attributes (root, engine, fallback)
        return getattr(self.inner, name)
