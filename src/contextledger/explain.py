"""Explanations: why a record was included, shaped or omitted (seed 000 §4.4, §8 R10).

Works from the stored ContextAssembly: its omission summary always, its per-record trace
when the assembly was made with ``trace=True`` (or the policy keeps traces), and the
PolicyDecision rows written with it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from contextledger.assembly.decisions import REASON_TEXT as _REASON_TEXT
from contextledger.assembly.decisions import memory_sent
from contextledger.errors import ContextLedgerError, NotFoundError
from contextledger.handles import parse_handle, record_handle, resolve_ref
from contextledger.inspector.resolve import SOURCES, assembly_decisions
from contextledger.inspector.whynot import WhyNotHit, why_not
from contextledger.store.base import Scope

if TYPE_CHECKING:
    from contextledger.runtime import HasRuntime
    from contextledger.store.sql import SqlStore

__all__ = ["explain_assembly", "render_explanation", "render_proxy", "render_retrieval", "render_why_not", "retrieval_explanation", "why_not"]


def explain_assembly(source: HasRuntime, scope: Scope, assembly_id: str, *, record_id: str | None = None) -> dict[str, Any]:
    """A JSON-ready explanation of ``assembly_id``.

    Returns ``{"assembly_id", "policy_version", "assembler_version", "epoch"
    (:func:`epoch_explanation`), "summary":
    {reason: count}, "branch_excluded", "selected": [...], "retrieval"
    (:func:`retrieval_explanation`), "cost" and "conversation_cost" (:mod:`.inspector.cost_view`),
    "upstream_usage" (what the provider reported for the request the proxy sent: input,
    cache read, cache write and output tokens, or ``None``), "proxy" (``{"mode": "shadow", "client_request_tokens",
    "assembled_request_tokens", …}`` when the proxy sent the client's request instead,
    else ``None``), "decision_source",
    "decisions": [{record_id, kind, decision, reason, family, shape, bucket, detail,
    notes}], "records": {record_id: [trace entry, ...]}}``; with ``record_id`` only that
    record's ``decision``, trace entries (``decisions``) and ``recalled`` (its
    retrieval hit, or ``None``).  ``record_id`` may be the
    handle the payload shows (``m12``, ``a12``: :mod:`contextledger.handles`), resolved
    in the assembly's conversation (``record_id`` in the answer is then the full id and
    ``handle`` the handle asked for).  ``decisions`` holds one
    outcome per record (raw / memory / stale_marker / reference / omitted) for every
    assembly, traced or not (:func:`contextledger.inspector.resolve.assembly_decisions`;
    ``decision_source`` says where they came from).

    Raises:
        NotFoundError: unknown assembly, or a ``record_id`` that names no record of the
            assembly's conversation.
    """
    store = source.runtime.store
    record, _payload = store.get_assembly(scope, assembly_id)
    ds = assembly_decisions(source, scope, record)
    decisions = record.trace or []
    stored = store.decisions(scope, assembly_id=assembly_id)
    by_record: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for d in decisions:
        by_record[str(d["record_id"])].append({k: v for k, v in d.items() if k != "record_id"})
    for dec in stored:
        if dec.record_id and not any(x.get("decision") == dec.decision and x.get("reason") == dec.reason for x in by_record.get(dec.record_id, [])):
            by_record[dec.record_id].append({"family": dec.family.value, "decision": dec.decision, "reason": dec.reason, **dec.detail})
    out: dict[str, Any] = {
        "assembly_id": record.id,
        "conversation_id": record.conversation_id,
        "branch_id": record.branch_id,
        "participant_id": record.participant_id,
        "provider": record.provider,
        "policy_version": record.policy_version,
        "assembler_version": record.assembler_version,
        "budget_tokens": record.budget_tokens,
        "replay_tokens": record.replay_tokens,
        "replay_mode": record.replay_mode,
        "assembled_tokens": record.assembled_tokens,
        "summary": dict(record.omitted),
        "branch_excluded": record.branch_excluded,
        "buckets": record.buckets,
        "selected": list(record.selected_refs),
        "trace_kept": record.trace is not None,
        "epoch": epoch_explanation(record.epoch),
        "decision_source": ds.source,
        "decision_source_text": SOURCES[ds.source],
        "upstream_usage": record.upstream_usage,
        "proxy": record.proxy,
    }
    out["retrieval"] = retrieval_explanation(record.retrieval)
    out |= {"cost": record.cost, "conversation_cost": _conversation_cost(store, scope, record.conversation_id)}
    final = ds.by_id()
    if record_id is not None:
        out |= _one_record(store, scope, record, record_id, by_record, final, out["retrieval"])
    else:
        out["decisions"] = [d.as_dict() for d in ds.records]
        out["records"] = dict(sorted(by_record.items()))
    return out


def _one_record(store: SqlStore, scope: Scope, record: Any, record_id: str, by_record: dict[str, list[dict[str, Any]]], final: dict[str, Any], retrieval: dict[str, Any] | None) -> dict[str, Any]:
    """:func:`explain_assembly`'s answer for one record (an id or a payload handle)."""
    out: dict[str, Any] = {}
    handle = parse_handle(record_id)
    if handle is not None:
        record_id = resolve_ref(store, scope, record.conversation_id, record_id)
        out["handle"] = str(handle)
    if record_id not in record.selected_refs and record_id not in by_record and not record_exists(store, scope, record.conversation_id, record_id):
        raise NotFoundError("record", record_id)
    out["record_id"] = record_id
    out["selected_in_payload"] = _in_payload(store, scope, record_id, record.selected_refs)
    out["decisions"] = by_record.get(record_id, [])
    retained = retention_note(store, scope, record_id)
    if retained is not None:
        out["retention"] = retained
    out["decision"] = final[record_id].as_dict() if record_id in final else None
    out["recalled"] = next((h for h in (retrieval or {}).get("hits", []) if h["record_id"] == record_id), None)
    return out


