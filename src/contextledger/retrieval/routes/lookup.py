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

from contextledger.retrieval.model import RetrievalQuery, RouteHit
from contextledger.retrieval.statements import artifacts_by_digest, memories_by_subject

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
        mem_ids = [i for i in ids if i.startswith("mem_")]
        for m in ctx.reads.memories_by_id(mem_ids) if mem_ids else []:
            if ctx.in_lineage(m.branch_id, m.seq):
                found.setdefault(("memory", m.id), 3.0)
        for msg in ctx.reads.messages_by_id(ctx.segments, [i for i in ids if i.startswith("msg_")]) if ids else []:
            found.setdefault(("message", msg.id), 3.0)
        digests = list(dict.fromkeys(m.group(1) for m in _SHA.finditer(text)))[:_MAX_NAMES]
        if digests:
            art_ids += self._by_digest(ctx, digests)
        if art_ids:
            for m in ctx.reads.memories_by_artifact(ctx.segments, art_ids):
                found.setdefault(("memory", m.id), 3.0 if m.source_artifact_ids[0] in ids else 2.0)
        paths = list(dict.fromkeys([*query.paths, *named_paths(text)]))[:_MAX_NAMES]
        if paths:
            mems = memories_by_subject(ctx.conn, ctx.scope.tenant_id, ctx.conversation_id, ctx.segments, [f"file:{p}" for p in paths])
            for m in sorted(mems, key=lambda m: -m.seq)[: _PER_PATH * len(paths)]:
                found.setdefault(("memory", m.id), 1.0)
        hits = [RouteHit(record_kind=k, record_id=r, score=s) for (k, r), s in found.items() if ctx.wanted(k, r)]
        return sorted(hits, key=lambda h: -h.score)[:limit]

    @staticmethod
    def _by_digest(ctx: RouteContext, digests: list[str]) -> list[str]:
        out: list[str] = []
        for d in digests:
            rows = artifacts_by_digest(ctx.conn, ctx.scope.tenant_id, ctx.conversation_id, f"sha256:{d}", _PER_PATH)
            out += [art_id for art_id, branch_id, seq in rows if ctx.in_lineage(branch_id, seq)]
        return out
