"""The naive baseline: the whole transcript as a replaying agent sends it (seed 000 §5.1).

``replay_request`` renders every message of the active lineage — every tool call, every
raw tool result (read back from storage), every retry and error — the way a transcript
replay would.  It is a measurement, not a request we would send: a call that never got a
result is given the placeholder result ``"[no result recorded]"`` so that the request can
be serialized and counted; progress/meta lines and thinking are left out (a replaying
agent does not send them either).
"""

from __future__ import annotations

from typing import Literal

from contextledger.assembly.candidates import CandidateSet
from contextledger.assembly.units import build_units
from contextledger.handles import artifact_handle
from contextledger.providers.base import NeutralRequest, ToolSchema, WireMessage
from contextledger.records.enums import AuthorityLevel, Role
from contextledger.records.models import ToolCall
from contextledger.records.parts import ImagePart, Part, TextPart, ToolCallPart, ToolResultPart
from contextledger.store.base import Scope
from contextledger.store.sql import SqlStore

__all__ = ["estimate_replay_tokens", "replay_request", "tool_schema_tokens"]

NO_RESULT = "[no result recorded]"


def replay_request(store: SqlStore, scope: Scope, cands: CandidateSet, tools: tuple[ToolSchema, ...]) -> tuple[NeutralRequest, int]:
    """The full-lineage replay request and its legacy message count.

    Units (:func:`~contextledger.assembly.units.build_units`) keep every result right
    after the turn that requested it, as the provider saw it; every raw result is read
    back whole (blob store included).
    """
    conv_id = cands.conversation.id
    messages = store.messages(scope, conv_id, cands.segments)
    calls = store.tool_calls(scope, conv_id, cands.segments)
    arts = {a.call_id: a for a in store.artifacts(scope, conv_id, cands.segments)}
    by_msg: dict[str, list[ToolCall]] = {}
    for c in calls:
        by_msg.setdefault(c.message_id, []).append(c)

    def raw(call_id: str) -> str:
        a = arts.get(call_id)
        if a is None:
            return NO_RESULT
        if a.inline_text is not None:
            return a.inline_text
        try:
            return store.read_artifact_bytes(scope, a).decode("utf-8", errors="replace")
        except Exception:
            return f"[payload unavailable: artifact {artifact_handle(a)}]"

    system: list[str] = []
    out: list[WireMessage] = []
    count = 0
    for u in build_units(messages, by_msg, arts, []):
        if u.kind in ("runtime", "cut"):
            continue
        head = u.messages[0]
        if head.metadata.get("handoff_format"):
            continue  # our own compaction records are not part of the transcript
        count += len(u.messages)
        if u.kind == "system":
            text = "\n".join(p.text for p in head.parts if isinstance(p, TextPart))
            if head.authority is AuthorityLevel.SYSTEM and not out:
                system.append(text)
            else:
                out.append(WireMessage(role="user", parts=(TextPart(text=text or "(empty)"),)))
            continue
        content: list[Part] = [p for p in head.parts if isinstance(p, (TextPart, ImagePart)) and (not isinstance(p, TextPart) or p.text.strip())]
        if u.kind == "observation":
            if head.role is Role.ASSISTANT:
                out.append(WireMessage(role="assistant", parts=tuple(content) or (TextPart(text="(no text)"),), name=head.speaker_label))
            out.extend(WireMessage(role="user", parts=(TextPart(text=raw(c.call_id) or "(empty)"),)) for c in u.calls)
            continue
        if u.kind == "exchange":
            content.extend(ToolCallPart(call_id=c.call_id, tool_name=c.tool_name, arguments_json=c.arguments_json) for c in u.calls)
            out.append(WireMessage(role="assistant", parts=tuple(content), name=head.speaker_label))
            for c in u.calls:
                a = arts.get(c.call_id)
                out.append(WireMessage(role="tool", parts=(ToolResultPart(call_id=c.call_id, text=raw(c.call_id), is_error=bool(a and a.is_error)),)))
            continue
        role: Literal["user", "assistant"] = "assistant" if head.role is Role.ASSISTANT else "user"
        out.append(WireMessage(role=role, parts=tuple(content) or (TextPart(text="(empty)"),), name=head.speaker_label))
    return NeutralRequest(system=tuple(system), messages=tuple(out), tools=tools), count


def tool_schema_tokens(provider: str, tools: tuple[ToolSchema, ...]) -> int:
    """Tokens the declarations of ``tools`` add to a ``provider`` request as serialized
    (the same request counted with and without them; 0 for no tools)."""
    from contextledger.providers.registry import count_payload_tokens, serialize

    if not tools:
        return 0
    probe = (WireMessage(role="user", parts=(TextPart(text="."),)),)
    with_tools = serialize(provider, NeutralRequest(system=(), messages=probe, tools=tools), resolve_blob=None)
    without = serialize(provider, NeutralRequest(system=(), messages=probe, tools=()), resolve_blob=None)
    return max(0, int(count_payload_tokens(provider, with_tools)) - int(count_payload_tokens(provider, without)))


def estimate_replay_tokens(store: SqlStore, scope: Scope, cands: CandidateSet, tools_tokens: int = 0) -> tuple[int, int]:
    """Replay size from cached per-record token counts (no payload reads): message
    content (the recorded system prompt included) + raw result tokens + 3 tokens of
    overhead per message + ``tools_tokens`` (the tool declarations, which the replayed
    request carries as the assembled one does: :func:`tool_schema_tokens`).  Used for
    very long histories where reading every payload would dominate the measurement."""
    t = cands.totals or store.lineage_totals(scope, cands.conversation.id, cands.segments)
    return t["message_tokens"] + t["artifact_tokens"] + 3 * t["messages"] + 3 + tools_tokens, t["messages"]
