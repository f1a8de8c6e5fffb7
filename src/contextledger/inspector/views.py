"""Data behind the inspector's list and conversation pages.

The conversation page shows the *user-visible* transcript — the projection of the graph a
person reads (seed 000 §4.12: runtime cognition — memories, assemblies, policy decisions,
omission counts — is never written into it): user and assistant text, tool calls as
named cards, summaries and child reports; never reasoning, progress or meta records.
Beside it: the branch tree (forks, abandoned branches, branch sends), the participants
(subagents under their parent) and every model request (assembly) on the timeline.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from contextledger.inspector.cost_view import conversation_cost
from contextledger.inspector.resolve import in_lineage
from contextledger.records.enums import MessageKind, Role
from contextledger.records.models import Branch, ContextAssembly, Message, Participant
from contextledger.records.parts import TextPart, ToolCallPart, ToolResultPart
from contextledger.store import schema as S
from contextledger.store.base import Scope

if TYPE_CHECKING:
    from contextledger.runtime import HasRuntime
    from contextledger.store.sql import SqlStore

__all__ = [
    "ConversationView",
    "assemblies_of",
    "conversation_rows",
    "conversation_view",
    "message_rows",
    "visible_text",
]

_VISIBLE_KINDS = frozenset({MessageKind.CHAT, MessageKind.SUMMARY, MessageKind.COMPACTION, MessageKind.MODERATOR, MessageKind.CHILD_REPORT})
_VISIBLE_ROLES = frozenset({Role.USER, Role.ASSISTANT})


def visible_text(m: Message) -> str:
    """The text a person reads for ``m`` (text parts; a tool call as ``tool(args)``; a
    tool result as its inline text).  Reasoning is never included."""
    out: list[str] = []
    for p in m.parts:
        if isinstance(p, TextPart):
            out.append(p.text)
        elif isinstance(p, ToolCallPart):
            out.append(f"{p.tool_name}({p.arguments_json[:200]})")
        elif isinstance(p, ToolResultPart):
            out.append(p.text or f"[result in {p.artifact_id}]")
    return "\n".join(out)


def _assembly_stats(store: SqlStore, scope: Scope) -> dict[str, tuple[int, int]]:
    """``{conversation id: (assemblies, tokens saved against replay)}``."""
    store.deferred.settle()
    t = S.assemblies
    saved = t.c.body["replay_tokens"].as_integer() - t.c.body["assembled_tokens"].as_integer()
    stmt = sa.select(t.c.conversation_id, sa.func.count(), sa.func.coalesce(sa.func.sum(saved), 0)).where(t.c.tenant_id == scope.tenant_id).group_by(t.c.conversation_id)
    with store.reader() as conn:
        return {str(r[0]): (int(r[1]), int(r[2])) for r in conn.execute(stmt).all()}


def conversation_rows(source: HasRuntime, scope: Scope, query: str | None = None) -> list[dict[str, Any]]:
    """One row per conversation, newest first: ``id``, ``title``, ``source`` (agent /
    format), ``messages``, ``tool_calls``, ``assemblies``, ``tokens_saved`` (replay −
    assembled, summed over its assemblies), ``created_at``.  ``query`` keeps the rows
    whose title, id or source contains it (case-insensitive)."""
    store = source.runtime.store
    stats = _assembly_stats(store, scope)
    rows: list[dict[str, Any]] = []
    for s in store.list_conversations(scope):
        c = s.conversation
        n, saved = stats.get(c.id, (0, 0))
        rows.append({"id": c.id, "title": c.title or "(untitled)", "source": c.source, "messages": s.message_count, "tool_calls": s.tool_call_count,
                     "assemblies": n, "tokens_saved": saved, "created_at": c.created_at})
    if query:
        q = query.strip().lower()
        rows = [r for r in rows if any(q in str(r[k]).lower() for k in ("title", "id", "source"))]
    rows.sort(key=lambda r: (r["created_at"], r["id"]), reverse=True)
    return rows


def message_rows(source: HasRuntime, scope: Scope, conversation_id: str, *, branch_id: str | None = None) -> list[dict[str, Any]]:
    """Every message of a conversation (or of one branch's lineage) in ``seq`` order:
    ``message_id``, ``seq``, ``role``, ``kind``, ``branch_id``, ``participant_id``,
    ``text`` (the visible text, at most 200 characters).

    Raises:
        NotFoundError: unknown conversation or branch.
    """
    store = source.runtime.store
    store.get_conversation(scope, conversation_id)
    segments = store.lineage(scope, branch_id) if branch_id is not None else None
    if branch_id is not None and store.get_branch(scope, branch_id).conversation_id != conversation_id:
        from contextledger.errors import NotFoundError

        raise NotFoundError("branch", branch_id)
    return [
        {"message_id": m.id, "seq": m.seq, "role": m.role.value, "kind": m.kind.value, "branch_id": m.branch_id, "participant_id": m.participant_id,
         "text": " ".join(visible_text(m).split())[:200]}
        for m in store.messages(scope, conversation_id, segments)
    ]


def assemblies_of(store: SqlStore, scope: Scope, conversation_id: str) -> list[ContextAssembly]:
    """Every assembly of a conversation, oldest first."""
    store.deferred.settle(conversation_id)
    t = S.assemblies
    stmt = sa.select(t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id).order_by(t.c.created_at, t.c.id)
    with store.reader() as conn:
        return [ContextAssembly.model_validate(r.body) for r in conn.execute(stmt).all()]


@dataclass(kw_only=True)
class BranchNode:
    """One branch in the tree: ``state`` is ``active``, ``lineage`` (an ancestor of the
    active branch), ``abandoned`` (a fork nobody continued) or ``branch_send``."""

    branch: Branch
    state: str
    messages: int
    children: list[BranchNode] = field(default_factory=list)


@dataclass(kw_only=True)
class ConversationView:
    """Everything the conversation page shows."""

    conversation: Any
    branch_id: str
    transcript: list[tuple[Message, list[ContextAssembly]]]
    hidden: int
    roots: list[BranchNode]
    participants: list[tuple[Participant, int]]
    assemblies: list[ContextAssembly]
    positions: dict[str, int]
    cost: dict[str, Any] = field(default_factory=dict)


def _branch_tree(branches: list[Branch], counts: dict[str, int], active_lineage: set[str], active: str) -> list[BranchNode]:
    nodes = {}
    for b in branches:
        state = "active" if b.id == active else "lineage" if b.id in active_lineage else "branch_send" if b.runtime_kind.value == "branch_send" else "abandoned"
        nodes[b.id] = BranchNode(branch=b, state=state, messages=counts.get(b.id, 0))
    roots: list[BranchNode] = []
    for b in branches:
        parent = nodes.get(b.parent_branch_id or "")
        (parent.children if parent is not None else roots).append(nodes[b.id])
    return roots


def _positions(store: SqlStore, scope: Scope, conversation_id: str, assemblies: list[ContextAssembly]) -> dict[str, int]:
    """``{assembly id: the newest message seq it could see}`` (its place on the timeline)."""
    ids = sorted({r for a in assemblies if a.lineage_max_seq is None for r in a.selected_refs if r.startswith("msg_")})
    seqs: dict[str, int] = {}
    t = S.messages
    with store.reader() as conn:
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            seqs.update({str(r.id): int(r.seq) for r in conn.execute(sa.select(t.c.id, t.c.seq).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id, t.c.id.in_(chunk))).all()})
    return {a.id: a.lineage_max_seq if a.lineage_max_seq is not None else max((seqs.get(r, -1) for r in a.selected_refs), default=-1) for a in assemblies}


def conversation_view(source: HasRuntime, scope: Scope, conversation_id: str, *, branch_id: str | None = None, last: int = 400) -> ConversationView:
    """The conversation page's data: the visible transcript of ``branch_id``'s lineage
    (default: the active branch; the newest ``last`` visible messages), each followed by
    the assemblies made right after it, the branch tree, the participants with their
    message counts, and every assembly.

    Raises:
        NotFoundError: unknown conversation or branch.
    """
    store = source.runtime.store
    conv = store.get_conversation(scope, conversation_id)
    branch = branch_id or conv.active_branch_id
    if store.get_branch(scope, branch).conversation_id != conversation_id:
        from contextledger.errors import NotFoundError

        raise NotFoundError("branch", branch)
    segments = store.lineage(scope, branch)
    msgs = store.messages(scope, conversation_id)
    counts: dict[str, int] = defaultdict(int)
    per_participant: dict[str, int] = defaultdict(int)
    for m in msgs:
        counts[m.branch_id] += 1
        per_participant[m.participant_id or ""] += 1
    visible = [m for m in msgs if in_lineage(m.branch_id, m.seq, segments) and m.role in _VISIBLE_ROLES and m.kind in _VISIBLE_KINDS
               and any(isinstance(p, TextPart | ToolCallPart) for p in m.parts)]
    assemblies = assemblies_of(store, scope, conversation_id)
    positions = _positions(store, scope, conversation_id, assemblies)
    after: dict[str, list[ContextAssembly]] = defaultdict(list)
    shown = visible[-last:]
    for a in assemblies:
        pos = positions.get(a.id, -1)
        anchor = next((m for m in reversed(shown) if m.seq <= pos), None)
        if anchor is not None:
            after[anchor.id].append(a)
    lineage_ids = {s.branch_id for s in segments}
    roots = _branch_tree(store.branches(scope, conversation_id), counts, lineage_ids, conv.active_branch_id)
    parts = [(p, per_participant.get(p.id, 0)) for p in store.participants(scope, conversation_id)]
    return ConversationView(conversation=conv, branch_id=branch, transcript=[(m, after.get(m.id, [])) for m in shown], hidden=len(visible) - len(shown),
                            roots=roots, participants=parts, assemblies=list(reversed(assemblies)), positions=positions, cost=conversation_cost(assemblies))
