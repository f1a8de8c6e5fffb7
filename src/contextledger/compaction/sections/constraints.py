"""The ``hard_constraints`` section: every constraint the next model must still obey."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextledger.compaction.sections.common import is_user_chat
from contextledger.compaction.text import message_text
from contextledger.policy.constraints import extract_user_constraints
from contextledger.policy.rules import Rule
from contextledger.records.enums import AuthorityLevel
from contextledger.records.models import Message

__all__ = ["hard_constraints"]


def _constraint(rule: Mapping[str, Any], origin: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "text": str(rule.get("text", "")),
        "rule_id": str(rule.get("id", "")),
        "source": str(rule.get("source_message_id") or rule.get("source") or ""),
        "origin": origin,
        "strength": str(rule.get("strength", "hard")),
    }
    if rule.get("source_message_id"):
        entry["message_id"] = str(rule["source_message_id"])
    return entry


def hard_constraints(
    rules: Sequence[Mapping[str, Any]],
    extra_rules: Sequence[Rule],
    messages: Sequence[Message],
    covered_ids: frozenset[str],
    carried: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """Every constraint the next model must still obey, verbatim; never capped.

    In order: pinned rules of the lineage (``origin "pinned"``; by the stating message's
    seq, then position in its text), other stored
    rules (``"project"``), ``extra_rules`` (``"project"``), constraints stated in covered
    user chat messages that were not pinned (re-extracted with
    :func:`~contextledger.policy.constraints.extract_user_constraints`, ``"stated"``),
    then entries of the previous compaction not already present (``"carried"``).
    Duplicates (same rule id, or the same verbatim text) are listed once.
    """
    out: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    seen_text: set[str] = set()

    def add(entry: dict[str, Any]) -> None:
        rid = entry["rule_id"]
        if not entry["text"].strip() or (rid and rid in seen_ids) or entry["text"] in seen_text:
            return
        if rid:
            seen_ids.add(rid)
        seen_text.add(entry["text"])
        out.append(entry)

    texts = {m.id: message_text(m) for m in messages}

    def position(rule: Mapping[str, Any]) -> tuple[int, int, str]:
        source = texts.get(str(rule.get("source_message_id") or ""), "")
        at = source.find(str(rule.get("text", ""))) if source else -1
        return (int(rule.get("_seq", 0)), at, str(rule.get("id")))

    ordered = sorted(rules, key=position)
    for r in ordered:
        if r.get("pinned"):
            add(_constraint(r, "pinned"))
    for r in ordered:
        if not r.get("pinned"):
            add(_constraint(r, "project"))
    for rule in sorted(extra_rules, key=lambda r: (r.order, r.id)):
        add(_constraint(rule.model_dump(mode="json"), "project"))
    for m in messages:
        if m.id in covered_ids and is_user_chat(m) and m.authority is AuthorityLevel.USER:
            for rule in extract_user_constraints(message_text(m), message_id=m.id, order=m.seq):
                add(_constraint(rule.model_dump(mode="json"), "stated"))
    for entry in carried:
        if isinstance(entry, Mapping) and isinstance(entry.get("text"), str):
            kept = {
                "text": entry["text"],
                "rule_id": str(entry.get("rule_id", "")),
                "source": str(entry.get("source", "")),
                "origin": "carried",
                "strength": str(entry.get("strength", "hard")),
            }
            if entry.get("message_id"):
                kept["message_id"] = str(entry["message_id"])
            add(kept)
    return out
