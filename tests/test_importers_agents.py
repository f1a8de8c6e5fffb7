"""Agent session formats: Claude Code (all record types, JSON-array form), Codex CLI
rollouts (envelope and bare layouts), Aider chat histories, Gemini CLI sessions (JSON,
JSONL log, API contents) and tau2-bench runs.

The fixtures are written here from the writers' source: Claude Code's session records
(``last-prompt``, ``permission-mode``, ``ai-title``, ``attachment`` …), codex-rs
``RolloutItem`` / ``ResponseItem`` and the pre-envelope rollout layout, Aider's
``InputOutput`` history writer and its edit-block coders, Gemini CLI's
``ChatRecordingService`` (``$rewindTo`` / ``$set`` records), tau2-bench's
``ToolCall`` / ``ToolMessage`` models.  Each format has a detection test whose file opens
with unusual but valid records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextledger.errors import ImportFormatError
from contextledger.ingest.importers import detect_format, parse_file
from contextledger.ingest.importers.aider_blocks import find_edit_blocks, split_thinking
from contextledger.ingest.transcript import ImportedMessage, ImportedTranscript
from contextledger.ledger import Ledger
from contextledger.providers.registry import validate_payload
from contextledger.records.enums import MessageKind, Role
from contextledger.records.parts import TextPart, ThinkingPart, ToolCallPart, ToolResultPart


def _jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _shape(t: ImportedTranscript) -> list[str]:
    return [f"{m.role.value}/{m.kind.value}" for m in t.messages]


def _calls(t: ImportedTranscript) -> list[ToolCallPart]:
    return [p for m in t.messages for p in m.parts if isinstance(p, ToolCallPart)]


def _results(t: ImportedTranscript) -> dict[str, ToolResultPart]:
    return {p.call_id: p for m in t.messages for p in m.parts if isinstance(p, ToolResultPart)}


def _text(m: ImportedMessage) -> str:
    return "\n".join(p.text for p in m.parts if isinstance(p, TextPart))


def _assembles(tmp_path: Path, path: Path) -> None:
    """The file imports and assembles a valid request for both providers."""
    ledger = Ledger.open(home=tmp_path / "ledger")
    try:
        conv = ledger.import_file(path).conversation_id
        for provider in ("openai-chat", "anthropic"):
            assert validate_payload(provider, ledger.assemble(conv, provider=provider, budget_tokens=4000).payload) == []
    finally:
        ledger.close()


# ------------------------------------------------------------------------ Claude Code


def _cc(uuid: str, parent: str | None, kind: str, content: Any, ts: str, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message.update({"id": f"msg_{uuid}", "model": "claude-sonnet-4-5", "type": "message"})
    return {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/repo", "sessionId": "s1",
            "version": "2.1.12", "type": kind, "uuid": uuid, "timestamp": ts, "message": message, **extra}


CLAUDE_RECORDS: list[dict[str, Any]] = [
    {"type": "last-prompt", "lastPrompt": "fix the port", "sessionId": "s1"},
    {"type": "permission-mode", "permissionMode": "acceptEdits", "sessionId": "s1"},
    {"type": "summary", "summary": "Port fix", "leafUuid": "a1"},
    {"type": "file-history-snapshot", "messageId": "u1", "snapshot": {"trackedFileBackups": {}}, "isSnapshotUpdate": False},
    {"type": "ai-title", "aiTitle": "Fix the server port", "sessionId": "s1"},
    _cc("u1", None, "user", "Fix the port in config.toml. Do not touch the tests.", "2026-02-01T10:00:00Z"),
    _cc("a1", "u1", "assistant", [{"type": "tool_use", "id": "toolu_1", "name": "Edit", "input": {"file_path": "config.toml", "old_string": "port = 8000", "new_string": "port = 8080"}}], "2026-02-01T10:00:01Z"),
    _cc("u2", "a1", "user", [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "The file config.toml has been updated."}], "2026-02-01T10:00:02Z"),
    {"type": "attachment", "uuid": "at1", "parentUuid": "u2", "timestamp": "2026-02-01T10:00:03Z", "sessionId": "s1",
     "attachment": {"type": "edited_text_file", "filename": "/repo/notes.md", "snippet": "1\tnew note"}},
    {"type": "a-future-record", "uuid": "f1", "parentUuid": "at1", "sessionId": "s1", "payload": {"x": 1}},
    _cc("a2", "f1", "assistant", [{"type": "text", "text": "Done: port = 8080."}], "2026-02-01T10:00:04Z"),
]


def test_claude_code_opening_metadata_records(tmp_path: Path) -> None:
    """CLI 2.1.x files may open with last-prompt / permission-mode / summary / snapshot /
    ai-title lines: still Claude Code; metadata is meta, an unknown type a noted meta."""
    path = _jsonl(tmp_path / "s1.jsonl", CLAUDE_RECORDS)
    assert detect_format(path) == "claude-code"
    t = parse_file(path)
    assert t.format == "claude-code" and t.metadata["claude_code_version"] == "2.1.12"
    assert [_text(m)[:20] for m in t.messages if m.role is Role.USER and m.kind is MessageKind.CHAT] == ["Fix the port in conf"]
    kinds = {m.metadata.get("record_type"): m.kind for m in t.messages if "record_type" in m.metadata}
    assert kinds == {
        "last-prompt": MessageKind.META, "permission-mode": MessageKind.META, "summary": MessageKind.SUMMARY,
        "file-history-snapshot": MessageKind.META, "ai-title": MessageKind.META, "attachment": MessageKind.META,
        "a-future-record": MessageKind.META,
    }
    attachment = next(m for m in t.messages if m.metadata.get("record_type") == "attachment")
    assert attachment.metadata["attachment_type"] == "edited_text_file"
    assert t.notes == ["line 10: unknown record type 'a-future-record' kept as meta"]
    assert _results(t)["toolu_1"].text == "The file config.toml has been updated."


def test_claude_code_json_array_form(tmp_path: Path) -> None:
    """logs/chat.json: the same records as one JSON array give the same messages."""
    array = tmp_path / "chat.json"
    array.write_text(json.dumps(CLAUDE_RECORDS, indent=2), encoding="utf-8")
    lines = _jsonl(tmp_path / "s1.jsonl", CLAUDE_RECORDS)
    assert detect_format(array) == "claude-code"
    a, b = parse_file(array), parse_file(lines)
    assert [(m.key, m.role, m.kind, m.parts) for m in a.messages] == [(m.key, m.role, m.kind, m.parts) for m in b.messages]
    assert a.active_leaf_key == b.active_leaf_key == "a2"
    assert a.notes == ["record 10: unknown record type 'a-future-record' kept as meta"]


def test_claude_code_untyped_record_is_kept(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "s.jsonl", [CLAUDE_RECORDS[5], {"uuid": "x", "sessionId": "s1", "note": "?"}])
    t = parse_file(path)
    kept = next(m for m in t.messages if m.key == "x")
    assert kept.kind is MessageKind.META and "line 2: record without a 'type' kept as meta" in t.notes


# ------------------------------------------------------------------------ Codex CLI

ENCRYPTED = "gAAAAABqAZLpDBVX3heq9f5RwzU7LNkny4dZ7BOgfOxEx3IW"


def _env(ts: int, kind: str, payload: Any) -> dict[str, Any]:
    return {"timestamp": f"2026-05-11T08:27:{ts:02d}.000Z", "type": kind, "payload": payload}


CODEX_LINES: list[dict[str, Any]] = [
    _env(0, "session_meta", {"id": "019e", "timestamp": "2026-05-11T08:26:55Z", "cwd": "/repo", "originator": "codex_cli_rs",
                             "cli_version": "0.125.0", "base_instructions": {"text": "You are Codex."}}),
    _env(1, "response_item", {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions instructions>sandboxed</permissions instructions>"}]}),
    _env(2, "turn_context", {"cwd": "/repo", "approval_policy": "on-request", "model": "gpt-5-codex"}),
    _env(3, "response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "make the tests pass"}]}),
    _env(3, "event_msg", {"type": "user_message", "message": "make the tests pass", "images": []}),
    _env(4, "response_item", {"type": "reasoning", "summary": [], "content": None, "encrypted_content": ENCRYPTED}),
    _env(5, "response_item", {"type": "function_call", "name": "exec_command", "arguments": "{\"cmd\": \"pytest -q\"}", "call_id": "call_a"}),
    _env(6, "event_msg", {"type": "token_count", "info": None}),
    _env(7, "response_item", {"type": "function_call_output", "call_id": "call_a", "output": "Process exited with code 1\nOutput:\nE   assert 8000 == 8080\n1 failed"}),
    _env(8, "event_msg", {"type": "exec_command_end", "call_id": "call_a", "exit_code": 1, "aggregated_output": "big", "stdout": "big"}),
    _env(9, "response_item", {"type": "custom_tool_call", "status": "completed", "call_id": "call_b", "name": "apply_patch",
                              "input": "*** Begin Patch\n*** Update File: config.toml\n@@\n-port = 8000\n+port = 8080\n*** End Patch\n"}),
    _env(10, "response_item", {"type": "custom_tool_call_output", "call_id": "call_b", "output": "{\"output\":\"Success. Updated the following files:\\nM config.toml\\n\",\"metadata\":{\"exit_code\":0}}"}),
    _env(11, "response_item", {"type": "local_shell_call", "call_id": "call_c", "status": "completed", "action": {"type": "exec", "command": ["bash", "-lc", "pytest -q"]}}),
    _env(12, "response_item", {"type": "function_call_output", "call_id": "call_c", "output": "{\"output\":\"1 passed\",\"metadata\":{\"exit_code\":0,\"duration_seconds\":0.4}}"}),
    _env(13, "response_item", {"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "pytest port"}}),
    _env(14, "response_item", {"type": "ghost_snapshot", "ghost_commit": {"id": "abc"}}),
    _env(15, "response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Fixed: port = 8080."}]}),
    _env(16, "event_msg", {"type": "agent_message", "message": "Fixed: port = 8080."}),
    _env(17, "compacted", {"message": "Summary: port fixed, tests pass."}),
    _env(18, "event_msg", {"type": "user_message", "message": "now update the docs"}),
    _env(19, "a_future_line", {"x": 1}),
]


def test_codex_envelope_rollout(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "rollout-2026-05-11T08-26-55-019e.jsonl", CODEX_LINES)
    assert detect_format(path) == "codex-rollout"
    t = parse_file(path)
    assert t.format == "codex-rollout" and t.title == "make the tests pass"
    assert t.metadata["cli_version"] == "0.125.0" and t.participants[0].model == "gpt-5-codex"
    user = [_text(m) for m in t.messages if m.role is Role.USER and m.kind is MessageKind.CHAT]
    assert user == ["make the tests pass", "now update the docs"]  # the event-only prompt becomes a message
    instructions = next(m for m in t.messages if m.metadata.get("instructions"))
    assert (instructions.role, instructions.kind, _text(instructions)) == (Role.SYSTEM, MessageKind.CHAT, "You are Codex.")
    assert [(c.call_id, c.tool_name) for c in _calls(t)] == [
        ("call_a", "exec_command"), ("call_b", "apply_patch"), ("call_c", "local_shell"), ("web_search_line_15", "web_search"),
    ]
    patch = json.loads(_calls(t)[1].arguments_json)["input"]
    assert patch.startswith("*** Begin Patch") and "+port = 8080" in patch
    results = _results(t)
    assert [results[c].is_error for c in ("call_a", "call_b", "call_c")] == [True, False, False]
    thinking = [p for m in t.messages for p in m.parts if isinstance(p, ThinkingPart)]
    assert thinking == [ThinkingPart(text="", signature=ENCRYPTED)]
    assert any(m.kind is MessageKind.COMPACTION and _text(m) == "Summary: port fixed, tests pass." for m in t.messages)
    progress = [m for m in t.messages if m.kind is MessageKind.PROGRESS]
    assert "big" not in "".join(_text(m) for m in progress)  # outputs are in the results, not repeated
    assert t.notes == ["line 21: record type 'a_future_line' kept as meta"]
    _assembles(tmp_path, path)


def test_codex_bare_layout_opens_with_meta_and_state_lines(tmp_path: Path) -> None:
    """The pre-envelope layout: meta line, ``record_type`` bookkeeping, bare items."""
    lines = [
        {"id": "c3c4b301-27c8", "timestamp": "2025-08-18T01:16:13.522Z", "instructions": None, "git": {"branch": "main"}},
        {"record_type": "state"},
        {"type": "message", "id": None, "role": "user", "content": [{"type": "input_text", "text": "list the files"}]},
        {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "call_1"},
        {"type": "function_call_output", "call_id": "call_1", "output": {"content": "a.py", "success": True}},
        {"record_type": "state"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "One file: a.py"}]},
    ]
    path = _jsonl(tmp_path / "rollout-old.jsonl", lines)
    assert detect_format(path) == "codex-rollout"
    t = parse_file(path)
    assert _shape(t) == ["system/meta", "user/chat", "assistant/chat", "tool/chat", "assistant/chat"]
    assert _results(t)["call_1"].text == "a.py"
    assert t.notes == ["2 'record_type' bookkeeping line(s) skipped"]


def test_codex_errors_name_the_line(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "r.jsonl", [CODEX_LINES[0], _env(1, "response_item", {"type": "function_call_output", "output": "x"})])
    with pytest.raises(ImportFormatError) as info:
        parse_file(path)
    assert str(info.value) == f"{path}, line 2: function_call_output has no 'call_id'"


# ------------------------------------------------------------------------ Aider

# "$$" ends a line with the two-space Markdown break Aider writes
AIDER = """
# aider chat started at 2025-07-15 11:38:37

