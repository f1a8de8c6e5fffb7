"""The ``user_goal`` section: the first user request of the lineage in the user's own
words, and the later requests of the covered range."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextledger.compaction.handoff import NONE_RECORDED
from contextledger.compaction.sections.common import is_user_chat, shareable_message
from contextledger.compaction.text import cap_text, message_text
from contextledger.ingest.preambles import user_text
from contextledger.records.models import Message
from contextledger.textcut import cut_index

__all__ = [
    "MAX_GOAL_CHARS",
    "MAX_LATER_REQUESTS",
    "MAX_REQUEST_CHARS",
    "user_goal",
    "user_requests",
]

MAX_GOAL_CHARS = 4000
"""Longest user goal kept verbatim (characters); the message id points at the rest."""
MAX_REQUEST_CHARS = 600
"""Longest later user request kept (characters)."""
MAX_LATER_REQUESTS = 10
"""Newest later user requests kept."""


def user_requests(messages: Sequence[Message]) -> list[tuple[Message, str]]:
    """``(message, the user's own words)`` of every user request in ``messages`` (seq
    order): shareable user chat messages with words of the user's once client-injected
    text is removed (:func:`~contextledger.ingest.preambles.user_text`), scaffold
    demonstrations (``is_demo``) left out."""
    own = [
        (m, user_text(message_text(m)))
        for m in messages
        if is_user_chat(m) and shareable_message(m) and not m.metadata.get("is_demo")
    ]
    return [(m, text) for m, text in own if text]


def user_goal(messages: Sequence[Message], covered_ids: frozenset[str]) -> dict[str, Any] | str:
    """The first user chat message of the lineage in the user's own words (verbatim up to
    :data:`MAX_GOAL_CHARS`) and the newest :data:`MAX_LATER_REQUESTS` other ones of the
    covered range.  The user's words only: client-injected text
    (:func:`~contextledger.ingest.preambles.user_text`: ``<system-reminder>``, Codex's
    ``<environment_context>`` …) is never quoted as theirs, a message of nothing else and a
    scaffold demonstration (``is_demo``) are no request."""
    users = user_requests(messages)
    if not users:
        return NONE_RECORDED
    first, text = users[0]
    later = [(m, t) for m, t in users[1:] if m.id in covered_ids][-MAX_LATER_REQUESTS:]
    return {
        "text": text if len(text) <= MAX_GOAL_CHARS else text[: cut_index(text, MAX_GOAL_CHARS - 1)] + "…",
        "message_id": first.id,
        "truncated": len(text) > MAX_GOAL_CHARS,
        "later_requests": [
            {"text": cap_text(t, MAX_REQUEST_CHARS), "message_id": m.id} for m, t in later
        ],
    }
