"""The OpenTelemetry span of an assembly: GenAI semantic conventions plus contextledger
attributes, off unless configured, message content only when capture is asked for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from contextledger.ledger import Ledger
from contextledger.server.settings import ServerSettings
from contextledger.server.telemetry import assembly_span


def _assembly(tmp_path: Path):  # type: ignore[no-untyped-def]
    ledger = Ledger.open(home=tmp_path)
    rec = ledger.recorder()
    conv = rec.start_conversation(title="t", system_prompt="You are an agent.")
    rec.record_message(conv.id, "user", "Summarise the log. Do not delete files.")
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "c1", "tool_name": "Bash", "arguments": {"command": "cat log"}}])
    rec.record_tool_result(conv.id, "c1", "secret-looking content line\n" * 5)
    result = ledger.assemble(conv.id, provider="anthropic", budget_tokens=3000)
    ledger.close()
    return result


def _spans(result, settings: ServerSettings):  # type: ignore[no-untyped-def]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    assembly_span(settings, result, "anthropic", "claude-sonnet-4-5", tracer_provider=provider)
    return exporter.get_finished_spans()


def test_span_follows_the_genai_conventions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    result = _assembly(tmp_path)
    assert _spans(result, ServerSettings()) == ()  # off unless configured
    [span] = _spans(result, ServerSettings(telemetry=True))
    a = dict(span.attributes or {})
    r = result.record
    assert span.name == "retrieval claude-sonnet-4-5"
    assert a["gen_ai.operation.name"] == "retrieval" and a["gen_ai.provider.name"] == "anthropic"
    assert a["gen_ai.conversation.id"] == r.conversation_id and a["gen_ai.request.model"] == "claude-sonnet-4-5"
    assert a["gen_ai.usage.input_tokens"] == r.assembled_tokens and a["contextledger.replay_tokens"] == r.replay_tokens
    assert a["contextledger.assembly.id"] == r.id and a["contextledger.policy.version"] == r.policy_version
    assert json.loads(str(a["gen_ai.retrieval.documents"])) == [{"id": ref} for ref in r.selected_refs]
    assert {k: v for k, v in a.items() if k.startswith("contextledger.omitted.")} == {f"contextledger.omitted.{k}": v for k, v in r.omitted.items()}
    assert "gen_ai.input.messages" not in a and "secret-looking" not in json.dumps({k: str(v) for k, v in a.items()})


def test_content_capture_is_opt_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    result = _assembly(tmp_path)
    [span] = _spans(result, ServerSettings(telemetry=True))
    assert json.loads(str((span.attributes or {})["gen_ai.input.messages"])) == result.payload["messages"]
