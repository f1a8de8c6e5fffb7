"""Tool semantics: the registry of every agent's tools, the fallback by argument shape,
tools declared in the policy, and what an edit leaves behind.

The conformance table runs, for each agent dialect × kind of change, a small transcript
in that agent's own format (:mod:`tests.tool_dialects`) through import and assembly at a
budget that drops the raw exchange: the value the edit wrote is in the payload, the
working set shows it under the file, and no pre-edit value is presented as current;
after successive edits only the newest value is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.tool_dialects import DECLARED_POLICY, DIALECTS, VALUES, WRITERS, payload_texts, story

from contextledger.errors import PolicyError
from contextledger.ledger import Ledger
from contextledger.memory.dialects import BUILTIN_TOOLS, KINDS, lookup_tool, spec_by_shape
from contextledger.memory.extractors.actions import resolve_action
from contextledger.memory.extractors.base import ToolInput
from contextledger.memory.extractors.file_write import ChangeLimits, bound_lines
from contextledger.memory.extractors.registry import default_registry
from contextledger.memory.extractors.shell_writes import shell_write
from contextledger.policy.loader import load_policy, policy_from_mapping

BUDGET = 450
"""Small enough that every dialect's raw edit exchange is dropped (checked below)."""

WS_HEAD = "files read or edited on this branch"


def _item(tool: str, args: dict[str, Any] | str, text: str = "", *, action: str | None = None) -> ToolInput:
    raw = args if isinstance(args, str) else json.dumps(args)
    return ToolInput(tool_name=tool, arguments_json=raw, result_text=text, is_error=False, size_bytes=len(text.encode()), action_text=action)


def _assemble(tmp_path: Path, dialect: str, kind: str, values: tuple[str, ...]) -> tuple[str, str]:
    calls, path = story(dialect, kind, values)
    source = WRITERS[dialect](tmp_path, calls)
    policy = None
    if dialect == "declared":
        (tmp_path / "policy.toml").write_text(DECLARED_POLICY, encoding="utf-8")
        policy = load_policy(tmp_path / "policy.toml")
    ledger = Ledger.open(home=tmp_path / "ledger", policy=policy)
    try:
        conv = ledger.import_file(source).conversation_id
        result = ledger.assemble(conv, provider="openai-chat", budget_tokens=BUDGET, persist=False)
        return "\n".join(payload_texts(result.payload)), path
    finally:
        ledger.close()


def _names_file(line: str, path: str) -> bool:
    """A working-set line of ``path`` as the agent names it, or of its absolute spelling
    under the directory a shell command ran in (Codex ``workdir``: ``/repo/settings.py``)."""
    return line.startswith(f"- {path} (") or (not path.startswith("/") and line.startswith("- /") and f"/{path} (" in line.split(" (", 1)[0] + " (")


def _working_set_entry(payload: str, path: str) -> list[str]:
    block = payload[payload.index(WS_HEAD):].split("\n")
    start = block.index(next(line for line in block if _names_file(line, path)))
    entry = [block[start]]
    for line in block[start + 1 :]:
        if not line.startswith("    | "):
            break
        entry.append(line)
    return entry


CASES = [(d, k) for d, (_, kinds) in DIALECTS.items() for k in kinds]


@pytest.mark.parametrize(("dialect", "kind"), CASES, ids=[f"{d}-{k}" for d, k in CASES])
@pytest.mark.parametrize("edits", [1, 2], ids=["one-edit", "two-edits"])
def test_conformance_the_newest_value_is_current_after_the_raw_exchange_is_dropped(tmp_path: Path, dialect: str, kind: str, edits: int) -> None:
    values = VALUES[: edits + 1]
    payload, path = _assemble(tmp_path, dialect, kind, values)
    newest, older = values[-1], values[:-1]
    assert "edit-1" not in payload, "the raw edit exchange must be dropped at this budget"
    assert newest in payload
    entry = _working_set_entry(payload, path)
    assert entry[0].endswith(f"{path} (edited)") or (dialect, kind) == ("fallback", "write")
    assert any(newest in line for line in entry[1:]), entry
    assert not any(old in line for old in older for line in entry), entry
    presented = [line for line in payload.split("\n") if any(old in line for old in older) and not line.lstrip().startswith("-")]
    assert presented == [], "a pre-edit value is presented as current"


