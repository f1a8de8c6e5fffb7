"""Shell command lines read the way the shell reads them: a Windows drive path keeps its
backslashes, each command of a pipeline is its own action (``pytest | tee f`` runs the
tests and writes ``f``), and a redirection the shell could not open wrote nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.tool_dialects import payload_texts

from contextledger.ledger import Ledger
from contextledger.memory.extractors.base import ToolInput
from contextledger.memory.extractors.registry import default_registry
from contextledger.memory.extractors.shell_words import pipelines, split_words
from contextledger.memory.extractors.shell_writes import shell_effects
from contextledger.policy.loader import policy_from_mapping

WS_HEAD = "files read or edited on this branch"


def _memory(command: str, text: str, is_error: bool = False) -> Any:
    item = ToolInput(tool_name="Bash", arguments_json=json.dumps({"command": command}), result_text=text, is_error=is_error, size_bytes=len(text))
    return default_registry().extract(item)


def _working_set(tmp_path: Path, steps: list[tuple[str, str, bool]]) -> list[str]:
    led = Ledger.open(home=tmp_path / "ledger")
    try:
        rec = led.recorder()
        conv = rec.start_conversation(system_prompt="coding agent")
        rec.record_message(conv.id, "user", "Save the output.")
        for n, (command, out, is_error) in enumerate(steps):
            rec.record_assistant(conv.id, tool_calls=[{"call_id": f"c{n}", "tool_name": "Bash", "arguments": {"command": command}}])
            rec.record_tool_result(conv.id, f"c{n}", out, is_error=is_error)
        rec.record_message(conv.id, "user", "What did you write?")
        policy = policy_from_mapping({"working_set": {"when_needed": False}})
        payload = "\n".join(payload_texts(led.assemble(conv.id, budget_tokens=4000, persist=False, policy=policy).payload))
    finally:
        led.close()
    lines = payload[payload.index(WS_HEAD) :].split("\n")[1:]
    return lines[: next(i for i, line in enumerate(lines) if not line.startswith(("- ", "    | ")))]


# 1. a Windows drive path keeps its backslashes


def test_a_drive_path_is_split_without_posix_escapes() -> None:
    assert split_words(r'cd C:\Users\me\proj && type "D:\x y\a.txt"') == ["cd", r"C:\Users\me\proj", "&&", "type", r"D:\x y\a.txt"]
    assert split_words(r"echo a\ b") == ["echo", "a b"]  # no drive path: POSIX escapes as before


def test_cd_to_a_drive_path_is_the_directory_of_the_later_commands() -> None:
    found = pipelines(r"cd C:\Users\me\proj && cat a.py > ..\b.txt", "/repo")
    assert found is not None
    assert [(p.stages, p.cwd) for p in found] == [((("cat", "a.py", ">", r"..\b.txt"),), "C:/Users/me/proj")]
    effects = shell_effects(r"cd C:\Users\me\proj && echo hi > out\log.txt", "/repo")
    assert effects is not None
    assert [(w.paths, w.content) for w in effects.writes] == [(("C:/Users/me/proj/out/log.txt",), "hi")]


def test_a_read_of_a_drive_path_names_the_file() -> None:
    m = _memory(r"cat C:\Users\me\proj\a.py", "x = 1\n")
    assert (m.kind, m.payload["path"], m.subject_key) == ("file_read", "C:/Users/me/proj/a.py", "file:C:/Users/me/proj/a.py")


def test_a_search_of_a_drive_path_keeps_its_pattern_and_path() -> None:
    m = _memory(r"grep -n TODO C:\src\app.py", "3:# TODO fix")
    assert (m.summary.split("\n")[0], m.payload["pattern"], m.subject_key) == (r"grep 'TODO' in C:\src\app.py → 1 entry", "TODO", "file:C:/src/app.py")


# 2. each command of a pipeline is its own action


def test_a_test_run_piped_into_tee_is_a_run_that_writes_the_file() -> None:
    m = _memory("pytest -q 2>&1 | tee out.log", "FAILED tests/test_a.py::test_x - assert 1 == 2\n1 failed, 2 passed in 0.12s", True)
    assert m.kind == "test_run"
    assert m.summary.split("\n") == [
        "tests: pytest -q 2>&1 | tee out.log → failed: 1 failed, 2 passed in 0.12s",
        "FAILED tests/test_a.py::test_x - assert 1 == 2",
        "files: wrote out.log",
    ]
    assert (m.payload["files_written"], m.payload["effects"]) == (["out.log"], ["wrote out.log"])


def test_only_a_program_feeding_tee_is_a_run() -> None:
    ran = shell_effects("pytest | tee out.log && cat > notes.txt <<EOF\nflaky\nEOF")
    text = shell_effects("printf 'x\\n' | tee a.txt && cat notes.md | tee -a b.txt")
    hidden = shell_effects("pytest | grep FAIL > fails.txt")
    assert ran is not None and text is not None and hidden is not None
    assert (ran.runs, [w.paths for w in ran.writes]) == (True, [("out.log",), ("notes.txt",)])
    assert (text.runs, [w.paths for w in text.writes]) == (False, [("a.txt",), ("b.txt",)])
    assert (hidden.runs, [w.paths for w in hidden.writes]) == (False, [("fails.txt",)])
    assert _memory("printf 'x\\n' | tee a.txt", "x").summary == "shell write a.txt"


# 3. a redirection the shell could not open wrote nothing


def test_an_unopened_redirect_target_is_not_written() -> None:
    cases = [
        ("echo hi > out.txt", "bash: out.txt: Permission denied", "out.txt"),
        ("echo hi > x/y.txt", "bash: line 1: x/y.txt: No such file or directory", "x/y.txt"),
        ("make > /ro/build.log", "/bin/sh: 1: cannot create /ro/build.log: Read-only file system", "/ro/build.log"),
        ("ls > src", "bash: src: Is a directory", "src"),
        ("echo hi > out.txt", "zsh: permission denied: out.txt", "out.txt"),
    ]
    for command, out, path in cases:
        m = _memory(command, out, True)
        head, line = m.summary.split("\n")
        assert (head.split(" (")[0], line) == (f"shell write {path} not written", out), command
        assert (m.payload["applied"], m.payload["not_written"], "command_failed" in m.payload) == (False, [path], False)


def test_a_written_file_beside_an_unopened_one_is_still_written() -> None:
    m = _memory("echo a > ok.txt && echo b > /ro/b.txt", "bash: /ro/b.txt: Read-only file system", True)
    assert m.summary == "wrote ok.txt (command failed)\nbash: /ro/b.txt: Read-only file system"
    assert (m.payload["paths"], m.payload["not_written"], m.payload["applied"]) == (["ok.txt"], ["/ro/b.txt"], True)


def test_a_run_whose_tee_could_not_open_its_file_wrote_nothing() -> None:
    m = _memory("pytest 2>&1 | tee /ro/run.log", "tee: /ro/run.log: Read-only file system\n3 passed in 0.10s")
    assert m.kind == "test_run"
    assert m.summary == "tests: pytest 2>&1 | tee /ro/run.log → passed: 3 passed in 0.1s"
    assert ("files_written" in m.payload, m.payload["not_written"]) == (False, ["/ro/run.log"])


def test_a_file_named_in_other_output_is_still_written() -> None:
    m = _memory("cat log.txt > copy.txt", "", False)
    assert (m.payload["applied"], "not_written" in m.payload) == (True, False)
    m = _memory("./check.sh > report.txt", "checking other.txt: Permission denied", True)
    assert (m.payload["applied"], m.payload["command_failed"], "not_written" in m.payload) == (True, True, False)


def test_working_set_says_not_written(tmp_path: Path) -> None:
    block = _working_set(tmp_path, [
        ("echo a > ok.txt && echo b > /ro/b.txt", "bash: /ro/b.txt: Read-only file system", True),
        ("echo hi > out.txt", "bash: out.txt: Permission denied", True),
    ])
    assert block == [
        "- out.txt (not written)",
        "- /ro/b.txt (not written)",
        "- ok.txt (written, command failed)",
    ]