> Aider v0.85.1$$
> Main model: gpt-4o with diff edit format$$
> Git repo: .git with 16 files$$

#### Fix the port in config.py. Do not rename anything.$$

<thinking-content-7bbeb8e1441453ad999a0bbba8a46d4b>
Maybe this:
config.py
<<<<<<< SEARCH
PORT = 1
=======
PORT = 2
>>>>>>> REPLACE
</thinking-content-7bbeb8e1441453ad999a0bbba8a46d4b>

### Plan

The port is wrong; here is the fix:

config.py
```python
<<<<<<< SEARCH
PORT = 8000
=======
PORT = 8080
>>>>>>> REPLACE
```

settings.py
```python
<<<<<<< SEARCH
DEBUG = True
=======
DEBUG = False
>>>>>>> REPLACE
```

Quote from the docs, in a fence:

```
> not a tool line
#### not a prompt
```

Then run the tests:

```bash
pytest -q
```

> Tokens: 3.2k sent, 21 received. Cost: $0.0082 message, $0.0082 session.$$
> Applied edit to config.py$$
> # 1 SEARCH/REPLACE block failed to match!

## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in settings.py
<<<<<<< SEARCH
DEBUG = True
=======
DEBUG = False
>>>>>>> REPLACE

The SEARCH section must exactly match an existing block of lines including all white space, comments, indentation, docstrings, etc$$
> Commit dde0244 fix: port 8080$$
> pytest -q$$
> Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]: y$$
> Running pytest -q$$
> Add command output to the chat? (Y)es/(N)o/(D)on't ask again [Yes]: y$$
> Added 3 lines of output to the chat.$$

