"""Side calls: a client's small utility requests beside its conversation, which the proxy
forwards untouched and never records as a conversation.

Interactive agent clients make model requests that are not turns of the agent's
conversation.  Claude Code (2.1.x) sends, besides its main loop:

* probes with ``max_tokens: 1`` — a quota check (one user message ``"quota"``), model
  and API-key validation (``"Hi"``, ``"."``): one output token cannot carry an answer;
* one-shot calls to the small model — the session title (a title-writing system prompt,
  the session text in one user message, a JSON output schema), topic checks, summaries,
  command-prefix extraction …: built by one helper that sends ``tools: []``, a single
  user message and thinking disabled, with the session's identity.

Every request of a Claude Code session names its session (header
``X-Claude-Code-Session-Id``; ``metadata.user_id`` holds ``session_id``), the main loop
always declares its tools, and the main loop's history starts with the user's prompt and
grows.  Codex names its session in a ``session_id`` header.  The rule, from those facts
and not from any prompt's wording:

1. a request whose output limit (``max_tokens``, ``max_completion_tokens``,
   ``max_output_tokens``) is at most :data:`PROBE_MAX_OUTPUT_TOKENS` is a *probe*;
2. a request of an identified agent session (:func:`session_of`) that declares no client
   tools (function / custom tools; a provider's server tools such as web search do not
   count) and whose history is one user turn is a *one-shot* side call.

A client that names its conversation (``x-contextledger-conversation``) asks for the
turn to be recorded: rule 2 does not apply to it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from contextledger.server.proxy.dialect import Dialect
from contextledger.server.proxy.events import note

__all__ = ["PROBE_MAX_OUTPUT_TOKENS", "SIDE_CALL_HEADER", "SideCall", "forward_side_call", "session_of", "side_call"]

_log = logging.getLogger("contextledger.server.proxy")

PROBE_MAX_OUTPUT_TOKENS = 1
"""An output limit this small cannot carry an answer: the request probes the API."""

SIDE_CALL_HEADER = "x-contextledger-side-call"
"""Response header naming why a request was forwarded as a side call."""

_SESSION_HEADERS = ("x-claude-code-session-id", "session_id", "session-id")
_LEGACY_USER_ID = re.compile(r"_session_([0-9A-Za-z-]{8,})\Z")
_CLIENT_TOOL_TYPES = (None, "custom", "function")
_SYSTEM_ROLES = ("system", "developer")


@dataclass(frozen=True, kw_only=True)
class SideCall:
    """A recognised side call.

    Attributes:
        rule: ``"probe"`` or ``"one-shot"`` (see module docstring).
        session: the client's session id when the request names one.
        reason: one line for logs, the inspector and :data:`SIDE_CALL_HEADER`.
    """

    rule: str
    session: str | None
    reason: str


def session_of(headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
    """The agent session a request names: a session header
    (``X-Claude-Code-Session-Id``, Codex's ``session_id``), else ``metadata.user_id`` of a
    Messages body (a JSON object with ``session_id``, or the older
    ``user_<hash>_account_<id>_session_<id>`` form); ``None`` when it names none."""
    lowered = {k.lower(): v for k, v in headers.items()}
    for name in _SESSION_HEADERS:
        value = lowered.get(name, "").strip()
        if value:
            return value
    metadata = body.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
    if not isinstance(user_id, str) or not user_id:
        return None
    try:
        doc = json.loads(user_id)
    except ValueError:
        match = _LEGACY_USER_ID.search(user_id)
        return match.group(1) if match else None
    session = doc.get("session_id") if isinstance(doc, dict) else None
    return session if isinstance(session, str) and session else None


def _output_cap(body: Mapping[str, Any]) -> int | None:
    for name in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _client_tools(body: Mapping[str, Any]) -> int:
    tools = body.get("tools")
    return sum(1 for t in tools if isinstance(t, dict) and t.get("type") in _CLIENT_TOOL_TYPES) if isinstance(tools, list) else 0


def _one_user_turn(body: Mapping[str, Any]) -> bool:
    """Whether the history (``messages``, or a Responses ``input``) is one user turn
    after any system / developer entries."""
    history = body.get("input", body.get("messages"))
    if isinstance(history, str):
        return "messages" not in body  # a Responses input given as one string
    if not isinstance(history, list):
        return False
    turns = [h for h in history if not (isinstance(h, dict) and h.get("role") in _SYSTEM_ROLES)]
    if len(turns) != 1 or not isinstance(turns[0], dict):
        return False
    return turns[0].get("role") == "user" and turns[0].get("type", "message") == "message"


def side_call(headers: Mapping[str, str], body: Mapping[str, Any], *, named: bool = False) -> SideCall | None:
    """The side call ``body`` is (see module docstring for the rule), or ``None`` for a
    conversation turn.  ``named``: the client named its conversation (rule 2 off)."""
    session = session_of(headers, body)
    cap = _output_cap(body)
    of = f" of session {session}" if session else ""
    if cap is not None and cap <= PROBE_MAX_OUTPUT_TOKENS:
        return SideCall(rule="probe", session=session, reason=f"probe{of}: at most {cap} output token(s)")
    if session is not None and not named and _client_tools(body) == 0 and _one_user_turn(body):
        return SideCall(rule="one-shot", session=session, reason=f"one-shot call{of}: no tools, one user turn")
    return None


async def forward_side_call(request: Request, dialect: Dialect, raw: bytes, side: SideCall) -> Response:
    """Forward ``raw`` (the client's bytes, secrets already screened by the caller) to
    ``dialect``'s upstream; count it and show it in the inspector (a ``side_call``
    event), nothing recorded."""
    from contextledger.server.proxy.upstream import _send, _untouched

    _log.info("%s side call forwarded untouched: %s", dialect.name, side.reason)
    note(request, "side_call", dialect.name, side.reason)
    url = dialect.upstream_base(request.app.state.service.settings) + dialect.upstream_path
    url += f"?{request.url.query}" if request.url.query else ""
    upstream = await _send(request, dialect, "POST", url, raw)
    return upstream if isinstance(upstream, Response) else _untouched(upstream, {SIDE_CALL_HEADER: side.reason[:200]})
