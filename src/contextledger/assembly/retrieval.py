"""Stage 5: retrieval — older evidence brought back for this request, as evidence lines.

Seed 001 §9 *Retrieval Router* (recall from rules, keywords, vectors, tools, artifacts,
memories or the graph — not only vector search) and §4.5; seed 001 §3: what the current
request asks about turns cold memory hot.

Two halves:

* **recall**, during candidate collection (inside its read transaction): the
  :class:`RetrievalRouter` builds the request's query (:func:`~contextledger.retrieval.request_query`:
  the current user input, the task statement as task state, the unresolved calls), runs
  the retrieval router's routes (:mod:`contextledger.retrieval`: ``keyword``,
  ``semantic``, ``artifact``, ``memory``, then ``graph`` from the fused hits; the
  assembler keeps its own recent window and rules) over the whole lineage's memories and
  chat messages (user and assistant text: a conversation without tool calls keeps its
  facts there) that are not candidates already, fuses them by reciprocal rank (k = 60)
  and keeps the best :data:`RETRIEVED`; memories become candidates with their
  exchanges, messages as themselves (text-only messages: no tool call left unpaired),
  and the usual policy
  evaluation (visibility, ownership, privacy, branch, freshness, supersession) decides
  what of them is sent — retrieval never bypasses a boundary.  What the router did (the
  routes used, the routes unavailable and why, and per recalled memory its routes, ranks
  and fused score) is the :attr:`Recalled.report` recorded on the ContextAssembly
  (``retrieval``).
* **evidence lines**, after shaping (:func:`evidence_lines`): every candidate memory not
  already shown by a unit in view becomes one line of the retrieval block, as its
  memory view allows (current, stale marker, restricted summary) — or nothing; every
  recalled message the viewer may see becomes one line too (:func:`message_lines`:
  its role, turn and text), so an old turn is sent in the retrieval block, never
  re-inserted into the history.

Work per request is bounded by the routes' own limits (at most
:data:`~contextledger.retrieval.router.PER_ROUTE` hits each, index ranges with a
``LIMIT``, one matrix–vector product over the conversation's cached vectors) and
:data:`RETRIEVED`, whatever the history length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from contextledger.assembly.pieces import Piece
from contextledger.assembly.render import memory_line
from contextledger.assembly.task import states_task
from contextledger.records.enums import MessageKind, OmissionReason, Role, Shape, ToolCallStatus
from contextledger.records.models import Message, ToolCall, ToolMemory
from contextledger.retrieval.model import RetrievalQuery
from contextledger.retrieval.query import request_query
from contextledger.retrieval.routes import Route, RouteContext
from contextledger.store.base import LineageSegment
from contextledger.textcut import cut_prefix

if TYPE_CHECKING:
    from contextledger.assembly.evaluate import Evaluator
    from contextledger.retrieval.embed import Encoder
    from contextledger.store.reads import LineageReads
    from contextledger.store.sql import SqlStore
    from contextledger.tokens import Tokenizer

__all__ = [
    "ASSEMBLY_ROUTES",
    "DEFAULT_ROUTER",
    "RETRIEVED",
    "TASK_STATE_CHARS",
    "Recalled",
    "RetrievalRouter",
    "evidence_lines",
    "message_lines",
]

MESSAGE_LINE_CHARS = 600
"""Characters of a recalled message's text on its evidence line."""

RETRIEVED = 12
"""Most older memories recalled into one candidate set."""

ASSEMBLY_ROUTES: tuple[str, ...] = ("keyword", "semantic", "artifact", "memory", "graph")
"""The routes the assembler asks (the recent tail and the rules are its own stages)."""

TASK_STATE_CHARS = 300
"""Characters of the task statement taken into the query as task state."""

UNRESOLVED_IN_QUERY = 8
"""Most unresolved calls (pending, awaiting approval; the newest) in the query."""

_DEFAULT: Any = object()
_UNRESOLVED = (ToolCallStatus.PENDING, ToolCallStatus.AWAITING_APPROVAL)


