"""Epochs: append-stable assembly (issue "Pay less, not just send less"; seed 000 §5.3 —
the assembly as cache boundary, a stable prefix is what a provider's prompt cache reuses).

Between two requests of one conversation — same branch lineage, viewer, provider and
policy version — the request is the previous *sent* request byte for byte plus the new
records rendered as the recent tail renders them (raw), while that fits under the
high-water mark (policy ``[epoch]``, :mod:`contextledger.policy.epoch`).  Otherwise the
context is re-planned once: the normal assembly, targeting the low-water mark
``fixed + low_water × (budget − fixed)`` (``fixed``: system blocks and tool declarations),
so the next epoch has room to grow.  Inside an epoch the system blocks and tools are
frozen, nothing already sent is re-rendered (no age label moves), and a record shown
earlier in the epoch that became stale or superseded since is announced by one appended
note citing the handles the payload labels (``m12``, ``a12``) or the call ids it sends
(:func:`outdated_note`).  A constraint the user states inside an epoch (a pinned rule of a
message after the epoch's head) does not re-plan: the message stating it is one of the new
records, sent raw, so the model reads it verbatim in the tail; the epoch record lists it
(``record.epoch["constraints_in_tail"]``, carried to the epoch's later requests) and the
next re-plan pins it in the system blocks.  The system blocks still re-plan when anything
else in them changes (system prompt, rules, a frozen constraint overridden).

**Where the state lives.**  The state of an epoch is the previous persisted assembly of
the lineage and its stored payload (the store keeps both), read once per request
(:meth:`~contextledger.store.read_audit.AuditReads.recent_assemblies`): several service
workers over one PostgreSQL database see the same state.  An assembly covers a *lineage
head* (the newest message it could see, recorded in ``record.epoch["head"]``); a request
reuses it only when that head lies in the request's own lineage, so a retry or fork at
an earlier head never sees later records: it extends the newest assembly made at or
before its head on its lineage, or re-plans (``lineage diverged``).  The budget is not
part of the key: the fit is checked against the current budget.  An assembly made with
``persist=False`` neither reads nor writes the state; ``replaces`` names an assembly of
the same request that was not sent (the proxy's first attempt, made again with the excess
cut), which is never the state.

The neutral request of an extension (:attr:`AssemblyResult.request`) carries the frozen
system blocks, the tools and the previous neutral messages when this process assembled
them (a per-process memo of the newest requests), else only the new messages: the
payload is whole either way.

Reasons recorded (``record.epoch["reason"]``): ``first request`` (no earlier assembly:
planned at the full budget), ``extends epoch``, ``re-planned: tail over high water (N > M
tokens)``, ``policy version changed (old → new)``, ``clock moved back (previous now → now)`` (the
request's ``now`` is earlier than the previous assembly's), ``lineage diverged``, ``tool
declarations changed``, ``tail outside the candidate window``, ``system blocks changed (system prompt, rules or
pinned constraints)``, ``history compacted``, ``an earlier record became visible``
(a promotion), ``an exchange spans the junction``, ``the new records continue the previous request's last turn``.

For the Messages API (whose consecutive user turns are one message) the note is one more
text block of the previous request's last user message: every block sent before stays
as it was, so the prompt cache still reads the whole previous request.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from contextledger.handles import artifact_handle, memory_handle
from contextledger.providers.base import NeutralRequest, ToolSchema, WireMessage
from contextledger.records.enums import OmissionReason
from contextledger.records.parts import TextPart
from contextledger.store.counters import in_lineage

if TYPE_CHECKING:
    from contextledger.assembly.candidates import CandidateSet
    from contextledger.assembly.evaluate import Evaluator
    from contextledger.assembly.request import Boundary
    from contextledger.assembly.units import Unit
    from contextledger.policy.model import Policy
    from contextledger.records.models import ContextAssembly, ToolMemory
    from contextledger.store.sql import SqlStore

__all__ = ["EpochState", "Extension", "extension_messages", "find_state", "fixed_tokens", "head_of", "outdated_note", "system_sha", "tools_sha"]

SCAN = 8
"""Newest assemblies of the conversation looked at for one in the request's lineage."""

_MEMO_SIZE = 64
_MEMO: OrderedDict[str, tuple[WireMessage, ...]] = OrderedDict()
"""Assembly id → its neutral messages, for the newest assemblies of this process."""


def remember(assembly_id: str, messages: tuple[WireMessage, ...]) -> None:
    """Keep the neutral messages of a persisted assembly (per-process memo)."""
    _MEMO[assembly_id] = messages
    _MEMO.move_to_end(assembly_id)
    while len(_MEMO) > _MEMO_SIZE:
        _MEMO.popitem(last=False)


