"""The query of one model request (seed 001 §4.5, §9): what the retrieval router is asked
before a request is assembled.

* ``text`` — the current user input (embedded for the semantic route; the user message
  was embedded when it was recorded, so ``vector_of`` names it and no model runs);
* ``context`` — task state (the task statement, the working set's files) and the
  unresolved calls (tool name and the head of the arguments), for the keyword routes;
* ``paths`` — the file paths named anywhere in them (artifact lookup, path rules).
"""

from __future__ import annotations

from collections.abc import Sequence

from contextledger.records.models import Message, ToolCall
from contextledger.retrieval.documents import message_text
from contextledger.retrieval.model import RetrievalQuery
from contextledger.retrieval.routes.lookup import named_paths

__all__ = ["ARGUMENT_CHARS", "request_query"]

ARGUMENT_CHARS = 300
"""Characters of an unresolved call's arguments taken into the query."""


def request_query(current: Message | None, *, task_state: str = "", unresolved: Sequence[ToolCall] = ()) -> RetrievalQuery:
    """The :class:`RetrievalQuery` of a request whose newest user message is ``current``
    (``None``: no user input yet — the query is the task state and calls alone)."""
    text = (message_text(current) or "") if current is not None else ""
    calls = "\n".join(f"{c.tool_name} {c.arguments_json[:ARGUMENT_CHARS]}" for c in unresolved)
    context = "\n".join(p for p in (task_state, calls) if p)
    return RetrievalQuery(
        text=text,
        context=context,
        vector_of=current.id if current is not None and text else None,
        paths=tuple(named_paths(f"{text}\n{context}")),
    )
