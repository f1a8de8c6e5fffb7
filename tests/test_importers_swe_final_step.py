"""SWE-agent: every step's observation is that step's call result, the last one too.

SWE-agent appends a step's observation to ``history`` only when it builds the next query,
so the observation of the final step (``submit``) is in ``trajectory`` alone; a call that
truly has no result is named in the import's notes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import real_params
from contextledger.ingest.importers import parse_file
from contextledger.ledger import Ledger
from contextledger.records.enums import MessageKind, Role
from contextledger.records.parts import TextPart

_NO_RESULT = re.compile(r"has no result$")


def _traj(path: Path, final_observation: Any) -> Path:
    step = {"action": "submit\n", "observation": final_observation, "response": "```\nsubmit\n```", "thought": ""}
    document = {
        "environment": "swe_main",
        "history": [
            {"role": "system", "content": "You are an autonomous programmer.", "agent": "primary"},
            {"role": "user", "content": "Fix the port in config.toml", "agent": "primary"},
            {"role": "assistant", "content": "```\nls\n```", "action": "ls\n", "agent": "primary"},
            {"role": "user", "content": "config.toml\n(Open file: n/a)\nbash-$", "agent": "primary"},
            {"role": "assistant", "content": "```\nsubmit\n```", "action": "submit\n", "agent": "primary"},
        ],
        "trajectory": [{"action": "ls\n", "observation": "config.toml", "response": "```\nls\n```", "thought": ""}, step],
        "info": {"exit_status": "submitted", "submission": "diff --git a/config.toml"},
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_final_step_observation_answers_the_submit(tmp_path: Path) -> None:
    t = parse_file(_traj(tmp_path / "run.traj", "diff --git a/config.toml"))
    last = t.messages[-1]
    assert (last.role, last.kind, last.source_ref) == (Role.USER, MessageKind.OBSERVATION, "trajectory[1].observation")
    assert last.parts == [TextPart(text="diff --git a/config.toml")] and last.metadata["action"] == "submit"
    assert t.notes == []
    ledger = Ledger.open(home=tmp_path / "ledger")
    try:
        result = ledger.import_file(tmp_path / "run.traj")
        assert (result.tool_calls, result.pending_calls) == (2, 0)
        payload = ledger.assemble(result.conversation_id, provider="openai-chat", budget_tokens=4000).payload
    finally:
        ledger.close()
    assert "pending, no result yet" not in json.dumps(payload)
    assert payload["messages"][-1]["role"] == "user" and "diff --git a/config.toml" in payload["messages"][-1]["content"]


def _calls_and_memories(tmp_path: Path, path: Path) -> tuple[int, dict[str, tuple[str, str]]]:
    """``(pending calls, {call_id: (call status, memory summary)})`` of an import."""
    ledger = Ledger.open(home=tmp_path / "ledger")
    try:
        result = ledger.import_file(path)
        scope = ledger.scope()
        summaries = {m.call_id: m.summary for m in ledger.store.memories(scope, result.conversation_id)}
        calls = {c.call_id: (c.status.value, summaries.get(c.call_id, "")) for c in ledger.store.tool_calls(scope, result.conversation_id)}
    finally:
        ledger.close()
    return result.pending_calls, calls


def test_a_final_step_without_observation_takes_the_recorded_exit(tmp_path: Path) -> None:
    t = parse_file(_traj(tmp_path / "run.traj", None))
    last = t.messages[-1]
    assert (last.role, last.kind, last.source_ref) == (Role.USER, MessageKind.OBSERVATION, "info.exit_status")
    assert last.parts == [TextPart(text="exit status: submitted\ndiff --git a/config.toml")]
    assert t.notes == ["history[4]: action 'submit' ends the trajectory; result from info.exit_status 'submitted'"]
    pending, calls = _calls_and_memories(tmp_path, tmp_path / "run.traj")
    assert pending == 0
    assert calls["obs_2"] == ("succeeded", "submit succeeded: exit status: submitted\ndiff --git a/config.toml")


def test_a_final_step_without_any_recorded_exit_ends_the_episode_unknown(tmp_path: Path) -> None:
    path = _traj(tmp_path / "run.traj", None)
    document = json.loads(path.read_text(encoding="utf-8"))
    del document["info"]
    path.write_text(json.dumps(document), encoding="utf-8")
    t = parse_file(path)
    assert t.messages[-1].parts == [TextPart(text="(the trajectory ends with this action; it records no result and no exit status)")]
    assert t.notes == ["history[4]: action 'submit' ends the trajectory; no exit recorded, status unknown"]
    pending, calls = _calls_and_memories(tmp_path, path)
    assert pending == 0 and calls["obs_2"][0] == "unknown"
    assert calls["obs_2"][1].startswith("submit unknown: ") and "succeeded" not in calls["obs_2"][1]


def test_an_earlier_step_without_observation_is_still_noted(tmp_path: Path) -> None:
    steps = [
        {"action": "edit 1:1\nx\nend_of_edit\n", "response": "", "thought": ""},
        {"action": "submit\n", "observation": "diff --git a/a.py", "response": "", "thought": ""},
    ]
    path = tmp_path / "steps.traj"
    path.write_text(json.dumps({"trajectory": steps}), encoding="utf-8")
    t = parse_file(path)
    assert t.notes == ["trajectory[0]: action 'edit' has no result"]


def _mini(path: Path, exit_status: str, submission: str) -> Path:
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat patch.txt"})}}
    document = {
        "trajectory_format": "mini-swe-agent-1.1",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Fix the separability matrix."},
            {"role": "assistant", "content": "Submitting.", "tool_calls": [call]},
            {"role": "exit", "content": submission, "extra": {"exit_status": exit_status, "submission": submission}},
        ],
        "info": {"exit_status": exit_status, "submission": submission},
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_mini_swe_agent_final_call_is_answered_by_the_exit(tmp_path: Path) -> None:
    path = _mini(tmp_path / "run.traj.json", "Submitted", "diff --git a/sep.py b/sep.py")
    t = parse_file(path)
    roles = [(m.role, m.kind) for m in t.messages[-2:]]
    assert roles == [(Role.TOOL, MessageKind.CHAT), (Role.SYSTEM, MessageKind.META)]  # the result, then the exit marker
    assert t.notes == ["messages[2]: action 'bash' ends the trajectory; result from info.exit_status 'Submitted'"]
    pending, calls = _calls_and_memories(tmp_path, path)
    assert pending == 0 and calls["call_1"][0] == "succeeded"


def test_nebius_final_action_with_a_non_submitted_exit_is_unknown(tmp_path: Path) -> None:
    document = {
        "model_name": "swe-agent-llama-70b",
        "exit_status": "exit_cost",
        "trajectory": [
            {"role": "system", "text": "You are an autonomous programmer."},
            {"role": "user", "text": "Fix the parser."},
            {"role": "ai", "text": "Let me look.\n```\nls\n```"},
            {"role": "user", "text": "a.py\n(Open file: n/a)\nbash-$"},
            {"role": "ai", "text": "Submit.\n```\nsubmit\n```"},
        ],
    }
    path = tmp_path / "nebius.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    t = parse_file(path)
    assert t.messages[-1].parts == [TextPart(text="exit status: exit_cost")] and t.messages[-1].metadata["result_status"] == "unknown"
    assert t.notes == ["trajectory[4]: action 'submit' ends the trajectory; result from exit_status 'exit_cost', status unknown"]
    pending, calls = _calls_and_memories(tmp_path, path)
    assert pending == 0
    assert calls["obs_2"] == ("unknown", "submit unknown: exit status: exit_cost")


@pytest.mark.parametrize(
    "path",
    real_params("swe-agent/*.traj", "mini-swe-agent-deepseek/*.traj.json", "adp-nebius-swe-agent/*.json"),
    ids=lambda p: getattr(p, "name", str(p)),
)
def test_real_trajectories_leave_no_call_pending_unnoted(tmp_path: Path, path: Path) -> None:
    t = parse_file(path)
    noted = [n for n in t.notes if _NO_RESULT.search(n)]
    ledger = Ledger.open(home=tmp_path / "ledger")
    try:
        result = ledger.import_file(path)
    finally:
        ledger.close()
    assert result.pending_calls == len(noted), noted
    document = json.loads(path.read_text(encoding="utf-8"))
    steps = document.get("trajectory") or []
    if steps and isinstance(steps[-1], dict) and isinstance(steps[-1].get("observation"), str):
        assert result.pending_calls == 0  # the trajectory has an observation for every step


@pytest.mark.parametrize(
    "path",
    real_params("swe-agent/*.traj", "mini-swe-agent-deepseek/*.traj.json", "adp-nebius-swe-agent/*.json"),
    ids=lambda p: getattr(p, "name", str(p)),
)
def test_real_trajectories_resolve_their_last_call(tmp_path: Path, path: Path) -> None:
    ledger = Ledger.open(home=tmp_path / "ledger")
    try:
        result = ledger.import_file(path)
        ordered = sorted(ledger.store.tool_calls(ledger.scope(), result.conversation_id), key=lambda c: (c.seq, c.call_index))
    finally:
        ledger.close()
    assert ordered and not ordered[-1].status.unresolved, (ordered[-1].tool_name, ordered[-1].status)
