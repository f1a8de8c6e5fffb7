"""Time-ordered, opaque record ids.

An id is ``<prefix>_<26 Crockford base32 chars>``: 48 bits of milliseconds since the Unix
epoch followed by 80 random bits (the ULID layout).  Ids sort by creation time as strings,
but callers must treat them as opaque; nothing in selection orders by id.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["new_id"]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_lock = threading.Lock()
_last_ms = 0
_last_rand = 0


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_id(prefix: str) -> str:
    """Return a new time-ordered id such as ``art_01JD8X9Q4M6Z3K2B7N5R8T1V0W``.

    Ids made in the same millisecond by one process are strictly increasing (the random
    part is incremented), so ids also sort in creation order within a process.

    Args:
        prefix: a short lowercase tag naming the record kind (``"msg"``, ``"art"`` …).
    """
    global _last_ms, _last_rand
    with _lock:
        now_ms = time.time_ns() // 1_000_000
        if now_ms <= _last_ms:
            now_ms = _last_ms
            _last_rand = (_last_rand + 1) & ((1 << 80) - 1)
        else:
            _last_ms = now_ms
            _last_rand = int.from_bytes(os.urandom(10), "big") >> 1
        value = (now_ms << 80) | _last_rand
    return f"{prefix}_{_encode(value, 26)}"