@dataclass(frozen=True, kw_only=True)
class Recalled:
    """What the router brought back for one request.

    Attributes:
        memories: the recalled memories that were not candidates yet, best first
            (bodies read by id); they join the candidates with their exchanges.
        messages: the recalled chat messages older than the candidate messages, text
            only, best first; they join the candidates as they are.
        relevance: memory id → points for every ranked memory, new or already a
            candidate (``n`` for the best of ``n`` ranked, 1 for the last): the budget
            evicts the evidence lines of recalled memories after the others of their
            freshness class (:func:`~contextledger.assembly.drop_order.eviction_key`).
        report: the explanation recorded on the ContextAssembly (``None``: no query —
            no user input, task state or unresolved call): ``{"query": {"message_id",
            "task_message_id", "unresolved_call_ids"}, "rrf_k", "routes_used",
            "degraded": {route: why}, "routes": [{"name", "hits"}],
            "hits": [{"record_id", "record_kind", "routes", "ranks", "fused_score", "candidate"}]}``
            (``candidate``: the memory was a candidate already; the record adds
            ``sent``: it reached the payload) — ids only, never text,
            and no timing (the same request gives the same record).
        duration_ms: the routes' time (recorded as ``timings_ms["retrieval"]``).
    """

    memories: list[ToolMemory]
    relevance: dict[str, int]
    report: dict[str, Any] | None
    duration_ms: float = 0.0
    messages: list[Message] = field(default_factory=list)


class RetrievalRouter:
    """The assembler's retrieval stage over the retrieval router (module docstring).

    Args:
        routes: route names of :data:`~contextledger.retrieval.router.ALL_ROUTES` and / or
            :class:`~contextledger.retrieval.routes.Route` objects (``()``: no recall).
        limit: most memories recalled.
        encoder: the embedding model of the semantic route when the query's user
            message has no stored vector (default: the process-wide one, ``None`` when
            the ``retrieval`` extra is missing or embeddings are off — the semantic
            route then reports itself unavailable and the others recall).
    """

    def __init__(self, routes: Sequence[str | Route] = ASSEMBLY_ROUTES, *, limit: int = RETRIEVED, encoder: Encoder | None = _DEFAULT) -> None:
        self.routes = tuple(routes)
        self.limit = limit
        self._encoder = encoder

    @property
    def route_names(self) -> tuple[str, ...]:
        """The names of the routes asked."""
        return tuple(r if isinstance(r, str) else r.name for r in self.routes)

    def encoder(self) -> Encoder | None:
        """The encoder given, else the process-wide one (or ``None``)."""
        if self._encoder is not _DEFAULT:
            return self._encoder
        from contextledger.retrieval.embed import get_encoder

        return get_encoder()

    def query(self, window: Sequence[Message], head: Sequence[Message], calls: Sequence[ToolCall]) -> tuple[RetrievalQuery, dict[str, Any]] | None:
        """The query of a request whose newest messages are ``window`` (``head``: the
        older messages read, with the task statement; ``calls``: the candidate calls)
        and its id-only description; ``None`` when there is nothing to ask."""
        # the user's own words (task.states_task): an injected preamble is neither the
        # task nor the request; the request is in the head when a tool loop outgrew the window
        users = [m for m in sorted([*head, *window], key=lambda m: m.seq) if m.role is Role.USER and m.kind is MessageKind.CHAT and states_task(m)]
        current, task = (users[-1], users[0]) if users else (None, None)
        task_text = ""
        if task is not None and current is not None and task.id != current.id:
            task_text = cut_prefix(" ".join(p.text for p in task.parts if p.kind == "text" and p.text), TASK_STATE_CHARS)
        unresolved = sorted((c for c in calls if c.status in _UNRESOLVED), key=lambda c: (c.seq, c.call_index))[-UNRESOLVED_IN_QUERY:]
        q = request_query(current, task_state=task_text, unresolved=unresolved)
        if not (q.text.strip() or q.context.strip()):
            return None
        described = {
            "message_id": current.id if current is not None and q.text else None,
            "task_message_id": task.id if task_text and task is not None else None,
            "unresolved_call_ids": [c.call_id for c in unresolved],
        }
        return q, described

    def recall(self, store: SqlStore, reads: LineageReads, segments: Sequence[LineageSegment], window: Sequence[Message], head: Sequence[Message], calls: Sequence[ToolCall], have: set[str]) -> Recalled:
        """Recall older memories and messages for the request (module docstring), in
        ``reads``'s read transaction; ``have``: ids of the memories that are candidates
        already (``window`` and ``head`` messages are candidates: no route returns them).
        The fused hits are ranked down to ``limit`` records that are not candidates (at
        most ``2 × limit`` ranked in all)."""
        asked = self.query(window, head, calls) if self.routes else None
        if asked is None:
            return Recalled(memories=[], relevance={}, report=None)
        from contextledger.retrieval.router import route_and_fuse

        q, described = asked
        ctx = RouteContext(
            store=store, conn=reads.conn, reads=reads, scope=reads.scope, conversation_id=reads.conversation_id,
            segments=list(segments), encoder=self.encoder(), kinds=frozenset({"memory", "message"}),
            exclude=frozenset(m.id for m in [*window, *head]),
        )
        result, fused = route_and_fuse(ctx, q, self.routes)
        # the fused records (at most one list per route) read once: equal fused scores
        # go by transcript order (older first), never by the random id, so a re-import
        # of the same transcript ranks the same
        mem_ids = [f[1] for f in fused if f[0] == "memory"]
        msg_ids = sorted(f[1] for f in fused if f[0] == "message")
        bodies: dict[str, ToolMemory | Message] = {m.id: m for m in reads.memories_by_id(mem_ids)} if mem_ids else {}
        if msg_ids:
            bodies.update({m.id: m for m in reads.messages_by_id(list(segments), msg_ids) if _text_only(m)})
        from contextledger.handles import record_handle
        from contextledger.retrieval.boundary import ROUTE_WEIGHTS
        from contextledger.retrieval.fusion import lead

        # named records lead, then each full-weight route's confident best hit, then
        # exact identifier matches
        hits = sorted((f for f in fused if f[1] in bodies), key=lambda f: (-lead(f, result.weights or ROUTE_WEIGHTS, result.exact, result.named, result.tops), -f[2], -len(f[3]), bodies[f[1]].seq, f[1]))
        ranked, new = [], 0
        for f in hits:
            if f[1] not in have and new >= self.limit:
                continue
            new += f[1] not in have
            ranked.append(f)
            if len(ranked) >= 2 * self.limit:
                break
        found = {f[1]: bodies[f[1]] for f in ranked if f[1] not in have}
        new_mems = [b for f in ranked if isinstance(b := found.get(f[1]), ToolMemory)]
        new_msgs = [b for f in ranked if isinstance(b := found.get(f[1]), Message)]
        report = {
            "query": described,
            "rrf_k": result.rrf_k,
            "routes_used": result.routes_used,
            "degraded": result.degraded,
            "routes": [{"name": r.name, "hits": r.hits} for r in result.routes],
            "hits": [
                {"record_id": rid, "handle": record_handle(kind, bodies[rid].seq), "record_kind": kind, "routes": sorted(ranks), "ranks": dict(sorted(ranks.items())), "fused_score": round(score, 6), "candidate": rid in have}
                for kind, rid, score, ranks, _ in ranked
            ],
        }
        relevance = {f[1]: len(ranked) - i for i, f in enumerate(ranked)}
        ms = round(sum(r.duration_ms for r in result.routes), 3)
        return Recalled(memories=new_mems, messages=new_msgs, relevance=relevance, report=report, duration_ms=ms)


