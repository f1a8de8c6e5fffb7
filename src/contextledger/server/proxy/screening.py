"""The client's body as it may reach a provider: every secret replaced by its marker.

The proxy forwards parts of a client's body as given (system prompts, Anthropic client
context, the continued turn of a tool loop, Responses compaction items).  Those parts go
through the same screen as every recorded text (:mod:`contextledger.security.secrets`):
:func:`screen_body` returns the body with the secrets in its model-facing fields
(``system``, ``messages``, ``input``, ``instructions``) replaced, exactly as the ledger
stores the same texts — a text block and a tool result by :func:`screen_text`, tool-call
arguments by :func:`redact_json_text` on the text the importers record (a Messages
``tool_use`` input as compact JSON).  The screen is deterministic, so a history resent
every turn is rendered the same way every turn and the prefix the provider caches stays
stable; a body without secrets is returned unchanged (the same object).

Opaque provider data is never touched (the provider needs it byte for byte): signatures,
encrypted reasoning and compaction content, ``redacted_thinking`` data, base64 image or
document data, ids, names and types.
"""

from __future__ import annotations

import json
from typing import Any

from contextledger.limits import loads_json
from contextledger.security.secrets import redact_json_text, screen_text

__all__ = ["MODEL_FIELDS", "body_bytes", "screen_body", "screen_raw"]

MODEL_FIELDS = ("system", "messages", "input", "instructions")
"""The body fields whose text a model reads (the three APIs' history and system prompt)."""

_OPAQUE_KEYS = frozenset({
    "id", "call_id", "tool_use_id", "type", "role", "name", "signature", "encrypted_content", "data", "media_type", "cache_control",
    "status", "model", "file_id", "detail", "phase",
})
"""Keys whose string values are identifiers or opaque provider data, never screened."""


def _arguments(text: str) -> str:
    return redact_json_text(text).text


def _tool_input(value: Any) -> Any:
    """A Messages ``tool_use`` input screened as the importer records it (compact JSON)."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return value
    screened = redact_json_text(text)
    if not screened.secret:
        return value
    try:
        return loads_json(screened.text)
    except ValueError:
        return {"_redacted": [f.marker for f in screened.findings]}


def _screen_dict(value: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    changed = False
    for key, item in value.items():
        if key in _OPAQUE_KEYS and isinstance(item, str):
            new = item
        elif key == "arguments" and isinstance(item, str):
            new = _arguments(item)
        elif key == "input" and value.get("type") == "tool_use":
            new = _tool_input(item)
        elif key in ("url", "image_url") and isinstance(item, str) and item.startswith("data:"):
            new = item  # an inline image or file: data, not text
        else:
            new = _screen(item)
        changed = changed or new is not item
        out[key] = new
    return out if changed else value


def _screen(value: Any) -> Any:
    """``value`` with every screened string replaced; the same object when nothing changed."""
    if isinstance(value, str):
        s = screen_text(value)
        return s.text if s.secret else value
    if isinstance(value, dict):
        return _screen_dict(value)
    if isinstance(value, list):
        items = [_screen(v) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value


def screen_body(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with the secrets of its :data:`MODEL_FIELDS` replaced by their markers
    (see module docstring); every other field is kept as given.  ``body`` itself is
    never modified; it is returned as is when it holds no secret."""
    out = dict(body)
    changed = False
    for name in MODEL_FIELDS:
        if name in body:
            new = _screen(body[name])
            changed = changed or new is not body[name]
            out[name] = new
    return out if changed else body


def body_bytes(body: dict[str, Any]) -> bytes:
    """``body`` as compact UTF-8 JSON (what the proxy sends for a body it built)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def screen_raw(raw: bytes) -> bytes:
    """The bytes of a request body to forward: ``raw`` itself unless it is a JSON object
    with a secret in its :data:`MODEL_FIELDS`, then that object screened
    (:func:`screen_body`) as compact JSON."""
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        return raw
    if not isinstance(body, dict):
        return raw
    clean = screen_body(body)
    return raw if clean is body else body_bytes(clean)
