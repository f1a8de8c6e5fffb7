"""The Anthropic Messages dialect (``POST /v1/messages``).

Request: ``system`` (a string or text blocks) is the client's system prompt and goes
upstream verbatim.  A ``role: "system"`` entry inside ``messages`` is client context, not
history (Claude Code's agent and skill listing, its standing reminders): it is folded, in
order, into the system prefix as a text block after the client's own blocks, an entry
repeated word for word only once — valid for every Messages API version, and the prefix
stays byte-stable from turn to turn (a client keeps its entries in its history, so a new
one extends the prefix once and a repeated one not at all).  The ledger's own blocks (rules, pinned constraints) follow as one more text
block.  ``messages`` is replaced by the assembled history, except that the assistant
message a tool loop continues — the one before the newest ``tool_result`` blocks — is sent
byte for byte as the client sent it, with its signed ``thinking`` / ``redacted_thinking``
blocks (the API refuses a modified one).  Breakpoints: the client's ``cache_control``
markers on ``tools`` and ``system`` stay where they are; the one it puts on its newest
message goes on the last block of the assembled newest message (the history before it is
the assembly's, so markers on older client messages have no equivalent place and are
dropped); one more marks the end of the stable prefix (tools and system) unless the
client placed one there, and inside an epoch, while the API's four allow, one marks the
end of the frozen prefix (the last message the request reuses unchanged from the previous
one, ``record.epoch["reused_messages"]``).  Every older assistant message
the assembly renders as the client's own turn without its signed thinking goes upstream
as the client sent it too — the same turn even where the records do not keep a field of
it (a tool call's ``caller``) — so each turn is sent the same way on every request.

Session: Claude Code names its session in ``x-claude-code-session-id`` and in
``metadata.user_id`` (a JSON object with ``session_id``, or the older
``user_…_account_…_session_<uuid>`` string).  ``tools`` go upstream as sent, plus the minimal declaration of a tool
called in the history but no longer declared; every other field passes unchanged.

Answer: the ``message`` object of a JSON body; for a stream, the object rebuilt from
``message_start``, the ``content_block_*`` events and ``message_delta`` up to
``message_stop`` (an ``error`` event, or a stream without ``message_stop``, records
nothing).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from contextledger.assembly.assembler import AssemblyResult
from contextledger.records.enums import Role
from contextledger.records.parts import TextPart
from contextledger.security.secrets import screen_text
from contextledger.server.proxy.bodies import BodyDialect, BodyRequest
from contextledger.server.proxy.dialect import Answer, AnswerStream
from contextledger.server.proxy.reconcile import ParsedRequest
from contextledger.server.proxy.sse import SseEvent
from contextledger.tokens import count_tokens

__all__ = ["MAX_CACHE_BREAKPOINTS", "AnthropicDialect"]

MAX_CACHE_BREAKPOINTS = 4
"""The Messages API accepts at most this many ``cache_control`` blocks per request."""

_THINKING = frozenset({"thinking", "redacted_thinking"})


def _count_breakpoints(value: Any) -> int:
    if isinstance(value, dict):
        return int("cache_control" in value) + sum(_count_breakpoints(v) for k, v in value.items() if k != "cache_control")
    if isinstance(value, list):
        return sum(_count_breakpoints(v) for v in value)
    return 0


def _system_blocks(system: Any, context: Sequence[str], ledger_blocks: Sequence[str]) -> list[dict[str, Any]] | str | None:
    """The client's system prompt, then its context entries, then the ledger's blocks."""
    if not ledger_blocks and not context:
        return copy.deepcopy(system) if system is not None else None
    blocks: list[dict[str, Any]] = []
    if isinstance(system, str) and system:
        blocks.append({"type": "text", "text": system})
    elif isinstance(system, list):
        blocks.extend(copy.deepcopy(system))
    blocks.extend({"type": "text", "text": text} for text in context if text)
    if ledger_blocks:
        blocks.append({"type": "text", "text": "\n\n".join(ledger_blocks)})
    return blocks


_SESSION_HEADER = "x-claude-code-session-id"
_LEGACY_SESSION = re.compile(r"_session_([0-9A-Za-z-]{8,64})$")


def _session_of_user_id(user_id: Any) -> str | None:
    """The session id inside ``metadata.user_id`` (see module docstring)."""
    if not isinstance(user_id, str) or not user_id:
        return None
    try:
        doc = json.loads(user_id)
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        sid = doc.get("session_id")
        return sid if isinstance(sid, str) and sid else None
    found = _LEGACY_SESSION.search(user_id)
    return found.group(1) if found else None


def _newest_marker(messages: list[Any]) -> dict[str, Any] | None:
    """The ``cache_control`` of the client's newest history message (its last marked
    block; ``system`` entries are context, not history)."""
    newest = next((m for m in reversed(messages) if isinstance(m, dict) and m.get("role") != "system"), None)
    if newest is None or not isinstance(newest.get("content"), list):
        return None
    marks = [b["cache_control"] for b in newest["content"] if isinstance(b, dict) and isinstance(b.get("cache_control"), dict)]
    return copy.deepcopy(marks[-1]) if marks else None


def _mark_last_block(message: dict[str, Any], marker: dict[str, Any], *, keep: bool = False) -> dict[str, Any]:
    """``message`` with ``marker`` on its last block (a string content becomes one text
    block); ``keep``: a block already marked keeps its marker."""
    content = message.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list) or not content or not isinstance(content[-1], dict) or content[-1].get("type") in _THINKING:
        return message
    if keep and "cache_control" in content[-1]:
        return message
    return {**message, "content": [*content[:-1], {**content[-1], "cache_control": marker}]}


def _unmark_older(messages: list[dict[str, Any]], excess: int) -> None:
    """Remove ``excess`` ``cache_control`` markers from the oldest messages (never the newest)."""
    for i, m in enumerate(messages[:-1]):
        content = m.get("content")
        if excess <= 0:
            return
        if not isinstance(content, list):
            continue
        blocks = []
        for b in content:
            if excess > 0 and isinstance(b, dict) and "cache_control" in b:
                b = {k: v for k, v in b.items() if k != "cache_control"}
                excess -= 1
            blocks.append(b)
        messages[i] = {**m, "content": blocks}


def _continued_turn(messages: list[Any]) -> dict[str, Any] | None:
    """The client's assistant message that the request's newest tool results answer,
    when it holds thinking blocks (it must then be sent exactly as given)."""
    if len(messages) < 2 or not isinstance(messages[-1], dict) or messages[-1].get("role") != "user":
        return None
    content = messages[-1].get("content")
    if not isinstance(content, list) or not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        return None
    turn = messages[-2]
    if not isinstance(turn, dict) or turn.get("role") != "assistant" or not isinstance(turn.get("content"), list):
        return None
    return turn if any(isinstance(b, dict) and b.get("type") in _THINKING for b in turn["content"]) else None


def _plain_blocks(message: dict[str, Any]) -> list[Any] | None:
    """The blocks of ``message`` without its thinking blocks and cache markers (as the
    assembly renders it); ``None`` for a string content."""
    content = message.get("content")
    if not isinstance(content, list):
        return None
    return [{k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b for b in _without_thinking(content)]


def _fingerprint(blocks: Sequence[Any]) -> str:
    """What identifies a turn however it is rendered: each block's type and its tool call
    id or text."""
    return json.dumps([[b.get("type"), b.get("id"), b.get("text")] if isinstance(b, dict) else b for b in blocks], sort_keys=True)


def _same_turn(assembled: Sequence[Any], client: Sequence[Any]) -> bool:
    """Whether ``assembled`` renders the client's turn ``client``: block for block, every
    field of the assembled block equal in the client's, which may carry more (fields the
    records do not keep, such as a tool call's ``caller``)."""
    return len(assembled) == len(client) and all(
        all(k in c and c[k] == v for k, v in a.items()) if isinstance(a, dict) and isinstance(c, dict) else a == c
        for a, c in zip(assembled, client, strict=True)
    )


