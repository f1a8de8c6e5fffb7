"""Aider's "Applied edit to PATH" lines name the file in the platform's own spelling: on
Windows with backslashes (``packages\\module\\a.ts``) for an edit block headed
``packages/module/a.ts``.  An applied edit is applied whatever the separators."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import require_real_data
from contextledger.ingest.importers import parse_file
from contextledger.ingest.transcript import ImportedTranscript
from contextledger.records.parts import ToolCallPart, ToolResultPart

_LINES = """# aider chat started at 2026-02-03 09:15:00

> Main model: gpt-4o with diff edit format

#### Make the retry limit 5 and drop the unused helper.

Changing both files.

packages/module/src/retry.ts
```typescript
<<<<<<< SEARCH
export const LIMIT = 3;
=======
export const LIMIT = 5;
>>>>>>> REPLACE
```

./packages/module/src/util.ts
```typescript
<<<<<<< SEARCH
export function unused() {}
=======
>>>>>>> REPLACE
```

packages/other/index.ts
```typescript
<<<<<<< SEARCH
export {};
=======
export { LIMIT } from "../module/src/retry";
>>>>>>> REPLACE
```

> Applied edit to packages\\module\\src\\retry.ts
> Applied edit to packages\\module\\src\\util.ts
> Commit 1a2b3c4 fix: retry limit

#### thanks
"""
WINDOWS_HISTORY = "".join(line + ("  " if line.startswith(("> ", "#### ")) else "") + "\n" for line in _LINES.splitlines())
"""Aider ends its prompt and tool lines with two spaces (Markdown line breaks)."""


def _results(t: ImportedTranscript) -> list[tuple[str, str, bool, str]]:
    """(path of the edit, result text, is_error, the result's source line ref) per edit result."""
    paths = {p.call_id: json.loads(p.arguments_json)["path"] for m in t.messages for p in m.parts if isinstance(p, ToolCallPart) and p.tool_name != "aider_run"}
    return [(paths.get(p.call_id, ""), p.text or "", p.is_error, m.source_ref) for m in t.messages for p in m.parts if isinstance(p, ToolResultPart) and p.call_id in paths]


def test_a_windows_applied_line_confirms_the_edit_of_the_forward_slash_path(tmp_path: Path) -> None:
    path = tmp_path / ".aider.chat.history.md"
    path.write_text(WINDOWS_HISTORY, encoding="utf-8")
    outcomes = sorted(r[:3] for r in _results(parse_file(path)))
    assert outcomes == [
        ("./packages/module/src/util.ts", "Applied edit to ./packages/module/src/util.ts\nCommit 1a2b3c4 fix: retry limit", False),
        ("packages/module/src/retry.ts", "Applied edit to packages/module/src/retry.ts\nCommit 1a2b3c4 fix: retry limit", False),
        # the one block no line confirms stays unapplied
        ("packages/other/index.ts", "not applied: the history records no 'Applied edit to packages/other/index.ts'", True),
    ]


_APPLIED_LINE = re.compile(r"^> Applied edit to (.+?)\s*$", re.M)
_OTHERS_APPLIED = re.compile(r"The other \d+ SEARCH/REPLACE blocks? (?:were|was) applied successfully")


def _key(path: str) -> str:
    return re.sub(r"/+", "/", path.strip().replace("\\", "/")).removeprefix("./")


def _applied_in_turn(lines: list[str], ref: str) -> set[str]:
    """Path keys of the ``Applied edit to`` lines of the turn whose reply starts at ``ref``
    (``"line N"``): from that line to the next user prompt (``#### ``)."""
    start = int(ref.split()[1]) - 1
    found: set[str] = set()
    for line in lines[start + 1 :]:
        if line.startswith("#### "):
            break
        m = _APPLIED_LINE.match(line)
        if m:
            found.add(_key(m.group(1)))
        elif _OTHERS_APPLIED.search(line):
            found.add("(the other blocks)")
    return found


@pytest.mark.parametrize("name", ["afi-core.aider.chat.history.md", "mozgoslav.aider.chat.history.md"])
def test_real_aider_histories_send_no_applied_edit_as_failed(name: str) -> None:
    """Every real history: no edit whose file an ``Applied edit to`` line of its turn
    names is sent as "not applied", and every edit sent as applied has such a line."""
    path = require_real_data() / "aider-chat-history" / name
    lines = path.read_text(encoding="utf-8").splitlines()
    results = _results(parse_file(path))
    assert any(not err for _, _, err, _ in results), f"{name} has no applied edit"
    wrongly_failed = [p for p, out, err, ref in results if err and out.startswith("not applied") and _key(p) in _applied_in_turn(lines, ref)]
    assert wrongly_failed == []
    unconfirmed = [(p, out) for p, out, err, ref in results if not err and not {_key(p), "(the other blocks)"} & _applied_in_turn(lines, ref)]
    assert unconfirmed == []
