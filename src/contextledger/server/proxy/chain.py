"""Content fingerprints and the hash chain that reconciles a client's history with the
ledger.

A client of the proxy resends its whole history with every request.  Each message of it
gets a *chain key*: ``px:`` + sha256(previous key, fingerprint of the message), the first
message chained to the conversation key.  A recorded message stores its chain key as its
``content_key`` (unique per conversation), so

* the longest prefix of a request that is already recorded is found by looking keys up
  (the newest few first, then a binary search — a recorded key implies its whole prefix);
* a changed or regenerated earlier message changes every later key: the rest is recorded
  on a fork at the last common message, never over it;
* two workers reconciling the same request compute the same keys, so each message is
  recorded once.

The fingerprint is what identifies a message when a client echoes it: text, tool calls
by meaning (provider call id and tool name — a client echoes a call with the defaults
it filled in, re-ordered keys or re-encoded JSON, and it is still the recorded call; the
provider issues a new id for a new call), tool results (id, error flag, sha256 of the
text), images by content address.  Reasoning (thinking) is left out: Chat clients drop
it and the Messages API lets clients omit it from earlier turns.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from contextledger.ingest.transcript import ImportedMessage
from contextledger.records.parts import (
    BinaryPart,
    ImagePart,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["CHAIN_PREFIX", "canonical_arguments", "chain_keys", "fingerprint"]

CHAIN_PREFIX = "px:"
"""Prefix of every chain key (``content_key`` of messages recorded by the proxy)."""


def canonical_arguments(arguments_json: str) -> str:
    """Tool-call arguments as canonical JSON (sorted keys, compact) when they parse, else
    the exact text: the Messages API hands ``input`` back as an object whose key order and
    spacing a client may change."""
    try:
        value = json.loads(arguments_json) if arguments_json.strip() else {}
    except ValueError:
        return arguments_json
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _sha(text: str | None) -> str:
    return hashlib.sha256((text or "").encode("utf-8", "surrogatepass")).hexdigest()


def _part(p: Part) -> list[Any] | None:
    if isinstance(p, TextPart):
        return ["text", p.text] if p.text.strip() else None
    if isinstance(p, ThinkingPart):
        return None
    if isinstance(p, ToolCallPart):
        return ["call", p.call_id, p.tool_name]
    if isinstance(p, ToolResultPart):
        return ["result", p.call_id, p.is_error, _sha(p.text), [i.blob_key or i.url for i in p.images]]
    if isinstance(p, ImagePart):
        return ["image", p.blob_key or p.url]
    if isinstance(p, BinaryPart):
        return ["binary", p.blob_key]
    raise TypeError(f"unknown part {type(p).__name__}")  # pragma: no cover - closed union


def fingerprint(message: ImportedMessage) -> str:
    """sha256 hex of what identifies ``message`` when a client echoes it (see module
    docstring)."""
    parts = [x for x in (_part(p) for p in message.parts) if x is not None]
    doc = [message.role.value, message.kind.value, parts]
    return _sha(json.dumps(doc, ensure_ascii=False, separators=(",", ":")))


def chain_keys(root: str, messages: Sequence[ImportedMessage]) -> list[str]:
    """The chain key of every message (``len(messages)`` keys, ``px:<64 hex>``)."""
    keys: list[str] = []
    prev = root
    for m in messages:
        prev = CHAIN_PREFIX + hashlib.sha256(f"{prev}\x1f{fingerprint(m)}".encode()).hexdigest()
        keys.append(prev)
    return keys
