"""The boundary check of recalled records: retrieval never bypasses a boundary.

After fusion every hit is loaded through the tenant-scoped store and checked exactly as
the assembler checks a candidate (the evaluators of :mod:`contextledger.assembly.families`):
lineage (branch and fork point), visibility (audit-only), ownership (participant-private,
a child subagent's narrow input), promotion, privacy (classes never sent raw are never
recalled; with a ``provider``, also the classes not routed to it), then conflict &
supersession (a superseded memory is withheld — the graph route offers its successor)
and freshness (a stale memory is marked, or withheld when the policy omits stale
records).  Refused hits are counted by reason, never returned.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING, Any

from contextledger.assembly.families import (
    ConflictEvaluator,
    FreshnessEvaluator,
    OwnershipEvaluator,
    PrivacyEvaluator,
    PromotionEvaluator,
    VisibilityEvaluator,
)
from contextledger.policy.rules import Rule
from contextledger.records.enums import PrivacyClass, Visibility
from contextledger.records.models import Message, Participant, ToolArtifact, ToolMemory
from contextledger.retrieval.documents import message_text
from contextledger.retrieval.fusion import Fused, lead
from contextledger.retrieval.model import Hit

if TYPE_CHECKING:
    from collections.abc import Set

    from contextledger.policy.model import Policy
    from contextledger.retrieval.routes import RouteContext

__all__ = ["EXCERPT_CHARS", "ROUTE_WEIGHTS", "Boundary"]

ROUTE_WEIGHTS: dict[str, float] = {"memory": 0.5, "graph": 0.5, "recent": 0.5}
"""RRF weights (default 1): the memory route repeats the keyword route's lexical signal
on fewer fields, the graph and recent routes rank by structure and time alone — at full
weight, two lists agreeing on a record that shares one common word would outrank the
one route that understood the question."""

EXCERPT_CHARS = 400
"""Characters of a memory's raw result shown with its hit."""


