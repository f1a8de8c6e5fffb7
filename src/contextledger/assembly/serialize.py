"""Stage 9: serialize — the provider payload, its exact token count, the stable prefix and
the replay baseline.

DESIGN.md pipeline step 6; seed 000 §5.1 (the token cost model: replay vs assembled).
The provider serializers (:mod:`contextledger.providers`) own the wire invariants: every
tool call answered right after it, legal role order, tool schemas sorted by name, tool
output framed as data.  Blobs referenced by image parts are read here; a missing blob is
left to the serializer's placeholder.  The naive replay — the whole lineage as a
replaying agent sends it — is counted exactly, or estimated from the stored per-record
counts (constant work) on long histories.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contextledger.assembly.replay import estimate_replay_tokens, replay_request, tool_schema_tokens
from contextledger.assembly.visibility import tool_schemas
from contextledger.providers.base import NeutralRequest, ToolSchema

if TYPE_CHECKING:
    from contextledger.assembly.candidates import CandidateSet
    from contextledger.assembly.request import Boundary
    from contextledger.store.sql import SqlStore

__all__ = ["Serialized", "measure_replay", "serialize_request", "stable_prefix_hash"]


@dataclass(frozen=True, kw_only=True)
class Serialized:
    """The provider ``payload`` (request-body fields) and its exact ``tokens``."""

    payload: dict[str, Any]
    tokens: int


def serialize_request(store: SqlStore, provider: str, request: NeutralRequest) -> Serialized:
    """Serialize ``request`` for ``provider`` and count it exactly."""
    from contextledger.providers.registry import count_payload_tokens, serialize

    def resolve_blob(key: str) -> bytes | None:
        try:
            return store.blobs.get(key)
        except Exception:
            return None

    payload = serialize(provider, request, resolve_blob=resolve_blob)
    return Serialized(payload=payload, tokens=count_payload_tokens(provider, payload))


def measure_replay(store: SqlStore, bound: Boundary, cands: CandidateSet) -> tuple[int, int]:
    """``(tokens, legacy message count)`` of the naive full-transcript request for the
    boundary's provider: serialized and counted (``bound.replay == "exact"``), or summed
    from the stored counts."""
    from contextledger.providers.registry import count_payload_tokens, serialize

    tools = tool_schemas(cands, None)
    if bound.replay == "estimate":  # like the exact replay, it carries the tool declarations
        return estimate_replay_tokens(store, bound.scope, cands, tool_schema_tokens(bound.provider, tools))
    req, n = replay_request(store, bound.scope, cands, tools)
    return int(count_payload_tokens(bound.provider, serialize(bound.provider, req, resolve_blob=None))), n


def stable_prefix_hash(system: tuple[str, ...], tools: tuple[ToolSchema, ...]) -> str:
    """``sha256:<hex>`` of the stable prefix: system text, rules, pinned constraints and
    the tool schemas (sorted by name) — what a provider's prompt cache can reuse between
    turns."""
    tool_sig = json.dumps([[t.name, t.description, t.parameters] for t in tools], sort_keys=True, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(("\x1e".join(system) + "\x1d" + tool_sig).encode()).hexdigest()