def _in_payload(store: SqlStore, scope: Scope, record_id: str, refs: tuple[str, ...] | list[str]) -> bool:
    """Whether ``record_id`` reached the payload: the rule of the retrieval list's
    ``sent`` (:func:`~contextledger.assembly.decisions.memory_sent`: a memory counts as
    sent when its raw result is)."""
    if record_id in refs or not record_id.startswith("mem_"):
        return record_id in refs
    try:
        mem = store.get_memory(scope, record_id)
    except ContextLedgerError:
        return False
    return memory_sent(record_id, mem.source_artifact_ids, refs)


def retrieval_explanation(retrieval: dict[str, Any] | None) -> dict[str, Any] | None:
    """The assembly's retrieval record (``ContextAssembly.retrieval``: routes used,
    unavailable routes and why, per ranked memory its routes, ranks, fused score, whether
    it was a candidate already and whether it was ``sent``).  ``None`` when the router
    was not asked (no query) or the assembly predates it."""
    return retrieval


def render_retrieval(r: dict[str, Any] | None) -> list[str]:
    """Text lines of :func:`retrieval_explanation` (empty without a record)."""
    if r is None:
        return []
    lines = [f"retrieval routes: {', '.join(r['routes_used']) or 'none'} (reciprocal-rank fusion, k = {r['rrf_k']})"]
    for name, why in sorted(r.get("degraded", {}).items()):
        lines.append(f"  {name} unavailable: {why}")
    hits = r.get("hits", [])
    lines.append(f"  recalled {len(hits)} older memor{'y' if len(hits) == 1 else 'ies'}" + (":" if hits else ""))
    for h in hits:
        ranks = ", ".join(f"{k} #{v}" for k, v in h["ranks"].items())
        lines.append(f"    {(h.get('handle') or '') + '  ' if h.get('handle') else ''}{h['record_id']}  fused {h['fused_score']:.6f}  {ranks}  {'sent' if h.get('sent') else 'not sent'}")
    return lines


