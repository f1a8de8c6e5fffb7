"""Which tool results are about one file (working set, staleness after an edit), and
which user sentences are requirements (pinned constraints)."""

from __future__ import annotations

import json

from contextledger.memory.extractors.actions import _grep_target
from contextledger.memory.extractors.base import ToolInput
from contextledger.memory.extractors.registry import default_registry
from contextledger.memory.extractors.textutil import looks_like_file
from contextledger.policy.constraints import extract_user_constraints


def _item(tool: str, args: dict[str, object], text: str, *, is_error: bool = False) -> ToolInput:
    return ToolInput(tool_name=tool, arguments_json=json.dumps(args), result_text=text, is_error=is_error, size_bytes=len(text.encode()))


def test_looks_like_file() -> None:
    assert [looks_like_file(p) for p in ("src/a.py", ".gitignore", "/x/Makefile.am", "src", "lib/", "**/*.py", "v1/", "a/b?.c")] == [True, True, True, False, False, False, False, False]


def test_grep_target_of_shell_commands() -> None:
    assert _grep_target('grep -A 100 "### Phase 7:" /docs/PLAN.md | grep -E "^x" | head -20') == ("### Phase 7:", "/docs/PLAN.md")
    assert _grep_target("grep -rn foo src") == ("foo", "src")
    assert _grep_target("rg -n -e bar a.py b.py") == ("bar", None)
    assert _grep_target('grep "unterminated') == (None, None)


def test_a_search_inside_one_file_has_the_file_as_subject_and_a_folder_search_does_not() -> None:
    reg = default_registry()
    in_file = reg.extract(_item("Grep", {"pattern": "redirect", "path": "src/auth/guard.ts", "output_mode": "content"}, "7:  return redirectTarget(next);"))
    assert (in_file.subject_key, in_file.payload["kind"]) == ("file:src/auth/guard.ts", "file_search")
    in_dir = reg.extract(_item("Grep", {"pattern": "redirect", "path": "src"}, "src/auth/guard.ts"))
    assert in_dir.subject_key == "search:redirect in src" and "kind" not in in_dir.payload
    shell = reg.extract(_item("Bash", {"command": 'grep -n "TODO" docs/PLAN.md | head'}, "3:- [ ] TODO one"))
    assert shell.subject_key == "file:docs/PLAN.md"


def test_function_style_create_is_a_created_file() -> None:
    ext = default_registry().extract(_item("create", {"filename": "reproduce.py"}, ""))
    assert ext.kind == "generated_file" and ext.subject_key == "file:reproduce.py"


def test_must_sentences_are_requirements_but_guesses_about_the_past_are_not() -> None:
    rules = extract_user_constraints("The parser must keep the last line. That must have worked. Must I rerun it?", message_id="m1")
    assert [r.text for r in rules] == ["The parser must keep the last line."]
