"""What one provider wire format contributes to the proxy (see :mod:`.pipeline`).

A :class:`Dialect` parses a request body into a :class:`~.reconcile.ParsedRequest`,
builds the upstream body from the client's body and the assembly (everything the client
sent passes through except the history, which the assembly replaces), reads the answer
from a JSON body or an SSE stream, and speaks the provider's error shape.
"""

from __future__ import annotations

import hashlib
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextledger.assembly.assembler import AssemblyResult
from contextledger.ingest.transcript import ImportedMessage
from contextledger.server.proxy.reconcile import ParsedRequest
from contextledger.server.proxy.sse import SseEvent

__all__ = ["Answer", "AnswerStream", "Dialect", "ledger_system_blocks"]


@dataclass(kw_only=True)
class Answer:
    """The assistant turn read from an upstream answer: its messages in order (usually
    one; a server-side tool's result splits a turn; none: nothing to record)."""

    messages: list[ImportedMessage]
    usage: dict[str, Any] = field(default_factory=dict)
    response_id: str | None = None
    model: str | None = None
    finish_reason: str | None = None


class AnswerStream(ABC):
    """Accumulates a streamed answer, event by event."""

    @abstractmethod
    def event(self, event: SseEvent) -> None:
        """Take one SSE event."""

    @abstractmethod
    def ended(self) -> bool:
        """Whether the stream sent the provider's last event (success or error)."""

    @abstractmethod
    def answer(self) -> Answer | None:
        """The answer once the stream completed as the provider ends a stream; ``None``
        while (or when) it did not — a dropped stream is never recorded."""


class Dialect(ABC):
    """One provider wire format (see module docstring).

    Attributes:
        name: the wire format (``"openai-chat"``, ``"anthropic"``, ``"openai-responses"``).
        provider: what the assembler serializes for (``Ledger.assemble(provider=…)``).
        upstream_path: appended to the upstream base URL.
        gen_ai_provider: ``gen_ai.provider.name`` of the OpenTelemetry conventions.
    """

    name: str
    provider: str
    upstream_path: str
    gen_ai_provider: str

    def session_key(self, headers: Mapping[str, str], body: dict[str, Any]) -> str | None:
        """The client's own session id, when its requests carry one (a header, a body
        field): two sessions never share it.  ``None`` (the default): the client names
        none, and the conversation is found from the history itself
        (:func:`~.reconcile.conversation_for`)."""
        return None

    history_field: str = "messages"
    """The body field that holds the history (a list of objects)."""

    def body_problem(self, body: dict[str, Any]) -> str | None:
        """What makes ``body`` invalid for the provider before any parsing: its history
        field (:attr:`history_field`) missing, not a list, or holding an item that is not a
        JSON object (``"messages[2] must be an object, got a string"``); ``None`` when the
        shape holds.  Such a body is answered 400, never forwarded."""
        return history_problem(self.history_field, body.get(self.history_field), missing=self.history_field not in body)

    def upstream_tokens(self, body: dict[str, Any]) -> int | None:
        """Tokens of what the model reads in an upstream body (o200k, compact JSON of the
        model-facing fields), for the budget check; ``None``: not measured."""
        return None

    @abstractmethod
    def upstream_base(self, settings: Any) -> str:
        """The configured base URL of the upstream."""

    @abstractmethod
    def parse(self, body: dict[str, Any]) -> ParsedRequest:
        """The request in neutral form.

        Raises:
            ImportFormatError / InputError: a body this dialect cannot read.
        """

    @abstractmethod
    def upstream_body(self, body: dict[str, Any], parsed: ParsedRequest, result: AssemblyResult, ledger_blocks: Sequence[str]) -> dict[str, Any]:
        """The body sent upstream: ``body`` with its history replaced by the assembly and
        ``ledger_blocks`` (rules, pinned constraints) after the client's system prompt."""

    def reserved_tokens(self, body: dict[str, Any], parsed: ParsedRequest) -> int:
        """Tokens (the provider's counting of :mod:`contextledger.providers.counting`) that
        :meth:`upstream_body` sends verbatim beyond what the assembly counts for the same
        parts (its system blocks and tool schemas): the proxy takes them off the budget
        it assembles under, so the upstream body stays within the budget.  ``0`` by
        default (the assembly's own rendering is what goes upstream)."""
        return 0

    @abstractmethod
    def answer_from_json(self, parsed: ParsedRequest, data: dict[str, Any]) -> Answer:
        """The answer of a non-streamed response body."""

    @abstractmethod
    def answer_stream(self, parsed: ParsedRequest) -> AnswerStream:
        """A fresh accumulator for a streamed answer."""

    @abstractmethod
    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """The provider's error body for a failure of the proxy itself."""

    @abstractmethod
    def stream_error(self, message: str) -> bytes:
        """The SSE bytes that tell a client its stream broke off."""


