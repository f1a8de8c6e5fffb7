"""What one provider wire format contributes to the proxy (see :mod:`.pipeline`).

A :class:`Dialect` parses a request body into a :class:`~.reconcile.ParsedRequest`,
builds the upstream body from the client's body and the assembly (everything the client
sent passes through except the history, which the assembly replaces), reads the answer
from a JSON body or an SSE stream, and speaks the provider's error shape.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
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


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def ledger_system_blocks(result: AssemblyResult, system_sha256: str | None, request_system: str) -> list[str]:
    """The assembled system blocks the ledger adds (rules, pinned constraints): every block
    except the conversation's recorded system prompt and the request's own (which the
    client's body carries verbatim)."""
    own = request_system.strip()
    return [b for b in result.request.system if b.strip() and b.strip() != own and _sha(b.strip()) != system_sha256]
