"""Stage 2: visibility and boundaries — which units and tools the viewer may see at all.

Seed 001 §9 *Visibility Filter* (what reaches the model and what stays runtime-only) and
*Boundary Controller* (branch, task, subagent and participant boundaries); seed 000
§4.9–4.14 (ownership, runtime modes, subagent promotion), DESIGN.md pipeline step 3.
Per unit, in order: a compaction replaces the units it covers (an older compaction gives
way to the newest; a covered unit that recovery protects stays, and is sent after the
summary: :func:`~contextledger.assembly.shape.unit_order`); progress and meta records are runtime-only; a result whose turn lies
before the candidate window is cut; ownership and visibility of the unit's first message
decide (a child subagent sees only its own records unless others were promoted to it).
An exchange repeated verbatim later is a duplicate.  The tool declarations are the
conversation's, narrowed to the viewer's tool list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contextledger.assembly.units import Unit
from contextledger.providers.base import ToolSchema
from contextledger.records.enums import MessageKind, OmissionReason
from contextledger.records.models import Message, Participant

if TYPE_CHECKING:
    from contextledger.assembly.candidates import CandidateSet
    from contextledger.assembly.evaluate import Evaluator

__all__ = ["VisibleUnits", "tool_schemas", "visible_units"]


@dataclass(frozen=True, kw_only=True)
class VisibleUnits:
    """The units the viewer may see, in history order.

    Attributes:
        units: visible units, duplicates removed.
        compaction: the newest compaction message of the lineage, if any.
        covered_to: the last seq its summary covers (-1 without one).
    """

    units: list[Unit]
    compaction: Message | None
    covered_to: int


def visible_units(cands: CandidateSet, units: list[Unit], ev: Evaluator) -> VisibleUnits:
    """Filter ``units`` (rules in the module docstring); every omission is recorded on
    ``ev`` with its reason."""
    visible: list[Unit] = []
    comp = cands.compaction
    covered_to = int(comp.metadata["covers"]["to_seq"]) if comp is not None else -1
    protected_keys = ev.recovery.protected(units)
    first_turn_seq = min((x.seq for x in units if x.is_turn_start), default=-1)
    for u in units:
        if u.kind == "system":
            continue
        head = u.messages[0]
        if head.kind == MessageKind.COMPACTION and head.metadata.get("handoff_format"):
            if comp is None or head.id != comp.id:
                ev.omit_unit(u, OmissionReason.COMPACTED, "an older compaction, replaced by the newest one")
            continue
        if u.seq <= covered_to and u.key not in protected_keys and not (u.seq == first_turn_seq and _goal_truncated(comp)):
            ev.omit_unit(u, OmissionReason.COMPACTED, f"covered by compaction {comp.id if comp else ''}")
            continue
        if u.kind == "runtime":
            ev.omit_unit(u, OmissionReason.RUNTIME_ONLY, "progress/meta records are runtime-only")
            continue
        if u.kind == "cut":
            ev.omit_unit(u, OmissionReason.OUTSIDE_WINDOW, "its turn is older than the candidate window")
            continue
        if not ev.unit_visible(u):
            continue
        visible.append(u)
    return VisibleUnits(units=_drop_duplicates(visible, ev, protected_keys), compaction=comp, covered_to=covered_to)


def _drop_duplicates(units: list[Unit], ev: Evaluator, protected: set[str]) -> list[Unit]:
    """An exchange repeated verbatim later (same tools, arguments and result bytes)
    adds nothing: the earlier copy is omitted with reason ``duplicate``."""
    seen: set[tuple[tuple[str, str, str], ...]] = set()
    keep: list[Unit] = []
    for u in reversed(units):
        if u.kind in ("exchange", "observation") and u.calls and len(u.artifacts) == len(u.calls) and u.key not in protected:
            sig = tuple((c.tool_name, c.arguments_json, u.artifacts[c.call_id].sha256) for c in u.calls)
            if sig in seen:
                ev.omit_unit(u, OmissionReason.DUPLICATE, "the same calls returned the same bytes later")
                for mem in u.memories.values():
                    ev.omit_record(mem.id, "memory", OmissionReason.DUPLICATE, "memory of a duplicated exchange")
                continue
            seen.add(sig)
        keep.append(u)
    return list(reversed(keep))


def _goal_truncated(comp: Any) -> bool:
    """Whether a compaction had to cut the user goal (then the raw task statement stays)."""
    goal = (comp.metadata.get("sections") or {}).get("user_goal") if comp is not None else None
    return isinstance(goal, dict) and bool(goal.get("truncated"))


def tool_schemas(cands: CandidateSet, viewer: Participant | None) -> tuple[ToolSchema, ...]:
    """The tool declarations of the request, sorted by name: the conversation's recorded
    tools (``metadata["tools"]``), narrowed to the viewer's ``tool_names`` when it has a
    list (a tool it may call but nobody declared gets a minimal schema)."""
    raw = cands.conversation.metadata.get("tools") or []
    schemas: dict[str, ToolSchema] = {}
    for t in raw:
        fn = t.get("function", t) if isinstance(t, dict) else {}
        name = fn.get("name")
        if isinstance(name, str) and name:
            schemas[name] = ToolSchema(name=name, description=str(fn.get("description") or ""), parameters=fn.get("parameters") or fn.get("input_schema") or {"type": "object", "properties": {}})
    if viewer is not None and viewer.tool_names:
        allowed = set(viewer.tool_names)
        schemas = {k: v for k, v in schemas.items() if k in allowed}
        for name in viewer.tool_names:
            schemas.setdefault(name, ToolSchema(name=name))
    return tuple(schemas[k] for k in sorted(schemas))