def _without_thinking(content: list[Any]) -> list[Any]:
    """``content`` without its ``thinking`` / ``redacted_thinking`` blocks."""
    return [b for b in content if not (isinstance(b, dict) and b.get("type") in _THINKING)]


def _signed(message: dict[str, Any]) -> bool:
    """Whether ``message`` holds a thinking block the Messages API signed: a ``thinking``
    block with a ``signature`` string, or a ``redacted_thinking`` block with its ``data``."""
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and ((b.get("type") == "thinking" and isinstance(b.get("signature"), str) and b["signature"]) or (b.get("type") == "redacted_thinking" and isinstance(b.get("data"), str)))
        for b in content
    )


def _keep_signed_turns(messages: list[dict[str, Any]], client: list[Any]) -> None:
    """Every assembled assistant message that is the client's own turn without its signed
    thinking (:func:`_same_turn`: a field the records do not keep, such as a tool call's
    ``caller``, does not make it another turn) goes upstream as the client sent it,
    thinking included: the continued turn has to (the API refuses a modified one), and
    every later request sends it the same way, so the prefix the provider saw stays
    byte-stable.  The client's body
    is the only source of these blocks, so a signature always comes from the Messages
    API it was issued by (never another provider's opaque reasoning)."""
    signed: dict[str, list[tuple[list[Any], dict[str, Any]]]] = {}
    for m in client:
        blocks = _plain_blocks(m) if isinstance(m, dict) and m.get("role") == "assistant" and _signed(m) else None
        if blocks is not None:
            signed.setdefault(_fingerprint(blocks), []).append((blocks, m))
    if not signed:
        return
    for i, m in enumerate(messages):
        blocks = _plain_blocks(m) if m.get("role") == "assistant" else None
        if blocks is not None:
            hit = next((c for plain, c in signed.get(_fingerprint(blocks), ()) if _same_turn(blocks, plain)), None)
            if hit is not None:
                messages[i] = hit


