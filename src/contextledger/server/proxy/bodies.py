"""Dialects that read requests and answers with the request-body importers
(:func:`contextledger.ingest.importers.bodies.parse_request_body`).

The leading system / developer messages of a parsed body are the client's system
prompt; the rest is the history.  An answer is parsed by handing the same body and the
provider's response object to the importer, so call ids are issued exactly as they will be
when the client resends the answer in its next request.
"""

from __future__ import annotations

from typing import Any

from contextledger.ingest.importers.bodies import parse_request_body
from contextledger.records.enums import Role
from contextledger.records.parts import TextPart
from contextledger.server.proxy.dialect import Answer, Dialect
from contextledger.server.proxy.reconcile import ParsedRequest

__all__ = ["BodyDialect", "BodyRequest"]

_SYSTEM = (Role.SYSTEM, Role.DEVELOPER)


class BodyRequest(ParsedRequest):
    """A parsed request that keeps its body, how many system messages led it, how many
    messages of the parsed body it holds (``consumed``: the answer's messages follow
    them) and the client context a dialect took out of the history (``context``)."""

    body: dict[str, Any]
    head: int
    consumed: int
    context: list[str]


class BodyDialect(Dialect):
    """A dialect whose bodies :func:`parse_request_body` reads (``body_provider``)."""

    body_provider: str

    def parse(self, body: dict[str, Any]) -> ParsedRequest:
        transcript = parse_request_body(self.body_provider, body)
        messages = transcript.messages
        head = 0
        while head < len(messages) and messages[head].role in _SYSTEM:
            head += 1
        texts = ("\n".join(p.text for p in m.parts if isinstance(p, TextPart)) for m in messages[:head])
        model = body.get("model")
        parsed = BodyRequest(
            system_text="\n\n".join(t for t in texts if t.strip()), messages=messages[head:], tools=list(transcript.tools),
            model=model if isinstance(model, str) else None, stream=body.get("stream") is True,
        )
        parsed.body = body
        parsed.head = head
        parsed.consumed = len(messages)
        parsed.context = []
        return parsed

    def answer_from_json(self, parsed: ParsedRequest, data: dict[str, Any]) -> Answer:
        assert isinstance(parsed, BodyRequest)
        transcript = parse_request_body(self.body_provider, parsed.body, response=data)
        new = transcript.messages[parsed.consumed:]
        usage = data.get("usage")
        choices = data.get("choices")
        finish = choices[0].get("finish_reason") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
        return Answer(
            messages=list(new), usage=usage if isinstance(usage, dict) else {}, response_id=data.get("id") if isinstance(data.get("id"), str) else None,
            model=data.get("model") if isinstance(data.get("model"), str) else None,
            finish_reason=str(finish or data.get("stop_reason") or data.get("status") or "") or None,
        )
