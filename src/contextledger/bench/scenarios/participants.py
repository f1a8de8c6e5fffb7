"""Participant scenarios: seed 000 §9.1 scenario 5 (participant visibility) and the §9.2
cases subagent continuation state, debate speaker attribution, child-subagent artifact
recording and parent resume metadata (seed 000 §9.3 runtime modes).
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
from contextledger.records.enums import MessageKind, PrivacyClass, RuntimeKind, Visibility

__all__ = ["CHILD_ARTIFACTS", "DEBATE", "PARENT_RESUME", "SEED_5", "SUBAGENT_CONTINUATION"]


def _build_seed5(ledger: Ledger, scale: int) -> BuiltCase:
    s = Script(ledger, title="invoice check", system_prompt="Two models answer the user in turn.", seed="seed-5", runtime_kind=RuntimeKind.MULTI_MODEL)
    a = s.rec.add_participant(s.id, "model-a", provider="openai-chat", model="gpt-a", runtime_kind=RuntimeKind.MULTI_MODEL)
    b = s.rec.add_participant(s.id, "model-b", provider="anthropic", model="claude-b", runtime_kind=RuntimeKind.MULTI_MODEL)
    s.user("Both of you: is invoice INV-2291 from Vendra correct?")
    s.filler(filler_tokens(scale, 297, SEED_REPLAY_TOKENS["seed-5"]), participant_id=a.id, fit=True)
    s.call(
        "erp_login", {"tenant": "acme"},
        json.dumps({"error": "401 invalid_grant", "access_token": "ya29.a0AfH6SMBx-private", "refresh_token": "1//0gPrivateRefresh"}),
        is_error=True, privacy=PrivacyClass.OAUTH_DERIVED, visibility=Visibility.PARTICIPANT_PRIVATE, participant_id=a.id,
    )
    s.call(
        "erp_get_invoice", {"invoice": "INV-2291"},
        json.dumps({"invoice": "INV-2291", "vendor": "Vendra", "lines": [{"sku": "VX-1", "qty": 10, "unit_eur": 418.0}], "total_eur": 4180.0}),
        visibility=Visibility.PARTICIPANT_PRIVATE, participant_id=a.id,
    )
    s.rec.record_message(
        s.id, "assistant", "Scratch: I suspect Vendra is overcharging by 12% versus the contract rate.",
        participant_id=a.id, visibility=Visibility.PARTICIPANT_PRIVATE,
    )
    s.say("INV-2291 totals 4,180 EUR for 10 units of VX-1; the arithmetic is correct.", participant_id=a.id, speaker_label="model-a")
    s.user("Model B, do you agree?")
    return BuiltCase(
        conversation_id=s.id, branch_id=None, participant_id=b.id, provider="anthropic", budget_tokens=seed_budget("seed-5"),
        now=T0.replace(hour=12),
        must_see=(Fact("4,180 EUR", "model A's shared answer"), Fact("do you agree?", "the question to B")),
        must_not_see=(
            Fact("overcharging by 12%", "model A's private note"),
            Fact("401 invalid_grant", "model A's private tool error"),
            Fact("ya29.a0AfH6SMBx-private", "OAuth payload"),
            Fact("1//0gPrivateRefresh", "OAuth payload"),
        ),
    )


SEED_5 = Scenario(name="seed-5", title="participant visibility", source="seed 000 §9.1 (5)", seed_scenario=True, build=_build_seed5)


def _build_debate(ledger: Ledger, scale: int) -> BuiltCase:
    s = Script(ledger, title="debate", system_prompt="A moderated debate between two speakers.", seed="debate", runtime_kind=RuntimeKind.DEBATE)
    pro = s.rec.add_participant(s.id, "pro", runtime_kind=RuntimeKind.DEBATE, role_label="pro")
    con = s.rec.add_participant(s.id, "con", runtime_kind=RuntimeKind.DEBATE, role_label="con")
    s.user("Motion: the city should replace its bus fleet with electric buses by 2030.")
    s.rec.record_message(s.id, "user", "Moderator: each side gets one rebuttal of at most 120 words; cite the figures you use.", kind=MessageKind.MODERATOR, speaker_label="moderator")
    s.filler(filler_tokens(scale, 500, 1400), participant_id=pro.id)
    s.say("Electric buses cut per-km energy cost by 62% in the Oslo pilot.", participant_id=pro.id, speaker_label="pro")
    s.say("Depot charging upgrades would cost 41 million, more than the whole 2026 transit budget.", participant_id=con.id, speaker_label="con")
    s.user("Pro, your rebuttal.")
    return BuiltCase(
        conversation_id=s.id, branch_id=None, participant_id=pro.id, provider="anthropic", budget_tokens=400,
        now=T0.replace(hour=12),
        must_see=(
            Fact("at most 120 words", "moderator instruction"),
            Fact("[pro] Electric buses cut per-km energy cost by 62%", "pro's claim with its speaker label"),
            Fact("[con] Depot charging upgrades would cost 41 million", "con's claim with its speaker label"),
        ),
        must_not_see=(),
    )


DEBATE = Scenario(name="debate-attribution", title="debate speaker attribution", source="seed 000 §9.2", seed_scenario=False, build=_build_debate)


def _subagents(ledger: Ledger, scale: int, seed: str, base: int) -> tuple[Script, str, str, str]:
    s = Script(ledger, title="vendor research", system_prompt="You are a research lead that delegates to subagents.", seed=seed)
    parent = s.rec.add_participant(s.id, "lead", runtime_kind=RuntimeKind.CHAT)
    child = s.rec.add_participant(s.id, "researcher", runtime_kind=RuntimeKind.SUBAGENT_CHILD, parent_participant_id=parent.id)
    s.user("Compare the two shortlisted payroll vendors.")
    s.filler(filler_tokens(scale, base, 1500), participant_id=parent.id)
    task = s.call("Task", {"description": "research Paylane pricing", "subagent": "researcher"}, participant_id=parent.id)
    s.call("web_fetch", {"url": "https://paylane.example.com/pricing"}, "<html><body><h1>Pricing</h1><p>Core plan 6.50 EUR per employee per month; onboarding fee 1,900 EUR.</p><div class='cookie'>cookie-banner-7781</div></body></html>", participant_id=child.id)
    s.call("scratch_write", {"path": "/tmp/child/notes.md"}, "draft: maybe negotiate the onboarding fee; unsure about the EU data residency claim", participant_id=child.id)
    return s, parent.id, child.id, task


def _build_child(ledger: Ledger, scale: int) -> BuiltCase:
    s, parent, _, task = _subagents(ledger, scale, "child-artifacts", 700)
    s.result(task, "REPORT: Paylane Core costs 6.50 EUR per employee per month plus a 1,900 EUR onboarding fee. Source: vendor pricing page.")
    s.user("Summarise what the researcher found.", participant_id=parent)
    return BuiltCase(
        conversation_id=s.id, branch_id=None, participant_id=parent, provider="openai-chat", budget_tokens=500,
        now=T0.replace(hour=12),
        must_see=(Fact("6.50 EUR per employee per month", "the promoted child report"), Fact(task, "the delegating call")),
        must_not_see=(Fact("cookie-banner-7781", "raw child workspace: fetched page"), Fact("maybe negotiate the onboarding fee", "raw child workspace: scratch notes")),
    )


CHILD_ARTIFACTS = Scenario(name="child-artifacts", title="child subagent artifact recording", source="seed 000 §9.2, §9.3", seed_scenario=False, build=_build_child)


def _build_resume(ledger: Ledger, scale: int) -> BuiltCase:
    s, parent, _, task = _subagents(ledger, scale, "parent-resume", 300)
    s.result(task, "[timeout] researcher stopped after 300 s; partial finding: Paylane Core 6.50 EUR per employee per month.", is_error=True)
    s.rec.record_checkpoint(
        s.id, participant_id=parent, parent_tool_call_id=task, retry_contract={"attempts": 1, "max_attempts": 3, "idempotency_key": "idem-paylane-01"},
        state={"resume": "retry the Paylane research with a 600 s limit"}, visibility_scope=Visibility.BRANCH,
    )
    s.user("Resume where the research stopped.", participant_id=parent)
    return BuiltCase(
        conversation_id=s.id, branch_id=None, participant_id=parent, provider="anthropic", budget_tokens=500,
        now=T0.replace(hour=12),
        must_see=(
            Fact(task, "the timed-out delegating call"),
            Fact("timeout", "failure state"),
            Fact("idem-paylane-01", "retry contract idempotency key"),
            Fact("max_attempts", "retry contract"),
        ),
        must_not_see=(Fact("cookie-banner-7781", "raw child workspace"),),
    )


PARENT_RESUME = Scenario(name="parent-resume", title="parent resume metadata", source="seed 000 §9.2, §9.3", seed_scenario=False, build=_build_resume)


def _build_continuation(ledger: Ledger, scale: int) -> BuiltCase:
    s = Script(ledger, title="batch research", system_prompt="You are a research lead that delegates to subagents.", seed="subagent-continuation")
    s.user("Research both vendors in parallel.")
    s.filler(filler_tokens(scale, 600, 1500))
    done = s.next_call_id()
    pending = s.next_call_id()
    s.rec.record_assistant(s.id, text="Delegating both.", tool_calls=[
        {"call_id": done, "tool_name": "Task", "arguments": {"description": "research Paylane"}},
        {"call_id": pending, "tool_name": "Task", "arguments": {"description": "research Wageflow"}},
    ])
    s.result(done, "REPORT: Paylane supports EU data residency (Frankfurt region).")
    s.rec.record_checkpoint(s.id, pending_call_ids=(pending,), subagent_batch_id="batch_R7", visibility_scope=Visibility.BRANCH)
    s.user("Any news?")
    return BuiltCase(
        conversation_id=s.id, branch_id=None, participant_id=None, provider="openai-chat", budget_tokens=400,
        now=T0.replace(hour=12),
        must_see=(Fact(pending, "the still-running subagent call"), Fact("batch_R7", "the subagent batch to resume"), Fact("Frankfurt region", "the finished subagent's report")),
        must_not_see=(),
    )


SUBAGENT_CONTINUATION = Scenario(name="subagent-continuation", title="subagent continuation state", source="seed 000 §9.2", seed_scenario=False, build=_build_continuation)
