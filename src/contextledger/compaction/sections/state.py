"""The ``current_state`` section: where the task stopped at the end of the covered range."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from contextledger.compaction.boundary import Boundary
from contextledger.compaction.handoff import NONE_RECORDED
from contextledger.compaction.sections.common import MAX_LINE_CHARS, SHARED_VISIBILITY, args_text
from contextledger.compaction.text import cap_text, message_text, prose_text
from contextledger.ingest.preambles import user_text
from contextledger.policy.constraints import split_sentences
from contextledger.records.enums import Role
from contextledger.records.models import ContinuationCheckpoint, SkillState, ToolCall

__all__ = ["current_state"]


def _unit_line(boundary: Boundary) -> str:
    talk = [
        u for u in boundary.covered if u.kind in ("user", "assistant", "exchange", "observation")
    ]
    if not talk:
        return NONE_RECORDED
    u = talk[-1]
    head = u.messages[0]
    if u.calls:
        calls = "; ".join(f"{c.tool_name}({args_text(c)}) → {c.status.value}" for c in u.calls)
        text = prose_text(head, 200)
        said = f" after saying: {text}" if text else ""
        return f"seq {u.seq}: assistant called {calls}{said}"
    if head.role is Role.USER:  # the user's own words only: injected text is the client's
        words = cap_text(" ".join(split_sentences(user_text(message_text(head)))), MAX_LINE_CHARS)
        return (
            f"seq {u.seq}: user said: {words}"
            if words
            else f"seq {u.seq}: client context (no words of the user's)"
        )
    return f"seq {u.seq}: assistant replied: {prose_text(head, MAX_LINE_CHARS)}"


def current_state(
    boundary: Boundary,
    calls: Sequence[ToolCall],
    checkpoints: Sequence[ContinuationCheckpoint],
    skill_states: Sequence[SkillState],
) -> dict[str, Any]:
    """Where the task stopped at the end of the covered range.

    ``stopped_at`` describes the last covered conversational unit; ``unresolved_calls``
    lists covered calls still pending or awaiting approval; ``checkpoint`` / ``skill_state``
    are the newest shareable ones with ``seq`` ≤ ``to_seq``.  Absent values are
    :data:`NONE_RECORDED`.
    """
    covered_calls = boundary.covered_call_ids
    pending = [c for c in calls if c.call_id in covered_calls and c.status.unresolved]
    ckpts = [
        c
        for c in checkpoints
        if c.seq <= boundary.to_seq and c.visibility_scope in SHARED_VISIBILITY
    ]
    skills = [
        s
        for s in skill_states
        if s.seq <= boundary.to_seq and s.visibility_scope in SHARED_VISIBILITY
    ]
    checkpoint: dict[str, Any] | str = NONE_RECORDED
    if ckpts:
        c = ckpts[-1]
        checkpoint = {
            "checkpoint_id": c.id,
            "pending_call_ids": list(c.pending_call_ids),
            "subagent_batch_id": c.subagent_batch_id,
            "retry_contract": json.dumps(c.retry_contract, sort_keys=True),
            "state": json.dumps(c.state, sort_keys=True, ensure_ascii=False),
        }
    skill: dict[str, Any] | str = NONE_RECORDED
    if skills:
        s = skills[-1]
        skill = {
            "loaded_skills": list(s.loaded_skills),
            "active_profile": s.active_profile or NONE_RECORDED,
            "usable_tools": list(s.usable_tools),
        }
    return {
        "stopped_at": _unit_line(boundary),
        "unresolved_calls": [
            {
                "call_id": c.call_id,
                "tool": c.tool_name,
                "status": c.status.value,
                "arguments": args_text(c),
            }
            for c in pending
        ]
        or NONE_RECORDED,
        "checkpoint": checkpoint,
        "skill_state": skill,
    }
