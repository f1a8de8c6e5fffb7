"""Importer for tau2-bench simulation runs (format ``"tau2-bench"``).

tau2-bench saves a run as ``{"timestamp", "info", "tasks", "simulations": [...]}``; each
simulation is ``{"id", "task_id", "trial", "termination_reason", "reward_info",
"messages": [...], ...}``.  Its messages are Chat-Completions-like with three differences
the shared converter (:mod:`.openai_messages`) handles: a tool call is ``{"id", "name",
"arguments": {...}, "requestor"}`` without the ``function`` wrapper and with the
arguments as an object; a tool message carries the call id as ``id`` (not
``tool_call_id``) and ``error: true`` when the call failed; the simulated user may call
its own tools (kept as data in the user message).  Message ``timestamp`` values become
creation times.

A file holding one simulation (the run file of a single task, or a simulation object on
its own) imports as one conversation; a run of several simulations is refused with a
reason that names how many it holds, so that each can be imported on its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextledger.ingest.importers.build import first_model, first_user_title, main_participant
from contextledger.ingest.importers.call_ids import CallIdRegistry
from contextledger.ingest.importers.common import (
    Source,
    describe_json,
    fail,
    parse_timestamp,
    source_key,
)
from contextledger.ingest.importers.openai_messages import OpenAIMessageConverter
from contextledger.ingest.transcript import ImportedTranscript

__all__ = ["FORMAT", "is_tau2_document", "parse_tau2_bench"]

FORMAT = "tau2-bench"
_SIMULATION_KEYS = ("task_id", "termination_reason", "reward_info", "trial")


def is_tau2_document(document: Mapping[str, Any]) -> bool:
    """True for a tau2-bench run (``simulations``) or one simulation object."""
    simulations = document.get("simulations")
    if isinstance(simulations, list) and all(isinstance(s, dict) and "messages" in s for s in simulations[:5]):
        return True
    return isinstance(document.get("messages"), list) and sum(k in document for k in _SIMULATION_KEYS) >= 2


def _model(run_info: Any) -> str | None:
    agent = run_info.get("agent_info") if isinstance(run_info, dict) else None
    llm = agent.get("llm") if isinstance(agent, dict) else None
    return llm if isinstance(llm, str) and llm else None


def parse_tau2_bench(source: Source, document: Mapping[str, Any]) -> ImportedTranscript:
    """Parse a tau2-bench run or simulation.

    Raises:
        ImportFormatError: a run with no or several simulations (reason names the count),
            messages that are not an array, or a malformed message (location
            ``"simulations[0].messages[7]"``).
    """
    prefix = ""
    simulation: Mapping[str, Any] = document
    if isinstance(document.get("simulations"), list):
        simulations = document["simulations"]
        if len(simulations) != 1:
            fail(
                source.path, "simulations",
                f"tau2-bench run holds {len(simulations)} simulations; import one simulation per file",
            )
        if not isinstance(simulations[0], dict):
            fail(source.path, "simulations[0]", f"expected a simulation object, found {describe_json(simulations[0])}")
        simulation, prefix = simulations[0], "simulations[0]."
    items = simulation.get("messages")
    if not isinstance(items, list):
        fail(source.path, f"{prefix}messages", f"expected an array of messages, found {describe_json(items)}")
    notes: list[str] = []
    registry = CallIdRegistry(notes)
    converter = OpenAIMessageConverter(source.path, registry, notes)
    messages = []
    for i, item in enumerate(items):
        message = converter.convert(item, f"msg:{i}", f"{prefix}messages[{i}]")
        if isinstance(item, dict):
            message.created_at = parse_timestamp(item.get("timestamp"))
        messages.append(message)
    registry.finish()
    run_info = document.get("info")
    model = _model(run_info) or first_model(messages)
    for message in messages:
        if message.role.value == "assistant" and message.model is None:
            message.model = model
    metadata: dict[str, Any] = {k: v for k, v in simulation.items() if k != "messages"}
    if run_info is not None:
        metadata["run_info"] = run_info
    return ImportedTranscript(
        format=FORMAT,
        path=source.name,
        title=first_user_title(messages),
        messages=messages,
        participants=[main_participant(model)],
        notes=notes,
        content_key=source_key([source]),
        metadata=metadata,
    )
