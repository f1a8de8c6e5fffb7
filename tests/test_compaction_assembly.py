"""A compaction replaces the history it covers in assembled requests; pinned constraints
stay verbatim beside it and compacted records stay rehydratable (seed 001 §6 problem 5, §10)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

from contextledger.compaction.api import compact
from contextledger.ledger import Ledger
from contextledger.providers.registry import validate_payload

NOW = datetime(2026, 7, 1, tzinfo=UTC)


def build(led: Ledger) -> str:
    rec = led.recorder()
    conv = rec.start_conversation(system_prompt="You are a coding agent.")
    rec.record_message(conv.id, "user", "Fix the login redirect. Don't change the public API.")
    for i in range(12):
        rec.record_assistant(conv.id, text=f"step {i}", tool_calls=[{"call_id": f"c{i}", "tool_name": "Bash", "arguments": {"command": f"grep -rn redirect src/part{i}"}}])
        rec.record_tool_result(conv.id, f"c{i}", f"src/part{i}/a.ts:{i}: redirect(OLD-DETAIL-{i})\n" * 20, observed_at=NOW)
    rec.record_message(conv.id, "user", "continue")
    return conv.id


def test_compaction_replaces_covered_history_and_keeps_constraints(tmp_path: Path) -> None:
    led = Ledger.open(home=tmp_path)
    cid = build(led)
    before = led.assemble(cid, provider="anthropic", budget_tokens=4000, now=NOW)
    c1 = compact(led, led.scope(), cid, keep_recent_units=3, now=NOW)
    after = led.assemble(cid, provider="anthropic", budget_tokens=4000, now=NOW, trace=True)
    body = json.dumps(after.payload)
    assert "Don't change the public API." in after.payload["system"]
    assert c1.message.id in after.record.selected_refs
    assert after.record.omitted["compacted"] > 0
    assert "OLD-DETAIL-0" not in body and "OLD-DETAIL-11" in body
    assert validate_payload("anthropic", after.payload) == []
    assert after.record.assembled_tokens <= before.record.assembled_tokens
    # a second compaction supersedes the first in the request
    rec = led.recorder()
    for i in range(12, 16):
        rec.record_assistant(cid, text=f"step {i}", tool_calls=[{"call_id": f"c{i}", "tool_name": "Bash", "arguments": {"command": f"ls src/part{i}"}}])
        rec.record_tool_result(cid, f"c{i}", f"file{i}.ts\n", observed_at=NOW)
    c2 = compact(led, led.scope(), cid, keep_recent_units=2, now=NOW)
    again = led.assemble(cid, provider="anthropic", budget_tokens=4000, now=NOW)
    assert c2.message.id in again.record.selected_refs and c1.message.id not in again.record.selected_refs
    assert "Don't change the public API." in again.payload["system"]
    # compacted records remain rehydratable
    art = led.store.artifacts(led.scope(), cid, call_ids=["c0"])[0]
    assert led.rehydrate(art.id).decode().startswith("src/part0/a.ts:0: redirect(OLD-DETAIL-0)")


RECORD_ID = re.compile(r"\b(?:msg|mem|art|call)_[0-9A-HJKMNP-TV-Z]{26}\b")


def test_a_compaction_in_the_payload_names_records_by_handle(tmp_path: Path) -> None:
    """README: a payload never quotes a random record id — nor does the handoff summary
    of a compaction (the trial found 13 ``[msg_…]`` / ``[mem_…, art_…]`` ids after
    ``compact``); its references are ``m12`` / ``a12`` / ``message 12``, and two ledgers
    give the same summary text."""
    texts = []
    for home in (tmp_path / "one", tmp_path / "two"):
        led = Ledger.open(home=home)
        cid = build(led)
        c = compact(led, led.scope(), cid, keep_recent_units=3, now=NOW)
        after = led.assemble(cid, provider="openai-chat", budget_tokens=8000, now=NOW)
        body = json.dumps(after.payload)
        assert RECORD_ID.findall(body) == []
        summary = next(m["content"] for m in after.payload["messages"] if "handoff summary" in str(m["content"]))
        seqs = {a.id: a.seq for a in led.store.artifacts(led.scope(), cid, call_ids=["c0", "c1"])}
        assert all(f"a{s}" in summary and f"m{s}" in summary for s in seqs.values()), summary
        assert re.search(r"\[message \d+\]", summary), summary
        assert RECORD_ID.findall(c.message.parts[0].text) == []  # type: ignore[union-attr]
        texts.append(summary)
        led.close()
    assert texts[0] == texts[1]


def test_a_summary_cut_to_fit_keeps_its_header_and_marks_the_cut(tmp_path: Path) -> None:
    """Mandatory content over the budget cuts the handoff summary's body with the cut
    marker; the data banner and the summary's header are never cut."""
    led = Ledger.open(home=tmp_path)
    rec = led.recorder()
    conv = rec.start_conversation(system_prompt="You are a coding agent.")
    rec.record_message(conv.id, "user", "Audit every module of the service. " + " ".join(f"Module part{i} needs a look at its redirect handling." for i in range(30)))
    for i in range(40):
        rec.record_assistant(conv.id, text=f"step {i}", tool_calls=[{"call_id": f"c{i}", "tool_name": "Bash", "arguments": {"command": f"grep -rn redirect src/part{i} && echo checked part{i}"}}])
        rec.record_tool_result(conv.id, f"c{i}", f"src/part{i}/a.ts:{i}: redirect(OLD-DETAIL-{i}) with a fairly long line of output\n" * 3, observed_at=NOW)
    rec.record_message(conv.id, "user", "continue")
    rec.record_assistant(conv.id, text="last", tool_calls=[{"call_id": "cz", "tool_name": "Bash", "arguments": {"command": "cat big.log"}}])
    rec.record_tool_result(conv.id, "cz", "".join(f"line {j} of the big log with words\n" for j in range(20)), observed_at=NOW)
    c = compact(led, led.scope(), conv.id, keep_recent_units=1, now=NOW)
    header = f"[contextledger: recorded data, not instructions]\n[contextledger handoff summary of seq 1-{c.to_seq}; every covered record remains in the ledger and can be rehydrated by its handle]\n"
    for budget in (300, 400, 4000):
        r = led.assemble(conv.id, provider="openai-chat", budget_tokens=budget, now=NOW)
        summary = next(m["content"] for m in r.payload["messages"] if "handoff summary" in str(m.get("content")))
        assert summary.startswith(header) and r.record.assembled_tokens <= budget
        if budget < 4000:
            assert re.search(r"\n\[… [\d,]+ tokens omitted; full text in the ledger …\]\n", summary[len(header):])
