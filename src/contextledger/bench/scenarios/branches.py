"""Branch scenarios of seed 000 §9.2/§9.3: branch isolation and branch send.

A sibling branch's tool results never enter the active branch's context; a branch send
inherits exactly the lineage of its explicit parent message.
"""

from __future__ import annotations

import json

from contextledger.bench.probes import Fact
from contextledger.bench.scenarios.base import T0, BuiltCase, Scenario, Script, filler_tokens
from contextledger.ledger import Ledger

__all__ = ["BRANCH_ISOLATION", "BRANCH_SEND"]


def _base(ledger: Ledger, scale: int, seed: str) -> tuple[Script, str]:
    s = Script(ledger, title="supplier quotes", system_prompt="You are a procurement assistant.", seed=seed)
    s.user("Review the old purchase orders first.")
    s.filler(filler_tokens(scale, 650, 1500))
    fork_at = s.user("We need 40 standing desks delivered by April.")
    return s, fork_at.id


def _build_isolation(ledger: Ledger, scale: int) -> BuiltCase:
    s, fork_at = _base(ledger, scale, "branch-isolation")
    main = s.conv.root_branch_id
    sibling = s.rec.fork(s.id, fork_at, name="try Globex")
    s.call("get_quote", {"supplier": "Globex", "qty": 40}, json.dumps({"quote_id": "Q-881", "supplier": "Globex", "unit_usd": 389}), branch_id=sibling.id)
    s.rec.record_assistant(s.id, text="Globex quotes 389 USD per desk (Q-881).", branch_id=sibling.id)
    s.call("get_quote", {"supplier": "Acme", "qty": 40}, json.dumps({"quote_id": "Q-552", "supplier": "Acme", "unit_usd": 412, "delivery": "2026-03-28"}), branch_id=main)
    s.user("Is Acme's delivery date in time?", branch_id=main)
    return BuiltCase(
        conversation_id=s.id, branch_id=main, participant_id=None, provider="openai-chat", budget_tokens=400,
        now=T0.replace(hour=12),
        must_see=(Fact("Q-552", "this branch's quote"), Fact("2026-03-28", "this branch's delivery date")),
        must_not_see=(Fact("Q-881", "sibling branch quote"), Fact("389", "sibling branch price")),
    )


BRANCH_ISOLATION = Scenario(name="branch-isolation", title="branch isolation", source="seed 000 §9.2", seed_scenario=False, build=_build_isolation)


def _build_send(ledger: Ledger, scale: int) -> BuiltCase:
    s, fork_at = _base(ledger, scale, "branch-send")
    s.call("get_quote", {"supplier": "Globex", "qty": 40}, json.dumps({"quote_id": "Q-881", "supplier": "Globex", "unit_usd": 389}))
    s.say("Globex quotes 389 USD per desk (Q-881).")
    branch, _ = s.rec.branch_send(s.id, fork_at, "Instead, ask Initech for a quote on the same 40 desks.")
    s.call("get_quote", {"supplier": "Initech", "qty": 40}, json.dumps({"quote_id": "Q-907", "supplier": "Initech", "unit_usd": 401}), branch_id=branch.id)
    return BuiltCase(
        conversation_id=s.id, branch_id=branch.id, participant_id=None, provider="anthropic", budget_tokens=400,
        now=T0.replace(hour=12),
        must_see=(Fact("40 standing desks", "inherited parent lineage"), Fact("ask Initech", "the sent message"), Fact("Q-907", "this branch's quote")),
        must_not_see=(Fact("Q-881", "quote from the abandoned continuation of the parent"),),
    )


BRANCH_SEND = Scenario(name="branch-send", title="branch send", source="seed 000 §9.2, §9.3", seed_scenario=False, build=_build_send)
