"""Runtime-graph operations across records: promotion, resume, runtime-mode entry points
(seed 000 §4.1, §4.9, §4.13, §4.14)."""

from contextledger.graph.modes import ScheduledTurn, SubagentStart, scheduled_turn, start_subagent
from contextledger.graph.promotion import (
    ChildReport,
    PromotionError,
    promote,
    resolve_with_child_report,
)
from contextledger.graph.resume import ResumeState, resume_state

__all__ = [
    "ChildReport",
    "PromotionError",
    "ResumeState",
    "ScheduledTurn",
    "SubagentStart",
    "promote",
    "resolve_with_child_report",
    "resume_state",
    "scheduled_turn",
    "start_subagent",
]
