"""What a memory says instead of noise: the plan a plan tool carries (newest plan
current), the informative line of an output (not a shell start-up warning), no line
said twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import require_real_data
from contextledger.ledger import Ledger
from contextledger.memory.derive import render_memory_text
from contextledger.memory.extractors.base import ToolInput
from contextledger.memory.extractors.registry import default_registry
from contextledger.memory.extractors.textutil import is_shell_noise
from contextledger.records.enums import ResolutionState

ACK = "Todos have been modified successfully. Ensure that you continue to use the todo list to track your progress. Please proceed with the current tasks if applicable"


def _item(tool: str, args: dict[str, Any], text: str, *, is_error: bool = False) -> ToolInput:
    return ToolInput(tool_name=tool, arguments_json=json.dumps(args), result_text=text, is_error=is_error, size_bytes=len(text.encode()))


def _todos(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"todos": [{"content": c, "status": s, "activeForm": c + "ing"} for c, s in pairs]}


def test_a_plan_memory_carries_each_agents_plan() -> None:
    reg = default_registry()
    claude = reg.extract(_item("TodoWrite", _todos(("Write parser", "completed"), ("Add tests", "in_progress"), ("Update docs", "pending")), ACK))
    assert (claude.kind, claude.subject_key, claude.summary) == ("plan", "plan:todo", "plan: 1 of 3 done · in progress: Add tests")
    assert claude.payload["todos"] == [{"text": "Write parser", "status": "completed"}, {"text": "Add tests", "status": "in_progress"}, {"text": "Update docs", "status": "pending"}]
    assert claude.payload["counts"] == {"completed": 1, "in_progress": 1, "pending": 1}
    codex = reg.extract(_item("update_plan", {"explanation": "tests first", "plan": [{"step": "Add failing test", "status": "completed"}, {"step": "Fix threshold", "status": "in_progress"}]}, "Plan updated"))
    assert (codex.summary, codex.payload["explanation"]) == ("plan: 1 of 2 done · in progress: Fix threshold", "tests first")
    gemini = reg.extract(_item("write_todos", {"todos": [{"description": "Read config", "status": "cancelled"}]}, "ok"))
    assert gemini.payload["todos"] == [{"text": "Read config", "status": "cancelled"}]
    proposal = reg.extract(_item("ExitPlanMode", {"plan": "## Plan\n1. Split the module\n2. Test"}, "User has approved your plan."))
    assert (proposal.subject_key, proposal.summary, proposal.payload["text"]) == ("plan:proposal", "plan proposed: Plan", "## Plan\n1. Split the module\n2. Test")


def test_the_newest_plan_supersedes_the_older_and_its_text_is_the_plan(tmp_path: Path) -> None:
    led = Ledger.open(home=tmp_path / "ledger")
    try:
        rec = led.recorder()
        conv = rec.start_conversation(system_prompt="coding agent")
        rec.record_message(conv.id, "user", "Port the module.")
        plans = [_todos(("Port a", "in_progress"), ("Port b", "pending")), _todos(("Port a", "completed"), ("Port b", "in_progress")), _todos(("Port a", "completed"), ("Port b", "completed"), ("Delete old code", "cancelled"))]
        for i, plan in enumerate(plans):
            rec.record_assistant(conv.id, tool_calls=[{"call_id": f"t{i}", "tool_name": "TodoWrite", "arguments": plan}])
            rec.record_tool_result(conv.id, f"t{i}", ACK)
        memories = led.store.memories(led.scope(), conv.id)
    finally:
        led.close()
    assert [m.resolution_state for m in memories] == [ResolutionState.SUPERSEDED, ResolutionState.SUPERSEDED, ResolutionState.CURRENT]
    text = render_memory_text(memories[-1]).split("\n")
    assert text[1].startswith("TodoWrite succeeded: plan: 2 of 3 done")
    assert text[2:] == ["[x] Port a", "[x] Port b", "[-] Delete old code (cancelled)"]
    assert "modified successfully" not in "\n".join(text)


def test_real_todo_plans_are_carried_and_only_the_newest_is_current(tmp_path: Path) -> None:
    path = require_real_data() / "claude-reliability-snapshots" / "python-to-rust-port.jsonl"
    led = Ledger.open(home=tmp_path / "ledger")
    try:
        conv = led.import_file(path).conversation_id
        plans = [m for m in led.store.memories(led.scope(), conv) if m.source_tool == "TodoWrite"]
    finally:
        led.close()
    assert len(plans) >= 2
    assert all(m.payload["extractor"] == "plan" and m.payload["todos"] for m in plans)
    assert [m.resolution_state is ResolutionState.CURRENT for m in plans] == [False] * (len(plans) - 1) + [True]
    assert not any("modified successfully" in render_memory_text(m) for m in plans)


NOISE = "/opt/homebrew/Library/Homebrew/cmd/shellenv.sh: line 18: /bin/ps: Operation not permitted"


def test_a_shell_start_up_warning_is_never_the_summary() -> None:
    reg = default_registry()
    run = reg.extract(_item("Bash", {"command": "node t.js"}, f"{NOISE}\ncheck 1 ok\nAll 12 tests passed!"))
    assert run.summary == "$ node t.js · 3 lines\nAll 12 tests passed!"
    only_noise_then_value = reg.extract(_item("lookup_order", {"id": 7}, f"{NOISE}\nstatus: shipped"))
    assert only_noise_then_value.summary.split("\n")[0] == "status: shipped"
    assert [is_shell_noise(x) for x in (NOISE, "/home/u/.bashrc: line 3: nvm: command not found", "/home/u/.zshrc:12: command not found: pyenv", "./run.sh: line 4: python: command not found", "bash: line 1: x: command not found")] == [True, True, True, False, False]


def test_no_summary_line_is_said_twice() -> None:
    ext = default_registry().extract(_item("lookup", {"q": "x"}, "same line\nsame line"))
    assert ext.summary == "same line"
