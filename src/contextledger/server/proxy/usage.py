"""The upstream's reported token usage of one answer, in one shape for every dialect
(issue 23, "Cost is a first-class figure": the proxy records the upstream's ``usage``).

The proxy reads ``usage`` from the answer — a JSON body, or the stream's events
(:class:`~.dialect.AnswerStream`: Anthropic's ``message_start.message.usage`` updated by
``message_delta.usage``, the OpenAI Chat chunk that carries ``usage``, the
``response.completed`` event's ``response.usage``) — and :func:`upstream_usage` turns it
into :data:`UpstreamUsage`::

    {"input_tokens": int,        # every input token the provider read, cached or not
     "cached_read_tokens": int,  # of them, read from the provider's prompt cache
     "cache_write_tokens": int,  # of them, written to the prompt cache (Anthropic)
     "output_tokens": int,
     "cache_write_5m_tokens": int, "cache_write_1h_tokens": int,   # when the provider splits writes by lifetime
     "raw": {...}}               # the provider's own object, unchanged

Per provider (units: the provider's own tokens, as billed):

* Anthropic Messages — ``input_tokens`` there counts only the input after the last cache
  breakpoint, so the total is ``input_tokens + cache_read_input_tokens +
  cache_creation_input_tokens``; ``cached_read`` / ``cache_write`` are the latter two;
  ``cache_creation.ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens`` give the
  split by lifetime.
* OpenAI Chat Completions — ``prompt_tokens`` (cached included),
  ``prompt_tokens_details.cached_tokens``, ``completion_tokens``; OpenAI bills no cache
  write (``0``).  A streamed answer carries usage only when the request asked for it
  (``stream_options.include_usage``); the proxy does not add that option to a client's
  request unless ``ServerSettings.stream_usage`` says so (:func:`with_stream_usage`).
* OpenAI Responses — ``input_tokens`` (cached included),
  ``input_tokens_details.cached_tokens``, ``output_tokens``; no cache write.

A count that is missing, negative or not an integer counts ``0``; an answer without any
count has no usage (``None``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["USAGE_FIELDS", "UpstreamUsage", "upstream_usage", "with_stream_usage"]

UpstreamUsage = dict[str, Any]
"""The normalised usage (see module docstring)."""

USAGE_FIELDS = ("input_tokens", "cached_read_tokens", "cache_write_tokens", "output_tokens")
"""The counts every :data:`UpstreamUsage` holds."""


def _n(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _get(obj: Any, *path: str) -> int | None:
    for key in path:
        obj = obj.get(key) if isinstance(obj, Mapping) else None
    return _n(obj)


def _anthropic(raw: Mapping[str, Any]) -> dict[str, int | None]:
    read, write = _get(raw, "cache_read_input_tokens"), _get(raw, "cache_creation_input_tokens")
    own = _get(raw, "input_tokens")
    total = None if own is None and read is None and write is None else (own or 0) + (read or 0) + (write or 0)
    out = {"input_tokens": total, "cached_read_tokens": read, "cache_write_tokens": write, "output_tokens": _get(raw, "output_tokens")}
    for ttl in ("5m", "1h"):
        split = _get(raw, "cache_creation", f"ephemeral_{ttl}_input_tokens")
        if split is not None:
            out[f"cache_write_{ttl}_tokens"] = split
    return out


def _openai_chat(raw: Mapping[str, Any]) -> dict[str, int | None]:
    return {"input_tokens": _get(raw, "prompt_tokens"), "cached_read_tokens": _get(raw, "prompt_tokens_details", "cached_tokens"),
            "cache_write_tokens": None, "output_tokens": _get(raw, "completion_tokens")}


def _openai_responses(raw: Mapping[str, Any]) -> dict[str, int | None]:
    return {"input_tokens": _get(raw, "input_tokens"), "cached_read_tokens": _get(raw, "input_tokens_details", "cached_tokens"),
            "cache_write_tokens": None, "output_tokens": _get(raw, "output_tokens")}


_READERS = {"anthropic": _anthropic, "openai-chat": _openai_chat, "openai-responses": _openai_responses}


def upstream_usage(dialect: str, raw: Any) -> UpstreamUsage | None:
    """The normalised usage of an answer's ``raw`` usage object (module docstring).

    Args:
        dialect: the wire format (``"anthropic"``, ``"openai-chat"``, ``"openai-responses"``).
        raw: the provider's ``usage`` object as read from the answer.

    Returns:
        :data:`UpstreamUsage`, or ``None`` when ``raw`` is not an object holding at least
        one count (or the dialect is unknown).
    """
    reader = _READERS.get(dialect)
    if reader is None or not isinstance(raw, Mapping):
        return None
    counts = reader(raw)
    if all(v is None for v in counts.values()):
        return None
    return {**{k: v or 0 for k, v in counts.items()}, "raw": dict(raw)}


def with_stream_usage(dialect: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with ``stream_options.include_usage: true`` when it is a streamed OpenAI
    Chat request that does not set it (the client then also receives the final usage
    chunk, ``choices: []``); every other body as given.  Used only when the service is
    configured so (``ServerSettings.stream_usage``)."""
    if dialect != "openai-chat" or body.get("stream") is not True:
        return body
    options = body.get("stream_options")
    if isinstance(options, dict) and "include_usage" in options:
        return body
    return {**body, "stream_options": {**(options if isinstance(options, dict) else {}), "include_usage": True}}
