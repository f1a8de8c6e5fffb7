"""The ``next_step`` section: the newest user request of the lineage, with the plan of the
last covered assistant text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextledger.compaction.handoff import NONE_RECORDED
from contextledger.compaction.sections.common import MAX_LINE_CHARS, shareable_message
from contextledger.compaction.sections.goal import MAX_REQUEST_CHARS, user_requests
from contextledger.compaction.text import cap_text, message_text, one_line
from contextledger.policy.constraints import split_sentences
from contextledger.records.enums import Role
from contextledger.records.models import Message

__all__ = ["next_step"]


def _last_plan(messages: Sequence[Message], covered_ids: frozenset[str]) -> Message | None:
    """The last covered shareable assistant message with text outside code fences."""
    for m in reversed(messages):
        if (
            m.id in covered_ids
            and m.role is Role.ASSISTANT
            and shareable_message(m)
            and split_sentences(message_text(m))
        ):
            return m
    return None


def _plan_entry(msg: Message) -> dict[str, Any]:
    return {
        "text": cap_text(split_sentences(message_text(msg))[-1], MAX_LINE_CHARS),
        "message_id": msg.id,
    }


def next_step(messages: Sequence[Message], covered_ids: frozenset[str]) -> dict[str, Any] | str:
    """What the next model is to do, led by the newest user request of the lineage
    (``messages``: covered range and raw tail, seq order; see :func:`user_requests`).

    Shape: ``{"text": <that request, one line, at most MAX_REQUEST_CHARS>, "message_id":
    <its id>, "plan": <plan> or NONE_RECORDED}``; ``plan`` is ``{"text", "message_id"}``:
    the final sentence (outside code fences, at most :data:`MAX_LINE_CHARS`) of the last
    covered shareable assistant text, kept only when no covered user request came after
    it (a request in the raw tail, such as "go ahead", leaves it standing).  Without any
    user request the plan alone is the next step (``{"text", "message_id"}``); without
    either, :data:`NONE_RECORDED`.
    """
    requests = user_requests(messages)
    last = _last_plan(messages, covered_ids)
    if not requests:
        return _plan_entry(last) if last is not None else NONE_RECORDED
    newest, text = requests[-1]
    answered = max((m.seq for m, _ in requests if m.id in covered_ids), default=-1)
    plan: dict[str, Any] | str = (
        _plan_entry(last) if last is not None and last.seq > answered else NONE_RECORDED
    )
    return {"text": one_line(text, MAX_REQUEST_CHARS), "message_id": newest.id, "plan": plan}
