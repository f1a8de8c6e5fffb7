"""Connected-app scenarios: seed 000 §9.1 scenario 3 (stale memory of calendar, CRM and
mail observations) and the §9.2 case "privacy omission of restricted raw bodies".
"""

from __future__ import annotations

import json
from datetime import timedelta

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
from contextledger.records.enums import PrivacyClass

__all__ = ["PRIVACY_OMISSION", "SEED_3"]


def _build_seed3(ledger: Ledger, scale: int) -> BuiltCase:
    s = Script(ledger, title="account prep", system_prompt="You are an executive assistant with calendar, CRM and mail tools.", seed="seed-3")
    s.user("Prepare me for the Northwind renewal call.")
    events = [
        {"id": "evt_5521", "title": "Northwind renewal sync", "start": "2026-03-04T14:00:00Z", "status": "confirmed", "room": "Atlas-3", "attendees": ["dana@northwind.example", "me"]},
        {"id": "evt_5530", "title": "Pipeline review", "start": "2026-03-04T16:00:00Z", "status": "tentative", "room": "Zoom", "attendees": ["sales-team"]},
    ]
    s.call("calendar_list_events", {"day": "2026-03-04"}, json.dumps({"status": 200, "events": events}))
    s.call("crm_get_account", {"account_id": "acc_NW01"}, json.dumps({"status": 200, "account_id": "acc_NW01", "name": "Northwind", "stage": "negotiation", "arr_usd": 182000, "open_risk": "procurement freeze"}))
    s.call("mail_get_thread", {"thread_id": "thr_93b1"}, json.dumps({"status": 200, "thread_id": "thr_93b1", "subject": "Renewal terms", "last_message": "We can sign at 8% uplift if the SLA credits stay."}))
    s.say("Prep notes are drafted from the calendar, CRM and the renewal thread.")
    s.filler(filler_tokens(scale, 563, SEED_REPLAY_TOKENS["seed-3"]), fit=True)
    s.user("It's Thursday now. Is the Northwind sync still on, and what did they last say?")
    return BuiltCase(
        conversation_id=s.id, branch_id=None, participant_id=None, provider="openai-chat", budget_tokens=seed_budget("seed-3"),
        now=T0 + timedelta(days=3),
        must_see=(
            Fact("evt_5521", "the calendar event, as stale memory"),
            Fact("stale", "a stale marker"),
            Fact("calendar_list_events", "revalidation hint: the tool to call again"),
            Fact("thr_93b1", "the mail thread, as stale memory"),
        ),
        must_not_see=(
            Fact('"status": "confirmed"', "a 3-day-old calendar status presented as current raw data"),
            Fact('"stage": "negotiation"', "a 3-day-old CRM stage presented as current raw data"),
        ),
    )


SEED_3 = Scenario(name="seed-3", title="connected-app stale memory", source="seed 000 §9.1 (3)", seed_scenario=True, build=_build_seed3)


def _build_privacy(ledger: Ledger, scale: int) -> BuiltCase:
    s = Script(ledger, title="inbox triage", system_prompt="You are an inbox assistant.", seed="privacy-omission")
    s.user("Sort the old newsletters first.")
    s.filler(filler_tokens(scale, 700, 1400))
    s.user("What does the landlord's latest email want from me?")
    body = {
        "thread_id": "thr_L4nd",
        "subject": "Lease renewal paperwork",
        "from": "landlord@example.org",
        "body": "Hi, please send the signed renewal by Friday. My private number is +1 415 555 0199 and the gate code is 4471#. Bank details for the deposit: IBAN DE89 3704 0044 0532 0130 00.",
    }
    s.call("gmail_get_thread", {"thread_id": "thr_L4nd"}, json.dumps(body), privacy=PrivacyClass.GOOGLE_USER_DATA)
    s.say("I read the thread.")
    s.user("Draft a short reply saying I'll send it Thursday.")
    return BuiltCase(
        conversation_id=s.id, branch_id=None, participant_id=None, provider="anthropic", budget_tokens=400,
        now=T0.replace(hour=11),
        must_see=(Fact("thr_L4nd", "the thread reference (safe summary / revalidation)"), Fact("send it Thursday", "current request")),
        must_not_see=(
            Fact("+1 415 555 0199", "restricted raw body: phone number"),
            Fact("4471#", "restricted raw body: gate code"),
            Fact("DE89 3704 0044 0532 0130 00", "restricted raw body: IBAN"),
        ),
    )


PRIVACY_OMISSION = Scenario(name="privacy-omission", title="privacy omission of restricted raw bodies", source="seed 000 §9.2", seed_scenario=False, build=_build_privacy)
