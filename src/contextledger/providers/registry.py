"""One entry point per operation for every provider wire format.

``provider`` is one of :data:`PROVIDERS` (the values of
:class:`~contextledger.records.enums.Provider`, which may be passed directly):

* ``"openai-chat"`` — OpenAI Chat Completions (:mod:`.openai_chat`);
* ``"anthropic"`` — Anthropic Messages (:mod:`.anthropic`), token counts by o200k proxy;
* ``"openai-responses"`` — OpenAI Responses (:mod:`.openai_responses`).

The payloads are exactly the request-body fields the serializers own (``messages`` /
``tools``, plus ``system`` for Anthropic; ``instructions`` / ``input`` / ``tools`` for
Responses); the caller adds ``model``, ``max_tokens`` (``max_output_tokens``) and other
parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contextledger.errors import InputError
from contextledger.providers.anthropic import serialize_anthropic
from contextledger.providers.base import NeutralRequest
from contextledger.providers.counting import (
    count_anthropic_tokens,
    count_openai_chat_tokens,
    count_openai_responses_tokens,
)
from contextledger.providers.openai_chat import BlobResolver, serialize_openai_chat
from contextledger.providers.openai_responses import serialize_openai_responses
from contextledger.providers.validate import validate_anthropic, validate_openai_chat
from contextledger.providers.validate_responses import validate_openai_responses

__all__ = [
    "ADDITIVE_PROVIDERS",
    "PROVIDERS",
    "BlobResolver",
    "count_payload_tokens",
    "serialize",
    "validate_payload",
]

PROVIDERS = ("openai-chat", "anthropic", "openai-responses")
"""Provider wire formats, in a fixed order."""

ADDITIVE_PROVIDERS = frozenset({"openai-chat", "openai-responses"})
"""Providers whose payload count is a sum over the wire dicts of each neutral message
(one serialized message never merges with its neighbours), so the counts a ``memo``
holds for a message's wire dicts add up to its share of the payload."""

_Serializer = Callable[..., dict[str, Any]]
_SERIALIZERS: dict[str, _Serializer] = {
    "openai-chat": serialize_openai_chat,
    "anthropic": serialize_anthropic,
    "openai-responses": serialize_openai_responses,
}
_COUNTERS: dict[str, Callable[..., int]] = {
    "openai-chat": count_openai_chat_tokens,
    "anthropic": count_anthropic_tokens,
    "openai-responses": count_openai_responses_tokens,
}
_VALIDATORS: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "openai-chat": validate_openai_chat,
    "anthropic": validate_anthropic,
    "openai-responses": validate_openai_responses,
}


def _check(provider: str) -> str:
    key = str(provider)
    if key not in PROVIDERS:
        raise InputError(f"unknown provider {key!r}; expected one of {list(PROVIDERS)}")
    return key


def serialize(
    provider: str,
    request: NeutralRequest,
    *,
    resolve_blob: BlobResolver | None = None,
    memo: dict[int, Any] | None = None,
) -> dict[str, Any]:
    """The request-body fields for ``request`` in ``provider``'s wire format.

    ``resolve_blob`` returns image bytes for a blob key (``None`` when unavailable); without
    it images are sent by URL or as placeholder text.  Same request ⇒ the same payload,
    byte for byte under ``json.dumps`` (insertion order is fixed).  ``memo`` (optional,
    caller-owned, one per ``resolve_blob``) reuses the wire form of message and tool
    objects serialized before (see the serializer modules); same result.

    Raises:
        InputError: unknown provider.
        ProviderSerializationError: content the format cannot express (see the serializer
            modules for the exact rules).
    """
    return _SERIALIZERS[_check(provider)](request, resolve_blob=resolve_blob, memo=memo)


def count_payload_tokens(provider: str, payload: dict[str, Any], *, memo: dict[int, Any] | None = None) -> int:
    """Input tokens of a serialized payload (formula in :mod:`.counting`).  ``memo``
    (optional, caller-owned) keeps the counts of message, block and tool dicts by
    identity, for payloads sharing dicts made with a serializer ``memo``.

    Raises:
        InputError: unknown provider.
    """
    return _COUNTERS[_check(provider)](payload, memo=memo)


def validate_payload(provider: str, payload: dict[str, Any]) -> list[str]:
    """Every rule the payload breaks, as ``"<path>: <reason>"``; ``[]`` when valid.

    Raises:
        InputError: unknown provider.
    """
    return _VALIDATORS[_check(provider)](payload)
