"""Stage 0: the request and its generation boundary (DESIGN.md pipeline step 1).

An :class:`AssemblyRequest` is what the caller asks for; :func:`check_request` refuses what
cannot be assembled before anything is read; :func:`fix_boundary` fixes, from the
candidate set, what the rest of the pipeline works under — conversation, branch,
participant (the *viewer*), runtime kind, provider, budget and ``now`` — as an immutable
:class:`Boundary` (seed 000 §5.6: same graph, policy version and ``now`` ⇒ same
selection).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from contextledger.errors import InputError, NotFoundError
from contextledger.records.enums import RuntimeKind
from contextledger.records.models import Participant
from contextledger.store.base import Scope

if TYPE_CHECKING:
    from contextledger.assembly.candidates import CandidateSet
    from contextledger.policy.model import Policy

__all__ = ["AUTO_EXACT_MAX_MESSAGES", "AssemblyRequest", "Boundary", "candidate_limits", "check_request", "fix_boundary"]

AUTO_EXACT_MAX_MESSAGES = 1000
"""``replay="auto"`` counts the replay exactly up to this many lineage messages."""


@dataclass(frozen=True, kw_only=True)
class AssemblyRequest:
    """One call of :meth:`~contextledger.assembly.assembler.Assembler.assemble` (see its
    arguments)."""

    scope: Scope
    conversation_id: str
    branch_id: str | None = None
    participant_id: str | None = None
    provider: str = "openai-chat"
    budget_tokens: int | None = None
    now: datetime | None = None
    trace: bool = False
    runtime_kind: RuntimeKind | None = None
    persist: bool = True
    replay: str = "auto"
    replaces: str | None = None
    defer: bool = False


@dataclass(frozen=True, kw_only=True)
class Boundary:
    """What one request is assembled under (fixed before any selection).

    Attributes:
        branch_id: the active branch (the conversation's when none was asked for).
        viewer: the participant the context is for (``None``: the shared view).
        runtime_kind: recorded on the assembly.
        budget: tokens (payload overhead included).
        now: the evaluation time (freshness, ages).
        replay: ``"exact"`` or ``"estimate"`` (how the naive replay is measured).
    """

    scope: Scope
    conversation_id: str
    branch_id: str
    viewer: Participant | None
    runtime_kind: RuntimeKind
    provider: str
    budget: int
    now: datetime
    replay: str


def check_request(req: AssemblyRequest, policy: Policy, providers: tuple[str, ...]) -> int:
    """The request's budget (the policy's default when none is given) after checking the
    request.

    Raises:
        InputError: unknown replay mode or provider, non-positive budget, naive ``now``.
    """
    if req.replay not in ("auto", "exact", "estimate"):
        raise InputError(f"unknown replay mode {req.replay!r}; expected auto, exact or estimate")
    if req.provider not in providers:
        raise InputError(f"unknown provider {req.provider!r}; expected one of {', '.join(providers)}")
    budget = req.budget_tokens if req.budget_tokens is not None else policy.budget.default_budget_tokens
    if budget <= 0:
        raise InputError(f"budget must be a positive number of tokens, got {budget}")
    if req.now is not None and req.now.tzinfo is None:
        raise InputError("now must be timezone-aware (e.g. 2026-01-01T00:00:00Z)")
    return budget


def candidate_limits(policy: Policy, budget: int) -> tuple[int, int, int]:
    """``(recent_window, max_candidates, recovery_window)`` of the candidate set of a
    request of ``budget`` tokens: the newest ``budget // 50`` messages (at least 40, at
    most ``candidates.recent_window``) — a shaped exchange costs ~100 tokens for its two
    messages, so about that many recent messages could be shown at all; older history
    reaches the request as evidence lines (newest memories, term recall, recovery) —
    the newest ``budget // 25`` memories (at least 50, at most
    ``candidates.max_candidates``: more lines cannot fit), and the newest
    ``max(16, 4 × recovery.max_failed_kept)`` failed calls."""
    return (
        min(policy.candidates.recent_window, max(40, budget // 50)),
        min(policy.candidates.max_candidates, max(50, budget // 25)),
        max(16, 4 * policy.recovery.max_failed_kept),
    )


def fix_boundary(req: AssemblyRequest, budget: int, cands: CandidateSet) -> Boundary:
    """The :class:`Boundary` of ``req`` once its candidates are read.

    Raises:
        NotFoundError: ``req.participant_id`` names no participant of the conversation.
    """
    viewer = _viewer(cands, req.participant_id)
    replay = req.replay
    if replay == "auto":
        replay = "exact" if cands.lineage_message_count <= AUTO_EXACT_MAX_MESSAGES else "estimate"
    return Boundary(
        scope=req.scope,
        conversation_id=req.conversation_id,
        branch_id=cands.branch_id,
        viewer=viewer,
        runtime_kind=req.runtime_kind or (viewer.runtime_kind if viewer else RuntimeKind.CHAT),
        provider=req.provider,
        budget=budget,
        now=req.now if req.now is not None else _default_now(cands),
        replay=replay,
    )


def _viewer(cands: CandidateSet, participant_id: str | None) -> Participant | None:
    """The participant to assemble for.  Default: the conversation's only root
    participant (the main agent, or the child of a subagent-only transcript); with
    several root participants (multi-model, debate), the shared view (``None``)."""
    if participant_id is None:
        roots = [p for p in cands.participants if p.parent_participant_id is None]
        return roots[0] if len(roots) == 1 else None
    for p in cands.participants:
        if p.id == participant_id or p.name == participant_id:
            return p
    raise NotFoundError("participant", participant_id)


def _default_now(cands: CandidateSet) -> datetime:
    """``now`` when the caller gives none: for an imported conversation, the time of
    its newest record (the moment its next request would have been made — and
    deterministic); for a live one, the wall clock."""
    if cands.conversation.source.startswith("import") and cands.messages:
        return max(m.created_at for m in cands.messages)
    return datetime.now(UTC)
