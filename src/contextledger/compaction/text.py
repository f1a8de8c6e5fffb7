"""Plain-text helpers of the handoff summary's sections (:mod:`.sections`): capped
texts, a message's text and prose."""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextledger.policy.constraints import split_sentences
from contextledger.records.parts import TextPart
from contextledger.textcut import cut_index

if TYPE_CHECKING:
    from contextledger.records.models import Message

__all__ = ["cap_text", "message_text", "one_line", "prose_text"]


def cap_text(text: str, limit: int) -> str:
    """``text`` stripped, at most ``limit`` characters; a cut ends with ``"…"`` and falls
    at a safe point (:func:`~contextledger.textcut.cut_index`)."""
    text = text.strip()
    return text if len(text) <= limit else text[: cut_index(text, max(0, limit - 1))] + "…"


def message_text(msg: Message) -> str:
    """The text parts of ``msg`` joined by newlines."""
    return "\n".join(p.text for p in msg.parts if isinstance(p, TextPart))


def prose_text(msg: Message, limit: int) -> str:
    """The sentences of ``msg``'s text outside code fences, joined by spaces and capped."""
    return cap_text(" ".join(split_sentences(message_text(msg))), limit)


def one_line(text: str, limit: int) -> str:
    """``text`` with its whitespace runs as single spaces, capped (:func:`cap_text`)."""
    return cap_text(" ".join(text.split()), limit)
