"""Seed 000 §9.1 scenario 6 — contradiction and supersession.

The same CRM account is read twice: the newer observation supersedes the older one (the
successor is kept, the superseded value omitted).  Two different systems disagree on the
renewal date: both sides of that live conflict are shown.
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

__all__ = ["SEED_6"]


def _build(ledger: Ledger, scale: int) -> BuiltCase:
    s = Script(ledger, title="renewal check", system_prompt="You are a revenue-operations assistant.", seed="seed-6")
    s.user("Check the Contoso account before the renewal.")
    s.call("crm_get_account", {"account_id": "acc_C0N7"}, json.dumps({"status": 200, "account_id": "acc_C0N7", "plan": "Team", "seats": 25, "owner": "rep-ana", "notes": "pilot in EU region"}))
    s.filler(filler_tokens(scale, 1188, SEED_REPLAY_TOKENS["seed-6"]), fit=True)
    s.call("crm_get_account", {"account_id": "acc_C0N7"}, json.dumps({"status": 200, "account_id": "acc_C0N7", "plan": "Enterprise", "seats": 60, "owner": "rep-ana", "notes": "upgraded after pilot"}))
    s.call("crm_get_renewal", {"account_id": "acc_C0N7"}, json.dumps({"status": 200, "account_id": "acc_C0N7", "renewal_date": "2026-04-30"}))
    s.call("billing_get_subscription", {"customer": "acc_C0N7"}, json.dumps({"status": 200, "subscription_id": "sub_91x", "renewal_date": "2026-05-31", "seats": 60}))
    s.user("Which plan are they on and when do they renew?")
    return BuiltCase(
        conversation_id=s.id, branch_id=None, participant_id=None, provider="anthropic", budget_tokens=seed_budget("seed-6"),
        now=T0.replace(hour=13),
        must_see=(
            Fact("Enterprise", "current plan (the successor observation)"),
            Fact("2026-04-30", "renewal date per CRM (one side of the conflict)"),
            Fact("2026-05-31", "renewal date per billing (other side of the conflict)"),
        ),
        must_not_see=(Fact('"plan": "Team"', "superseded plan presented as raw data"),),
    )


SEED_6 = Scenario(name="seed-6", title="contradiction and supersession", source="seed 000 §9.1 (6)", seed_scenario=True, build=_build)
