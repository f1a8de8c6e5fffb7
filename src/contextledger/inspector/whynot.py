"""Why did the model not see it?  A search over what the ledger holds, answered with the
decision each match got in one request (seed 000 §2.5: "why did the model *not* see a
piece of information?" — stale, over budget, outside the branch, another participant's
private state, blocked rehydration …).

One library function, :func:`why_not`, serves ``contextledger explain --why-not``, the
inspector's ``/assemblies/{id}/why-not`` page and the MCP tools.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from contextledger.errors import InputError
from contextledger.handles import parse_handle
from contextledger.inspector.resolve import DecisionSet, assembly_decisions, in_lineage
from contextledger.records.enums import OmissionReason
from contextledger.records.models import Message, ToolArtifact, ToolMemory
from contextledger.records.parts import TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from contextledger.security.screen import REDACTED_TEXT_KEY, holds_secrets
from contextledger.store import schema as S
from contextledger.store.base import Scope

if TYPE_CHECKING:
    from contextledger.runtime import HasRuntime
    from contextledger.store.sql import SqlStore

__all__ = ["MAX_QUERY_CHARS", "WhyNotHit", "why_not"]

MAX_QUERY_CHARS = 500
"""Longest accepted query (characters)."""
_EXCERPT = 160


@dataclass(kw_only=True)
class WhyNotHit:
    """One record that matched, with its decision in the request."""

    record_id: str
    kind: str
    decision: str
    reason: str
    detail: str | None
    family: str | None
    shape: str | None
    bucket: str | None
    seq: int
    branch_id: str
    in_lineage: bool
    excerpt: str

    def as_dict(self) -> dict[str, Any]:
        """JSON form: ``record_id``, ``kind``, ``decision``, ``reason`` first."""
        return dict(self.__dict__)


def _message_text(m: Message) -> str:
    out: list[str] = []
    for p in m.parts:
        if isinstance(p, TextPart | ThinkingPart):
            out.append(p.text)
        elif isinstance(p, ToolCallPart):
            out.append(f"{p.tool_name} {p.arguments_json}")
        elif isinstance(p, ToolResultPart) and p.text:
            out.append(p.text)
    return "\n".join(out)


def _excerpt(text: str, needle: str) -> str:
    i = text.lower().find(needle)
    if i < 0:
        return " ".join(text[:_EXCERPT].split())
    start = max(0, i - _EXCERPT // 3)
    return ("…" if start else "") + " ".join(text[start : start + _EXCERPT].split()) + ("…" if start + _EXCERPT < len(text) else "")


def _plain(q: str) -> bool:
    """Whether ``q`` reads the same inside a JSON string (safe to pre-filter in SQL)."""
    return q.isascii() and not any(c in q for c in '"\\%_') and all(c.isprintable() for c in q)


def _rows(store: SqlStore, scope: Scope, t: sa.Table, conversation_id: str, watermark: int | None, q: str, *, also: sa.ColumnElement[Any] | None = None) -> list[Any]:
    stmt = sa.select(t.c.id, t.c.body).where(t.c.tenant_id == scope.tenant_id, t.c.conversation_id == conversation_id)
    if watermark is not None:
        stmt = stmt.where(t.c.seq <= watermark)
    if _plain(q):
        cond = sa.or_(sa.cast(t.c.body, sa.Text).ilike(f"%{q}%"), t.c.id.ilike(f"%{q}%"))
        stmt = stmt.where(cond if also is None else sa.or_(cond, also))
    with store.reader() as conn:
        return list(conn.execute(stmt.order_by(t.c.seq, t.c.id)).all())


def _redacted_texts(store: SqlStore, scope: Scope, artifacts: list[ToolArtifact]) -> dict[str, str]:
    """``artifact id → redacted text`` of the secret-bearing ``artifacts``: their memories'
    :data:`~contextledger.security.screen.REDACTED_TEXT_KEY` (an artifact whose memory
    holds none is absent: it is matched and shown by its tool name and arguments only)."""
    ids = [a.id for a in artifacts if holds_secrets(a)]
    if not ids:
        return {}
    tm = S.tool_memories
    stmt = sa.select(tm.c.artifact_id, tm.c.body).where(tm.c.tenant_id == scope.tenant_id, tm.c.artifact_id.in_(ids)).order_by(tm.c.seq, tm.c.id)
    out: dict[str, str] = {}
    with store.reader() as conn:
        for r in conn.execute(stmt):
            text = ToolMemory.model_validate(r.body).payload.get(REDACTED_TEXT_KEY)
            if isinstance(text, str):
                out.setdefault(r.artifact_id, text)
    return out


def _artifact_text(store: SqlStore, scope: Scope, art: ToolArtifact, redacted: dict[str, str]) -> str:
    """The text of ``art`` a why-not query is matched against and quoted from: the
    redacted text of a secret-bearing artifact (never its raw payload), else the raw
    result."""
    if art.deleted_at is not None:
        return ""
    if holds_secrets(art):
        return redacted.get(art.id, "")
    if art.blob_key is None:
        return art.inline_text or ""
    try:
        return store.read_artifact_bytes(scope, art).decode("utf-8", "replace")
    except Exception:  # a missing or damaged blob is shown on the artifact's own page
        return ""


def _candidates(store: SqlStore, scope: Scope, ds: DecisionSet, q: str) -> list[tuple[str, Message | ToolArtifact | ToolMemory, str]]:
    rec, wm = ds.assembly, ds.watermark
    out: list[tuple[str, Message | ToolArtifact | ToolMemory, str]] = []
    handle = parse_handle(q)
    for r in _rows(store, scope, S.messages, rec.conversation_id, wm, q):
        m = Message.model_validate(r.body)
        out.append(("message", m, _message_text(m)))
    # artifacts: the blob-held ones cannot be filtered in SQL
    ta, tm = S.tool_artifacts, S.tool_memories
    also: sa.ColumnElement[bool] = ta.c.blob_key.is_not(None)
    if handle is not None and handle.kind == "artifact":
        also = sa.or_(also, ta.c.seq == handle.seq)
    arts = [ToolArtifact.model_validate(r.body) for r in _rows(store, scope, ta, rec.conversation_id, wm, q, also=also)]
    redacted = _redacted_texts(store, scope, arts)
    out.extend(("artifact", a, f"{a.tool_name} {a.arguments_json}\n{_artifact_text(store, scope, a, redacted)}") for a in arts)
    for r in _rows(store, scope, tm, rec.conversation_id, wm, q, also=tm.c.seq == handle.seq if handle is not None and handle.kind == "memory" else None):
        mem = ToolMemory.model_validate(r.body)
        out.append(("memory", mem, f"{mem.summary}\n{json.dumps(mem.payload, ensure_ascii=False)}"))
    return out


def why_not(source: HasRuntime, scope: Scope, assembly_id: str, query: str, *, limit: int = 500, decisions: DecisionSet | None = None) -> list[WhyNotHit]:
    """Every recorded message, tool result (artifact) or memory of the assembly's
    conversation, up to the newest record the request could see, whose text or id
    contains ``query`` (case-insensitive) — or, for a handle (``m12``, ``a12``:
    :mod:`contextledger.handles`), the record it names too — with the decision and reason it got in that
    request (decisions as :func:`~contextledger.inspector.resolve.assembly_decisions`
    finds them).  A record that was never a candidate gets ``outside_window`` (older
    than the candidate window and not recalled) or ``out_of_lineage``.

    Returns at most ``limit`` hits, in ``seq`` order, messages before artifacts before
    memories at one ``seq``.

    Raises:
        NotFoundError: unknown assembly.
        InputError: an empty query, or one longer than :data:`MAX_QUERY_CHARS`.
    """
    q = query.strip()
    if not q or len(q) > MAX_QUERY_CHARS:
        raise InputError(f"why-not query must be 1 to {MAX_QUERY_CHARS} characters, got {len(q)}")
    store = source.runtime.store
    ds = decisions or assembly_decisions(source, scope, assembly_id)
    segments = store.lineage(scope, ds.assembly.branch_id)
    known = ds.by_id()
    sent = set(ds.assembly.selected_refs)
    needle = q.lower()
    handle = parse_handle(q)
    hits: list[WhyNotHit] = []
    for kind, rec, text in _candidates(store, scope, ds, q):
        named = handle is not None and handle.kind == kind and rec.seq == handle.seq
        if not named and needle not in text.lower() and needle not in rec.id.lower():
            continue
        lineage = in_lineage(rec.branch_id, rec.seq, segments)
        d = known.get(rec.id)
        if d is not None:
            decision, reason, detail, family, shape, bucket = d.decision, d.reason, d.detail, d.family, d.shape, d.bucket
        elif rec.id in sent:  # an assembly stored before every sent record had a decision
            decision, reason, family, shape, bucket = ("memory" if kind == "memory" else "raw"), "selected", "budget", None, None
            detail = "in the request's selected records (no per-record decision was stored for it)"
        elif not lineage:
            decision, reason, detail, family, shape, bucket = "omitted", OmissionReason.OUT_OF_LINEAGE.value, f"on branch {rec.branch_id}, outside the request's lineage", "visibility", None, None
        elif ds.source == "summary_only":
            decision, reason, detail, family, shape, bucket = "unknown", "summary_only", "no per-record decisions for this assembly", None, None, None
        else:
            decision, reason, family, shape, bucket = "omitted", OmissionReason.OUTSIDE_WINDOW.value, "budget", None, None
            detail = "not a candidate of this request: older than the candidate window and not recalled"
        hits.append(WhyNotHit(record_id=rec.id, kind=kind, decision=decision, reason=reason, detail=detail, family=family, shape=shape, bucket=bucket,
                              seq=rec.seq, branch_id=rec.branch_id, in_lineage=lineage, excerpt=_excerpt(text, needle)))
    order = {"message": 0, "artifact": 1, "memory": 2}
    hits.sort(key=lambda h: (h.seq, order[h.kind], h.record_id))
    return hits[:limit]