def _context_messages(messages: list[Any]) -> list[Any]:
    """``messages`` as the Messages API counts them in the context window: every
    assistant message but the continued turn (:func:`_continued_turn`) without its
    ``thinking`` / ``redacted_thinking`` blocks."""
    continued = _continued_turn(messages)
    out: list[Any] = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) and m.get("role") == "assistant" and m is not continued else None
        out.append({**m, "content": _without_thinking(content)} if isinstance(content, list) else m)
    return out


def _tool_use_ids(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    return [str(b.get("id")) for b in content if isinstance(b, dict) and b.get("type") == "tool_use"] if isinstance(content, list) else []


class AnthropicDialect(BodyDialect):
    """See module docstring."""

    name = "anthropic"
    body_provider = "anthropic"
    provider = "anthropic"
    upstream_path = "/v1/messages"
    gen_ai_provider = "anthropic"

    def upstream_base(self, settings: Any) -> str:
        return str(settings.anthropic_upstream)

    def session_key(self, headers: Mapping[str, str], body: dict[str, Any]) -> str | None:
        """Claude Code's session id (see module docstring), ``None`` without one."""
        given = headers.get(_SESSION_HEADER)
        metadata = body.get("metadata")
        sid = given.strip() if isinstance(given, str) and given.strip() else _session_of_user_id(metadata.get("user_id") if isinstance(metadata, dict) else None)
        return f"anthropic-session:{sid}" if sid else None

    def upstream_tokens(self, body: dict[str, Any]) -> int | None:
        """o200k tokens of the compact JSON of ``system``, ``messages`` and ``tools`` as
        they fill the context window: the Messages API strips the thinking blocks of
        earlier assistant turns from it (context window = input − previous thinking +
        current turn), so only the continued turn's thinking counts
        (:func:`_context_messages`).  Counting the older turns' signed thinking, which
        :func:`_keep_signed_turns` sends back, would take budget from the history on
        every turn of a thinking session."""
        fields = {k: body[k] for k in ("system", "messages", "tools") if k in body}
        if isinstance(fields.get("messages"), list):
            fields["messages"] = _context_messages(fields["messages"])
        return count_tokens(json.dumps(fields, ensure_ascii=False, separators=(",", ":")))

    def parse(self, body: dict[str, Any]) -> ParsedRequest:
        """The body's history without its ``system`` entries, which are kept apart as the
        request's client context (see module docstring)."""
        parsed = super().parse(body)
        assert isinstance(parsed, BodyRequest)
        entries = [m for m in parsed.messages if m.role is Role.SYSTEM]
        if entries:
            parsed.messages = [m for m in parsed.messages if m.role is not Role.SYSTEM]
            texts = ("\n".join(p.text for p in m.parts if isinstance(p, TextPart)) for m in entries)
            # a repeated reminder once: the prefix stays put; sent upstream as given, so screened as recorded texts are
            parsed.context = list(dict.fromkeys(screen_text(t).text for t in texts if t.strip()))
            parsed.reserved_tokens = sum(count_tokens(json.dumps({"type": "text", "text": t}, ensure_ascii=False, separators=(",", ":"))) for t in parsed.context)
        return parsed

    def upstream_body(self, body: dict[str, Any], parsed: ParsedRequest, result: AssemblyResult, ledger_blocks: Sequence[str]) -> dict[str, Any]:
        messages = [dict(m) for m in result.payload.get("messages", [])]
        client = body.get("messages") or []
        turn = _continued_turn(client)
        if turn is not None:
            ids = _tool_use_ids(turn)
            for i in range(len(messages) - 1, -1, -1):
                if messages[i].get("role") == "assistant":
                    if _tool_use_ids(messages[i]) == ids:
                        messages[i] = turn
                    break
        _keep_signed_turns(messages, client)
        marker = _newest_marker(client)
        if marker is not None and messages and messages[-1].get("role") == "user":
            messages[-1] = _mark_last_block(messages[-1], marker)
        out = {**body, "messages": messages}
        context = parsed.context if isinstance(parsed, BodyRequest) else []
        system = _system_blocks(body.get("system"), context, ledger_blocks)
        if system is None:
            out.pop("system", None)
        else:
            out["system"] = system
        declared = {str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)}
        missing = [t for t in result.payload.get("tools", []) if t.get("name") not in declared]
        if missing:
            out["tools"] = [*(body.get("tools") or []), *missing]
        self._mark_stable_prefix(out)
        reused = int((result.record.epoch or {}).get("reused_messages") or 0)
        if 0 < reused < len(messages) and _count_breakpoints([out.get("system"), out.get("tools"), messages]) < MAX_CACHE_BREAKPOINTS:
            # the end of the epoch's frozen prefix: the previous request, read from the cache
            messages[reused - 1] = _mark_last_block(messages[reused - 1], {"type": "ephemeral"}, keep=True)
        excess = _count_breakpoints([out.get("system"), out.get("tools"), messages]) - MAX_CACHE_BREAKPOINTS
        if excess > 0:
            _unmark_older(messages, excess)
        return out

    @staticmethod
    def _mark_stable_prefix(out: dict[str, Any]) -> None:
        """A ``cache_control`` breakpoint on the last system block (the end of the stable
        prefix: tools, then system), within the API's limit."""
        system = out.get("system")
        if isinstance(system, str) and system:
            system = out["system"] = [{"type": "text", "text": system}]
        if not isinstance(system, list) or not system or not isinstance(system[-1], dict):
            return
        if "cache_control" in system[-1] or _count_breakpoints([system, out.get("tools"), out.get("messages")]) >= MAX_CACHE_BREAKPOINTS:
            return
        system[-1] = {**system[-1], "cache_control": {"type": "ephemeral"}}

    def answer_stream(self, parsed: ParsedRequest) -> AnswerStream:
        return _MessagesStream(self, parsed)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                413: "request_too_large", 429: "rate_limit_error", 504: "timeout_error", 529: "overloaded_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def stream_error(self, message: str) -> bytes:
        return ("event: error\ndata: " + json.dumps(self.error_body(502, message)) + "\n\n").encode()


