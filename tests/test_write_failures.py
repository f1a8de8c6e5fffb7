"""A failed write changes nothing (seed 000 §4.5, §4.6): the status of a write / edit /
patch call comes from its result — the error flag or the tool's own failure text — and a
failed write never makes an earlier read of its file stale.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import real_params
from contextledger.ingest.recorder import Recorder
from contextledger.ledger import Ledger
from contextledger.memory.links import file_staleness
from contextledger.memory.write_status import result_status, write_failed
from contextledger.records.enums import ToolCallStatus
from contextledger.records.models import Conversation

FAILURES = [
    "Error: old_str not found in src/app.py",
    "ERROR:\nInvalid `path` parameter: /repo/x.py. The path /repo/x.py does not exist.",
    "<tool_use_error>String to replace not found in file.\nString: foo</tool_use_error>",
    "Failed to edit, could not find the string to replace.",
    "apply_patch verification failed: Failed to find expected lines in src/a.rs",
    "No replacement was performed, old_str `x = 1` did not appear verbatim in /repo/a.py.",
    "Could not write file: permission denied",
    "Cannot edit a file that has not been read yet.",
    "edit_file failed: the file changed on disk",
    "[Errno 2] No such file or directory: 'a.py'",
]
SUCCESSES = [
    "The file /repo/a.py has been updated. Here's the result of running `cat -n` on a snippet:\n 1\terror = None",
    "File created successfully at: /repo/errors.py",
    "Successfully overwrote file: /repo/a.py.",
    "Success. Updated the following files:\nM src/a.rs",
    "The file /repo/a.py has been edited. Here's the result of running `cat -n`:\n  1 raise ValueError('failed')",
    "",
]


@pytest.mark.parametrize("text", FAILURES)
def test_a_write_tools_own_failure_texts_are_failures(text: str) -> None:
    assert write_failed(text)
    assert result_status("edit_file", json.dumps({"path": "src/app.py", "old_str": "a", "new_str": "b"}), text, False) is ToolCallStatus.FAILED


@pytest.mark.parametrize("text", SUCCESSES)
def test_a_write_tools_success_texts_are_successes(text: str) -> None:
    assert not write_failed(text)
    assert result_status("edit_file", json.dumps({"path": "src/app.py", "old_str": "a", "new_str": "b"}), text, False) is ToolCallStatus.SUCCEEDED


def test_only_write_and_read_calls_read_their_failure_text_and_the_flag_always_wins() -> None:
    # a shell command's status is its exit code: "Error:" output is data; a file's line is
    # not the read tool's failure text
    assert result_status("Bash", json.dumps({"command": "sed -i s/a/b/ x.py"}), "Error: something printed", False) is ToolCallStatus.SUCCEEDED
    assert result_status("Read", json.dumps({"file_path": "x.py"}), "     1\tError: a line of the file", False) is ToolCallStatus.SUCCEEDED
    assert result_status("Bash", json.dumps({"command": "pytest -q"}), "cat: x: No such file or directory", False) is ToolCallStatus.SUCCEEDED
    assert result_status("edit_file", json.dumps({"path": "a.py"}), "The file a.py has been updated.", True) is ToolCallStatus.FAILED
    assert result_status("edit_file", json.dumps({"path": "a.py"}), None, False) is ToolCallStatus.SUCCEEDED


@pytest.mark.parametrize(
    ("tool", "args", "text", "status"),
    [
        ("terminal", {"command": "cat src/missing.py"}, "cat: src/missing.py: No such file or directory", "failed"),
        ("run_shell", {"cmd": "sed -n '1,40p' a.py"}, "sed: can't read a.py: No such file or directory", "failed"),
        ("exec", {"command": "head -n 5 a.py"}, "head: cannot open 'a.py' for reading: No such file or directory", "failed"),
        ("read_file", {"path": "a.py"}, "Error: file not found: a.py", "failed"),
        ("terminal", {"command": "cat a.py"}, "def f():\n    return 'No such file or directory'\n", "succeeded"),
        ("read_file", {"path": "ERRORS.md"}, "Error handling\n==============\n", "succeeded"),
    ],
)
def test_only_a_successful_result_is_a_read(sqlite_ledger: Ledger, tool: str, args: dict[str, str], text: str, status: str) -> None:
    rec = sqlite_ledger.recorder()
    conv = rec.start_conversation(title="read", system_prompt="You read code.")
    rec.record_message(conv.id, "user", "Look at the file.")
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "r1", "tool_name": tool, "arguments": args}])
    rec.record_tool_result(conv.id, "r1", text)
    [mem] = sqlite_ledger.store.memories(sqlite_ledger.scope(), conv.id)
    [call] = sqlite_ledger.store.tool_calls(sqlite_ledger.scope(), conv.id)
    assert call.status.value == status and mem.status.value == status
    assert mem.payload["extractor"] == "file_read"
    if status == "failed":
        assert mem.payload["content_sha256"] is None and mem.payload["lines_returned"] == 0
        assert mem.summary.split("\n")[1] == text.split("\n")[0]
    else:
        assert mem.payload["content_sha256"] is not None and mem.payload["lines_returned"] == 2


_Call = tuple[str, dict[str, Any], str]
"""``(tool name, arguments, result text)`` of one recorded call."""


def _read_then_edit(ledger: Ledger, read: _Call, edit: _Call) -> tuple[Recorder, Conversation]:
    """A conversation asking to rename a helper in src/app.py: the read ``r1`` of the file,
    then the edit ``e1``, each with its result."""
    rec = ledger.recorder()
    conv = rec.start_conversation(title="edit", system_prompt="You edit code.")
    rec.record_message(conv.id, "user", "Rename the helper in src/app.py.")
    for call_id, (tool, arguments, result) in (("r1", read), ("e1", edit)):
        rec.record_assistant(conv.id, tool_calls=[{"call_id": call_id, "tool_name": tool, "arguments": arguments}])
        rec.record_tool_result(conv.id, call_id, result)
    return rec, conv


def test_a_failed_edit_is_failed_and_leaves_the_earlier_read_fresh(ledger: Ledger) -> None:
    rec, conv = _read_then_edit(
        ledger,
        ("read_file", {"path": "src/app.py"}, "def helper():\n    return 1\n"),
        ("edit_file", {"path": "src/app.py", "old_str": "def helpr():", "new_str": "def assist():"}, "Error: old_str `def helpr():` not found in src/app.py"),
    )
    scope = ledger.scope()
    calls = {c.call_id: c for c in ledger.store.tool_calls(scope, conv.id)}
    assert calls["e1"].status is ToolCallStatus.FAILED and calls["r1"].status is ToolCallStatus.SUCCEEDED
    mems = {m.call_id: m for m in ledger.store.memories(scope, conv.id)}
    edit = mems["e1"]
    assert edit.status is ToolCallStatus.FAILED and edit.payload["applied"] is False
    assert edit.summary.startswith("edit_file failed: edit_file src/app.py rejected\nError: old_str `def helpr():` not found in src/app.py")
    assert file_staleness(list(mems.values())) == {}
    r = ledger.assemble(conv.id, budget_tokens=4000, persist=False)
    body = json.dumps(r.payload, ensure_ascii=False)
    assert "def helper():\\n    return 1" in body and "stale" not in body
    # the edit applied on the second try makes the read stale
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "e2", "tool_name": "edit_file", "arguments": {"path": "src/app.py", "old_str": "def helper():", "new_str": "def assist():"}}])
    rec.record_tool_result(conv.id, "e2", "The file src/app.py has been updated.")
    mems = {m.call_id: m for m in ledger.store.memories(scope, conv.id)}
    assert mems["e2"].status is ToolCallStatus.SUCCEEDED and file_staleness(list(mems.values())) == {mems["r1"].id: mems["e2"].id}


REAL = real_params(
    "codemie-code/**/*.jsonl", "claude-code-viewer-dkimuson/*.jsonl", "marot-spotter/*.jsonl", "claude-reliability-snapshots/*.jsonl",
    "adp-*/*.json", "swe-agent/*.traj", "mini-swe-agent-deepseek/*.json", "moredip-session-share/*.jsonl",
)


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name if isinstance(p, Path) else str(p))
def test_real_failed_writes_and_reads_are_failed_and_make_nothing_stale(tmp_path: Path, path: Path) -> None:
    led = Ledger.open(home=tmp_path / "home")
    try:
        try:
            conv = led.import_file(path).conversation_id
        except Exception as exc:  # not a transcript of an agent format: nothing to check
            pytest.skip(f"{path.name}: {exc}")
        scope = led.scope()
        memories = led.store.memories(scope, conv)
        calls = {c.call_id: c for c in led.store.tool_calls(scope, conv)}
    finally:
        led.close()
    rejected = [m for m in memories if m.payload.get("extractor") == "file_write" and m.payload.get("applied") is False]
    for m in rejected:
        assert m.status is ToolCallStatus.FAILED and calls[m.call_id].status is ToolCallStatus.FAILED, (path.name, m.summary)
        assert f"{m.source_tool} failed: " in m.summary.split("\n")[0], (path.name, m.summary)
    for m in memories:  # a read that shows no file is no successful read
        if m.payload.get("extractor") == "file_read" and m.payload.get("content_sha256") is None:
            assert m.status is ToolCallStatus.FAILED and calls[m.call_id].status is ToolCallStatus.FAILED, (path.name, m.summary)
    makers = set(file_staleness(memories).values())
    assert not makers & {m.id for m in memories if m.status is ToolCallStatus.FAILED}, path.name


def test_a_failed_edit_that_reports_the_file_changed_meanwhile_makes_the_read_stale(ledger: Ledger) -> None:
    _, conv = _read_then_edit(
        ledger,
        ("Read", {"file_path": "/repo/src/app.py"}, "     1\tdef helper():\n     2\t    return 1\n"),
        ("Edit", {"file_path": "/repo/src/app.py", "old_string": "helper", "new_string": "assist"}, "<tool_use_error>File has been modified since read, either by the user or by a linter. Read it again before attempting to write it.</tool_use_error>"),
    )
    mems = {m.call_id: m for m in ledger.store.memories(ledger.scope(), conv.id)}
    assert mems["e1"].status is ToolCallStatus.FAILED and mems["e1"].payload["applied"] is False
    assert file_staleness(list(mems.values())) == {mems["r1"].id: mems["e1"].id}