#### /run python -c 'print(42)'$$
> 42
still output$$
> Add 0.0k tokens of command output to the chat? (Y)es/(N)o [Yes]: y$$
> Added 2 lines of output to the chat.$$

#### Add file to the chat? (Y)es/(N)o/(A)ll/(S)kip all/(D)on't ask again [Yes]: all$$

# aider chat started at 2025-07-16 09:00:00

> Main model: gpt-4o with whole edit format$$

#### write hello.py$$

hello.py
```python
print("hello")
```

> Applied edit to hello.py$$
""".replace("$$\n", "  \n")


def test_aider_history(tmp_path: Path) -> None:
    path = tmp_path / ".aider.chat.history.md"
    path.write_text(AIDER, encoding="utf-8")
    assert detect_format(path) == "aider-history"
    t = parse_file(path)
    assert t.format == "aider-history" and t.metadata == {"sessions": 2, "edit_format": "whole"}
    assert t.participants[0].model == "gpt-4o"
    users = [_text(m) for m in t.messages if m.role is Role.USER and m.kind is MessageKind.CHAT]
    assert users == ["Fix the port in config.py. Do not rename anything.", "/run python -c 'print(42)'", "write hello.py"]
    reply = next(m for m in t.messages if m.role is Role.ASSISTANT)
    assert isinstance(reply.parts[0], ThinkingPart) and "PORT = 1" in reply.parts[0].text
    assert "### Plan" in _text(reply) and "> not a tool line" in _text(reply)
    calls = [(c.tool_name, json.loads(c.arguments_json)) for c in _calls(t)]
    assert calls == [
        ("aider_search_replace", {"path": "config.py", "search": "PORT = 8000", "replace": "PORT = 8080"}),
        ("aider_search_replace", {"path": "settings.py", "search": "DEBUG = True", "replace": "DEBUG = False"}),
        ("aider_run", {"command": "pytest -q"}),
        ("aider_whole_file", {"path": "hello.py", "content": 'print("hello")\n'}),
    ]
    results = [_results(t)[c.call_id] for c in _calls(t)]
    assert [r.is_error for r in results] == [False, True, False, False]
    assert results[0].text == "Applied edit to config.py\nCommit dde0244 fix: port 8080"
    assert "SearchReplaceNoExactMatch" in (results[1].text or "")
    assert results[2].text == "ran `pytest -q`; Added 3 lines of output to the chat."
    run = next(m for m in t.messages if m.kind is MessageKind.OBSERVATION)
    assert (run.metadata["action"], run.metadata["action_tool"], _text(run)) == ("python -c 'print(42)'", "aider_run", "42\nstill output")
    confirmations = [m for m in t.messages if m.metadata.get("aider") == "confirmation"]
    assert len(confirmations) == 1
    _assembles(tmp_path, path)


def test_aider_detected_without_a_session_header(tmp_path: Path) -> None:
    """A history cut at the top (it opens on tool lines) is still Aider's."""
    path = tmp_path / "history.md"
    path.write_text("> Applied edit to a.py  \n\n#### next step  \n\nOk.\n", encoding="utf-8")
    assert detect_format(path) == "aider-history"
    assert _shape(parse_file(path)) == ["system/meta", "user/chat", "assistant/chat"]


