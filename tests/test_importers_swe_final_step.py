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


def test_a_step_without_observation_is_noted(tmp_path: Path) -> None:
    t = parse_file(_traj(tmp_path / "run.traj", None))
    assert t.messages[-1].role is Role.ASSISTANT
    assert t.notes == ["history[4]: action 'submit' has no result"]


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
