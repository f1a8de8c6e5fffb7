"""Seed 000 §9.1 scenario 1 — pending document selection.

A picker awaiting the user's choice must stay resumable: the pending call, the options it
offers and the user's request reach the model; the raw search payload (thumbnails, owner
e-mails of the documents not offered) does not.
"""

from __future__ import annotations

import json

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

__all__ = ["SEED_1"]


def _build(ledger: Ledger, scale: int) -> BuiltCase:
    s = Script(ledger, title="board deck", system_prompt="You are a document assistant for the user's shared drive.", seed="seed-1")
    s.user("First tidy the archive folders, then I will ask for a deck.")
    s.filler(filler_tokens(scale, 475, SEED_REPLAY_TOKENS["seed-1"]), fit=True)
    s.user("Find last quarter's board deck and summarise its revenue slide.")
    docs = [
        {"id": "doc_7Hq2", "title": "Board deck Q4 2025 (final)", "modified": "2026-01-28", "owner": "cfo@example.com", "thumbnail": "thumb-ff31a0", "size": 4811023},
        {"id": "doc_K81m", "title": "Board deck Q4 2025 (draft v3)", "modified": "2026-01-19", "owner": "strategy@example.com", "thumbnail": "thumb-0c9e17", "size": 4377120},
        {"id": "doc_2Pzw", "title": "Board deck Q3 2025", "modified": "2025-10-30", "owner": "cfo@example.com", "thumbnail": "thumb-a7d402", "size": 3902214},
        {"id": "doc_Vn44", "title": "Q4 board pre-read notes", "modified": "2026-01-20", "owner": "ops-lead@example.com", "thumbnail": "thumb-5b6e88", "size": 120331},
        {"id": "doc_Mm90", "title": "Board offsite agenda", "modified": "2026-01-05", "owner": "assistant@example.com", "thumbnail": "thumb-c1f2d3", "size": 40210},
    ]
    s.call("drive_search", {"query": "board deck Q4 2025", "limit": 5}, json.dumps({"files": docs, "next_page": "tok_88aa"}, ensure_ascii=False))
    picker = s.call(
        "request_user_choice",
        {"prompt": "Two Q4 decks match. Which one should I summarise?", "options": ["doc_7Hq2", "doc_K81m"]},
        text="Two decks match; asking which one to use.",
    )
    s.rec.set_awaiting_approval(s.id, picker)
    return BuiltCase(
        conversation_id=s.id, branch_id=None, participant_id=None, provider="openai-chat", budget_tokens=seed_budget("seed-1"),
        now=T0.replace(hour=12),
        must_see=(
            Fact(picker, "the pending picker call (resumable)"),
            Fact("doc_7Hq2", "option 1 offered"),
            Fact("doc_K81m", "option 2 offered"),
            Fact("revenue slide", "the user's request"),
        ),
        must_not_see=(
            Fact("thumb-a7d402", "raw search payload: thumbnail of a document not offered"),
            Fact("ops-lead@example.com", "raw search payload: owner of a document not offered"),
        ),
    )


SEED_1 = Scenario(name="seed-1", title="pending document selection", source="seed 000 §9.1 (1)", seed_scenario=True, build=_build)
