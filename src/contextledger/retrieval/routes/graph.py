"""Graph route (seed 001 §4.5 "Graph Traversal"): one step from the best first-stage
hits along the runtime graph's links —

* supersession: a memory's successor (``superseded_by``) and what it ``supersedes``;
* conflicts: the memories it ``conflicts_with``;
* provenance: the other memories derived from the same artifact;
* file links: the newest memories about the same file (``subject_key``).

Starts from at most :data:`SEEDS` memories of ``ctx.seeds`` and returns neighbours in
seed order (score ``1 / seed position``; equal scores in the order found, not by id).
Three reads by id / subject / artifact, bounded by the seeds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextledger.retrieval.model import RetrievalQuery, RouteHit
from contextledger.retrieval.statements import memories_by_subject

if TYPE_CHECKING:
    from contextledger.retrieval.routes import RouteContext

__all__ = ["SEEDS", "GraphRoute"]

SEEDS = 6
"""First-stage hits the traversal starts from."""

_PER_SUBJECT = 2


class GraphRoute:
    """See module docstring."""

    name = "graph"

    def run(self, ctx: RouteContext, query: RetrievalQuery, limit: int) -> list[RouteHit]:
        """Neighbours of the seeds, by seed order."""
        seed_ids = [rid for kind, rid in ctx.seeds if kind == "memory"][:SEEDS]
        if not seed_ids:
            return []
        seeds = {m.id: m for m in ctx.reads.memories_by_id(seed_ids)}
        links: dict[str, float] = {}
        subjects: dict[str, float] = {}
        arts: dict[str, float] = {}
        for pos, sid in enumerate(seed_ids, start=1):
            m = seeds.get(sid)
            if m is None:
                continue
            for other in (m.superseded_by, *m.supersedes, *m.conflicts_with):
                if other:
                    links.setdefault(other, 1.0 / pos)
            if m.subject_key:
                subjects.setdefault(m.subject_key, 1.0 / pos)
            for a in m.source_artifact_ids:
                arts.setdefault(a, 1.0 / pos)
        found = dict(links)
        if subjects:
            near = memories_by_subject(ctx.conn, ctx.scope.tenant_id, ctx.conversation_id, ctx.segments, sorted(subjects))
            per: dict[str, int] = {}
            for n in sorted(near, key=lambda n: -n.seq):
                key = n.subject_key or ""
                if per.get(key, 0) < _PER_SUBJECT:
                    per[key] = per.get(key, 0) + 1
                    found.setdefault(n.id, subjects[key])
        if arts:
            for n in ctx.reads.memories_by_artifact(ctx.segments, sorted(arts)):
                found.setdefault(n.id, arts.get(n.source_artifact_ids[0], 0.0) if n.source_artifact_ids else 0.0)
        hits = [RouteHit(record_kind="memory", record_id=rid, score=s) for rid, s in found.items() if rid not in seeds and ctx.wanted("memory", rid)]
        # equal scores keep the order found (links, same file newest first, same artifact
        # in transcript order), never the random id: a re-import ranks the same
        return sorted(hits, key=lambda h: -h.score)[:limit]
