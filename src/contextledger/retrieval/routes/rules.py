"""Rules route: the conversation's project rules (``AGENTS.md``, ``CLAUDE.md`` … loaded
by :func:`contextledger.policy.rules.load_rule_files`, and pinned user constraints) that
concern the request: a path-scoped rule whose globs match a path of the query ranks
first, then rules sharing query tokens (score: shared tokens).  Reads the conversation's
rule rows (few by nature)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextledger.policy.rules import Rule
from contextledger.retrieval.model import RetrievalQuery, RouteHit
from contextledger.retrieval.text import query_tokens, tokens

if TYPE_CHECKING:
    from contextledger.retrieval.routes import RouteContext

__all__ = ["RulesRoute"]


class RulesRoute:
    """See module docstring."""

    name = "rules"

    def run(self, ctx: RouteContext, query: RetrievalQuery, limit: int) -> list[RouteHit]:
        """Rules concerning the query, best first."""
        wanted = set(query_tokens(f"{query.text}\n{query.context}"))
        scored: list[tuple[float, str]] = []
        for body in ctx.reads.rule_bodies():
            b = body.get("_branch_id")
            if b is not None and not ctx.in_lineage(str(b), int(body.get("_seq", 0))):
                continue
            try:
                rule = Rule.model_validate({k: v for k, v in body.items() if not k.startswith("_")})
            except ValueError:
                continue
            score = float(len(wanted.intersection(tokens(rule.text))))
            if rule.scope_paths and query.paths and rule.applies_to(query.paths, ()):
                score += 100.0
            if score > 0:
                scored.append((score, rule.id))
        scored.sort(key=lambda s: (-s[0], s[1]))
        return [RouteHit(record_kind="rule", record_id=rid, score=s) for s, rid in scored[:limit]]