def retention_note(store: SqlStore, scope: Scope, record_id: str) -> str | None:
    """``"deleted by retention on <date>"`` (or archived / redacted / hashed) for a record
    whose payload retention changed — an artifact, or a memory whose artifact it was."""
    from contextledger.records.enums import PolicyFamily

    decisions = [d for d in store.decisions(scope, record_id=record_id) if d.family is PolicyFamily.RETENTION]
    if not decisions and record_id.startswith("mem_"):
        try:
            mem = store.get_memory(scope, record_id)
        except ContextLedgerError:
            return None
        decisions = [d for a in mem.source_artifact_ids for d in store.decisions(scope, record_id=a) if d.family is PolicyFamily.RETENTION]
    decisions = [d for d in decisions if d.decision.endswith("_payload")]
    if not decisions:
        return None
    d = decisions[-1]
    verb = {"delete_payload": "deleted", "hash_payload": "deleted (sha256 kept)", "redact_payload": "redacted", "archive_payload": "archived"}.get(d.decision, d.decision)
    return f"payload {verb} by retention on {d.created_at.date().isoformat()} ({d.reason})"


def record_exists(store: SqlStore, scope: Scope, conversation_id: str, record_id: str) -> bool:
    """Whether ``record_id`` names a record (message, call, artifact, memory, rule …) of
    ``conversation_id`` in the scope's tenant."""
    import sqlalchemy as sa

    from contextledger.store.schema import TABLES

    with store.reader() as conn:
        for table in TABLES.values():
            c = table.c
            if "conversation_id" not in c or "id" not in c:
                continue
            hit = conn.execute(sa.select(c.id).where(c.id == record_id, c.tenant_id == scope.tenant_id, c.conversation_id == conversation_id).limit(1)).first()
            if hit is not None:
                return True
    return False




def epoch_explanation(epoch: dict[str, Any] | None) -> dict[str, Any] | None:
    """Why the request's prefix is what it is (:mod:`contextledger.assembly.epoch`):
    ``{"number", "first", "reason", "extends", "reused_messages"}``, plus
    ``constraints_in_tail`` (rule ids) when pinned constraints are sent only in the
    message that stated them (raw), not restated in the frozen system blocks; ``None`` for an assembly made without epoch state."""
    if not epoch:
        return None
    out = {k: epoch.get(k) for k in ("number", "first", "reason", "extends", "reused_messages")}
    if epoch.get("constraints_in_tail"):
        out["constraints_in_tail"] = list(epoch["constraints_in_tail"])
    return out


def _conversation_cost(store: SqlStore, scope: Scope, conversation_id: str) -> dict[str, Any]:
    from contextledger.inspector.cost_view import conversation_cost
    from contextledger.inspector.views import assemblies_of

    return conversation_cost(assemblies_of(store, scope, conversation_id))


def _replay_words(expl: dict[str, Any]) -> str:
    """How the replay figure was measured (``replay`` or ``replay (estimated)``)."""
    return "replay (estimated)" if expl.get("replay_mode") == "estimate" else "replay"