def remembered(assembly_id: str) -> tuple[WireMessage, ...] | None:
    """The neutral messages of ``assembly_id`` when this process assembled it."""
    return _MEMO.get(assembly_id)


@dataclass(frozen=True, kw_only=True)
class EpochState:
    """The previous assembly a request may extend, or why there is none.

    Attributes:
        previous: the newest assembly of the lineage (same viewer and provider), or
            ``None``.
        payload: its stored payload.
        reason: why the request re-plans when it cannot extend (``first request`` when
            there is no previous assembly at all).
    """

    previous: ContextAssembly | None
    payload: dict[str, Any] | None
    reason: str

    @property
    def extendable(self) -> bool:
        """Whether the request may try to extend :attr:`previous`."""
        return self.previous is not None and self.payload is not None and self.reason == ""

    @property
    def replan(self) -> bool:
        """Whether a plan is a re-plan (targets low water): an earlier assembly of the
        lineage exists (a lineage none of whose earlier assemblies lies on it — a new
        branch, a fork before the first request — starts at the full budget)."""
        return self.reason not in ("first request", "lineage diverged")


@dataclass(kw_only=True)
class Extension:
    """The new records of an extension, rendered (see :func:`extension_messages`)."""

    units: list[Unit] = field(default_factory=list)
    note: WireMessage | None = None
    announced: list[str] = field(default_factory=list)


def head_of(cands: CandidateSet) -> dict[str, Any] | None:
    """``{"message_id", "branch_id", "seq"}`` of the lineage head the request sees (its
    newest candidate message), ``None`` for an empty lineage."""
    if not cands.messages:
        return None
    m = max(cands.messages, key=lambda m: (m.seq, m.id))
    return {"message_id": m.id, "branch_id": m.branch_id, "seq": m.seq}