def _text_only(msg: Message) -> bool:
    """A chat message of text parts alone (recalled as it is: no call to pair)."""
    return msg.kind is MessageKind.CHAT and msg.role in (Role.USER, Role.ASSISTANT) and all(p.kind == "text" for p in msg.parts)


DEFAULT_ROUTER = RetrievalRouter()
"""The router candidate collection uses unless given another (every assembly route)."""


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


def message_lines(messages: Sequence[Message], ev: Evaluator, tok: Tokenizer) -> list[Piece]:
    """One evidence-line piece per recalled message the viewer may see (visibility and
    ownership of the message; a privacy class above ``internal`` is not recalled: its
    routing is decided with its exchange), in transcript order: ``- <role>, turn
    <seq>: <text>`` (text cut at :data:`MESSAGE_LINE_CHARS`)."""
    lines: list[Piece] = []
    for msg in sorted(messages, key=lambda m: (m.seq, m.id)):
        if ev.is_omitted(msg.id) or msg.privacy_class.value not in ("public", "internal"):
            continue
        if ev._visible(msg.visibility, msg.participant_id) is not None:
            continue
        text = " ".join(p.text for p in msg.parts if p.kind == "text" and p.text).strip()
        if not text:
            continue
        line = f"- {msg.role.value}, turn {msg.seq}: {cut_prefix(text, MESSAGE_LINE_CHARS)}"
        lines.append(Piece(unit=None, messages=[], cost=tok.count(line) + 2, bucket="retrieval", shape=Shape.EXTRACT if len(text) > MESSAGE_LINE_CHARS else Shape.RAW, order=(msg.seq, 2), extra_refs=(msg.id,), line=line))
    return lines
