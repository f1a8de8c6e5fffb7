"""Broken provenance is explicitly marked with the producing call (seed 000 §9.2, §9.4):
a memory whose raw payload is gone cites the call that produced it, never a made-up id."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from contextledger.ledger import Ledger
from contextledger.memory.links import lost_payload_note, repair_provenance
from contextledger.records.enums import ResolutionState
from contextledger.records.models import ToolArtifact, ToolMemory

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ROWS = "lead_id,company\n" + "\n".join(f"L-{5000 + i},Company {i}" for i in range(900))


def _record_export(led: Ledger) -> tuple[str, ToolArtifact, ToolMemory]:
    rec = led.recorder()
    conv = rec.start_conversation(title="leads", system_prompt="You are a sales-ops assistant.")
    rec.record_message(conv.id, "user", "Export the March lead list.")
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "call_004", "tool_name": "export_leads", "arguments": {"path": "exports/leads_march.csv"}}])
    _, art, mem = rec.record_tool_result(conv.id, "call_004", ROWS, observed_at=T0)
    assert mem is not None
    return conv.id, art, mem


def test_lost_payload_memory_cites_its_producing_call(ledger: Ledger) -> None:
    conv_id, art, mem = _record_export(ledger)
    blobs = ledger.store.blobs
    assert art.blob_key is not None and blobs.exists(art.blob_key)
    blobs.delete(art.blob_key)  # the stored raw payload is lost
    assert ledger.verify_provenance(conv_id) == {"ok": [], "repaired": [], "unverifiable": [mem.id]}
    after = ledger.store.get_memory(ledger.scope(), mem.id)
    first, _, rest = mem.summary.partition("\n")
    assert after.summary == f"{first} (raw payload lost; produced by call_004)" + (f"\n{rest}" if rest else "")
    assert (after.resolution_state, after.repair_attempts, after.source_artifact_ids, after.call_id) == (ResolutionState.UNVERIFIABLE, 1, (art.id,), "call_004")
    # a second check counts the attempt but never marks twice
    ledger.verify_provenance(conv_id)
    again = ledger.store.get_memory(ledger.scope(), mem.id)
    assert (again.summary, again.repair_attempts) == (after.summary, 2)
    res = ledger.assemble(conv_id, provider="anthropic", budget_tokens=400, now=T0.replace(hour=12), persist=False)
    text = json.dumps(res.payload)
    assert "(raw payload lost; produced by call_004)" in text
    assert "L-5437,Company 437" not in text


def test_unverifiable_without_a_recorded_call_says_so() -> None:
    mem = ToolMemory(
        id="m1", tenant_id="t1", conversation_id="c1", branch_id="b1", seq=1, source_artifact_ids=("art_gone",),
        source_tool="export_leads", summary="export_leads succeeded: lead_id,company\n… 9 bytes omitted …", observed_at=T0, created_at=T0,
    )
    marked, outcome = repair_provenance(mem, artifact_exists=lambda a: False, artifact_hash_ok=lambda a: False, candidates=[])
    assert outcome == "unverifiable"
    assert marked.summary == "export_leads succeeded: lead_id,company (raw payload lost; producing call unknown)\n… 9 bytes omitted …"
    assert lost_payload_note("call_004") == "(raw payload lost; produced by call_004)"
    healthy, outcome = repair_provenance(mem, artifact_exists=lambda a: True, artifact_hash_ok=lambda a: True, candidates=[])
    assert (outcome, healthy) == ("ok", mem)
