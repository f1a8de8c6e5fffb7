"""A raw exchange whose evidence lines hold every word of its results gives up its framing
before any evidence line is evicted (:mod:`contextledger.assembly.lossless`): at the
seeds' budgets every payload format keeps the same facts.  (A lossy newest result, a
build log, stays raw or as its excerpt: ``test_newest_result.py``.)
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextledger.assembly.lossless import words
from contextledger.bench.probes import check_probes
from contextledger.bench.scenarios import get_scenario
from contextledger.ledger import Ledger

WHY = "raw exchange kept as its evidence lines, which hold every word of its results: its framing goes before any evidence"
FORMATS = ("openai-chat", "anthropic", "openai-responses")


@pytest.fixture(scope="module")
def seed6() -> Iterator[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger.open(home=Path(tmp))
        try:
            b = get_scenario("seed-6").build(ledger, 1)
            out: dict[str, Any] = {}
            for provider in FORMATS:
                r = ledger.assemble(b.conversation_id, provider=provider, budget_tokens=b.budget_tokens, now=b.now, persist=False, trace=True)
                out[provider] = (r, check_probes(r.payload, b.must_see, b.must_not_see))
            yield out
        finally:
            ledger.close()


def test_words_are_exact_runs_of_word_characters() -> None:
    assert words('{"renewal_date": "2026-05-31", "seats": 60}') == {"renewal_date", "2026", "05", "31", "seats", "60"}
    assert words("plan=Enterprise · 請求書 INV-3307") == {"plan", "Enterprise", "請求書", "INV", "3307"}
    assert "enterprise" not in words("Enterprise")


@pytest.mark.parametrize("provider", ["openai-chat", "openai-responses"])
def test_seed6_newest_exchange_becomes_its_lines_and_every_renewal_date_stays(seed6: dict[str, Any], provider: str) -> None:
    r, probe = seed6[provider]
    assert (probe.recall, probe.missing) == (1.0, ())
    assert r.record.assembled_tokens <= 199
    body = json.dumps(r.payload, ensure_ascii=False)
    # no call is sent: the billing exchange's framing (call, output, tool declaration) went
    assert "tools" not in r.payload and "function_call" not in body and "tool_calls" not in body
    assert "renewal_date=2026-05-31, seats=60 · call call_010" in body
    assert "renewal_date=2026-04-30" in body
    omitted = [d for d in r.trace if d.get("detail") == WHY]
    assert [(d["record_kind"], d["reason"]) for d in omitted] == [("message", "budget"), ("message", "budget")]


def test_seed6_keeps_the_same_facts_in_every_format(seed6: dict[str, Any]) -> None:
    facts = {p: (probe.recall, probe.missing) for p, (_, probe) in seed6.items()}
    assert facts == {p: (1.0, ()) for p in FORMATS}