# the same history as an editor leaves it once it strips the trailing spaces: typed lines
# are told by their ``#### `` prefix, not by the two-space break
AIDER_PLAIN = """
# aider chat started at 2025-07-15 11:38:37

> Main model: gpt-4o with diff edit format

#### Fix the flaky retry test in tests/test_retry.py.
#### Keep the public API unchanged.

Raising the timeout fixes it.

> Tokens: 1.2k sent, 40 received.

#### /run pytest -q tests/test_retry.py

> Add command output to the chat? (Y)es/(N)o [Yes]: y
> Added 4 lines of output to the chat.

#### now update the changelog

Done.
"""


def test_aider_typed_lines_without_trailing_spaces(tmp_path: Path) -> None:
    stripped, written = tmp_path / "stripped.md", tmp_path / "written.md"
    stripped.write_text(AIDER_PLAIN, encoding="utf-8")
    written.write_text("".join(line + ("  " if line.startswith(("#### ", "> ")) else "") + "\n" for line in AIDER_PLAIN.split("\n")[:-1]), encoding="utf-8")
    a, b = parse_file(stripped), parse_file(written)
    records = [[(m.role, m.kind, _text(m), m.source_ref, m.metadata) for m in t.messages] for t in (a, b)]
    assert records[0] == records[1]
    users = [_text(m) for m in a.messages if m.role is Role.USER and m.kind is MessageKind.CHAT]
    assert users == [
        "Fix the flaky retry test in tests/test_retry.py.\nKeep the public API unchanged.",
        "/run pytest -q tests/test_retry.py",
        "now update the changelog",
    ]
    assert [_text(m) for m in a.messages if m.role is Role.ASSISTANT] == ["Raising the timeout fixes it.", "Done."]
    run = next(m for m in a.messages if m.kind is MessageKind.OBSERVATION)
    assert (run.metadata["action"], run.metadata["action_tool"]) == ("pytest -q tests/test_retry.py", "aider_run")


