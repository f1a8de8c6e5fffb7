"""An imported call's status and summary say what the transcript says: a read that shows
no file failed, an outcome the transcript does not record is ``unknown`` (never
``succeeded``), and a text history that is not UTF-8 still imports.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import real_params
from contextledger.errors import ImportFormatError
from contextledger.ingest.importers import parse_file
from contextledger.ledger import Ledger
from contextledger.records.parts import TextPart


def _statuses(tmp_path: Path, path: Path) -> list[tuple[str, str, str]]:
    """``(tool, call status, memory summary)`` of every call of an import, in order."""
    ledger = Ledger.open(home=tmp_path / "ledger")
    try:
        conv = ledger.import_file(path).conversation_id
        scope = ledger.scope()
        summaries = {m.call_id: m.summary for m in ledger.store.memories(scope, conv)}
        calls = sorted(ledger.store.tool_calls(scope, conv), key=lambda c: (c.seq, c.call_index))
        return [(c.tool_name, c.status.value, summaries.get(c.call_id, "")) for c in calls]
    finally:
        ledger.close()


def _traj(path: Path, steps: list[tuple[str, str]]) -> Path:
    history: list[dict[str, str]] = [
        {"role": "system", "content": "You are an autonomous programmer.", "agent": "primary"},
        {"role": "user", "content": "Fix the port.", "agent": "primary"},
    ]
    for action, observation in steps:
        history.append({"role": "assistant", "content": f"```\n{action}\n```", "action": action + "\n", "agent": "primary"})
        history.append({"role": "user", "content": observation, "agent": "primary"})
    trajectory = [{"action": a + "\n", "observation": o, "response": "", "thought": ""} for a, o in steps]
    path.write_text(json.dumps({"environment": "swe_main", "history": history, "trajectory": trajectory}), encoding="utf-8")
    return path


def test_swe_agent_reads_that_cannot_open_the_file_failed(tmp_path: Path) -> None:
    path = _traj(tmp_path / "run.traj", [
        ("open missing.py", "File missing.py not found"),
        ("cat nope.py", "cat: nope.py: No such file or directory"),
        ("open src/app.py", "[File: /repo/src/app.py (2 lines total)]\n1:x = 1\n2:y = 2"),
    ])
    assert _statuses(tmp_path, path) == [
        ("open", "failed", "open failed: read missing.py failed\nFile missing.py not found"),
        ("cat", "failed", "cat failed: read nope.py failed\ncat: nope.py: No such file or directory"),
        ("open", "succeeded", "open succeeded: read /repo/src/app.py lines 1-2 of 2 · 11 bytes · sha256:9af816430225"),
    ]


_BREAK = "  "  # Aider ends typed and tool lines with the Markdown line break
_AIDER = "\n".join([
    "",
    "# aider chat started at 2025-07-15 11:38:37",
    "",
    "> Main model: gpt-4o with diff edit format" + _BREAK,
    "",
    "#### make the script executable" + _BREAK,
    "",
    "Run this:",
    "",
    "```bash",
    "chmod +x build.sh",
    "```",
    "",
    "> Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]: y" + _BREAK,
    "> Running chmod +x build.sh" + _BREAK,
    "",
    "#### !ls" + _BREAK,
    "",
])


def test_aider_commands_without_recorded_output_are_unknown(tmp_path: Path) -> None:
    path = tmp_path / ".aider.chat.history.md"
    path.write_text(_AIDER, encoding="utf-8")
    rows = _statuses(tmp_path, path)
    assert [(tool, status) for tool, status, _ in rows] == [("aider_run", "unknown"), ("aider_run", "unknown")]
    assert rows[0][2].startswith("aider_run unknown: $ chmod +x build.sh") and rows[0][2].endswith("ran `chmod +x build.sh`; output not recorded in the history")
    assert rows[1][2].startswith("aider_run unknown: $ ls") and rows[1][2].endswith("(output not recorded in the history; not added to the chat)")
    assert not any("succeeded" in summary for _, _, summary in rows)


def test_a_latin1_aider_history_imports_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / ".aider.chat.history.md"
    path.write_bytes("\n# aider chat started at 2025-07-15 11:38:37\n\n#### résumé the café notes  \n\nDone: café.\n".encode("latin-1"))
    t = parse_file(path)
    assert t.notes == ["byte 52: not valid UTF-8 (invalid continuation byte); the file was decoded as Latin-1 (ISO-8859-1)"]
    assert [m.parts for m in t.messages[1:]] == [[TextPart(text="résumé the café notes")], [TextPart(text="Done: café.")]]


def test_a_json_transcript_that_is_not_utf8_still_fails(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_bytes('{"messages": [{"role": "user", "content": "café"}]}'.encode("latin-1"))
    with pytest.raises(ImportFormatError, match=r"binary file: not valid UTF-8 \(invalid continuation byte\)"):
        parse_file(path)


@pytest.mark.parametrize("path", real_params("aider-chat-history/*.md"), ids=lambda p: getattr(p, "name", str(p)))
def test_real_aider_commands_never_claim_success(tmp_path: Path, path: Path) -> None:
    rows = [r for r in _statuses(tmp_path, path) if r[0] == "aider_run"]
    assert all(status == "unknown" and "succeeded" not in summary for _, status, summary in rows), rows[:3]


def _jsonl_with(tmp_path: Path, bad: dict[int, bytes], n: int = 30) -> Path:
    """A JSONL transcript of ``n`` user messages; line ``i`` (0-based) in ``bad`` is replaced."""
    lines = [f'{{"role": "user", "content": "message number {i} about the build"}}'.encode() for i in range(n)]
    for i, raw in bad.items():
        lines[i] = raw
    path = tmp_path / "chat.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_a_jsonl_transcript_with_one_latin1_byte_imports_with_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One invalid byte in a UTF-8 text file is decoded as U+FFFD, with one note naming
    the file, the line and the byte offset (in the transcript's notes; nothing on stderr)."""
    path = _jsonl_with(tmp_path, {7: b'{"role": "user", "content": "the caf\xe9 notes"}'})
    offset = path.read_bytes().index(b"\xe9")
    t = parse_file(path)
    assert [m.parts for m in t.messages[7:8]] == [[TextPart(text="the caf\ufffd notes")]]
    assert len(t.messages) == 30
    assert t.notes[0] == f"{path}: 1 invalid UTF-8 sequence(s) (line 8 byte {offset}) decoded as U+FFFD"
    assert capsys.readouterr().err == ""


def test_a_mostly_undecodable_file_is_still_binary(tmp_path: Path) -> None:
    """Invalid sequences on more than 1% of the lines: refused as binary, first bad byte named."""
    path = _jsonl_with(tmp_path, {1: b'{"role": "user", "content": "\xe9"}', 5: b'{"role": "user", "content": "\xff"}'})
    offset = path.read_bytes().index(b"\xe9")
    with pytest.raises(ImportFormatError) as info:
        parse_file(path)
    assert (info.value.location, info.value.reason) == (f"byte {offset}", "binary file: not valid UTF-8 (invalid continuation byte)")