class Boundary:
    """Checks hits for one request (see module docstring).

    Args:
        viewer: the participant the recall is for (``None``: the conversation's main
            view — nobody's private state).
        provider: the provider the recalled text may be sent to (``None``: only the
            classes no provider receives are refused).
    """

    def __init__(self, policy: Policy, *, now: datetime, viewer: Participant | None, provider: str | None) -> None:
        self.visibility = VisibilityEvaluator(viewer)
        self.ownership = OwnershipEvaluator(viewer)
        self.promotion = PromotionEvaluator(viewer)
        self.privacy = PrivacyEvaluator(policy, provider) if provider else None
        self.denied = set(policy.privacy.raw_denied)
        self.conflict = ConflictEvaluator(policy)
        self.freshness = FreshnessEvaluator(policy, now)
        self.withheld: Counter[str] = Counter()

    def _seen(self, visibility: Visibility, owner: str | None, shared: tuple[str, ...], privacy: PrivacyClass, promoted_to: Any = ()) -> str | None:
        v = self.visibility.check(visibility, owner) or self.ownership.check(visibility, owner, shared)
        if v is None:
            v = self.ownership.child_input(owner, tuple(promoted_to) if isinstance(promoted_to, list | tuple) else ())
        if v is not None:
            return v.reason.value
        if privacy.value in self.denied:
            return "privacy_restricted"
        if self.privacy is not None:
            p = self.privacy.check(privacy)
            if p is not None:
                return p.reason.value
        return None

    def memory(self, m: ToolMemory) -> tuple[str | None, bool]:
        """``(refusal reason or None, stale)`` for a memory."""
        reason = self._seen(m.visibility_scope, m.owner_participant_id, m.shared_with_participants, m.privacy_class)
        if reason is None and (p := self.promotion.check(m)) is not None:
            reason = p.reason.value
        if reason is None and (c := self.conflict.check(m)) is not None:
            reason = c.reason.value
        stale = reason is None and self.freshness.is_stale(m)
        if stale and self.freshness.check(m) is not None:
            reason = "stale"
        return reason, stale

    def message(self, m: Message) -> str | None:
        """Refusal reason for a message, or ``None``."""
        return self._seen(m.visibility, m.participant_id, (), m.privacy_class, m.metadata.get("promoted_to", ()))

    def excerpt(self, art: ToolArtifact | None) -> str:
        """The head of an artifact's inline raw result, when it may be shown raw."""
        if art is None or not art.inline_text or art.deleted_at is not None or self._seen(
            art.visibility_scope, art.owner_participant_id, art.shared_with_participants, art.privacy_class
        ) is not None:
            return ""
        return art.inline_text[:EXCERPT_CHARS]

    def admit(
        self, ctx: RouteContext, fused: list[Fused], limit: int, exact: Set[tuple[str, str]] = frozenset(), named: Set[tuple[str, str]] = frozenset(),
        leaders: Set[tuple[str, str]] | None = None,
    ) -> list[Hit]:
        """The best ``limit`` admitted hits of ``fused`` (refusals counted in
        :attr:`withheld`), highest :attr:`Hit.score <contextledger.retrieval.model.Hit.score>`
        first (:func:`~contextledger.retrieval.fusion.lead`, then the fused score; ties:
        more routes, kind, transcript order, id).  ``exact``: the keyword hits holding a
        query identifier whole; ``named``: the records the query names exactly; ``leaders``:
        the routes' confident best hits (:func:`~contextledger.retrieval.fusion.tops`;
        ``None``: every full-weight route's best hit)."""
        mem_ids = [rid for kind, rid, *_ in fused if kind == "memory"]
        msg_ids = [rid for kind, rid, *_ in fused if kind == "message"]
        mems = {m.id: m for m in ctx.store.memories(ctx.scope, ctx.conversation_id, ids=mem_ids, conn=ctx.conn)} if mem_ids else {}
        art_ids = sorted({m.source_artifact_ids[0] for m in mems.values() if m.source_artifact_ids})
        arts = {a.id: a for a in ctx.store.artifacts(ctx.scope, ctx.conversation_id, ids=art_ids, conn=ctx.conn)} if art_ids else {}
        msgs = {m.id: m for m in ctx.reads.messages_by_id(ctx.segments, msg_ids)} if msg_ids else {}
        rules = {str(b.get("id")): b for b in ctx.reads.rule_bodies()} if any(f[0] == "rule" for f in fused) else {}
        seq_of = {("memory", i): m.seq for i, m in mems.items()} | {("message", i): m.seq for i, m in msgs.items()} | {("rule", i): int(b.get("_seq") or 0) for i, b in rules.items()}
        # named records lead, then each full-weight route's best hit, then exact
        # identifier matches (fusion.lead); equal scores: transcript order (older
        # first), never the random id
        leads = {(f[0], f[1]): lead(f, ROUTE_WEIGHTS, exact, named, leaders) for f in fused}
        fused = sorted(fused, key=lambda f: (-leads[f[0], f[1]], -f[2], -len(f[3]), f[0], seq_of.get((f[0], f[1]), 0), f[1]))
        out: list[Hit] = []
        for kind, rid, score, ranks, scores in fused:
            if len(out) >= limit:
                break
            text, stale, excerpt = "", False, ""
            where: tuple[str | None, int | None] = (None, None)
            if kind == "memory":
                m = mems.get(rid)
                reason = "missing" if m is None else ("out_of_lineage" if not ctx.in_lineage(m.branch_id, m.seq) else None)
                if m is not None and reason is None:
                    reason, stale = self.memory(m)
                    text, where = m.summary, (m.branch_id, m.seq)
                    excerpt = self.excerpt(arts.get(m.source_artifact_ids[0])) if m.source_artifact_ids else ""
            elif kind == "message":
                msg = msgs.get(rid)
                reason = "out_of_lineage" if msg is None else self.message(msg)
                if msg is not None and reason is None:
                    text, where = message_text(msg) or "", (msg.branch_id, msg.seq)
            else:
                body = rules.get(rid)
                reason = "missing" if body is None else None
                text = str(Rule.model_validate({k: v for k, v in body.items() if not k.startswith("_")}).text) if body else ""
            if reason is not None:
                self.withheld[reason] += 1
                continue
            out.append(Hit(record_kind=kind, record_id=rid, fused_score=score, ranks=ranks, scores=scores, text=text, stale=stale, branch_id=where[0], seq=where[1], excerpt=excerpt, lead=leads[kind, rid]))
        return out
