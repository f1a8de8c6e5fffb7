"""The first recording tier: the records a recording transaction must hold so nothing
the model needs can be lost (seed 000 §4.2: the raw artifact exists before anything is
reduced).

For a tool result that is the :class:`~contextledger.records.models.ToolArtifact` (sha256,
byte size, blob key or inline text, cached token count), the result message referencing
it and the call's new status; for a turn, its message and a pending
:class:`~contextledger.records.models.ToolCall` per requested call.  This module builds
those records; :class:`~contextledger.ingest.recorder.Recorder` writes them.  What is
derived from them (memory, links, terms, retrieval documents) is the second tier,
:mod:`contextledger.ingest.derivation`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from contextledger.ids import new_id
from contextledger.records.enums import (
    PrivacyClass,
    RuntimeIsolationPolicy,
    RuntimeKind,
    ToolCallStatus,
    Visibility,
)
from contextledger.records.models import Message, ToolArtifact, ToolCall
from contextledger.records.parts import Part, TextPart, ToolCallPart, ToolResultPart
from contextledger.store.blobs import sha256_key
from contextledger.tokens import get_tokenizer

__all__ = [
    "TERMINAL_RUN_STATUSES",
    "AlreadyRecorded",
    "ToolCallSpec",
    "decode_result",
    "message_token_count",
    "pending_calls",
    "result_artifact",
]

TERMINAL_RUN_STATUSES = frozenset({"completed", "failed", "timeout"})
"""ModelRun statuses after which a run produces nothing more (seed 000 §4.14: a child's
generated-file handles become parent-visible only once its run is in one of these)."""


@dataclass(frozen=True, kw_only=True)
class ToolCallSpec:
    """A tool call to record: provider ``call_id``, ``tool_name`` and the arguments
    (a mapping, serialised as compact JSON, or the exact argument text)."""

    call_id: str
    tool_name: str
    arguments: Mapping[str, Any] | str = "{}"

    @property
    def arguments_json(self) -> str:
        """The argument text as stored."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def message_token_count(parts: Sequence[Part]) -> int:
    """Cached o200k tokens of a message's own content (text, thinking, tool-call names,
    ids and arguments, inline tool-result text) — per-message overhead excluded."""
    tok = get_tokenizer()
    total = 0
    for p in parts:
        if isinstance(p, TextPart):
            total += tok.count(p.text)
        elif isinstance(p, ToolCallPart):
            total += tok.count(p.tool_name) + tok.count(p.arguments_json) + tok.count(p.call_id)
        elif isinstance(p, ToolResultPart):
            total += tok.count(p.call_id)
    return total


class AlreadyRecorded(Exception):
    """Control-flow signal: a concurrent writer recorded the same call's result first."""


def pending_calls(msg: Message) -> list[ToolCall]:
    """A new pending :class:`ToolCall` for every :class:`ToolCallPart` of ``msg``, in part
    order (``call_index`` 0, 1, …), owned by the message's participant and run."""
    calls = []
    parts = [p for p in msg.parts if isinstance(p, ToolCallPart)]
    for index, p in enumerate(parts):
        calls.append(
            ToolCall(
                id=new_id("call"), tenant_id=msg.tenant_id, conversation_id=msg.conversation_id, branch_id=msg.branch_id,
                message_id=msg.id, seq=msg.seq, call_index=index, call_id=p.call_id, tool_name=p.tool_name,
                arguments_json=p.arguments_json, participant_id=msg.participant_id, model_run_id=msg.model_run_id,
                created_at=msg.created_at,
            )
        )
    return calls


def decode_result(raw: bytes, content_type: str | None) -> tuple[str | None, str]:
    """``(text, content type)`` of a raw result: UTF-8 text and ``content_type`` or
    ``text/plain``; ``None`` and ``content_type`` or ``application/octet-stream`` when
    ``raw`` is not UTF-8."""
    try:
        return raw.decode("utf-8"), content_type or "text/plain"
    except UnicodeDecodeError:
        return None, content_type or "application/octet-stream"


def result_artifact(
    tenant_id: str,
    conversation_id: str,
    call: ToolCall,
    raw: bytes,
    *,
    text: str | None,
    content_type: str,
    inline: str | None,
    blob_key: str | None,
    status: ToolCallStatus,
    is_error: bool,
    error_type: str | None,
    seq: int,
    visibility: Visibility,
    child: bool,
    privacy_class: PrivacyClass,
    shared_with: Sequence[str],
    skill_profile: str | None,
    provider_metadata: Mapping[str, Any] | None,
    observed_at: datetime,
    now: datetime,
    artifact_id: str | None,
) -> ToolArtifact:
    """The :class:`ToolArtifact` of ``call``'s raw result ``raw`` (``message_id`` unset):
    sha256 and byte size of ``raw``, o200k tokens of its text (0 for binary), owned by the
    call's participant and run; a child subagent's artifact is ``child_audit_only``."""
    return ToolArtifact(
        id=artifact_id or new_id("art"),
        tenant_id=tenant_id,
        conversation_id=conversation_id,
        branch_id=call.branch_id,
        tool_call_id=call.id,
        call_id=call.call_id,
        tool_name=call.tool_name,
        arguments_json=call.arguments_json,
        status=status,
        is_error=is_error,
        error_type=error_type,
        content_type=content_type,
        inline_text=inline,
        blob_key=blob_key,
        sha256=sha256_key(raw),
        size_bytes=len(raw),
        result_tokens=get_tokenizer().count(text) if text is not None else 0,
        seq=seq,
        owner_participant_id=call.participant_id,
        owner_model_run_id=call.model_run_id,
        visibility_scope=visibility,
        shared_with_participants=tuple(sorted(shared_with)),
        runtime_kind=RuntimeKind.SUBAGENT_CHILD if child else RuntimeKind.CHAT,
        runtime_isolation_policy=RuntimeIsolationPolicy.CHILD_AUDIT_ONLY if child else RuntimeIsolationPolicy.PARTICIPANT,
        privacy_class=privacy_class,
        skill_profile=skill_profile,
        provider_metadata=dict(provider_metadata or {}),
        observed_at=observed_at,
        created_at=now,
    )