def test_every_listed_agent_tool_is_in_the_registry() -> None:
    listed = {
        "claude-code": ["Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Bash", "BashOutput", "Grep", "Glob", "LS", "Task", "TodoWrite", "WebFetch", "WebSearch"],
        "codex": ["shell", "apply_patch", "update_plan", "local_shell"],
        "openhands": ["str_replace_editor", "execute_bash"],
        "gemini-cli": ["read_file", "read_many_files", "write_file", "replace", "run_shell_command", "glob", "search_file_content", "list_directory"],
        "aider": ["aider_search_replace", "aider_whole_file", "aider_udiff", "aider_run"],
    }
    kinds = {name: spec.kind for names in listed.values() for name in names if (spec := lookup_tool(name)) is not None}
    assert kinds == {
        "Read": "read", "Write": "write", "Edit": "edit", "MultiEdit": "edit", "NotebookEdit": "edit", "Bash": "shell",
        "BashOutput": "shell_output", "Grep": "search", "Glob": "search", "LS": "list", "Task": "subagent", "TodoWrite": "plan",
        "WebFetch": "fetch", "WebSearch": "web_search", "shell": "shell", "apply_patch": "patch", "update_plan": "plan",
        "local_shell": "shell", "str_replace_editor": "editor", "execute_bash": "shell", "read_file": "read",
        "read_many_files": "read", "write_file": "write", "replace": "edit", "run_shell_command": "shell", "glob": "search",
        "search_file_content": "search", "list_directory": "list", "aider_search_replace": "edit", "aider_whole_file": "write",
        "aider_udiff": "patch", "aider_run": "shell",
    }
    assert all(spec.kind in KINDS for spec in BUILTIN_TOOLS.values())


@pytest.mark.parametrize(
    ("sub", "kind", "verb"),
    [("view", "read", "read"), ("create", "write", "create"), ("str_replace", "edit", "write"), ("insert", "insert", "write"), ("undo_edit", "undo_edit", "write")],
)
def test_str_replace_editor_sub_commands(sub: str, kind: str, verb: str) -> None:
    action = resolve_action(_item("str_replace_editor", {"command": sub, "path": "/w/a.py", "new_str": "x = 2", "insert_line": 4}))
    assert (action.kind, action.verb, action.path) == (kind, verb, "/w/a.py")


def test_argument_names_per_dialect() -> None:
    gemini = resolve_action(_item("read_file", {"absolute_path": "/r/a.py", "offset": 10, "limit": 5}))
    assert (gemini.verb, gemini.path, gemini.line_range) == ("read", "/r/a.py", (10, 14))
    multi = resolve_action(_item("MultiEdit", {"file_path": "/a.py", "edits": [{"old_string": "a", "new_string": "b"}, {"old_string": "c", "new_string": ""}]}))
    assert multi.edits == (("a", "b"), ("c", ""))
    notebook = resolve_action(_item("NotebookEdit", {"notebook_path": "/n.ipynb", "cell_id": "c1", "new_source": "print(2)"}))
    assert (notebook.kind, notebook.path, notebook.edits) == ("edit", "/n.ipynb", (("", "print(2)"),))
    local = resolve_action(_item("local_shell", {"type": "exec", "command": ["bash", "-lc", "ls src"]}))
    assert (local.verb, local.command) == ("shell", "ls src")
    many = resolve_action(_item("read_many_files", {"paths": ["a.py", "b.py"]}))
    assert (many.verb, many.paths) == ("other", ("a.py", "b.py"))
    assert resolve_action(_item("update_plan", {"plan": [{"step": "x", "status": "pending"}]})).kind == "plan"


@pytest.mark.parametrize(
    ("name", "args", "kind"),
    [
        ("edit_file_v2", {"target_file": "a.py", "old_text": "x", "new_text": "y"}, "edit"),
        ("put_file", {"filename": "a.py", "contents": "x = 1\n"}, "write"),
        ("submit", {"change": "*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n*** End Patch"}, "patch"),
        ("apply_diff", {"d": "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n"}, "patch"),
        ("view_source", {"path": "a.py"}, "read"),
        ("delete_row", {"path": "a.py"}, None),
        ("run_in_sandbox", {"cmd": "sed -i 's/a/b/' a.py"}, "shell"),
        ("lookup", {"query": "x"}, None),
    ],
)
def test_fallback_by_argument_shape(name: str, args: dict[str, Any], kind: str | None) -> None:
    spec = spec_by_shape(name, args, json.dumps(args))
    assert (spec.kind if spec else None) == kind


