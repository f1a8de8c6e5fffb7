"""Pinned constraints the request already carries where the user stated them.

A pinned constraint is restated verbatim in the system blocks so that it survives
compaction and the budget stage (seed 001 §6 problem 4: constraints stay in force after
any summary).  When the message that stated it is in the request raw, holding the
sentence verbatim, the restatement adds nothing the model does not read in the user's
own words — it only makes a small conversation's request larger than its replay
(issue "What a new user found", item 9).  Such constraints are sent once, in their
message, the way an epoch sends a constraint stated after its head
(:func:`~contextledger.assembly.epoch_extend.constraints_in_tail`); a re-plan that no
longer sends the message raw restates them again.
"""

from __future__ import annotations

from collections.abc import Sequence

from contextledger.policy.rules import Rule
from contextledger.providers.base import NeutralRequest
from contextledger.records.parts import TextPart

__all__ = ["constraints_shown"]


def constraints_shown(request: NeutralRequest, rules: Sequence[Rule]) -> tuple[str, ...]:
    """Ids of the pinned ``rules`` (in the order given) whose text a user-role message of
    ``request`` holds verbatim, that message being the one that stated it (its ``ref``
    is the rule's ``source_message_id``).  A cut message that lost the sentence, a
    memory or summary quoting it, or a rule without a source message does not count."""
    texts: dict[str, str] = {}
    for m in request.messages:
        if m.role == "user" and m.ref is not None:
            body = "\n".join(p.text for p in m.parts if isinstance(p, TextPart))
            texts[m.ref] = texts.get(m.ref, "") + "\n" + body
    return tuple(
        r.id for r in rules
        if r.pinned and r.source_message_id is not None and r.text and r.text in texts.get(r.source_message_id, "")
    )
