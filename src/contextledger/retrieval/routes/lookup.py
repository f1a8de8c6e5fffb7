"""Artifact lookup route (seed 001 §4.5 "Artifact Lookup": large logs, large files, web
results): the records a query names exactly.

* a record id (``mem_…``, ``msg_…``, ``art_…``: an artifact stands for the memory derived
  from it) — by primary key;
* a handle a payload shows (``m12``, ``a12``: :mod:`contextledger.handles`; lower case,
  a word of its own) — the lineage memory recorded at that ``seq``
  (``ix_tool_memories_lineage``);
* a tool call id as the provider gave it (``toolu_01…``, ``call_…``: any word of the
  request text holding a digit, 4 to 128 characters) — the memory of that call's
  artifact (``ux_tool_artifacts_call_id``), else the assistant message that made the
  call (``ux_tool_calls_call_id``);
* a ``sha256:`` digest or a bare hex prefix of at least 12 characters — artifacts of the
  conversation whose digest starts with it (``ix_tool_artifacts_sha256``), then their
  memories;
* a file path (``query.paths``, and path-like words of the query) — the memories whose
  subject is that file (``file:<path>``; ``ix_tool_memories_subject``), newest first.

A record found by id, handle, call id or digest is *named* by the query
(:attr:`RouteHit.exact <contextledger.retrieval.model.RouteHit>`): fusion ranks it
first (:func:`~contextledger.retrieval.fusion.lead`).  Every read is by index, bounded
by the number of names in the query (at most 16 of each kind)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from contextledger.handles import HANDLE_PATTERN, parse_handle
from contextledger.retrieval.model import RetrievalQuery, RouteHit
from contextledger.retrieval.statements import artifacts_by_digest, memories_by_subject

if TYPE_CHECKING:
    from contextledger.retrieval.routes import RouteContext

__all__ = ["LookupRoute", "call_id_words", "named_handles", "named_paths"]

_ID = re.compile(r"\b(mem|msg|art)_[0-9A-Z]{26}\b")
_SHA = re.compile(r"\b(?:sha256:)?([0-9a-f]{12,64})\b")
_PATH = re.compile(r"(?<![\w@./-])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+\.\w+|\b[\w-]+\.(?:py|ts|tsx|js|jsx|go|rs|java|rb|md|toml|yaml|yml|json|cfg|ini|txt|sh|c|h|cpp|sql)\b")
_HANDLE_WORD = re.compile(rf"(?<![\w.:/-])({HANDLE_PATTERN})(?![\w.:/-])")
_WORD = re.compile(r"[A-Za-z0-9][\w.:+=-]*\w")
_CALL_ID_CHARS = (4, 128)
_MAX_NAMES = 16
_PER_PATH = 4


def named_handles(text: str) -> list[int]:
    """The ``seq`` of each handle (``m12``, ``a12``) written as a word in ``text``, in
    order, at most 16 (a memory and its artifact share the ``seq``)."""
    seqs = [h.seq for m in _HANDLE_WORD.finditer(text) if (h := parse_handle(m.group(1))) is not None]
    return list(dict.fromkeys(seqs))[:_MAX_NAMES]


def call_id_words(text: str) -> list[str]:
    """The words of ``text`` that may be a provider's tool call id (a digit, 4 to 128
    characters of letters, digits and ``_ . : + = -``), in order, at most 16."""
    lo, hi = _CALL_ID_CHARS
    words = (m.group(0) for m in _WORD.finditer(text))
    return list(dict.fromkeys(w for w in words if lo <= len(w) <= hi and any(c.isdigit() for c in w)))[:_MAX_NAMES]


def named_paths(text: str) -> list[str]:
    """File paths written in ``text`` (``src/app/x.py``, ``./conf.yaml``, ``README.md``)."""
    return list(dict.fromkeys(_PATH.findall(text)))[:_MAX_NAMES]


class LookupRoute:
    """See module docstring; scores: 3 for an id, a handle or a call id, 2 for a digest,
    1 for a path."""

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
        seqs = named_handles(query.text)
        for m in ctx.reads.memories_at_seqs(ctx.segments, seqs) if seqs else []:
            found.setdefault(("memory", m.id), 3.0)
        for key in self._by_call_id(ctx, call_id_words(query.text)):
            found.setdefault(key, 3.0)
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
        hits = [RouteHit(record_kind=k, record_id=r, score=s, exact=s >= 2.0) for (k, r), s in found.items() if ctx.wanted(k, r)]
        return sorted(hits, key=lambda h: -h.score)[:limit]

    @staticmethod
    def _by_call_id(ctx: RouteContext, words: list[str]) -> list[tuple[str, str]]:
        """``(kind, id)`` of what the call ids among ``words`` name, in call order: the
        memory of the call's artifact, else the assistant message that made the call."""
        if not words:
            return []
        arts = [a for a in ctx.reads.artifacts_by_call_id(words) if ctx.in_lineage(a.branch_id, a.seq)]
        mems = {m.source_artifact_ids[0]: m for m in ctx.reads.memories_by_artifact(ctx.segments, [a.id for a in arts])} if arts else {}
        out = [("memory", mems[a.id].id) for a in arts if a.id in mems]
        answered = {a.call_id for a in arts if a.id in mems}
        calls = [c for c in ctx.reads.calls_by_call_id([w for w in words if w not in answered]) if ctx.in_lineage(c.branch_id, c.seq)] if len(answered) < len(words) else []
        if calls:
            msgs = {m.id for m in ctx.reads.messages_by_id(ctx.segments, sorted({c.message_id for c in calls}))}
            out += [("message", c.message_id) for c in calls if c.message_id in msgs]
        return list(dict.fromkeys(out))

    @staticmethod
    def _by_digest(ctx: RouteContext, digests: list[str]) -> list[str]:
        out: list[str] = []
        for d in digests:
            rows = artifacts_by_digest(ctx.conn, ctx.scope.tenant_id, ctx.conversation_id, f"sha256:{d}", _PER_PATH)
            out += [art_id for art_id, branch_id, seq in rows if ctx.in_lineage(branch_id, seq)]
        return out