@pytest.mark.parametrize(
    ("command", "kind", "paths", "content"),
    [
        ("sed -i 's/a = 1/a = 2/g' src/x.py src/y.py", "edit", ("src/x.py", "src/y.py"), None),
        ("sed -i.bak -e 's/a/b/' x.py", "edit", ("x.py",), None),
        ("cd /repo && cat > x.py <<'EOF'\nx = 2\nEOF", "write", ("/repo/x.py",), "x = 2"),
        ("cd src && sed -i 's/a/b/' ../lib/./x.py", "edit", ("lib/x.py",), None),
        ("cat <<EOF > conf.toml\nk = 2\nEOF", "write", ("conf.toml",), "k = 2"),
        ("echo 'k = 3' >> conf.toml", "write", ("conf.toml",), "k = 3"),
        ("printf 'a\\n' > out.txt", "write", ("out.txt",), "a\\n"),
        ("ls | tee -a listing.txt", "write", ("listing.txt",), None),
        ("python gen.py > build/out.json 2>&1", "write", ("build/out.json",), None),
        ("git apply <<'EOF'\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\nEOF", "patch", ("x.py",), "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b"),
        ("patch -p1 < fix.diff", "patch", (), None),
        ("rm -f a.txt b.txt", "delete", ("a.txt", "b.txt"), None),
        ("git rm old.py", "delete", ("old.py",), None),
    ],
)
def test_shell_commands_that_write_files(command: str, kind: str, paths: tuple[str, ...], content: str | None) -> None:
    found = shell_write(command)
    assert found is not None and (found.kind, found.paths, found.content) == (kind, paths, content)


@pytest.mark.parametrize("command", ["python x.py > /dev/null 2>&1", "grep -n 'a > b' f.py", "python -c 'print(1>2)'", "pytest 2> err.txt", "sed -n 1,20p a.py", "cat 'unterminated",
    # a function call written as markup (SWE-smith ADP actions) is no redirection to ``<``
    '<function=bash>\n<parameter=command>find /testbed -type f -name "*.py" | sort</parameter>\n</function>',
    "<function=str_replace_editor>\n<parameter=command>view</parameter>\n<parameter=path>/testbed/a.py</parameter>\n</function>",
    "echo a > > b"])
def test_shell_commands_that_do_not_write(command: str) -> None:
    assert shell_write(command) is None


def test_an_edit_memory_carries_the_change_within_the_limits() -> None:
    big = "\n".join(f"line {i} = {i}" for i in range(60))
    reg = default_registry(change_limits=ChangeLimits(max_lines=5, max_bytes=1500))
    ext = reg.extract(_item("Write", {"file_path": "/a.py", "content": big}, "The file /a.py has been updated."))
    assert ext.kind == "file_write"
    assert ext.payload["new_text"] == "\n".join(f"line {i} = {i}" for i in range(5))
    assert (ext.payload["new_text_lines"], ext.payload["new_text_omitted"]) == (60, 55)
    assert ext.limits == "55 more changed lines in the recorded call"
    sed = default_registry().extract(_item("Bash", {"command": "sed -i 's/retries = 3/retries = 7/' app.py"}))
    assert (sed.payload["diff"], sed.payload["new_text"], sed.payload["command"]) == ("@@ sed s/…/…/ @@\n-retries = 3\n+retries = 7", "retries = 7", "sed -i 's/retries = 3/retries = 7/' app.py")
    assert bound_lines(["é" * 10, "b"], ChangeLimits(max_lines=5, max_bytes=15)) == (["ééééé…"], 1)


def test_policy_declared_tools_and_their_errors(tmp_path: Path) -> None:
    policy = policy_from_mapping({"tools": {"my_editor": {"kind": "edit", "path": "file", "old": "before", "new": ["after", "replacement"]}}})
    spec = policy.tools["my_editor"].spec()
    assert (spec.kind, spec.path, spec.old, spec.new) == ("edit", ("file",), ("before",), ("after", "replacement"))
    bad = [
        ({"kind": "editt", "path": "file"}, "tools.my_editor.kind: unknown kind 'editt' (known: read, write, edit, insert, patch, undo_edit, delete, list, search, shell, shell_output, fetch, web_search, subagent, plan, other)"),
        ({"kind": "edit", "path": "file"}, "tools.my_editor: a tool of kind 'edit' needs 'new' or 'edits' (the argument name)"),
        ({"kind": "write", "path": "f", "contents": "c"}, "tools.my_editor.contents: unknown key"),
        ({"kind": "read", "path": 3}, "tools.my_editor.path: expected an argument name or an array of argument names, got int 3"),
    ]
    for decl, message in bad:
        with pytest.raises(PolicyError) as err:
            policy_from_mapping({"tools": {"my_editor": decl}}, "my.toml")
        assert str(err.value) == f"my.toml: {message}"


def test_a_declaration_wins_over_the_builtin_registry() -> None:
    item = _item("Read", {"file_path": "/a.py", "body": "x = 1"}, "saved")
    reg = default_registry(declared_tools={"Read": policy_from_mapping({"tools": {"Read": {"kind": "write", "path": "file_path", "content": "body"}}}).tools["Read"].spec()})
    ext = reg.extract(item)
    assert (ext.kind, ext.payload["new_text"]) == ("generated_file", "x = 1")
    assert default_registry().extract(item).kind == "file_read"


