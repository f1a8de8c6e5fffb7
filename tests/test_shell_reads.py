"""A file read through the shell is a file read, and a later write of that file by any
tool makes it stale — whatever spelling of the path each side uses.

Hard cases written from the programs' documented options (POSIX ``cat`` / ``head`` /
``tail`` / ``sed -n``, GNU ``nl``), Codex's ``workdir`` argument and ``apply_patch``
grammar (openai/codex ``codex-rs/apply-patch``: ``*** Update File`` / ``Add File`` /
``Delete File`` / ``Move to``), and Claude Code's Edit / Write / MultiEdit.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from tests.tool_dialects import payload_texts

from conftest import require_real_data
from contextledger.ingest.importers import detect_format, parse_file
from contextledger.ledger import Ledger
from contextledger.memory.dialects import begin_patch_paths
from contextledger.memory.extractors.actions import resolve_action
from contextledger.memory.extractors.base import ToolInput
from contextledger.memory.extractors.registry import default_registry
from contextledger.memory.extractors.shell_reads import ShellRead, shell_reads
from contextledger.memory.extractors.textutil import normalise_path
from contextledger.memory.links import LINEAGE_STALE_KEY
from contextledger.memory.paths import same_file, written_paths
from contextledger.records.enums import ResolutionState
from contextledger.records.models import ToolMemory
from contextledger.records.parts import ToolCallPart


def _r(path: str, window: tuple[int, int | None] | None, numbered: bool, program: str) -> ShellRead:
    return ShellRead(path=path, line_range=window, numbered=numbered, program=program)


@pytest.mark.parametrize(
    ("command", "cwd", "reads"),
    [
        ("cat -n auth.py", "/repo", [_r("/repo/auth.py", (1, None), True, "cat")]),
        ("cat ./src/../auth.py", None, [_r("auth.py", (1, None), False, "cat")]),
        ("cd src && cat -b app.py", "/repo", [_r("/repo/src/app.py", (1, None), True, "cat")]),
        ("cd /etc && cd nginx && cat nginx.conf", None, [_r("/etc/nginx/nginx.conf", (1, None), False, "cat")]),
        ("nl -ba src/x.ts | sed -n '90,108p'", "/w", [_r("/w/src/x.ts", (90, 108), True, "nl")]),
        ("nl -b a x.py", None, [_r("x.py", (1, None), True, "nl")]),
        ("head -n 50 x.py", None, [_r("x.py", (1, 50), False, "head")]),
        ("head -20 x.py", None, [_r("x.py", (1, 20), False, "head")]),
        ("head x.py", None, [_r("x.py", (1, 10), False, "head")]),
        ("tail -n 20 log.txt", None, [_r("log.txt", None, False, "tail")]),
        ("tail -n +5 x.py", None, [_r("x.py", (5, None), False, "tail")]),
        ("sed -n '40,60p' /a/b.py", "/ignored", [_r("/a/b.py", (40, 60), False, "sed")]),
        ("sed -n 7p b.py", None, [_r("b.py", (7, 7), False, "sed")]),
        ("sed -n -e '3,$p' b.py", None, [_r("b.py", (3, None), False, "sed")]),
        ("head -n 200 f.py | tail -n 50", None, [_r("f.py", (151, 200), False, "head")]),
        ("cat -n f.py | sed -n '5,9p' | head -n 2", None, [_r("f.py", (5, 6), True, "cat")]),
        ("less README.md", None, [_r("README.md", (1, None), False, "less")]),
        ("more README.md", None, [_r("README.md", (1, None), False, "more")]),
        ("cat x.py 2>/dev/null", None, [_r("x.py", (1, None), False, "cat")]),
        ("sed -n '1,220p' A.md && sed -n '1,40p' /d/B.md", "/w", [_r("/w/A.md", (1, 220), False, "sed"), _r("/d/B.md", (1, 40), False, "sed")]),
    ],
)
def test_shell_commands_that_read_files(command: str, cwd: str | None, reads: list[ShellRead]) -> None:
    assert list(shell_reads(command, cwd) or ()) == reads


@pytest.mark.parametrize(
    "command",
    [
        "cat x.py | grep foo",  # a search, not a read
        "cat a.py b.py",  # two files in one text
        "cat > x.py <<'EOF'\nx = 1\nEOF",
        "cat x.py > y.py",
        "sed -i 's/a/b/' x.py",
        "sed '1,5p' x.py",  # without -n every line is printed, the window twice
        "sed -n '/def/,/return/p' x.py",
        "head -c 100 x.py",
        "tail -f log.txt",
        "cd $HOME && cat x.py",
        "cat *.py",
        "cat -",
        "cat x.py && python x.py",
        "nl -ba x.py | sort",
    ],
)
def test_shell_commands_that_are_not_file_reads(command: str) -> None:
    assert shell_reads(command) is None


def _item(tool: str, args: dict[str, Any] | str, text: str, *, is_error: bool = False) -> ToolInput:
    raw = args if isinstance(args, str) else json.dumps(args)
    return ToolInput(tool_name=tool, arguments_json=raw, result_text=text, is_error=is_error, size_bytes=len(text.encode()))


def test_a_sed_window_numbers_its_lines_from_the_window_whatever_the_text_looks_like() -> None:
    codex = "Chunk ID: a1\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\n12: not a line number\nb = 2\nc = 3\n"
    ext = default_registry().extract(_item("exec_command", {"cmd": "sed -n '40,42p' src/a.py", "workdir": "/w"}, codex))
    assert (ext.kind, ext.subject_key, ext.payload["line_range"], ext.payload["lines_returned"]) == ("file_read", "file:/w/src/a.py", [40, 42], 3)
    assert ext.summary.startswith("read /w/src/a.py lines 40-42 · 33 bytes")


def test_numbered_shell_output_is_parsed_and_a_failed_read_has_no_content() -> None:
    reg = default_registry()
    out = json.dumps({"output": "    90\tdef f():\n    91\t    return 1\n", "metadata": {"exit_code": 0}})
    nl = reg.extract(_item("shell", {"command": ["bash", "-lc", "nl -ba a.py | sed -n '90,91p'"], "workdir": "/r"}, out))
    assert (nl.payload["path"], nl.payload["line_range"], nl.payload["symbols"]) == ("/r/a.py", [90, 91], ["def f"])
    failed = reg.extract(_item("Bash", {"command": "cat missing.py"}, "Exit code 1\ncat: missing.py: No such file or directory"))
    assert (failed.kind, failed.payload["content_sha256"], failed.payload["line_range"]) == ("file_read", None, None)
    assert failed.summary == "read missing.py failed\ncat: missing.py: No such file or directory"


READ = ("exec_command", {"cmd": "cat -n auth.py", "workdir": "/repo"}, "Process exited with code 0\nOutput:\n     1\tdef login(user):\n     2\t    return check(user)\n")
PATCH_OK = '{"output":"Success. Updated the following files:\\nM auth.py\\n","metadata":{"exit_code":0}}'
WRITERS: dict[str, tuple[str, dict[str, Any] | str, str]] = {
    "claude-edit": ("Edit", {"file_path": "/repo/auth.py", "old_string": "def login(user):", "new_string": "def login(user, token):"}, "The file /repo/auth.py has been updated."),
    "claude-write": ("Write", {"file_path": "/repo/auth.py", "content": "def login(user, token):\n    pass\n"}, "The file /repo/auth.py has been updated."),
    "claude-multiedit": ("MultiEdit", {"file_path": "/repo/auth.py", "edits": [{"old_string": "user)", "new_string": "user, token)"}]}, "Applied 1 edit to /repo/auth.py"),
    "codex-patch-relative": ("apply_patch", "*** Begin Patch\n*** Update File: auth.py\n@@\n-def login(user):\n+def login(user, token):\n*** End Patch\n", PATCH_OK),
    "codex-patch-second-file": ("apply_patch", "*** Begin Patch\n*** Add File: notes.md\n+x\n*** Update File: auth.py\n@@\n-a\n+b\n*** End Patch\n", PATCH_OK),
    "codex-patch-delete": ("apply_patch", "*** Begin Patch\n*** Delete File: auth.py\n*** End Patch\n", PATCH_OK),
    "codex-patch-move-from": ("apply_patch", "*** Begin Patch\n*** Update File: auth.py\n*** Move to: login.py\n@@\n-a\n+b\n*** End Patch\n", PATCH_OK),
    "codex-shell-apply-patch": ("shell", {"command": ["apply_patch", "*** Begin Patch\n*** Update File: auth.py\n@@\n-a\n+b\n*** End Patch\n"], "workdir": "/repo"}, PATCH_OK),
    "shell-sed-i": ("exec_command", {"cmd": "sed -i 's/user)/user, token)/' auth.py", "workdir": "/repo"}, "Process exited with code 0\nOutput:\n"),
    "shell-redirect-after-cd": ("Bash", {"command": "cd /repo && echo 'x = 1' >> ./auth.py"}, ""),
    "shell-tee": ("Bash", {"command": "printf 'x\\n' | tee /repo/auth.py"}, "x"),
    "git-apply-file-list": ("Bash", {"command": "cd /repo && git apply <<'EOF'\n--- a/auth.py\n+++ b/auth.py\n@@ -1 +1 @@\n-a\n+b\nEOF"}, ""),
    "compound-run": ("Bash", {"command": "cd /repo && rm -f auth.py && cat > t.js <<'EOF'\nconsole.log('ok')\nEOF\nnode t.js"}, "ok"),
}


def _record(tmp_path: Path, calls: list[tuple[str, dict[str, Any] | str, str]]) -> list[ToolMemory]:
    led = Ledger.open(home=tmp_path / "ledger")
    try:
        rec = led.recorder()
        conv = rec.start_conversation(system_prompt="coding agent")
        rec.record_message(conv.id, "user", "Add a token to login.")
        for i, (tool, args, out) in enumerate(calls):
            arguments = args if isinstance(args, dict) else {"input": args}
            rec.record_assistant(conv.id, tool_calls=[{"call_id": f"c{i}", "tool_name": tool, "arguments": arguments}])
            rec.record_tool_result(conv.id, f"c{i}", out)
        return led.store.memories(led.scope(), conv.id)
    finally:
        led.close()


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_shell_read_is_stale_after_a_write_of_the_file_by_any_tool(tmp_path: Path, writer: str) -> None:
    read, write = _record(tmp_path, [READ, WRITERS[writer]])
    assert (read.payload["extractor"], read.subject_key) == ("file_read", "file:/repo/auth.py")
    assert any(same_file("/repo/auth.py", p) for p in written_paths(write)), written_paths(write)
    assert read.resolution_state is ResolutionState.STALE
    assert read.limits is not None and read.limits.startswith("file changed later (m")


def test_a_read_is_not_stale_after_a_write_of_another_file_or_a_read_after_the_write(tmp_path: Path) -> None:
    other = ("Edit", {"file_path": "/repo/src/auth.py", "old_string": "a", "new_string": "b"}, "The file /repo/src/auth.py has been updated.")
    read, _ = _record(tmp_path / "a", [READ, other])
    assert read.resolution_state is ResolutionState.CURRENT
    _, read_after = _record(tmp_path / "b", [WRITERS["codex-patch-relative"], READ])
    assert read_after.resolution_state is ResolutionState.CURRENT


def test_an_imported_codex_read_is_sent_as_a_stale_marker_after_a_custom_tool_patch(tmp_path: Path) -> None:
    from tests.tool_dialects import Call, write_codex

    calls = [Call("exec_command", READ[1], READ[2], "r1"), Call("apply_patch", str(WRITERS["codex-patch-relative"][1]), PATCH_OK, "p1")]
    led = Ledger.open(home=tmp_path / "ledger")
    try:
        conv = led.import_file(write_codex(tmp_path, calls)).conversation_id
        payload = led.assemble(conv, provider="openai-chat", budget_tokens=100_000, persist=False).payload
    finally:
        led.close()
    read_result = next(m["content"] for m in payload["messages"] if m.get("tool_call_id") == "r1")
    assert read_result.startswith("[stale memory ") and "revalidate: exec_command" in read_result
    assert "return check(user)" not in "\n".join(payload_texts(payload))


def test_a_compound_command_keeps_its_output_and_says_what_it_deleted(tmp_path: Path) -> None:
    command = "rm -f old_test.js && cat > t.js <<'EOF'\nconst assert = require('assert');\nassert.equal(1, 1);\nconsole.log('All 12 tests passed!');\nEOF\nnode t.js"
    output = "running 12 checks\n" + "".join(f"check {i}: ok\n" for i in range(12)) + "All 12 tests passed!\n"
    ext = default_registry().extract(_item("Bash", {"command": command}, output))
    assert ext.kind == "command"
    assert ext.summary == "$ rm -f old_test.js && cat > t.js <<'EOF' · 14 lines\nAll 12 tests passed!\nfiles: deleted old_test.js; wrote t.js"
    assert (ext.payload["files_written"], ext.payload["effects"]) == (["old_test.js", "t.js"], ["deleted old_test.js", "wrote t.js"])
    delete = default_registry().extract(_item("Bash", {"command": "rm -f a.txt b.txt"}, ""))
    assert delete.summary == "delete a.txt, b.txt"
    both = default_registry().extract(_item("Bash", {"command": "rm -f old.js && cat > t.js <<'EOF'\nx\nEOF"}, ""))
    assert (both.kind, both.summary, both.payload["paths"]) == ("file_write", "deleted old.js; wrote t.js", ["old.js", "t.js"])
    led = Ledger.open(home=tmp_path / "ledger")
    try:
        rec = led.recorder()
        conv = rec.start_conversation(system_prompt="coding agent")
        rec.record_message(conv.id, "user", "Write and run the checks.")
        rec.record_assistant(conv.id, tool_calls=[{"call_id": "c1", "tool_name": "Bash", "arguments": {"command": command}}])
        rec.record_tool_result(conv.id, "c1", output)
        rec.record_message(conv.id, "user", "Did they pass?")
        text = "\n".join(payload_texts(led.assemble(conv.id, budget_tokens=100_000, persist=False).payload))
    finally:
        led.close()
    assert output.strip() in text


# -- every real Claude Code / Codex transcript with a shell read and a later write ---------


def _shell_read_then_write(path: Path) -> bool:
    """Whether a shell read of a file is followed by a write of it (read from the calls)."""
    reads: list[str] = []
    for m in parse_file(path).messages:
        for p in m.parts:
            if not isinstance(p, ToolCallPart):
                continue
            a = resolve_action(ToolInput(tool_name=p.tool_name, arguments_json=p.arguments_json, result_text="", is_error=False, size_bytes=0))
            if a.verb == "read" and a.command is not None:
                reads.append(normalise_path(a.path or ""))
                continue
            written = list(a.paths or ((a.path,) if a.path else ()))
            if a.kind == "patch" and not written:
                written = begin_patch_paths(a.patch or p.arguments_json)
            if (a.verb in ("write", "create") or a.effects) and any(same_file(r, normalise_path(w)) for r in reads for w in written):
                return True
    return False


def _real_agent_files() -> list[Path]:
    root = require_real_data()
    out = []
    for f in sorted(root.rglob("*.jsonl")):
        try:
            fmt = detect_format(f)
        except Exception:  # not a transcript this test is about
            continue
        if fmt in ("claude-code", "codex-rollout") and _shell_read_then_write(f):
            out.append(f)
    return out


def test_real_shell_reads_are_stale_after_a_later_write_of_the_file(tmp_path: Path) -> None:
    files = _real_agent_files()
    assert len(files) >= 3, files
    checked = 0
    for f in files:
        led = Ledger.open(home=tmp_path / f.stem)
        try:
            conv = led.import_file(f).conversation_id
            memories = led.store.memories(led.scope(), conv)
        finally:
            led.close()
        lineage_stale = {i for m in memories for i in m.payload.get(LINEAGE_STALE_KEY, [])}
        by_id = {m.id: m for m in memories}
        for read in memories:
            if read.payload.get("extractor") != "file_read" or not {"command", "cmd"} & set(read.revalidation_args):
                continue
            path = str(read.payload.get("path") or "")
            later = [m for m in memories if (m.seq, m.id) > (read.seq, read.id) and any(same_file(path, p) for p in written_paths(m))]
            if not path or not later:
                continue
            checked += 1
            head = read
            while head.resolution_state is ResolutionState.SUPERSEDED and head.superseded_by in by_id:
                head = by_id[head.superseded_by]  # the same view read again: its successor carries the state
            if (head.seq, head.id) > (later[0].seq, later[0].id):
                continue  # read again after the write: current
            assert head.resolution_state is ResolutionState.STALE or head.id in lineage_stale, (f.name, head.summary, later[0].summary)
    assert checked >= 3


def test_codex_argv_commands_are_read_as_their_shell_line() -> None:
    action = resolve_action(_item("shell", {"command": ["bash", "-lc", "cd src && head -n 3 a.py"], "workdir": "/w"}, ""))
    assert (action.verb, action.path, action.line_range) == ("read", "/w/src/a.py", (1, 3))
    joined = resolve_action(_item("shell", {"command": ["cat", "-n", "my file.py"]}, ""))
    assert (joined.verb, joined.path, joined.command) == ("read", "my file.py", shlex.join(["cat", "-n", "my file.py"]))


def _runs_with_effects(path: Path) -> int:
    """Calls of ``path`` whose shell command writes files and also runs something."""
    n = 0
    for m in parse_file(path).messages:
        action_text = m.metadata.get("action")
        for p in m.parts:
            if isinstance(p, ToolCallPart):
                item = ToolInput(tool_name=p.tool_name, arguments_json=p.arguments_json, result_text="", is_error=False, size_bytes=0, action_text=action_text if isinstance(action_text, str) else None)
                a = resolve_action(item)
                n += a.verb == "shell" and bool(a.effects)
    return n


def test_real_compound_commands_keep_their_output_and_name_their_writes(tmp_path: Path) -> None:
    """Every real transcript with a command that writes files and runs something
    (``cat > repro.py << 'EOF'`` … ``python repro.py``): its memory is the run's
    (command or test run), lists the files written, and keeps an output line."""
    root = require_real_data()
    found: dict[Path, int] = {}
    for f in sorted(p for p in root.rglob("*") if p.suffix in (".json", ".jsonl")):
        try:
            detect_format(f)
        except Exception:  # not a transcript
            continue
        if (n := _runs_with_effects(f)) > 0:
            found[f] = n
    assert len(found) >= 3, found
    for f, n in found.items():
        led = Ledger.open(home=tmp_path / f.stem)
        try:
            conv = led.import_file(f).conversation_id
            runs = [m for m in led.store.memories(led.scope(), conv) if m.payload.get("files_written")]
        finally:
            led.close()
        assert len(runs) == n, f.name
        for m in runs:
            assert m.payload["extractor"] in ("command", "test_run"), (f.name, m.summary)
            assert all(" +? -?" not in line for line in m.summary.split("\n"))
            if m.payload.get("output_lines") and m.status.value == "succeeded":
                assert len(m.summary.split("\n")) >= 2, (f.name, m.summary)