class _MessagesStream(AnswerStream):
    def __init__(self, dialect: AnthropicDialect, parsed: ParsedRequest) -> None:
        self.dialect, self.parsed = dialect, parsed
        self.message: dict[str, Any] | None = None
        self.partial: dict[int, str] = {}
        self.done = False
        self.broken = False

    def event(self, event: SseEvent) -> None:
        try:
            data = json.loads(event.data)
        except ValueError:
            self.broken = True
            return
        kind = data.get("type") if isinstance(data, dict) else None
        if kind == "message_start":
            self.message = copy.deepcopy(data.get("message") or {})
            self.message["content"] = []
        elif kind == "error" or self.message is None:
            self.broken = self.broken or kind == "error"
        elif kind == "content_block_start":
            content = self.message["content"]
            index = int(data.get("index", len(content)))
            while len(content) <= index:
                content.append({})
            content[index] = copy.deepcopy(data.get("content_block") or {})
        elif kind == "content_block_delta":
            self._delta(int(data.get("index", 0)), data.get("delta") or {})
        elif kind == "content_block_stop":
            index = int(data.get("index", 0))
            if index in self.partial:
                text = self.partial.pop(index)
                try:
                    self.message["content"][index]["input"] = json.loads(text) if text.strip() else {}
                except (ValueError, IndexError):
                    self.broken = True
        elif kind == "message_delta":
            self.message.update({k: v for k, v in (data.get("delta") or {}).items()})
            self.message["usage"] = {**(self.message.get("usage") or {}), **(data.get("usage") or {})}
        elif kind == "message_stop":
            self.done = True

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        assert self.message is not None
        try:
            block = self.message["content"][index]
        except IndexError:
            self.broken = True
            return
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + str(delta.get("text", ""))
        elif kind == "input_json_delta":
            self.partial[index] = self.partial.get(index, "") + str(delta.get("partial_json", ""))
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + str(delta.get("signature", ""))
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))

    def ended(self) -> bool:
        return self.done or self.broken

    def answer(self) -> Answer | None:
        if not self.done or self.broken or self.message is None:
            return None
        return self.dialect.answer_from_json(self.parsed, self.message)
