"""Artifact lookup route (seed 001 §4.5 "Artifact Lookup": large logs, large files, web
results): the records a query names exactly.

* a record id (``mem_…``, ``msg_…``, ``art_…``: an artifact stands for the memory derived
  from it) — by primary key;
* a ``sha256:`` digest or a bare hex prefix of at least 12 characters — artifacts of the
  conversation whose digest starts with it (``ix_tool_artifacts_sha256``), then their
  memories;
* a file path (``query.paths``, and path-like words of the query) — the memories whose
  subject is that file (``file:<path>``; ``ix_tool_memories_subject``), newest first.

Every read is by index, bounded by the number of names in the query (at most 16)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import sqlalchemy as sa

from contextledger.retrieval.model import RetrievalQuery, RouteHit
from contextledger.store import schema as S

if TYPE_CHECKING:
    from contextledger.retrieval.routes import RouteContext

__all__ = ["LookupRoute", "named_paths"]

_ID = re.compile(r"\b(mem|msg|art)_[0-9A-Z]{26}\b")
_SHA = re.compile(r"\b(?:sha256:)?([0-9a-f]{12,64})\b")
_PATH = re.compile(r"(?<![\w@./-])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+\.\w+|\b[\w-]+\.(?:py|ts|tsx|js|jsx|go|rs|java|rb|md|toml|yaml|yml|json|cfg|ini|txt|sh|c|h|cpp|sql)\b")
_MAX_NAMES = 16
_PER_PATH = 4


def named_paths(text: str) -> list[str]:
    """File paths written in ``text`` (``src/app/x.py``, ``./conf.yaml``, ``README.md``)."""
    return list(dict.fromkeys(_PATH.findall(text)))[:_MAX_NAMES]


class LookupRoute:
    """See module docstring; scores: 3 for an id, 2 for a digest, 1 for a path."""

    name = "artifact"

    def run(self, ctx: RouteContext, query: RetrievalQuery, limit: int) -> list[RouteHit]:
        """Records named by the query, in the order above."""
        text = f"{query.text}\n{query.context}"
        found: dict[tuple[str, str], float] = {}
        ids = list(dict.fromkeys(m.group(0) for m in _ID.finditer(text)))[:_MAX_NAMES]
        art_ids = [i for i in ids if i.startswith("art_")]
        for m in ctx.store.memories(ctx.scope, ctx.conversation_id, ids=[i for i in ids if i.startswith("mem_")], conn=ctx.conn) if ids else []:
            if ctx.in_lineage(m.branch_id, m.seq):
                found.setdefault(("memory", m.id), 3.0)
        for msg in ctx.reads.messages_by_id(ctx.segments, [i for i in ids if i.startswith("msg_")]) if ids else []:
            found.setdefault(("message", msg.id), 3.0)
        digests = list(dict.fromkeys(m.group(1) for m in _SHA.finditer(text)))[:_MAX_NAMES]
        if digests:
            art_ids += self._by_digest(ctx, digests)
        if art_ids:
            for m in ctx.store.memories(ctx.scope, ctx.conversation_id, artifact_ids=art_ids, conn=ctx.conn):
                if ctx.in_lineage(m.branch_id, m.seq):
                    found.setdefault(("memory", m.id), 3.0 if m.source_artifact_ids[0] in ids else 2.0)
        paths = list(dict.fromkeys([*query.paths, *named_paths(text)]))[:_MAX_NAMES]
        if paths:
            mems = ctx.store.memories(ctx.scope, ctx.conversation_id, subject_keys=[f"file:{p}" for p in paths], conn=ctx.conn)
            for m in sorted((m for m in mems if ctx.in_lineage(m.branch_id, m.seq)), key=lambda m: -m.seq)[: _PER_PATH * len(paths)]:
                found.setdefault(("memory", m.id), 1.0)
        hits = [RouteHit(record_kind=k, record_id=r, score=s) for (k, r), s in found.items() if ctx.wanted(k, r)]
        return sorted(hits, key=lambda h: -h.score)[:limit]

    @staticmethod
    def _by_digest(ctx: RouteContext, digests: list[str]) -> list[str]:
        t = S.tool_artifacts
        out: list[str] = []
        for d in digests:
            key = f"sha256:{d}"
            stmt = (
                sa.select(t.c.id, t.c.branch_id, t.c.seq)
                .where(t.c.tenant_id == ctx.scope.tenant_id, t.c.conversation_id == ctx.conversation_id, t.c.sha256 >= key, t.c.sha256 < key + "g")
                .limit(_PER_PATH)
            )
            out += [r.id for r in ctx.conn.execute(stmt) if ctx.in_lineage(r.branch_id, int(r.seq))]
        return out