def test_aider_edit_formats() -> None:
    udiff = "```diff\n--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n```\n"
    assert [(b.tool, b.path, b.diff) for b in find_edit_blocks(udiff, "udiff")] == [
        ("aider_udiff", "app.py", "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-x = 1\n+x = 2"),
    ]
    fenced = "```\nsrc/a.py\n<<<<<<< SEARCH\nold\n=======\nnew\n>>>>>>> REPLACE\n```\n"
    assert [(b.path, b.search, b.replace) for b in find_edit_blocks(fenced, "diff-fenced")] == [("src/a.py", "old", "new")]
    prose = "Here is the code:\n```python\nprint(1)\n```\n"
    assert find_edit_blocks(prose, "whole") == []
    assert split_thinking("<think>plan</think>answer") == (["plan"], "answer")
    assert split_thinking("<thinking-content-ab12>cut short") == (["cut short"], "")


# ------------------------------------------------------------------------ Gemini CLI

GEMINI_SESSION: dict[str, Any] = {
    "sessionId": "gem-1", "projectHash": "abc123", "startTime": "2026-03-01T10:00:00Z", "lastUpdated": "2026-03-01T10:05:00Z",
    "messages": [
        {"id": "m1", "timestamp": "2026-03-01T10:00:00Z", "type": "user", "content": [{"text": "Set the port to 8080 in app.cfg"}]},
        {"id": "m2", "timestamp": "2026-03-01T10:00:05Z", "type": "gemini", "content": "Editing the file.", "model": "gemini-2.5-pro",
         "thoughts": [{"subject": "Plan", "description": "replace the port line", "timestamp": "2026-03-01T10:00:04Z"}],
         "toolCalls": [
             {"id": "replace-1", "name": "replace", "args": {"file_path": "/p/app.cfg", "old_string": "port=80", "new_string": "port=8080"},
              "status": "success", "timestamp": "2026-03-01T10:00:06Z",
              "result": [{"functionResponse": {"id": "replace-1", "name": "replace", "response": {"output": "Successfully modified file: /p/app.cfg (1 replacements)."}}}]},
             {"id": "shell-2", "name": "run_shell_command", "args": {"command": "make test"}, "status": "error", "timestamp": "2026-03-01T10:00:07Z",
              "result": [{"functionResponse": {"id": "shell-2", "name": "run_shell_command", "response": {"error": "Command exited with code 2"}}}]},
             {"id": "read-3", "name": "read_file", "args": {"absolute_path": "/p/app.cfg"}, "status": "executing", "timestamp": "2026-03-01T10:00:08Z"},
         ]},
        {"id": "m3", "timestamp": "2026-03-01T10:01:00Z", "type": "info", "content": "Request cancelled."},
    ],
}


