"""Pin user constraints stated in conversation as rule records (issue: authority & rules).

"never …", "do not …", approval gates and target paths in a user message become pinned
:class:`~contextledger.policy.rules.Rule` records linked to the message; the assembler
re-emits them verbatim in the stable prefix of every later request, so a summary is never
the only carrier of a prohibition (seed 001 §6 problem 5, §10).
"""

from __future__ import annotations

from contextledger.policy.constraints import extract_user_constraints
from contextledger.records.enums import AuthorityLevel, MessageKind, Role
from contextledger.records.models import Message
from contextledger.records.parts import TextPart
from contextledger.store.base import Scope
from contextledger.store.sql import SqlStore, Writer

__all__ = ["pin_constraints_in", "pin_user_constraints"]


def pin_user_constraints(store: SqlStore, scope: Scope, message: Message) -> int:
    """Extract and pin the constraints of a user message; returns how many were new.

    Only user-authored chat messages (authority ``user``) can pin constraints; tool
    output, observations, imported non-user text and scaffold demonstrations
    (``metadata["is_demo"]``) never can.
    """
    if not _eligible(message):
        return 0
    with store.writer(scope) as w:
        return pin_constraints_in(w, message)


def _eligible(message: Message) -> bool:
    # a scaffold's demonstration (SWE-agent ``is_demo``) is user-role text the user never wrote
    return message.role is Role.USER and message.kind == MessageKind.CHAT and message.authority is AuthorityLevel.USER and not message.metadata.get("is_demo")


def pin_constraints_in(w: Writer, message: Message) -> int:
    """Same as :func:`pin_user_constraints`, inside an open write transaction."""
    if not _eligible(message):
        return 0
    text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart))
    if not text.strip():
        return 0
    n = 0
    # order = conversation position, then position in the message text: pinned
    # constraints are emitted in the order the user stated them, never by (random) id
    for i, r in enumerate(extract_user_constraints(text, message_id=message.id, order=message.seq * 1000)):
        r = r.model_copy(update={"order": message.seq * 1000 + i})
        if w.add_rule(r.id, message.conversation_id, message.branch_id, message.seq, r.model_dump(mode="json")):
            n += 1
    return n
