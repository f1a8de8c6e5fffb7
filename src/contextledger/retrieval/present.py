"""Memory hits of a search as the service's ``/api`` search and the MCP ``search_ledger``
tool show them: the memory's tool, artifacts, status and observation time beside the
hit's routes, ranks and fused score (one read of the memories by id)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from contextledger.memory.terms import memory_terms, query_terms

if TYPE_CHECKING:
    from contextledger.retrieval.model import RetrievalResult
    from contextledger.store.base import Scope
    from contextledger.store.sql import SqlStore

__all__ = ["memory_results"]


def memory_results(store: SqlStore, scope: Scope, conversation_id: str, result: RetrievalResult, query: str) -> list[dict[str, Any]]:
    """One dict per memory hit of ``result``, best first: ``memory_id``,
    ``source_artifact_ids``, ``source_tool``, ``status``, ``summary``, ``observed_at``
    (ISO 8601), ``matched_terms`` (the query's content terms the memory is indexed
    under), ``routes``, ``ranks``, ``scores``, ``fused_score``, ``stale``."""
    ids = [h.record_id for h in result.hits if h.record_kind == "memory"]
    mems = {m.id: m for m in store.memories(scope, conversation_id, ids=ids)} if ids else {}
    terms = query_terms(query)
    out: list[dict[str, Any]] = []
    for h in result.hits:
        m = mems.get(h.record_id)
        if m is None:
            continue
        hit = h.to_json()
        out.append({
            "memory_id": m.id, "source_artifact_ids": list(m.source_artifact_ids), "source_tool": m.source_tool, "status": m.status.value,
            "summary": m.summary, "observed_at": m.observed_at.isoformat(), "matched_terms": sorted(terms & set(memory_terms(m))),
            "routes": hit["routes"], "ranks": hit["ranks"], "scores": hit["scores"], "fused_score": hit["fused_score"], "stale": h.stale,
        })
    return out