def test_vitest_failure_keeps_its_assertion_line_and_location() -> None:
    """From a Codex CLI rollout in ../shared/data/real: the latest failing call's error
    line must survive in the test-run memory."""
    out = (
        "Process exited with code 1\nOutput:\n"
        " ❯ src/a.test.ts (16 tests | 1 failed | 15 skipped) 1316ms\n"
        "       × sets default threshold 1312ms\n\n"
        "⎯⎯⎯⎯⎯⎯⎯ Failed Tests 1 ⎯⎯⎯⎯⎯⎯⎯\n\n"
        " FAIL  src/a.test.ts > Config > sets default threshold\n"
        "AssertionError: expected undefined to deeply equal { auto: true }\n\n"
        " ❯ src/a.test.ts:253:33\n\n"
        " Test Files  1 failed (1)\n      Tests  1 failed | 15 skipped (16)\n"
        "⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯[1/1]⎯\n"
    )
    ext = default_registry().extract(_item("exec_command", {"cmd": "npx vitest run src/a.test.ts"}, out))
    assert ext.kind == "test_run"
    assert ext.payload["failures"][0]["message"] == "AssertionError: expected undefined to deeply equal { auto: true }"
    assert ext.payload["failures"][0]["location"] == "src/a.test.ts:253"


def test_text_actions_are_read_by_their_command() -> None:
    """SWE-agent / mini-swe-agent text actions are recorded as calls named after their
    first word with ``{"action": …}`` arguments: the command decides, not the name."""
    reg = default_registry()
    sed = reg.extract(_item("sed", {"action": "sed -i 's/a = 3/a = 7/' x.py"}, "", action="sed -i 's/a = 3/a = 7/' x.py"))
    assert (sed.kind, sed.payload["new_text"]) == ("file_write", "a = 7")
    cat = reg.extract(_item("cat", {"action": "cat x.py"}, "a = 7\n", action="cat x.py"))
    assert (cat.kind, cat.subject_key) == ("file_read", "file:x.py")


def test_working_set_states_created_deleted_rejected_and_read_after_edit(tmp_path: Path) -> None:
    led = Ledger.open(home=tmp_path / "ledger")
    try:
        rec = led.recorder()
        conv = rec.start_conversation(system_prompt="coding agent")
        rec.record_message(conv.id, "user", "Tidy the project.")
        steps: list[tuple[str, str, dict[str, Any], str, bool]] = [
            ("c1", "Write", {"file_path": "new.py", "content": "A = 1\nB = 2\n"}, "File created successfully at: new.py", False),
            ("c2", "Bash", {"command": "rm -f old.py"}, "", False),
            ("c3", "Edit", {"file_path": "cfg.py", "old_string": "X = 1", "new_string": "X = 2"}, "<tool_use_error>String to replace not found in file.</tool_use_error>", True),
            ("c4", "Edit", {"file_path": "app.py", "old_string": "N = 1", "new_string": "N = 2"}, "The file app.py has been updated.", False),
            ("c5", "Read", {"file_path": "app.py"}, "     1→N = 2", False),
        ]
        for call_id, tool, args, out, is_error in steps:
            rec.record_assistant(conv.id, tool_calls=[{"call_id": call_id, "tool_name": tool, "arguments": args}])
            rec.record_tool_result(conv.id, call_id, out, is_error=is_error)
        rec.record_message(conv.id, "user", "What changed?")
        payload = "\n".join(payload_texts(led.assemble(conv.id, budget_tokens=4000, persist=False, policy=policy_from_mapping({"working_set": {"when_needed": False}})).payload))
    finally:
        led.close()
    lines = payload[payload.index(WS_HEAD):].split("\n")[1:]
    block = lines[: next(i for i, line in enumerate(lines) if not line.startswith(("- ", "    | ")))]
    assert block == [
        "- app.py (read)",
        "- cfg.py (edit rejected)",
        "- old.py (deleted)",
        "- new.py (created)",
        "    | A = 1",
        "    | B = 2",
    ]


def test_a_relative_edit_of_an_absolutely_read_file_is_one_working_set_entry(tmp_path: Path) -> None:
    """Claude Code reads ``/repo/settings.py``, then edits it with ``sed -i`` on the
    relative path: the working set lists the file once, as edited, with the new value."""
    from tests.tool_dialects import READS, Call, write_claude_code

    calls = [READS["claude-code"]("/repo/settings.py"), Call("Bash", {"command": f"sed -i 's/{VALUES[0]}/{VALUES[1]}/' settings.py"}, "", "edit-1")]
    led = Ledger.open(home=tmp_path / "ledger")
    try:
        conv = led.import_file(write_claude_code(tmp_path, calls)).conversation_id
        payload = "\n".join(payload_texts(led.assemble(conv, budget_tokens=BUDGET, persist=False).payload))
    finally:
        led.close()
    assert _working_set_entry(payload, "/repo/settings.py") == ["- /repo/settings.py (edited)", f"    | {VALUES[1]}"]
    assert "- settings.py (" not in payload