def tools_sha(tools: tuple[ToolSchema, ...]) -> str:
    """``sha256:<hex>`` of the tool declarations (name, description, parameters)."""
    sig = json.dumps([[t.name, t.description, t.parameters] for t in tools], sort_keys=True, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(sig.encode()).hexdigest()


def system_sha(system: tuple[str, ...]) -> str:
    """``sha256:<hex>`` of the system blocks as planned (before any budget cut)."""
    return "sha256:" + hashlib.sha256("\x1e".join(system).encode()).hexdigest()


def find_state(store: SqlStore, bound: Boundary, cands: CandidateSet, policy: Policy, *, replaces: str | None) -> EpochState:
    """The epoch state of the request (rules in the module docstring): among the newest
    :data:`SCAN` assemblies of the conversation for the viewer, the newest of the same
    provider whose head lies in the request's lineage (at or before its head)."""
    viewer = bound.viewer.id if bound.viewer else None
    head = head_of(cands)
    earlier = [a for a in store.recent_assemblies(bound.scope, bound.conversation_id, viewer, limit=SCAN) if a.id != replaces and a.provider == bound.provider]
    if not earlier:
        return EpochState(previous=None, payload=None, reason="first request")
    for a in earlier:
        h = (a.epoch or {}).get("head")
        if not h or head is None or h["seq"] > head["seq"] or not in_lineage(cands.segments, h["branch_id"], h["seq"]):
            continue
        if a.policy_version != policy.version:
            return EpochState(previous=a, payload=None, reason=f"policy version changed ({a.policy_version} → {policy.version})")
        if bound.now < a.now:  # ages and freshness are measured from ``now``: an earlier clock is another plan
            return EpochState(previous=a, payload=None, reason=f"clock moved back ({_iso(a.now)} → {_iso(bound.now)})")
        grown = budget_grew(a, bound.budget, policy)
        if grown:
            return EpochState(previous=a, payload=None, reason=grown)
        _, payload = store.get_assembly(bound.scope, a.id)
        return EpochState(previous=a, payload=payload, reason="" if payload else "no usable previous state")
    return EpochState(previous=None, payload=None, reason="lineage diverged")


def _iso(t: Any) -> str:
    return str(t.isoformat().replace("+00:00", "Z"))


def budget_grew(previous: ContextAssembly, budget: int, policy: Policy) -> str:
    """The re-plan reason when the budget grew past what the epoch was planned for while
    the previous request left records out for lack of room (the high-water mark at the
    new budget exceeds the larger of the previous request's budget and the budget the
    epoch was planned at, ``epoch["planned_budget_tokens"]``), else ``""``.  Small
    per-request differences — the client context a proxy reserves, the continued turn's
    thinking that shrinks the budget inside a tool loop and leaves it at the next user
    turn — never re-plan: the epoch gets back the room it was planned with."""
    squeezed = any(previous.omitted.get(r, 0) for r in (OmissionReason.BUDGET.value, OmissionReason.REPLACED_BY_MEMORY.value, OmissionReason.COMPACTED.value))
    planned = int((previous.epoch or {}).get("planned_budget_tokens") or 0)
    baseline = max(previous.budget_tokens, planned)
    if squeezed and budget * policy.epoch.high_water > baseline:
        return f"re-planned: budget grew ({baseline:,} → {budget:,} tokens)"
    return ""


def messages_key(payload: dict[str, Any]) -> str:
    """The payload key that holds the conversation: ``input`` (Responses) or ``messages``."""
    return "input" if "input" in payload else "messages"


def fixed_tokens(provider: str, payload: dict[str, Any]) -> int:
    """Tokens of what every request of an epoch sends whatever its history: the payload
    without its conversation (Chat Completions: its leading system message kept)."""
    from contextledger.providers.registry import count_payload_tokens

    key = messages_key(payload)
    lead = [m for m in payload.get(key, [])[:1] if isinstance(m, dict) and m.get("role") in ("system", "developer")]
    return int(count_payload_tokens(provider, {**payload, key: lead}))


def split_new_units(units: list[Unit], head_seq: int) -> list[Unit] | str:
    """The units after the head (system and runtime units left out: the system is frozen
    inside an epoch), or the reason they cannot extend the previous request."""
    out: list[Unit] = []
    for u in units:
        seqs = [m.seq for m in u.messages]
        if max(seqs) <= head_seq:
            continue
        if min(seqs) <= head_seq:
            return "an exchange spans the junction"
        if u.kind == "cut":
            return "tail outside the candidate window"
        if u.kind in ("system", "runtime"):
            continue
        out.append(u)
    return out


_LABEL = re.compile(r"\b([ma][1-9][0-9]*)\b")


def outdated_note(memories: list[ToolMemory], ev: Evaluator, payload: dict[str, Any], refs: tuple[str, ...], announced: set[str]) -> tuple[WireMessage | None, list[str]]:
    """The note announcing records sent earlier in the epoch that are now stale or
    superseded, and the memory ids it announces.  A record is cited by its handle when
    the payload labels it (``m12`` / ``a12``), else by the call id the payload sends;
    one it cannot cite is not announced.  ``refs``: the ids the payload was built from."""
    from contextledger.assembly.pieces import outdated
    from contextledger.assembly.render import DATA_BANNER

    text = json.dumps(payload.get(messages_key(payload), []), ensure_ascii=False)
    labels = set(_LABEL.findall(text))
    sent = set(refs)
    lines: list[str] = []
    done: list[str] = []
    for m in sorted(memories, key=lambda m: (m.seq, m.id)):
        if m.id in announced or m.id in done or not (m.id in sent or any(a in sent for a in m.source_artifact_ids)):
            continue
        if not outdated(m, ev):
            continue
        cite = next((h for h in (memory_handle(m), artifact_handle(m)) if h in labels), None)
        if cite is None:
            cite = m.call_id if m.call_id and f'"{m.call_id}"' in text else None
        if cite is None:
            continue
        what = "superseded by a newer observation" if m.superseded_by is not None else "stale: what it shows changed since"
        lines.append(f"- {cite}: {what}")
        done.append(m.id)
    if not lines:
        return None, []
    body = DATA_BANNER + "\nrecords shown earlier in this context that are no longer current:\n" + "\n".join(lines)
    return WireMessage(role="user", parts=(TextPart(text=body),), ref=done[0]), done


def extension_messages(new: list[WireMessage], note: WireMessage | None) -> list[WireMessage]:
    """The new neutral messages with the note at the junction: before the new records,
    so nothing already sent changes and nothing follows the newest tool output (for the
    Messages API, whose consecutive user turns merge, the note joins the previous
    request's last user message as one more block after everything it held:
    :func:`~contextledger.assembly.epoch_extend.extend`)."""
    return [note, *new] if note is not None else list(new)


def neutral_request(system: tuple[str, ...], prefix: tuple[WireMessage, ...] | None, new: list[WireMessage], tools: tuple[ToolSchema, ...]) -> NeutralRequest:
    """The neutral request of an extension (see the module docstring)."""
    return NeutralRequest(system=system, messages=(*(prefix or ()), *new), tools=tools)
