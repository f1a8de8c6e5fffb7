"""Seed 000 §9.1 scenario 4 — multi-skill runtime state.

Loaded skills, the active profile and the directly usable tools reach the model; the raw
skill manuals loaded earlier and a tool of the profile that is no longer active do not.
"""

from __future__ import annotations

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

__all__ = ["SEED_4"]

_MANUAL = """# {name} skill
Step 1: open the source document with the reader tool.
Step 2: validate every field against the schema before writing.
Step 3: keep a log line per field changed.
Step 4: never overwrite the original; write a copy under out/.
Step 5: report the fields you could not fill.
Step 6: attach the output handle to your answer.
Step 7: {secret}
Appendix: the tool accepts fields as JSON objects with name, value and page keys; dates use ISO 8601; amounts use a dot as decimal separator and no thousands separator.
"""


def _build(ledger: Ledger, scale: int) -> BuiltCase:
    s = Script(ledger, title="expense forms", system_prompt="You are a back-office agent that works through skills.", seed="seed-4")
    s.user("Handle the support queue first.")
    s.rec.record_skill_state(s.id, loaded_skills=["support-macros"], active_profile="support-agent", usable_tools=["zendesk_reply", "kb_search"])
    s.filler(filler_tokens(scale, 246, SEED_REPLAY_TOKENS["seed-4"]), fit=True)
    s.user("Now switch to finance: fill the expense claim PDF from the March spreadsheet.")
    s.call("load_skill", {"name": "pdf-forms"}, _MANUAL.format(name="pdf-forms", secret="flatten the form layers before export"))
    s.call("load_skill", {"name": "xlsx-analyst"}, _MANUAL.format(name="xlsx-analyst", secret="recalculate pivot caches before reading totals"))
    s.rec.record_skill_state(s.id, loaded_skills=["pdf-forms", "xlsx-analyst"], active_profile="finance-analyst", usable_tools=["fill_pdf_form", "read_xlsx", "sum_columns"])
    s.say("Skills loaded; the finance profile is active.")
    s.user("Go ahead.")
    return BuiltCase(
        conversation_id=s.id, branch_id=None, participant_id=None, provider="anthropic", budget_tokens=seed_budget("seed-4"),
        now=T0.replace(hour=12),
        must_see=(
            Fact("pdf-forms", "loaded skill"),
            Fact("xlsx-analyst", "loaded skill"),
            Fact("finance-analyst", "active profile"),
            Fact("fill_pdf_form", "usable tool"),
            Fact("read_xlsx", "usable tool"),
        ),
        must_not_see=(
            Fact("zendesk_reply", "tool of the profile that is no longer active"),
            Fact("recalculate pivot caches before reading totals", "raw skill manual text"),
        ),
    )


SEED_4 = Scenario(name="seed-4", title="multi-skill runtime state", source="seed 000 §9.1 (4)", seed_scenario=True, build=_build)
