"""Which user messages state the task (seed 001 §9 temperature: the task statement and
the current input are hot; seed 000 §4.6 the goal is never lost).

A user message states the task when it holds the user's own words: not a scaffold
demonstration (SWE-agent's ``is_demo`` example trajectory) and not wholly
client-injected text (:mod:`contextledger.ingest.preambles`: Codex's
``<environment_context>`` and AGENTS.md blocks, Claude Code's ``<system-reminder>`` …).
The task statement is the first such message of the lineage, the current input the
newest.
"""

from __future__ import annotations

from contextledger.ingest.preambles import is_injected
from contextledger.records.models import Message
from contextledger.records.parts import TextPart

__all__ = ["TASK_PROBE", "states_task"]

TASK_PROBE = 16
"""User messages read from each end of the lineage to find the first (and the newest)
that states the task: a client injects a few preamble messages per turn, never more."""


def states_task(m: Message) -> bool:
    """Whether user message ``m`` holds the user's own words (module docstring); linear
    in the size of its text."""
    if m.metadata.get("is_demo"):
        return False
    return not is_injected("\n".join(p.text for p in m.parts if isinstance(p, TextPart)))