_JSON_KIND = {str: "a string", int: "a number", float: "a number", bool: "a boolean", list: "an array", dict: "an object", type(None): "null"}


def history_problem(name: str, value: Any, *, missing: bool, text_allowed: bool = False) -> str | None:
    """The problem of a history field ``name`` holding ``value`` (see
    :meth:`Dialect.body_problem`); ``text_allowed``: a plain string is a valid history too
    (the Responses ``input``)."""
    if missing:
        return f"the request body has no '{name}' field"
    if text_allowed and isinstance(value, str):
        return None
    if not isinstance(value, list):
        return f"'{name}' must be an array{' or a string' if text_allowed else ''}, got {_JSON_KIND.get(type(value), 'a value')}"
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            return f"'{name}[{i}]' must be an object, got {_JSON_KIND.get(type(item), 'a value')}"
    return None


def session_from(headers: Mapping[str, str], body: dict[str, Any], names: Sequence[str]) -> str | None:
    """The first non-empty of the headers ``names`` (lower-case, in order of preference),
    else the body's ``prompt_cache_key``; ``None`` when the client sends neither (the
    OpenAI dialects' :meth:`Dialect.session_key`)."""
    lower = {k.lower(): v for k, v in headers.items()}
    for name in names:
        value = lower.get(name, "").strip()
        if value:
            return value
    cache_key = body.get("prompt_cache_key")
    return cache_key.strip() if isinstance(cache_key, str) and cache_key.strip() else None


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def prompt_cache_key(result: AssemblyResult) -> str:
    """The ``prompt_cache_key`` the OpenAI dialects send when the client sent none:
    derived from the conversation (``cl-`` and 32 hex of its tenant and id), so every
    request of one conversation is routed to the same prompt cache and two
    conversations never share one."""
    r = result.record
    return "cl-" + hashlib.sha256(f"{r.tenant_id}\x1f{r.conversation_id}".encode()).hexdigest()[:32]


def ledger_system_blocks(result: AssemblyResult, system_sha256: str | None, request_system: str) -> list[str]:
    """The assembled system blocks the ledger adds (rules, pinned constraints): every block
    except the conversation's recorded system prompt and the request's own, whole or as
    the assembly cut it to fit a budget (the client's body carries it verbatim)."""
    own = request_system.strip()
    return [b for b in result.request.system if b.strip() and b.strip() != own and _sha(b.strip()) != system_sha256 and not _cut_of(b.strip(), own)]


_CUT = re.compile(r"\n\[… ≈?[\d,]+(?: \(±[\d,]+\))? tokens omitted; full text in the ledger \(system prompt\) …\]\n")


def _cut_of(block: str, own: str) -> bool:
    """Whether ``block`` is the assembly's cut of ``own`` (its head and tail around the
    omission marker of :func:`~contextledger.assembly.last_resort.cut_text`): the client
    sends its own system prompt whole, so the cut is not a block of the ledger's."""
    m = _CUT.search(block)
    return m is not None and bool(own) and own.startswith(block[:m.start()].strip()) and own.endswith(block[m.end():].strip())
