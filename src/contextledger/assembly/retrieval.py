"""Stage 5: retrieval — older evidence brought back for this request, as evidence lines.

Seed 001 §9 *Retrieval Router* (recall from rules, keywords, vectors, tools, artifacts,
memories or the graph — not only vector search) and §4.5; seed 001 §3: what the current
request asks about turns cold memory hot.

Two halves:

* **recall**, during candidate collection (inside its read transaction): a
  :class:`RetrievalRouter` asks each of its :class:`RetrievalRoute` s for older lineage
  memories relevant to a :class:`RetrievalQuery` (the current user input) and merges
  their :class:`Recall` s; the best :data:`RETRIEVED` become candidates, with their
  exchanges.  The default router has one route, :class:`TermIndexRoute` (rare content
  terms of the input, ``memory_terms`` index).  Further routes plug in here.
* **evidence lines**, after shaping (:func:`evidence_lines`): every candidate memory not
  already shown by a unit in view becomes one line of the retrieval block, as its
  memory view allows (current, stale marker, restricted summary) — or nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from contextledger.assembly.pieces import Piece
from contextledger.assembly.render import memory_line
from contextledger.memory.terms import query_terms
from contextledger.records.enums import OmissionReason, Role
from contextledger.records.models import Message, ToolMemory
from contextledger.store.base import LineageSegment
from contextledger.store.counters import in_lineage

if TYPE_CHECKING:
    from contextledger.assembly.evaluate import Evaluator
    from contextledger.store.reads import LineageReads
    from contextledger.tokens import Tokenizer

__all__ = [
    "DEFAULT_ROUTER",
    "RETRIEVED",
    "Recall",
    "RetrievalQuery",
    "RetrievalRoute",
    "RetrievalRouter",
    "TermIndexRoute",
    "evidence_lines",
]

RETRIEVED = 12
"""Most older memories recalled into one candidate set."""


@dataclass(frozen=True, kw_only=True)
class RetrievalQuery:
    """What recall is asked for.

    Attributes:
        text: the current user input (the newest user chat message of the window).
        terms: its content terms (:func:`~contextledger.memory.terms.query_terms`), sorted.
        segments: the request's lineage; only memories on it may be recalled.
        exclude: ids of memories that are candidates already.
    """

    text: str
    terms: tuple[str, ...]
    segments: tuple[LineageSegment, ...]
    exclude: frozenset[str]


class Recall(NamedTuple):
    """One recalled memory: its id, the route's ``score`` (higher is more relevant,
    comparable within a route) and its ``seq`` (newer wins ties)."""

    memory_id: str
    score: float
    seq: int


class RetrievalRoute(Protocol):
    """A way of recalling older memories.  ``recall`` runs inside the collection's read
    transaction (``reads``), must be bounded whatever the history length, deterministic,
    and return only memories of ``query.segments`` not in ``query.exclude``."""

    name: str

    def recall(self, reads: LineageReads, query: RetrievalQuery) -> list[Recall]: ...


class TermIndexRoute:
    """Recall by content terms: the newest ``per_term`` index rows of each of the first
    ``max_terms`` query terms are read (one ``ix_memory_terms_term`` range per term); a
    memory scores the sum of its matched terms' rarity (``1 / rows found for the term``,
    so a rare id outweighs a common word)."""

    name = "terms"

    def __init__(self, *, per_term: int = 64, max_terms: int = 12) -> None:
        self.per_term = per_term
        self.max_terms = max_terms

    def recall(self, reads: LineageReads, query: RetrievalQuery) -> list[Recall]:
        """Scored memories of ``query`` (see the class docstring)."""
        terms = list(query.terms[: self.max_terms])
        if not terms:
            return []
        segments = list(query.segments)
        rows = [r for r in reads.term_matches(terms, self.per_term) if r[0] not in query.exclude and in_lineage(segments, r[2], r[3])]
        per_term: dict[str, int] = {}
        for _, term, _, _ in rows:
            per_term[term] = per_term.get(term, 0) + 1
        score: dict[str, float] = {}
        newest: dict[str, int] = {}
        for mem_id, term, _, seq in rows:
            score[mem_id] = score.get(mem_id, 0.0) + 1.0 / per_term[term]
            newest[mem_id] = seq
        return [Recall(k, score[k], newest[k]) for k in score]


class RetrievalRouter:
    """Asks every route and keeps the best ``limit`` memories: a memory's score is the sum
    over the routes that recalled it; ties go to the newer, then to the smaller id."""

    def __init__(self, routes: Sequence[RetrievalRoute], *, limit: int = RETRIEVED) -> None:
        self.routes = tuple(routes)
        self.limit = limit

    def query(self, window: list[Message], segments: Sequence[LineageSegment], have: set[str]) -> RetrievalQuery | None:
        """The query of a request whose newest messages are ``window``: its newest user
        chat message (``None`` when there is none, or it has no content terms)."""
        current = next((m for m in reversed(window) if m.role is Role.USER and m.kind.value == "chat"), None)
        if current is None:
            return None
        text = " ".join(getattr(p, "text", "") for p in current.parts)
        terms = tuple(sorted(query_terms(text)))
        if not terms:
            return None
        return RetrievalQuery(text=text, terms=terms, segments=tuple(segments), exclude=frozenset(have))

    def recall(self, reads: LineageReads, window: list[Message], segments: Sequence[LineageSegment], have: set[str]) -> list[ToolMemory]:
        """The recalled memories (bodies read by id), best first."""
        query = self.query(window, segments, have)
        if query is None:
            return []
        score: dict[str, float] = {}
        newest: dict[str, int] = {}
        for route in self.routes:
            for r in route.recall(reads, query):
                score[r.memory_id] = score.get(r.memory_id, 0.0) + r.score
                newest[r.memory_id] = max(newest.get(r.memory_id, r.seq), r.seq)
        best = sorted(score, key=lambda k: (-score[k], -newest[k], k))[: self.limit]
        return reads.memories_by_id(best) if best else []


DEFAULT_ROUTER = RetrievalRouter([TermIndexRoute()])
"""The router candidate collection uses unless given another."""


def evidence_lines(memories: list[ToolMemory], in_view: set[str], covered_to: int, ev: Evaluator, tok: Tokenizer) -> list[Piece]:
    """One evidence-line piece per candidate memory that no unit in view shows, in
    candidate order: skipped when already omitted, omitted as ``compacted`` when the
    compaction summarises it, else as its memory view allows (``None``: omitted, reason
    recorded by the view)."""
    lines: list[Piece] = []
    for mem in memories:
        if mem.id in in_view or ev.is_omitted(mem.id):
            continue
        if mem.seq <= covered_to:
            ev.omit_record(mem.id, "memory", OmissionReason.COMPACTED, "summarised by the compaction")
            continue
        view = ev.memory_view(mem)
        if view is None:
            continue
        text = memory_line(mem, view.text)
        lines.append(Piece(unit=None, messages=[], cost=tok.count(text) + 2, bucket="retrieval", shape=view.shape, order=(mem.seq, 0), memory_ids=(mem.id,), confidence=mem.confidence, stale=view.stale, memory=mem, line=text))
    return lines
