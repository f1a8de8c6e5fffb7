"""File scenarios: seed 000 §9.1 scenario 2 (multi-tool file generation) and the §9.2
cases "exact raw CSV rehydration" and "broken-provenance repair".
"""

from __future__ import annotations

import json
from pathlib import Path

from contextledger.bench.probes import Fact
from contextledger.bench.scenarios.base import (
    SEED_REPLAY_TOKENS,
    T0,
    BuiltCase,
    Scenario,
    Script,
    filler_tokens,
    seed_budget,
)
from contextledger.ledger import Ledger

__all__ = ["CSV_REHYDRATION", "PROVENANCE_REPAIR", "SEED_2"]


def _sales_csv(rows: int) -> str:
    lines = ["date,region,sku,amount"]
    lines += [f"2026-01-{i % 28 + 1:02d},region-{i % 7},sku-{1000 + i},{(i * 37) % 500}.00" for i in range(rows)]
    return "\n".join(lines)


def _build_seed2(ledger: Ledger, scale: int) -> BuiltCase:
    s = Script(ledger, title="q1 report files", system_prompt="You are a reporting assistant with file tools.", seed="seed-2")
    s.user("Archive last year's drafts first.")
    s.filler(filler_tokens(scale, 390, SEED_REPLAY_TOKENS["seed-2"]), fit=True)
    s.user("Generate the Q1 sales report as a CSV, a chart and a PDF summary.")
    s.call("query_sales", {"quarter": "2026-Q1"}, _sales_csv(32))
    s.call("write_file", {"path": "out/q1_sales.csv"}, json.dumps({"file_id": "file_8KQ2", "path": "out/q1_sales.csv", "bytes": 2841, "sha256": "9f2c41d07a"}))
    png = "iVBORw0KGgoAAAANSUhEUgAAAoAAAAHgCAYAAAA10dzkAAAABHNCSVQICAgIfAhkiAAAAAlwSFlz" * 3
    s.call("render_chart", {"source": "out/q1_sales.csv", "kind": "bar"}, json.dumps({"file_id": "file_C3x7", "path": "out/q1_chart.png", "preview_base64": png}))
    s.call("render_pdf", {"sources": ["out/q1_sales.csv", "out/q1_chart.png"]}, json.dumps({"file_id": "file_P9Z1", "path": "out/q1_summary.pdf", "pages": 3}))
    s.say("The files are ready.")
    s.user("Email the PDF and the CSV to finance.")
    return BuiltCase(
        conversation_id=s.id, branch_id=None, participant_id=None, provider="anthropic", budget_tokens=seed_budget("seed-2"),
        now=T0.replace(hour=12),
        must_see=(
            Fact("file_8KQ2", "CSV file handle"),
            Fact("out/q1_sales.csv", "CSV path"),
            Fact("file_P9Z1", "PDF file handle"),
            Fact("out/q1_summary.pdf", "PDF path"),
            Fact("Email the PDF and the CSV to finance.", "current request"),
        ),
        must_not_see=(
            Fact("2026-01-14,region-6,sku-1013,481.00", "raw CSV row"),
            Fact("iVBORw0KGgoAAAANSUhEUg", "raw base64 chart preview"),
        ),
    )


SEED_2 = Scenario(name="seed-2", title="multi-tool file generation", source="seed 000 §9.1 (2)", seed_scenario=True, build=_build_seed2)


def _build_csv(ledger: Ledger, scale: int) -> BuiltCase:
    s = Script(ledger, title="invoice audit", system_prompt="You are an accounts assistant. Quote figures exactly.", seed="csv-rehydration")
    s.user("Clean up the vendor folders first.")
    s.filler(filler_tokens(scale, 700, 1500))
    s.user("Pull February's invoices for the audit.")
    rows = ["date,region,invoice,amount_eur"] + [f"2026-02-{d:02d},{('north', 'south', 'east')[d % 3]},INV-{3300 + d},{d * 173 % 2000}.{d * 7 % 100:02d}" for d in range(1, 21)]
    s.call("export_invoices", {"month": "2026-02", "format": "csv"}, "\n".join(rows))
    s.say("February's invoices are exported (20 rows).")
    s.user("The auditor needs the exact raw rows for INV-3307 and INV-3312, byte for byte.")
    return BuiltCase(
        conversation_id=s.id, branch_id=None, participant_id=None, provider="openai-chat", budget_tokens=700,
        now=T0.replace(hour=12),
        must_see=(Fact(rows[7], "exact raw row INV-3307"), Fact(rows[12], "exact raw row INV-3312")),
        must_not_see=(),
    )


CSV_REHYDRATION = Scenario(name="csv-rehydration", title="exact raw CSV rehydration", source="seed 000 §9.2", seed_scenario=False, build=_build_csv)


def _build_repair(ledger: Ledger, scale: int) -> BuiltCase:
    s = Script(ledger, title="lead export", system_prompt="You are a sales-ops assistant.", seed="provenance-repair")
    s.user("Check the old campaign tickets first.")
    s.filler(filler_tokens(scale, 500, 1500))
    s.user("Export the March lead list.")
    big = "lead_id,company,stage,owner\n" + "\n".join(f"L-{5000 + i},Company {i},{('new', 'mql', 'sql')[i % 3]},rep{i % 9}" for i in range(900))
    cid = s.call("export_leads", {"month": "2026-03", "path": "exports/leads_march.csv"}, big)
    art = ledger.store.get_artifact(ledger.scope(), s.last_artifact_id)
    if art.blob_key is not None:  # simulate losing the stored raw payload (broken provenance)
        blob_root = Path(str(getattr(ledger.store.blobs, "root", "")))
        for path in blob_root.rglob(art.blob_key.split(":", 1)[-1]):
            path.unlink()
    # a provenance check runs (an operator or a scheduled job): the memory of the lost
    # payload cannot be repaired from other evidence, so it is marked with its producer
    report = ledger.verify_provenance(s.id)
    if len(report["unverifiable"]) != 1:
        raise RuntimeError(f"provenance-repair: expected one unverifiable memory, got {report}")
    s.say("Exported 900 leads to exports/leads_march.csv.")
    s.user("Which file did you export, and from which call? Cite it.")
    return BuiltCase(
        conversation_id=s.id, branch_id=None, participant_id=None, provider="anthropic", budget_tokens=500,
        now=T0.replace(hour=12),
        must_see=(Fact("exports/leads_march.csv", "exported file"), Fact(cid, "the call that produced it")),
        must_not_see=(Fact("L-5437,Company 437", "raw rows of a payload that is no longer stored"),),
    )


PROVENANCE_REPAIR = Scenario(name="provenance-repair", title="broken-provenance repair", source="seed 000 §9.2", seed_scenario=False, build=_build_repair)