def render_explanation(expl: dict[str, Any]) -> str:
    """Human-readable lines for :func:`explain_assembly` output."""
    lines = [
        f"assembly {expl['assembly_id']} — policy {expl['policy_version']}, {expl['assembler_version']}",
        f"provider {expl['provider']}, budget {expl['budget_tokens']:,} tokens: {_replay_words(expl)} {expl['replay_tokens']:,} → assembled {expl['assembled_tokens']:,}"
        " (both with system prompt and tool declarations)",
    ]
    if "cost" in expl:
        from contextledger.inspector.cost_view import cost_words

        lines.append(cost_words(expl["cost"]))
        total = expl.get("conversation_cost") or {}
        if total.get("requests"):
            ratio = f", {total['ratio']:.2f}× replay" if total.get("ratio") is not None else ""
            lines.append(f"conversation: {total['requests']} requests, ${total['assembled']['usd']:.6f} assembled vs ${total['replay']['usd']:.6f} replay{ratio}")
    lines += render_proxy(expl)
    ep = expl.get("epoch")
    if ep:
        where = "its first request" if ep["first"] else f"extends {ep['extends']} ({ep['reused_messages']:,} items reused byte for byte)"
        lines.append(f"epoch {ep['number']}, {where} — why the prefix changed here (or did not): {ep['reason']}")
        if ep.get("constraints_in_tail"):
            n = len(ep["constraints_in_tail"])
            lines.append(f"  {n} constraint{'s' if n != 1 else ''} {'are' if n != 1 else 'is'} sent where the user stated them, not restated in the system blocks (restated once that message is no longer sent raw)")
    if expl.get("summary"):
        lines.append("omitted or reshaped, by reason:")
        for reason, n in sorted(expl["summary"].items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"  {n:6d}  {reason}: {_REASON_TEXT.get(reason, reason)}")
    if expl.get("branch_excluded"):
        lines.append(f"branch exclusions (apart from budget): {expl['branch_excluded']}")
    if "record_id" not in expl:
        lines += render_retrieval(expl.get("retrieval"))
    if "record_id" in expl:
        lines.append(f"record {expl['handle'] + ' ' if expl.get('handle') else ''}{expl['record_id']}: {'in the payload' if expl['selected_in_payload'] else 'not in the payload'}")
        if expl.get("retention"):
            lines.append(f"  {expl['retention']}")
        for d in expl["decisions"]:
            lines.append(f"  - {d.get('family')}: {d.get('decision')} ({d.get('reason')}) {d.get('detail', '')}".rstrip())
        if expl.get("recalled"):
            h = expl["recalled"]
            lines.append(f"  recalled by retrieval: fused {h['fused_score']:.6f}, " + ", ".join(f"{k} #{v}" for k, v in h["ranks"].items()))
        final = expl.get("decision")
        if final:
            lines.append(f"  outcome: {final['decision']} ({final['reason']}){' — ' + final['detail'] if final.get('detail') else ''}")
        elif expl["decision_source"] == "summary_only":
            lines.append(f"  (per-record decisions {SOURCES['summary_only']})")
    return "\n".join(lines)


def render_proxy(expl: dict[str, Any]) -> list[str]:
    """Text lines of an explanation's shadow mark and upstream usage (empty without)."""
    lines: list[str] = []
    mark = expl.get("proxy")
    if mark and mark.get("mode") == "shadow":
        client, assembled = int(mark["client_request_tokens"]), int(mark["assembled_request_tokens"])
        change = f" ({(assembled - client) / client:+.0%})" if client else ""
        lines.append(f"shadow mode: the client's own request was forwarded ({client:,} tokens); this assembly was not — it would have sent {assembled:,}{change}")
    if mark and mark.get("upstream_error"):
        lines.append(f"upstream: {mark['upstream_error']}; nothing reached the provider")
    usage = expl.get("upstream_usage")
    if usage:
        lines.append(f"upstream usage: input {usage['input_tokens']:,} tokens (cache read {usage['cached_read_tokens']:,}, "
                     f"cache write {usage['cache_write_tokens']:,}), output {usage['output_tokens']:,}")
    return lines


def render_why_not(query: str, hits: list[WhyNotHit]) -> str:
    """Human-readable lines for :func:`why_not` hits (one line per record)."""
    if not hits:
        return f"no recorded message, tool result or memory matches {query!r}"
    lines = [f"{len(hits)} record{'s' if len(hits) != 1 else ''} match {query!r}:"]
    for h in hits:
        why = _REASON_TEXT.get(h.reason, h.detail or h.reason)
        handle = record_handle(h.kind, h.seq)
        lines.append(f"  {handle + '  ' if handle else ''}{h.record_id}  {h.kind:8s} {h.decision:12s} {h.reason}: {why}")
        lines.append(f"      {h.excerpt}")
    return "\n".join(lines)