def test_gemini_session_json(tmp_path: Path) -> None:
    path = tmp_path / "session-2026-03-01T10-00-gem1.json"
    path.write_text(json.dumps(GEMINI_SESSION), encoding="utf-8")
    assert detect_format(path) == "gemini-cli"
    t = parse_file(path)
    assert _shape(t) == ["user/chat", "assistant/chat", "tool/chat", "tool/chat", "system/meta"]
    turn = t.messages[1]
    assert [p.kind for p in turn.parts] == ["thinking", "text", "tool_call", "tool_call", "tool_call"]
    assert turn.parts[0] == ThinkingPart(text="Plan: replace the port line") and turn.model == "gemini-2.5-pro"
    results = _results(t)
    assert results["replace-1"].text == "Successfully modified file: /p/app.cfg (1 replacements)." and not results["replace-1"].is_error
    assert (results["shell-2"].text, results["shell-2"].is_error) == ("Command exited with code 2", True)
    assert "read-3" not in results and "read-3: call read-3 has no result" not in t.notes
    assert any("read-3 has no result" in n for n in t.notes)
    _assembles(tmp_path, path)


def test_gemini_jsonl_log_with_upserts_rewind_and_set(tmp_path: Path) -> None:
    """Opens with a ``$set`` patch; a message written twice is one message (the newest
    version); a rewound message stays on a side branch."""
    m1, m2 = GEMINI_SESSION["messages"][0], GEMINI_SESSION["messages"][1]
    pending = {**m2, "toolCalls": [{**m2["toolCalls"][0], "status": "executing", "result": None}]}
    done = {**m2, "toolCalls": [m2["toolCalls"][0]]}
    lines = [
        {"$set": {"summary": "Port change"}},
        {"sessionId": "gem-1", "projectHash": "abc123", "startTime": "2026-03-01T10:00:00Z"},
        m1, pending, done,
        {"id": "m4", "timestamp": "2026-03-01T10:02:00Z", "type": "user", "content": "actually use 9090"},
        {"$rewindTo": "m4"},
        {"id": "m5", "timestamp": "2026-03-01T10:03:00Z", "type": "user", "content": "thanks"},
    ]
    path = _jsonl(tmp_path / "session-x.jsonl", lines)
    assert detect_format(path) == "gemini-cli"
    t = parse_file(path)
    assert t.tree and t.title == "Port change"
    keys = [m.key for m in t.messages]
    assert keys == ["m1", "m2", "m2#tool0", "m4", "m5"]
    by_key = {m.key: m for m in t.messages}
    assert by_key["m4"].parent_key == by_key["m5"].parent_key == "m2#tool0"
    assert t.active_leaf_key == "m5"
    assert _results(t)["replace-1"].text.startswith("Successfully modified")
    assert "1 rewind(s): the rewound messages are kept on a side branch" in t.notes


