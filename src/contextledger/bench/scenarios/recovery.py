"""Recovery scenarios of seed 000 §9.2: a retry-critical error kept, and a scheduled job
that resumes through the same assembly path (seed 000 §9.3).
"""

from __future__ import annotations

from datetime import timedelta

from contextledger.bench.probes import Fact
from contextledger.bench.scenarios.base import T0, BuiltCase, Scenario, Script, filler_tokens
from contextledger.ledger import Ledger
from contextledger.records.enums import RuntimeKind, Visibility

__all__ = ["RETRY_CRITICAL", "SCHEDULED_JOB"]

_TRACE = "\n".join(f"    at Pool.query (node_modules/pg/lib/pool.js:{40 + i}:{i})" for i in range(14))


def _build_retry(ledger: Ledger, scale: int) -> BuiltCase:
    s = Script(ledger, title="deploy", system_prompt="You are a release engineer agent.", seed="retry-critical")
    s.user("Deploy release 4.2 to staging.")
    cid = s.call(
        "run_migrations", {"env": "staging", "release": "4.2"},
        f"Applying 0041_users ... ok\nApplying 0042_add_index ...\nERROR: migration 0042_add_index failed: lock timeout on table orders\n{_TRACE}",
        is_error=True,
    )
    s.rec.record_checkpoint(s.id, retry_contract={"failed_call": cid, "attempts": 1, "max_attempts": 3, "next": "retry with lock_timeout=30s"}, visibility_scope=Visibility.BRANCH)
    s.filler(filler_tokens(scale, 600, 1500))
    s.user("Retry the deploy now that traffic is low.")
    return BuiltCase(
        conversation_id=s.id, branch_id=None, participant_id=None, provider="openai-chat", budget_tokens=400,
        now=T0.replace(hour=13),
        must_see=(Fact("ERROR: migration 0042_add_index failed: lock timeout on table orders", "retry-critical error line"), Fact("lock_timeout=30s", "retry contract")),
        must_not_see=(Fact("pool.js:53:13", "raw stack-frame noise"),),
    )


RETRY_CRITICAL = Scenario(name="retry-critical-error", title="retry-critical error kept", source="seed 000 §9.2", seed_scenario=False, build=_build_retry)


def _build_job(ledger: Ledger, scale: int) -> BuiltCase:
    s = Script(ledger, title="daily digest", system_prompt="You run the scheduled daily metrics digest.", seed="scheduled-job", runtime_kind=RuntimeKind.SCHEDULED_JOB)
    s.user("Every weekday at 07:00, post yesterday's signup and churn numbers to #metrics.")
    s.filler(filler_tokens(scale, 700, 1500))
    s.call("metrics_query", {"metric": "signups", "day": "2026-03-02"}, '{"metric": "signups", "day": "2026-03-02", "value": 1284}')
    s.call("metrics_query", {"metric": "churn", "day": "2026-03-02"}, "ERROR 503: metrics warehouse unavailable", is_error=True)
    s.tick(60 * 20)
    s.user("Scheduled run 2026-03-03 07:00: continue the digest.")
    return BuiltCase(
        conversation_id=s.id, branch_id=None, participant_id=None, provider="anthropic", budget_tokens=400,
        now=T0 + timedelta(hours=22),
        must_see=(Fact("#metrics", "job instruction"), Fact("ERROR 503: metrics warehouse unavailable", "last run's failure")),
        must_not_see=(),
    )


SCHEDULED_JOB = Scenario(name="scheduled-job", title="scheduled job", source="seed 000 §9.2, §9.3", seed_scenario=False, build=_build_job)
