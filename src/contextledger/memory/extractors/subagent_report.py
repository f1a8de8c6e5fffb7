"""Subagent reports (``Task`` / ``Agent`` results): the report's head as a summary.

Seed 000 §4.14: a parent resume sees the *promoted child report*, never the raw child
workspace.  The report is text written by the child model, so the extract is labelled
``model_written`` with confidence 0.7: it carries the child's claims, not observations.

Payload keys: ``description``, ``subagent_type``, ``agent_id`` (when the report names
one), ``report_head`` (≤ :data:`REPORT_HEAD_CHARS` characters), ``report_chars``,
``report_lines``.
"""

from __future__ import annotations

import re
from typing import Any

from contextledger.memory.extractors.actions import resolve_action
from contextledger.memory.extractors.base import Extraction, ToolInput
from contextledger.memory.extractors.textutil import (
    body_ranges,
    cap,
    fmt_int,
    nonempty,
    split_lines,
    unwrap,
)
from contextledger.records.enums import ConfidenceBasis, ContextKind, FreshnessClass, Shape

__all__ = ["REPORT_HEAD_CHARS", "SubagentReportExtractor"]

REPORT_HEAD_CHARS = 1500
"""Characters of the report kept in the payload."""

_AGENT_ID = re.compile(r"\bagentId: (\w+)")


class SubagentReportExtractor:
    """Extractor for child-agent reports."""

    name = "subagent_report"

    def matches(self, item: ToolInput) -> bool:
        """True for ``Task`` / ``Agent`` style delegation tools."""
        return resolve_action(item).verb == "task"

    def extract(self, item: ToolInput) -> Extraction:
        """The report extract of ``item`` (shape ``summary``)."""
        args = item.arguments or {}
        body = unwrap(item.result_text)
        text = body.text.strip()
        lines = nonempty(split_lines(text))
        agent = _AGENT_ID.search(text[-500:])
        description = args.get("description")
        payload: dict[str, Any] = {
            "description": description if isinstance(description, str) else None,
            "subagent_type": args.get("subagent_type")
            if isinstance(args.get("subagent_type"), str)
            else None,
            "agent_id": agent.group(1) if agent else None,
            "report_head": cap(text, REPORT_HEAD_CHARS),
            "report_chars": len(text),
            "report_lines": len(lines),
        }
        label = f"subagent {payload['subagent_type'] or 'task'}"
        if payload["description"]:
            label += f" {cap(str(payload['description']), 80)!r}"
        first = f"{label} reported {fmt_int(len(text))} chars"
        heads = [cap(ln.strip().lstrip("#").strip(), 200) for ln in lines[:2]]
        prov_lines, prov_bytes = body_ranges(item.result_text, body)
        return Extraction(
            kind="subagent_report",
            summary="\n".join([first, *heads]),
            payload=payload,
            shape=Shape.SUMMARY,
            context_kind=ContextKind.RECOVERY if item.is_error else ContextKind.KNOWLEDGE,
            freshness_class=FreshnessClass.SESSION,
            subject_key=f"task:{payload['agent_id']}" if payload["agent_id"] else None,
            revalidation_tool=None,
            revalidation_args={},
            confidence=0.7,
            confidence_basis=ConfidenceBasis.MODEL_WRITTEN,
            limits=(
                f"report head {REPORT_HEAD_CHARS} of {fmt_int(len(text))} chars"
                if len(text) > REPORT_HEAD_CHARS
                else None
            ),
            error_type="error" if item.is_error else None,
            line_range=prov_lines,
            byte_range=prov_bytes,
        )