def test_gemini_api_contents(tmp_path: Path) -> None:
    history = {"history": [
        {"role": "user", "parts": [{"text": "list files"}]},
        {"role": "model", "parts": [{"text": "Listing."}, {"functionCall": {"name": "list_directory", "args": {"path": "."}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "list_directory", "response": {"output": "a.py"}}}]},
    ]}
    path = tmp_path / "checkpoint-1.json"
    path.write_text(json.dumps(history), encoding="utf-8")
    assert detect_format(path) == "gemini-cli"
    t = parse_file(path)
    assert _shape(t) == ["user/chat", "assistant/chat", "tool/chat"]
    call = _calls(t)[0]
    assert _results(t)[call.call_id].text == "a.py"


# ------------------------------------------------------------------------ tau2-bench

TAU2_SIMULATION: dict[str, Any] = {
    "id": "sim-1", "task_id": "3", "trial": 0, "termination_reason": "user_stop", "reward_info": {"reward": 1.0},
    "messages": [
        {"role": "assistant", "content": "Hi! How can I help you today?", "turn_idx": 0, "timestamp": "2025-06-01T10:00:00"},
        {"role": "user", "content": "My phone has no signal.", "turn_idx": 1, "timestamp": "2025-06-01T10:00:05"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "tc_1", "name": "get_customer_by_phone", "arguments": {"phone_number": "555-0100"}, "requestor": "assistant"}], "turn_idx": 2},
        {"role": "tool", "id": "tc_1", "content": "{\"customer_id\": \"C1\"}", "requestor": "assistant", "error": False, "turn_idx": 3},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "tc_2", "name": "suspend_line", "arguments": {"line_id": "L9"}, "requestor": "assistant"}], "turn_idx": 4},
        {"role": "tool", "id": "tc_2", "content": "Error: line L9 not found", "requestor": "assistant", "error": True, "turn_idx": 5},
        {"role": "user", "content": "Let me check.", "tool_calls": [{"id": "tu_1", "name": "toggle_airplane_mode", "arguments": {}, "requestor": "user"}], "turn_idx": 6},
        {"role": "tool", "id": "tu_1", "content": "Airplane mode: OFF", "requestor": "user", "error": False, "turn_idx": 7},
    ],
}


def test_tau2_run_with_one_simulation(tmp_path: Path) -> None:
    """Opens with the agent's greeting (tau2 agents speak first)."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"timestamp": "2025-06-01", "info": {"agent_info": {"llm": "gpt-4.1"}}, "tasks": [], "simulations": [TAU2_SIMULATION]}), encoding="utf-8")
    assert detect_format(path) == "tau2-bench"
    t = parse_file(path)
    assert _shape(t) == ["assistant/chat", "user/chat", "assistant/chat", "tool/chat", "assistant/chat", "tool/chat", "user/chat", "user/observation"]
    assert [(c.call_id, c.tool_name, c.arguments_json) for c in _calls(t)] == [
        ("tc_1", "get_customer_by_phone", '{"phone_number":"555-0100"}'), ("tc_2", "suspend_line", '{"line_id":"L9"}'),
    ]
    assert [r.is_error for r in _results(t).values()] == [False, True]
    assert "toggle_airplane_mode" in _text(t.messages[6])
    assert t.participants[0].model == "gpt-4.1" and t.metadata["reward_info"] == {"reward": 1.0}
    assert t.messages[1].created_at is not None
    _assembles(tmp_path, path)


def test_tau2_run_of_several_simulations_is_refused_by_count(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"info": {}, "simulations": [TAU2_SIMULATION, TAU2_SIMULATION]}), encoding="utf-8")
    with pytest.raises(ImportFormatError) as info:
        parse_file(path)
    assert (info.value.location, info.value.reason) == ("simulations", "tau2-bench run holds 2 simulations; import one simulation per file")
