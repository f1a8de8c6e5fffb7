"""Recent-tail route: the newest user / assistant messages and memories of the lineage,
newest first (seed 001 §4.5 "Recent Tail": the current conversation, the current tool
results).  Two index ranges, each ``LIMIT limit``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextledger.records.enums import MessageKind, Role
from contextledger.retrieval.model import RetrievalQuery, RouteHit

if TYPE_CHECKING:
    from contextledger.retrieval.routes import RouteContext

__all__ = ["RecentRoute"]


class RecentRoute:
    """See module docstring; the score is ``1 / position`` in recency."""

    name = "recent"

    def run(self, ctx: RouteContext, query: RetrievalQuery, limit: int) -> list[RouteHit]:
        """The newest records, newest first."""
        msgs = ctx.reads.newest_messages(ctx.segments, limit, MessageKind.CHAT.value)
        mems = ctx.reads.newest_memories(ctx.segments, limit)
        rows: list[tuple[int, str, str]] = [(m.seq, "message", m.id) for m in msgs if m.role in (Role.USER, Role.ASSISTANT)]
        rows += [(m.seq, "memory", m.id) for m in mems]
        rows.sort(key=lambda r: (-r[0], r[1], r[2]))
        return [RouteHit(record_kind=kind, record_id=rid, score=1.0 / i) for i, (_, kind, rid) in enumerate(rows[:limit], start=1)]
