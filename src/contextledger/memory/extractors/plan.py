"""Plan tools: the plan itself, not the tool's acknowledgement.

A plan tool's result says nothing ("Todos have been modified successfully…", "Plan
updated"); the plan is in the call.  Recognised through the tool registry (kind
``plan``), with each agent's documented arguments:

* Claude Code ``TodoWrite``: ``todos`` = ``[{content, status, activeForm}]``;
* Codex ``update_plan``: ``plan`` = ``[{step, status}]``, optional ``explanation``;
* Gemini CLI ``write_todos``: ``todos`` = ``[{description, status}]``;
* Claude Code ``ExitPlanMode``: ``plan`` = the plan as text.

Every plan memory has the subject ``plan:todo`` (``plan:proposal`` for an
``ExitPlanMode`` text), so a newer plan supersedes the older one
(:func:`contextledger.memory.links.plan_links`).

Payload keys: ``todos`` (``[{"text", "status"}]``, at most :data:`MAX_PLAN_ITEMS`, each
text at most :data:`PLAN_ITEM_CHARS` characters), ``todos_total``, ``counts``
(status → number), ``explanation`` (Codex) or ``text`` (a plan given as text, capped).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from contextledger.memory.extractors.actions import resolve_action
from contextledger.memory.extractors.base import Extraction, ToolInput
from contextledger.memory.extractors.textutil import cap, fmt_int
from contextledger.records.enums import ConfidenceBasis, ContextKind, FreshnessClass, Shape

__all__ = ["MAX_PLAN_ITEMS", "PLAN_ITEM_CHARS", "PlanExtractor", "plan_items"]

MAX_PLAN_ITEMS = 30
PLAN_ITEM_CHARS = 160
PLAN_TEXT_CHARS = 1500
_TEXT_KEYS = ("content", "step", "description", "text", "title", "task")
_STATUS_ORDER = ("completed", "in_progress", "pending")


def plan_items(args: dict[str, Any]) -> list[dict[str, str]] | None:
    """``[{"text", "status"}]`` of a plan call's ``todos`` / ``plan`` list (statuses as
    written, ``pending`` when missing); ``None`` when the call carries no list."""
    value = args.get("todos", args.get("plan"))
    if not isinstance(value, list):
        return None
    items: list[dict[str, str]] = []
    for entry in value:
        if isinstance(entry, str):
            items.append({"text": entry, "status": "pending"})
            continue
        if not isinstance(entry, dict):
            continue
        text = next((entry[k] for k in _TEXT_KEYS if isinstance(entry.get(k), str) and entry[k].strip()), None)
        if text is None:
            continue
        status = entry.get("status")
        items.append({"text": text.strip(), "status": status.strip().lower() if isinstance(status, str) and status.strip() else "pending"})
    return items


class PlanExtractor:
    """Extractor for plan tools (``TodoWrite``, ``update_plan``, ``write_todos``,
    ``ExitPlanMode``)."""

    name = "plan"

    def matches(self, item: ToolInput) -> bool:
        """True for a successful call of a tool of kind ``plan`` that carries a plan."""
        if item.is_error or resolve_action(item).kind != "plan":
            return False
        args = item.arguments or {}
        return plan_items(args) is not None or isinstance(args.get("plan"), str)

    def extract(self, item: ToolInput) -> Extraction:
        """The plan extract of ``item``."""
        args = item.arguments or {}
        items = plan_items(args)
        if items is None:
            text = str(args.get("plan", "")).strip()
            first = next((ln.strip("# ").strip() for ln in text.splitlines() if ln.strip()), "(empty plan)")
            return self._extraction({"text": cap(text, PLAN_TEXT_CHARS)}, f"plan proposed: {cap(first, 160)}", "plan:proposal")
        counts: dict[str, int] = {}
        for it in items:
            counts[it["status"]] = counts.get(it["status"], 0) + 1
        done = counts.get("completed", 0)
        summary = f"plan: {fmt_int(done)} of {fmt_int(len(items))} done"
        doing = [it["text"] for it in items if it["status"] == "in_progress"]
        if doing:
            summary += f" · in progress: {cap(doing[0], 120)}"
        payload: dict[str, Any] = {
            "todos": [{"text": cap(it["text"], PLAN_ITEM_CHARS), "status": it["status"]} for it in items[:MAX_PLAN_ITEMS]],
            "todos_total": len(items),
            "counts": {k: counts[k] for k in sorted(counts, key=lambda s: (_STATUS_ORDER.index(s) if s in _STATUS_ORDER else 9, s))},
        }
        if isinstance(args.get("explanation"), str) and args["explanation"].strip():
            payload["explanation"] = cap(args["explanation"].strip(), 300)
        ext = self._extraction(payload, summary, "plan:todo")
        if len(items) > MAX_PLAN_ITEMS:
            return dataclasses.replace(ext, limits=f"first {MAX_PLAN_ITEMS} of {fmt_int(len(items))} plan items")
        return ext

    @staticmethod
    def _extraction(payload: dict[str, Any], summary: str, subject: str) -> Extraction:
        return Extraction(
            kind="plan",
            summary=summary,
            payload=payload,
            shape=Shape.STRUCTURED,
            context_kind=ContextKind.PLANNING,
            freshness_class=FreshnessClass.SESSION,
            subject_key=subject,
            confidence=1.0,
            confidence_basis=ConfidenceBasis.DETERMINISTIC_PARSE,
        )
