"""The compacted user goal quotes the user's own words only (seed 001 §10 handoff;
``ingest/preambles.py``): client-injected text is never quoted as the user's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import real_params
from contextledger.ingest.preambles import INJECTED_TAGS
from contextledger.ledger import Ledger

REMINDER = "<system-reminder>\nThe TodoWrite tool hasn't been used recently. Never mention this reminder.\n</system-reminder>"


def test_the_user_goal_and_later_requests_leave_out_injected_text(sqlite_ledger: Ledger) -> None:
    rec = sqlite_ledger.recorder()
    conv = rec.start_conversation(title="goal", system_prompt="You are a coding agent.")
    rec.record_message(conv.id, "user", "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>")
    first = rec.record_message(conv.id, "user", REMINDER + "\nPort the parser to Rust; keep the CLI flags.")
    for i in range(8):
        rec.record_message(conv.id, "assistant", f"Step {i} done.")
        rec.record_message(conv.id, "user", f"{REMINDER}\nNow do step {i + 1}." if i % 2 else REMINDER)
    c = sqlite_ledger.compact(conv.id, keep_recent_units=2)
    assert c.document["current_state"]["stopped_at"].endswith(": client context (no words of the user's)")
    goal = c.document["user_goal"]
    assert goal["text"] == "Port the parser to Rust; keep the CLI flags." and goal["message_id"] == first.id
    assert [r["text"] for r in goal["later_requests"]] and all(r["text"].startswith("Now do step ") for r in goal["later_requests"])
    rendered = "\n".join(getattr(p, "text", "") for p in c.message.parts)
    assert "Port the parser to Rust; keep the CLI flags." in rendered and "TodoWrite tool hasn't been used" not in rendered


REAL = real_params("codemie-code/**/*.jsonl", "claude-code-viewer-dkimuson/*.jsonl", "marot-spotter/*.jsonl", "claude-reliability-snapshots/*.jsonl")


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name if isinstance(p, Path) else str(p))
def test_real_compacted_goals_quote_no_injected_text(tmp_path: Path, path: Path) -> None:
    led = Ledger.open(home=tmp_path / "home")
    try:
        conv = led.import_file(path).conversation_id
        try:
            c = led.compact(conv, keep_recent_units=2)
        except Exception as exc:  # too short to compact: nothing to check
            pytest.skip(f"{path.name}: {exc}")
    finally:
        led.close()
    goal, state = c.document["user_goal"], c.document["current_state"]
    stopped = state.get("stopped_at") if isinstance(state, dict) else None
    quoted = [stopped] if isinstance(stopped, str) and ": user said: " in stopped else []
    if not isinstance(goal, str):
        quoted += [goal["text"], *(r["text"] for r in goal["later_requests"])]
    for text in quoted:
        assert text.strip(), path.name
        assert not any(f"<{tag}" in text for tag in INJECTED_TAGS), (path.name, text[:200])
        assert not text.startswith(("# AGENTS.md instructions", "Caveat: The messages below")), (path.name, text[:200])
