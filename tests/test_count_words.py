"""Counts in memory summaries are in the right number ("1 line", "2 lines", "1 file"), and
a tool result with no output says "(no output)" — never "0 lines" or "1 lines" (issue 25:
payloads never contradict the transcript)."""

from __future__ import annotations

from typing import Any

import pytest

from contextledger.ledger import Ledger
from contextledger.memory.extractors.textutil import count_of

PATCH = "*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n*** Update File: b.py\n@@\n-x\n+y\n*** End Patch"
CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("Bash", {"command": "true"}, "", "Bash succeeded: $ true · (no output)"),
    ("Bash", {"command": "true"}, "\n", "Bash succeeded: $ true · (no output)"),
    ("Bash", {"command": "echo x"}, "x", "Bash succeeded: $ echo x · 1 line\nx"),
    ("Bash", {"command": "ls"}, "a\nb", "Bash succeeded: $ ls · 2 lines\nb"),
    ("Grep", {"pattern": "foo", "path": "src", "output_mode": "content"}, "src/a.py:3:foo", "Grep succeeded: grep 'foo' in src → 1 match in 1 file\nfirst: src/a.py:3"),
    ("Glob", {"pattern": "*.py"}, "a.py", "Glob succeeded: glob '*.py' → 1 entry\nfirst: a.py"),
    ("http_get", {"url": "https://x/api"}, '{"a": [1]}', "http_get succeeded: JSON object · 1 key\nkeys: a"),
    ("http_get", {"url": "https://x/api"}, '[{"id": 1}]', "http_get succeeded: JSON array · 1 item · 0.id=1"),
    ("apply_patch", {"input": PATCH}, "Success", "apply_patch succeeded: apply_patch a.py (+1 file) +2 -2"),
]


@pytest.mark.parametrize(("tool", "args", "output", "summary"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_memory_summaries_count_in_the_right_number(sqlite_ledger: Ledger, tool: str, args: dict[str, Any], output: str, summary: str) -> None:
    rec = sqlite_ledger.recorder()
    conv = rec.start_conversation(title="counts")
    rec.record_message(conv.id, "user", "go")
    rec.record_assistant(conv.id, text="", tool_calls=[{"call_id": "c1", "tool_name": tool, "arguments": args}])
    _, _, memory = rec.record_tool_result(conv.id, "c1", output)
    assert memory is not None and memory.summary == summary


def test_count_of_spells_the_number() -> None:
    assert [count_of(n, "line") for n in (0, 1, 2, 12345)] == ["0 lines", "1 line", "2 lines", "12,345 lines"]
    assert count_of(1, "match", "matches") == "1 match" and count_of(3, "entry", "entries") == "3 entries"
