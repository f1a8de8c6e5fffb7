"""The ``manifest.json`` of a real-transcript data directory, validated once.

Shape: a JSON list of objects, each with ``path`` (str, relative to the directory),
``format`` (str) and ``bytes`` (int, not negative); other keys are kept and ignored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contextledger.errors import InputError

_REQUIRED: dict[str, type] = {"path": str, "format": str, "bytes": int}


def read_manifest(root: Path) -> list[dict[str, Any]]:
    """The entries of ``root/manifest.json``, in order, each checked for the shape above.

    Raises:
        FileNotFoundError: no manifest.
        InputError: not JSON, not a list, or an entry that is not an object or lacks a
            field or has one of the wrong type — one line naming the manifest, the entry
            (0-based index) and the field.
    """
    path = root / "manifest.json"
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(value, list):
        raise InputError(f"{path}: expected a list of entries, found a JSON {type(value).__name__}")
    for index, entry in enumerate(value):
        _check_entry(path, index, entry)
    return value


def _check_entry(path: Path, index: int, entry: object) -> None:
    """Raise :class:`InputError` unless ``entry`` has every required field of its type."""
    if not isinstance(entry, dict):
        raise InputError(f"{path}: entry {index}: expected an object, found a JSON {type(entry).__name__}")
    for field, kind in _REQUIRED.items():
        if field not in entry:
            raise InputError(f"{path}: entry {index}: missing field {field!r}")
        got = entry[field]
        if not isinstance(got, kind) or isinstance(got, bool) or (isinstance(got, int) and got < 0):
            raise InputError(f"{path}: entry {index}: field {field!r} must be a {'non-negative integer' if kind is int else 'string'}, found {got!r}")
