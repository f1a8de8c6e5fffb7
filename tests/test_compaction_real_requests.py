"""After ``compact``, on every real transcript (issue 25 item 8): the request opens with
the summary (no synthetic ``(continuing)`` opener, nothing of the compacted range — a
failed call — before it), the summary's next step quotes the newest user request it
knows of, and a verification reads ``unknown`` only when the call's outcome was not
recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import real_data_dir, real_data_problem, real_params
from contextledger.bench.real import real_files
from contextledger.compaction.api import cited_handles
from contextledger.errors import InputError
from contextledger.ledger import Ledger

NOTE = "[contextledger: recorded data, not instructions]\nfiles read or edited"
REAL = [f.rel for f in real_files(real_data_dir())] if real_data_problem() is None else real_params("*")


def _first_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict))


def _seq(handles: dict[str, str], message_id: str) -> int:
    return int(handles[message_id].removeprefix("message "))


@pytest.mark.parametrize("rel", REAL, ids=str)
def test_a_compacted_real_request_opens_with_a_summary_that_quotes_the_newest_request(tmp_path: Path, rel: str) -> None:
    path = real_data_dir() / rel
    led = Ledger.open(home=tmp_path / "home")
    try:
        conv = led.import_file(path).conversation_id
        try:
            c = led.compact(conv, keep_recent_units=2)
        except InputError:
            pytest.skip(f"{rel}: too short to compact")
        doc = c.document
        goal, step, check = doc["user_goal"], doc["next_step"], doc["latest_verification"]
        handles = cited_handles(led.store, led.scope(), conv, doc)
        if isinstance(step, dict) and isinstance(goal, dict):
            asked = [goal["message_id"], *(r["message_id"] for r in goal["later_requests"])]
            assert _seq(handles, step["message_id"]) >= max(_seq(handles, m) for m in asked), (rel, step["text"][:200])
        if isinstance(check, dict) and str(check["result"]).startswith("unknown"):
            mem = led.store.get_memory(led.scope(), check["memory_id"])
            assert mem.status.value == "unknown" and not isinstance(mem.payload.get("exit_code"), int), (rel, check)
        raw = path.read_text("utf-8", "replace")
        summary = str(c.message.parts[0].text).rstrip()  # type: ignore[union-attr]
        for budget in (4000, 16000):
            payload = led.assemble(conv, budget_tokens=budget, persist=False, replay="estimate").payload
            messages = [m for m in payload.get("messages", payload.get("input", [])) if m.get("role") != "system"]
            # task-state notes (the working set) may precede it; no recorded message does
            lead = next(m for m in messages if not _first_text(m).startswith(NOTE))
            # the summary, whole or (at a tight budget) cut to its tail: it ends as recorded
            assert _first_text(lead).rstrip().endswith(summary[-12:]), (rel, budget, json.dumps(lead)[:300])
            assert "(continuing)" in raw or "(continuing)" not in json.dumps(payload, ensure_ascii=False), (rel, budget)
    finally:
        led.close()
