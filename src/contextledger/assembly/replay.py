"""The naive baseline: the whole transcript as a replaying agent sends it (seed 000 §5.1).

``replay_request`` renders every message of the active lineage — every tool call, every
raw tool result (read back from storage), every retry and error — the way a transcript
replay would.  It is a measurement, not a request we would send: a call that never got a
result is given the placeholder result ``"[no result recorded]"`` so that the request can
be serialized and counted; progress/meta lines and thinking are left out (a replaying
agent does not send them either).
"""

from __future__ import annotations

from contextledger.assembly.candidates import CandidateSet
from contextledger.providers.base import NeutralRequest, ToolSchema, WireMessage
from contextledger.records.enums import AuthorityLevel, MessageKind, Role
from contextledger.records.parts import ImagePart, Part, TextPart, ToolCallPart, ToolResultPart
from contextledger.store.base import Scope
from contextledger.store.sql import SqlStore

__all__ = ["estimate_replay_tokens", "replay_request"]

NO_RESULT = "[no result recorded]"


def replay_request(store: SqlStore, scope: Scope, cands: CandidateSet, tools: tuple[ToolSchema, ...]) -> tuple[NeutralRequest, int]:
    """The full-lineage replay request and its legacy message count."""
    conv_id = cands.conversation.id
    messages = store.messages(scope, conv_id, cands.segments)
    calls = store.tool_calls(scope, conv_id, cands.segments)
    arts = {a.call_id: a for a in store.artifacts(scope, conv_id, cands.segments)}
    by_msg: dict[str, list[str]] = {}
    for c in calls:
        by_msg.setdefault(c.message_id, []).append(c.call_id)
    answered: set[str] = set()
    system: list[str] = []
    out: list[WireMessage] = []
    count = 0

    def raw(call_id: str) -> str:
        a = arts.get(call_id)
        if a is None:
            return NO_RESULT
        if a.inline_text is not None:
            return a.inline_text
        try:
            return store.read_artifact_bytes(scope, a).decode("utf-8", errors="replace")
        except Exception:
            return f"[payload unavailable: {a.id}]"

    pending_after: list[str] = []
    for m in messages:
        if m.kind in (MessageKind.PROGRESS, MessageKind.META):
            continue
        count += 1
        if m.role in (Role.SYSTEM, Role.DEVELOPER):
            text = "\n".join(p.text for p in m.parts if isinstance(p, TextPart))
            if m.authority is AuthorityLevel.SYSTEM and not out:
                system.append(text)
            else:
                out.append(WireMessage(role="user", parts=(TextPart(text=text or "(empty)"),)))
            continue
        # a replaying agent must still answer any call left open before moving on
        if pending_after and m.role is not Role.TOOL:
            out.extend(WireMessage(role="tool", parts=(ToolResultPart(call_id=c, text=NO_RESULT),)) for c in pending_after)
            pending_after = []
        if m.role is Role.TOOL:
            for p in m.parts:
                if isinstance(p, ToolResultPart):
                    out.append(WireMessage(role="tool", parts=(ToolResultPart(call_id=p.call_id, text=raw(p.call_id), is_error=p.is_error, images=p.images),)))
                    answered.add(p.call_id)
                    if p.call_id in pending_after:
                        pending_after.remove(p.call_id)
            continue
        if m.kind == MessageKind.OBSERVATION:
            body = "\n".join(raw(p.call_id) for p in m.parts if isinstance(p, ToolResultPart)) or "\n".join(p.text for p in m.parts if isinstance(p, TextPart))
            out.append(WireMessage(role="user", parts=(TextPart(text=body or "(empty)"),)))
            continue
        parts: list[Part] = [p for p in m.parts if isinstance(p, (TextPart, ImagePart)) and (not isinstance(p, TextPart) or p.text.strip())]
        if m.role is Role.ASSISTANT:
            tool_parts = [p for p in m.parts if isinstance(p, ToolCallPart) and not p.call_id.startswith("obs_")]
            parts.extend(tool_parts)
            pending_after = [p.call_id for p in tool_parts]
            if not parts:
                parts = [TextPart(text="(no text)")]
            out.append(WireMessage(role="assistant", parts=tuple(parts), name=m.speaker_label))
        else:
            out.append(WireMessage(role="user", parts=tuple(parts) or (TextPart(text="(empty)"),), name=m.speaker_label))
    if pending_after:
        out.extend(WireMessage(role="tool", parts=(ToolResultPart(call_id=c, text=NO_RESULT),)) for c in pending_after)
    return NeutralRequest(system=tuple(system), messages=tuple(out), tools=tools), count


def estimate_replay_tokens(store: SqlStore, scope: Scope, cands: CandidateSet) -> tuple[int, int]:
    """Replay size from cached per-record token counts (no payload reads): message
    content + raw result tokens + 3 tokens of overhead per message.  Used for very long
    histories where reading every payload would dominate the measurement."""
    t = store.lineage_totals(scope, cands.conversation.id, cands.segments)
    return t["message_tokens"] + t["artifact_tokens"] + 3 * t["messages"] + 3, t["messages"]
