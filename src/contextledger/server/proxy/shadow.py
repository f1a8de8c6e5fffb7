"""Shadow mode: trust before switching (issue 23, "Shadow mode").

In shadow mode the proxy does everything it does in assemble mode — identifies the
conversation, records the client's history and the answer with its usage, and makes the
assembly it would have sent (persisted like any other) — but forwards the client's own
body, byte for byte, instead of the assembled one.  The assembly record is marked
(``ContextAssembly.proxy``, :func:`shadow_mark`) with what each request would have cost
in input tokens: the client's request and the assembled request, both counted with the
provider's formula (:func:`contextledger.providers.registry.count_payload_tokens`) over
the whole body, so they compare like with like.

The mode is the service's (``contextledger serve --proxy-mode shadow``,
``CONTEXTLEDGER_PROXY_MODE``, ``ServerSettings.proxy_mode``; default ``assemble``), or
one request's (``x-contextledger-mode: shadow`` / ``assemble``: the header wins).  A
shadow forward is not a passthrough (a request the proxy failed to assemble): it is
counted apart (``/metrics``: ``contextledger_proxy_shadow_requests_total``), and a
request that cannot be assembled in shadow mode is a passthrough as in assemble mode.
The response says so: ``x-contextledger-mode: shadow``, ``x-contextledger-shadow-tokens``
(the assembled request's tokens) and ``x-contextledger-client-tokens`` (the client's).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from contextledger.providers.registry import count_payload_tokens
from contextledger.server.settings import PROXY_MODES

__all__ = ["CLIENT_TOKENS_HEADER", "MODES", "MODE_HEADER", "SHADOW_TOKENS_HEADER", "request_mode", "shadow_headers", "shadow_mark"]

MODE_HEADER = "x-contextledger-mode"
SHADOW_TOKENS_HEADER = "x-contextledger-shadow-tokens"
CLIENT_TOKENS_HEADER = "x-contextledger-client-tokens"
MODES = PROXY_MODES
"""The proxy's modes: send the assembled request, or the client's own (shadow)."""


def request_mode(headers: Mapping[str, str], default: str) -> str:
    """The mode of one request: its :data:`MODE_HEADER` (case-insensitive value), else
    ``default`` (the service's ``proxy_mode``).

    Raises:
        ValueError: a header value that is not one of :data:`MODES` (answered 400).
    """
    given = headers.get(MODE_HEADER)
    if given is None:
        return default
    mode = given.strip().lower()
    if mode not in MODES:
        raise ValueError(f"{MODE_HEADER} is 'assemble' or 'shadow', got {given!r}")
    return mode


def shadow_mark(provider: str, client_body: dict[str, Any], raw: bytes, assembled_body: dict[str, Any]) -> dict[str, Any]:
    """The ``ContextAssembly.proxy`` value of a shadow forward.

    Args:
        provider: the payload format (``"anthropic"``, ``"openai-chat"``, ``"openai-responses"``).
        client_body: the client's body as parsed; ``raw``: its bytes as received (and sent).
        assembled_body: the body the proxy would have sent in assemble mode.

    Returns:
        ``{"mode": "shadow", "client_request_tokens": int, "assembled_request_tokens": int,
        "client_body_sha256": "sha256:<hex>"}`` — tokens of each whole body, the
        provider's formula (o200k; a labelled proxy for Anthropic).
    """
    return {
        "mode": "shadow",
        "client_request_tokens": count_payload_tokens(provider, client_body),
        "assembled_request_tokens": count_payload_tokens(provider, assembled_body),
        "client_body_sha256": "sha256:" + hashlib.sha256(raw).hexdigest(),
    }


def shadow_headers(mark: Mapping[str, Any]) -> dict[str, str]:
    """The response headers that report a shadow forward (module docstring)."""
    return {MODE_HEADER: "shadow", SHADOW_TOKENS_HEADER: str(mark["assembled_request_tokens"]), CLIENT_TOKENS_HEADER: str(mark["client_request_tokens"])}
