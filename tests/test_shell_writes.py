"""Shell commands that write files and then fail: a nonzero exit status does not undo a
redirection, ``tee`` or here-document write (the shell opened the files before or while
the command ran); only a call refused before it ran (the user said no, or a permission
setting denied it) wrote nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.tool_dialects import payload_texts

from contextledger.ledger import Ledger
from contextledger.memory.extractors.base import ToolInput
from contextledger.memory.extractors.registry import default_registry
from contextledger.memory.extractors.shell_writes import shell_effects
from contextledger.policy.loader import policy_from_mapping

COMMAND = "printf 'retry\\n' | tee out.log && cat > notes.txt <<EOF\nflaky: test_retry\nEOF"
FAILED = "retry\nExit code 1\ncat: write error: No space left on device"
REFUSED = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, "
    "the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how to proceed."
)
WS_HEAD = "files read or edited on this branch"


def _memory(command: str, text: str, is_error: bool) -> Any:
    item = ToolInput(tool_name="Bash", arguments_json=json.dumps({"command": command}), result_text=text, is_error=is_error, size_bytes=len(text))
    return default_registry().extract(item)


def test_a_failed_compound_command_wrote_its_files() -> None:
    m = _memory(COMMAND, FAILED, True)
    assert m.summary == "wrote out.log; wrote notes.txt (command failed)\ncat: write error: No space left on device"
    assert (m.payload["paths"], m.payload["applied"], m.payload["command_failed"]) == (["out.log", "notes.txt"], True, True)


def test_a_refused_command_wrote_nothing() -> None:
    m = _memory(COMMAND, REFUSED, True)
    assert m.summary.split("\n")[0] == "shell write out.log (+1 file) rejected"
    assert (m.payload["applied"], "command_failed" in m.payload) == (False, False)


def test_a_succeeded_compound_command() -> None:
    m = _memory(COMMAND, "1 passed in 0.05s", False)
    assert m.summary == "wrote out.log; wrote notes.txt"
    assert "command_failed" not in m.payload


def test_the_here_document_is_the_content_of_its_own_stage_only() -> None:
    effects = shell_effects(COMMAND)
    assert effects is not None
    assert [(w.paths, w.content) for w in effects.writes] == [(("out.log",), None), (("notes.txt",), "flaky: test_retry")]


def test_working_set_lists_every_file_of_a_failed_command(tmp_path: Path) -> None:
    led = Ledger.open(home=tmp_path / "ledger")
    try:
        rec = led.recorder()
        conv = rec.start_conversation(system_prompt="coding agent")
        rec.record_message(conv.id, "user", "Find the flaky test and note it.")
        steps: list[tuple[str, str, str, bool]] = [
            ("c1", "echo 'x = 1' > blocked.py", REFUSED, True),
            ("c2", COMMAND, FAILED, True),
        ]
        for call_id, command, out, is_error in steps:
            rec.record_assistant(conv.id, tool_calls=[{"call_id": call_id, "tool_name": "Bash", "arguments": {"command": command}}])
            rec.record_tool_result(conv.id, call_id, out, is_error=is_error)
        rec.record_message(conv.id, "user", "What did you write?")
        payload = "\n".join(payload_texts(led.assemble(conv.id, budget_tokens=4000, persist=False, policy=policy_from_mapping({"working_set": {"when_needed": False}})).payload))
    finally:
        led.close()
    lines = payload[payload.index(WS_HEAD):].split("\n")[1:]
    block = lines[: next(i for i, line in enumerate(lines) if not line.startswith(("- ", "    | ")))]
    assert block == [
        "- notes.txt (written, command failed)",
        "- out.log (written, command failed)",
        "- blocked.py (edit rejected)",
    ]
