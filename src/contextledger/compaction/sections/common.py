"""What every handoff section builder shares: which records may feed a branch-visible
handoff (:func:`shareable_message`, :func:`shareable_memory`) and the small readers of a
memory (its extractor kind, first artifact, first summary line) and of a call."""

from __future__ import annotations

import re
from collections.abc import Iterable

from contextledger.compaction.text import cap_text, one_line
from contextledger.records.enums import MessageKind, PrivacyClass, PromotionPolicy, Role, Visibility
from contextledger.records.models import Message, ToolCall, ToolMemory

__all__ = [
    "ARTIFACT_REF",
    "FILE_KINDS",
    "MAX_LINE_CHARS",
    "SHAREABLE_PRIVACY",
    "SHARED_VISIBILITY",
    "WRITE_KINDS",
    "args_text",
    "by_seq",
    "first_artifact",
    "first_line",
    "is_user_chat",
    "memory_kind",
    "shareable_memory",
    "shareable_message",
]

MAX_LINE_CHARS = 300
"""Longest single fact, error, reason or attempt line (characters)."""

SHAREABLE_PRIVACY = frozenset({PrivacyClass.PUBLIC, PrivacyClass.INTERNAL, PrivacyClass.USER_DATA})
"""Privacy classes whose derived text may enter a branch-visible handoff."""

SHARED_VISIBILITY = frozenset({Visibility.BRANCH, Visibility.CONVERSATION})
WRITE_KINDS = frozenset({"file_write", "generated_file"})
FILE_KINDS = frozenset({"file_read", "file_write", "generated_file"})
ARTIFACT_REF = re.compile(r" ?\[artifact [^\]]*\]")


def shareable_message(msg: Message) -> bool:
    """Whether ``msg`` may feed a branch-visible handoff."""
    return msg.visibility in SHARED_VISIBILITY and msg.privacy_class in SHAREABLE_PRIVACY


def shareable_memory(mem: ToolMemory) -> bool:
    """Whether ``mem`` may feed a branch-visible handoff."""
    return (
        mem.visibility_scope in SHARED_VISIBILITY
        and mem.promotion_policy not in (PromotionPolicy.NOT_PROMOTED, PromotionPolicy.AUDIT_ONLY)
        and mem.privacy_class in SHAREABLE_PRIVACY
    )


def memory_kind(mem: ToolMemory) -> str:
    return str(mem.payload.get("extractor") or "")


def first_artifact(mem: ToolMemory) -> str | None:
    return mem.source_artifact_ids[0] if mem.source_artifact_ids else None


def first_line(mem: ToolMemory) -> str:
    """The summary's first line without its artifact reference (ids are cited apart)."""
    return cap_text(ARTIFACT_REF.sub("", mem.summary.split("\n", 1)[0]), MAX_LINE_CHARS)


def is_user_chat(msg: Message) -> bool:
    return msg.role is Role.USER and msg.kind == MessageKind.CHAT


def by_seq(memories: Iterable[ToolMemory]) -> list[ToolMemory]:
    return sorted(memories, key=lambda m: (m.seq, m.id))


def args_text(call: ToolCall) -> str:
    return one_line(call.arguments_json, 160)
