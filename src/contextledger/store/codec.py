"""Stored record bodies: JSON text in, frozen records out (and back).

Every record is stored as its JSON ``body`` next to the indexed columns; reads decode
the text with pydantic in one pass (:func:`decode_body`), memoised by the exact text for
the records an assembly reads again and again.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from contextledger.records.models import (
    Branch,
    ContinuationCheckpoint,
    Conversation,
    Message,
    Participant,
    SkillState,
    ToolArtifact,
    ToolCall,
    ToolMemory,
)

__all__ = ["DECODE_CACHE_SIZE", "decode_body", "iso_utc", "record_body"]

R = TypeVar("R", bound=BaseModel)

def iso_utc(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat()


def record_body(record: BaseModel) -> dict[str, Any]:
    return record.model_dump(mode="json")


DECODE_CACHE_SIZE = 4096
"""Decoded records kept per process by :func:`decode_body` (least recently used go first)."""

_CACHED_MODELS: frozenset[type[BaseModel]] = frozenset(
    {Conversation, Branch, Participant, Message, ToolCall, ToolArtifact, ToolMemory, SkillState, ContinuationCheckpoint}
)


@lru_cache(maxsize=DECODE_CACHE_SIZE)
def _decode_cached(model: type[BaseModel], text: str) -> BaseModel:
    return _decode_text(model, text)


def _decode_text(model: type[R], text: str) -> R:
    try:
        return model.model_validate_json(text)
    except ValidationError:
        # what the JSON parser of pydantic refuses but ``json`` reads (``NaN``, lone
        # surrogates): the original decoding path, which reports real shape errors
        return model.model_validate(json.loads(text))


def decode_body(model: type[R], body: Any) -> R:
    """One record from a stored ``body``: JSON text (parsed and validated in one pass by
    pydantic), or an already decoded dict.  Records that an assembly reads again and
    again (messages, calls, artifacts, memories, conversations, branches, participants,
    runtime state) are memoised by their exact JSON text in a process-wide LRU of
    :data:`DECODE_CACHE_SIZE` entries: the same bytes always give the same record, and an
    updated record has new bytes, so a cached record is never out of date.  Records are
    frozen; callers must not mutate their ``dict`` fields in place.

    Raises:
        pydantic.ValidationError: the body does not fit ``model``.
    """
    if not isinstance(body, str):
        return model.model_validate(body)
    if model in _CACHED_MODELS:
        return _decode_cached(model, body)  # type: ignore[return-value]
    return _decode_text(model, body)
