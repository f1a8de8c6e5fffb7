"""An OpenTelemetry span per assembly, following the GenAI semantic conventions.

Off unless configured (``CONTEXTLEDGER_OTEL=1`` or an ``OTEL_EXPORTER_OTLP_ENDPOINT``;
``pip install 'contextledger[otel]'``).  Each proxied request's assembly becomes one
INTERNAL span ``retrieval {model}`` with

* ``gen_ai.operation.name`` = ``retrieval``, ``gen_ai.provider.name``,
  ``gen_ai.request.model``, ``gen_ai.conversation.id``, ``gen_ai.data_source.id``
  (``contextledger``), ``gen_ai.usage.input_tokens`` (the assembled request's tokens);
* ``gen_ai.retrieval.documents``: the included records as ``[{"id"}]`` (record ids, no
  content);
* ``contextledger.*``: assembly id, policy and assembler versions, budget, replay and
  assembled tokens, and ``contextledger.omitted.<reason>`` counts.

Message content (``gen_ai.input.messages``: the assembled payload) is captured only when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is ``SPAN_ONLY`` or
``SPAN_AND_EVENT`` — off by default, as the conventions require.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from contextledger.assembly.assembler import AssemblyResult
from contextledger.server.settings import ServerSettings

__all__ = ["assembly_attributes", "assembly_span"]

_CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def assembly_attributes(result: AssemblyResult, provider_name: str, model: str | None) -> dict[str, Any]:
    """The span attributes of one assembly (see module docstring)."""
    r = result.record
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "retrieval",
        "gen_ai.provider.name": provider_name,
        "gen_ai.conversation.id": r.conversation_id,
        "gen_ai.data_source.id": "contextledger",
        "gen_ai.usage.input_tokens": r.assembled_tokens,
        "gen_ai.retrieval.documents": json.dumps([{"id": ref} for ref in r.selected_refs]),
        "contextledger.assembly.id": r.id,
        "contextledger.branch.id": r.branch_id,
        "contextledger.policy.version": r.policy_version,
        "contextledger.assembler.version": r.assembler_version,
        "contextledger.budget_tokens": r.budget_tokens,
        "contextledger.replay_tokens": r.replay_tokens,
        "contextledger.assembled_tokens": r.assembled_tokens,
        "contextledger.over_budget": r.over_budget,
    }
    if model:
        attrs["gen_ai.request.model"] = model
    for reason, count in sorted(r.omitted.items()):
        attrs[f"contextledger.omitted.{reason}"] = count
    if os.environ.get(_CAPTURE, "").upper() in ("SPAN_ONLY", "SPAN_AND_EVENT"):
        attrs["gen_ai.input.messages"] = json.dumps(result.payload.get("messages", []), ensure_ascii=False)
    return attrs


def assembly_span(settings: ServerSettings, result: AssemblyResult, provider_name: str, model: str | None, *, tracer_provider: Any = None) -> None:
    """Emit the span of ``result`` when telemetry is on (its duration is the assembly's
    recorded timings), through ``tracer_provider`` (default: the global one); a no-op
    otherwise or without the ``otel`` extra."""
    if not settings.telemetry:
        return
    try:
        from opentelemetry import trace
    except ImportError:  # pragma: no cover - depends on the install
        return
    end = time.time_ns()
    duration_ms = sum(float(v) for v in result.record.timings_ms.values())
    tracer = trace.get_tracer("contextledger", tracer_provider=tracer_provider)
    span = tracer.start_span(f"retrieval {model or ''}".strip(), kind=trace.SpanKind.INTERNAL, attributes=assembly_attributes(result, provider_name, model), start_time=end - int(duration_ms * 1e6))
    span.end(end_time=end)
