"""Small transcripts in each agent's own format, for the tool-semantics conformance table.

Every transcript tells the same story: the agent reads ``settings.py`` (where its
dialect has a read), changes ``MAX_RETRIES`` one or more times with the dialect's own
tool for one kind of change, then talks about other things for a few turns, and the
user finally asks what the file says now.  The formats are written from each agent's
public source and docs: Claude Code session JSONL (``Read`` / ``Edit`` / ``MultiEdit`` /
``Write`` / ``Bash``), Codex CLI rollouts (``response_item`` function / custom tool
calls: ``exec_command`` reads with ``workdir``, ``shell``, ``apply_patch``), Gemini CLI session JSON (``toolCalls`` with
``functionResponse`` results: ``read_file``, ``replace``, ``write_file``,
``run_shell_command``), OpenAI chat messages as OpenHands / SWE-agent and
mini-swe-agent keep them (``str_replace_editor``, ``execute_bash``, ``bash``), Aider's
``.aider.chat.history.md`` (SEARCH/REPLACE, whole-file and udiff blocks), OpenAI
Responses item lists and Anthropic Messages request bodies.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ORIGINAL = '"""Service settings."""\nMAX_RETRIES = 3\nTIMEOUT_SECONDS = 30\n'
VALUES = ("MAX_RETRIES = 3", "MAX_RETRIES = 7", "MAX_RETRIES = 9")
FILLER = (
    "Separately, the deployment notes mention a staging cluster in region eu-west and a nightly job "
    "that rotates logs; none of that needs a change today, it is only context for later planning. "
)


@dataclass(frozen=True)
class Call:
    """One tool call with its result, in the dialect's own terms."""

    name: str
    args: dict[str, Any] | str
    result: str
    call_id: str


Change = Callable[[str, str, str, str], Call]
"""(call id, path, old value, new value) → the call that makes the change."""


def _content(new: str) -> str:
    return ORIGINAL.replace(VALUES[0], new)


def _numbered_arrow(text: str) -> str:
    return "\n".join(f"{i:>6}→{line}" for i, line in enumerate(text.splitlines(), 1))


def _cat_n(path: str, text: str) -> str:
    body = "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(text.splitlines(), 1))
    return f"Here's the result of running `cat -n` on {path}:\n{body}\n"


def _sed(cid: str, path: str, old: str, new: str, tool: str = "Bash", key: str = "command") -> Call:
    return Call(tool, {key: f"sed -i 's/{old}/{new}/' {path}"}, "", cid)


def _heredoc(cid: str, path: str, old: str, new: str, tool: str = "Bash") -> Call:
    return Call(tool, {"command": f"cat > {path} <<'EOF'\n{_content(new)}EOF"}, "", cid)


# --- per dialect: path, read call, and the calls of each kind of change -------------------

CLAUDE: dict[str, Change] = {
    "edit": lambda c, p, o, n: Call("Edit", {"file_path": p, "old_string": o, "new_string": n}, f"The file {p} has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n     2→{n}", c),
    "multi_edit": lambda c, p, o, n: Call("MultiEdit", {"file_path": p, "edits": [{"old_string": o, "new_string": n}, {"old_string": "TIMEOUT_SECONDS = 30", "new_string": "TIMEOUT_SECONDS = 30"}]}, f"Applied 2 edits to {p}", c),
    "write": lambda c, p, o, n: Call("Write", {"file_path": p, "content": _content(n)}, f"The file {p} has been updated. Here's the result of running `cat -n` on a snippet of the edited file:", c),
    "shell_sed": lambda c, p, o, n: _sed(c, p, o, n),
    "shell_heredoc": lambda c, p, o, n: _heredoc(c, p, o, n),
}
CODEX: dict[str, Change] = {
    "patch": lambda c, p, o, n: Call("apply_patch", f"*** Begin Patch\n*** Update File: {p}\n@@\n \"\"\"Service settings.\"\"\"\n-{o}\n+{n}\n*** End Patch\n", '{"output":"Success. Updated the following files:\\nM ' + p + '\\n","metadata":{"exit_code":0,"duration_seconds":0.1}}', c),
    "shell_sed": lambda c, p, o, n: Call("shell", {"command": ["bash", "-lc", f"sed -i 's/{o}/{n}/' {p}"], "workdir": "/repo"}, '{"output":"","metadata":{"exit_code":0,"duration_seconds":0.0}}', c),
    "shell_heredoc": lambda c, p, o, n: Call("shell", {"command": ["bash", "-lc", f"cat > {p} <<'EOF'\n{_content(n)}EOF"]}, '{"output":"","metadata":{"exit_code":0,"duration_seconds":0.0}}', c),
}
GEMINI: dict[str, Change] = {
    "edit": lambda c, p, o, n: Call("replace", {"file_path": p, "old_string": o, "new_string": n}, f"Successfully modified file: {p} (1 replacements).", c),
    "write": lambda c, p, o, n: Call("write_file", {"file_path": p, "content": _content(n)}, f"Successfully overwrote file: {p}.", c),
    "shell_sed": lambda c, p, o, n: _sed(c, p, o, n, "run_shell_command"),
}
OPENHANDS: dict[str, Change] = {
    "edit": lambda c, p, o, n: Call("str_replace_editor", {"command": "str_replace", "path": p, "old_str": o, "new_str": n}, f"The file {p} has been edited. Here's the result of running `cat -n` on a snippet of {p}:\n     2\t{n}\nReview the changes and make sure they are as expected.", c),
    "shell_sed": lambda c, p, o, n: _sed(c, p, o, n, "execute_bash"),
}
MINI_SWE: dict[str, Change] = {
    "shell_sed": lambda c, p, o, n: _sed(c, p, o, n, "bash"),
    "shell_heredoc": lambda c, p, o, n: _heredoc(c, p, o, n, "bash"),
}
AIDER: dict[str, Change] = {
    "edit": lambda c, p, o, n: Call("aider_search_replace", f"{p}\n```python\n<<<<<<< SEARCH\n{o}\n=======\n{n}\n>>>>>>> REPLACE\n```", f"Applied edit to {p}", c),
    "write": lambda c, p, o, n: Call("aider_whole_file", f"{p}\n```python\n{_content(n)}```", f"Applied edit to {p}", c),
    "patch": lambda c, p, o, n: Call("aider_udiff", f"```diff\n--- {p}\n+++ {p}\n@@ -1,3 +1,3 @@\n \"\"\"Service settings.\"\"\"\n-{o}\n+{n}\n TIMEOUT_SECONDS = 30\n```", f"Applied edit to {p}", c),
}
def _swe_window(path: str, new: str) -> str:
    lines = _content(new).splitlines()
    return f"[File: {path} ({len(lines)} lines total)]\n(this is the beginning of the file)\n" + "\n".join(f"{i}:{ln}" for i, ln in enumerate(lines, 1)) + "\n(this is the end of the file)"


SWE_TEXT: dict[str, Change] = {
    "edit": lambda c, p, o, n: Call("edit", f"edit 2:2\n{n}\nend_of_edit", _swe_window(p, n) + "\nFile updated. Please review the changes and make sure they are correct.", c),
    "shell_sed": lambda c, p, o, n: Call("sed", f"sed -i 's/{o}/{n}/' {p}", "", c),
}
MINI_TEXT: dict[str, Change] = {
    "shell_sed": lambda c, p, o, n: Call("bash", f"sed -i 's/{o}/{n}/' {p}", "<returncode>0</returncode>\n<output>\n</output>", c),
    "shell_heredoc": lambda c, p, o, n: Call("bash", f"cat <<'EOF' > {p}\n{_content(n)}EOF", "<returncode>0</returncode>\n<output>\n</output>", c),
}
RESPONSES: dict[str, Change] = {
    "patch": lambda c, p, o, n: Call("apply_patch", {"input": f"*** Begin Patch\n*** Update File: {p}\n@@\n-{o}\n+{n}\n*** End Patch\n"}, "Done!", c),
    "shell_sed": lambda c, p, o, n: Call("shell", {"command": ["bash", "-lc", f"sed -i 's/{o}/{n}/' {p}"]}, "", c),
}
ANTHROPIC: dict[str, Change] = {
    "edit": lambda c, p, o, n: Call("str_replace_based_edit_tool", {"command": "str_replace", "path": p, "old_str": o, "new_str": n}, "Successfully replaced text at exactly one location.", c),
}
DECLARED: dict[str, Change] = {
    "edit": lambda c, p, o, n: Call("my_editor", {"file": p, "before": o, "after": n, "why": "retry budget"}, "ok", c),
}
FALLBACK: dict[str, Change] = {
    "edit": lambda c, p, o, n: Call("modify_source_file", {"target_file": p, "old_text": o, "new_text": n}, "done", c),
    "patch": lambda c, p, o, n: Call("submit_change", {"change": f"*** Begin Patch\n*** Update File: {p}\n@@\n-{o}\n+{n}\n*** End Patch"}, "accepted", c),
    "write": lambda c, p, o, n: Call("save_document", {"filename": p, "contents": _content(n)}, "saved", c),
}

READS: dict[str, Callable[[str], Call]] = {
    "claude-code": lambda p: Call("Read", {"file_path": p}, _numbered_arrow(ORIGINAL), "read-1"),
    "codex": lambda p: Call("exec_command", {"cmd": f"cat -n {p}", "workdir": "/repo"}, "Chunk ID: 5e1d\nWall time: 0.0 seconds\nProcess exited with code 0\nOutput:\n" + "".join(f"{i:>6}\t{line}\n" for i, line in enumerate(ORIGINAL.splitlines(), 1)), "read-1"),
    "gemini-cli": lambda p: Call("read_file", {"absolute_path": p}, ORIGINAL, "read-1"),
    "openhands": lambda p: Call("str_replace_editor", {"command": "view", "path": p}, _cat_n(p, ORIGINAL), "read-1"),
    "mini-swe-agent": lambda p: Call("bash", {"command": f"cat {p}"}, f"<returncode>0</returncode>\n<output>\n{ORIGINAL}</output>", "read-1"),
    "openai-responses": lambda p: Call("shell", {"command": ["bash", "-lc", f"cat {p}"]}, ORIGINAL, "read-1"),
    "anthropic-messages": lambda p: Call("str_replace_based_edit_tool", {"command": "view", "path": p}, _cat_n(p, ORIGINAL), "read-1"),
    "declared": lambda p: Call("Read", {"file_path": p}, _numbered_arrow(ORIGINAL), "read-1"),
    "fallback": lambda p: Call("open_source_file", {"path": p}, ORIGINAL, "read-1"),
    "swe-agent": lambda p: Call("open", f"open {p}", _swe_window(p, VALUES[0]), "read-1"),
    "mini-swe-agent-text": lambda p: Call("bash", f"cat {p}", f"<returncode>0</returncode>\n<output>\n{ORIGINAL}</output>", "read-1"),
}

DIALECTS: dict[str, tuple[str, dict[str, Change]]] = {
    "claude-code": ("/repo/settings.py", CLAUDE),
    "codex": ("settings.py", CODEX),
    "gemini-cli": ("/repo/settings.py", GEMINI),
    "openhands": ("/workspace/repo/settings.py", OPENHANDS),
    "mini-swe-agent": ("settings.py", MINI_SWE),
    "aider": ("settings.py", AIDER),
    "openai-responses": ("settings.py", RESPONSES),
    "anthropic-messages": ("/repo/settings.py", ANTHROPIC),
    "declared": ("/repo/settings.py", DECLARED),
    "fallback": ("/repo/settings.py", FALLBACK),
    "swe-agent": ("/repo/settings.py", SWE_TEXT),
    "mini-swe-agent-text": ("settings.py", MINI_TEXT),
}
"""dialect → (the file's path as the agent names it, change kind → call)."""

DECLARED_POLICY = '[tools.my_editor]\nkind = "edit"\npath = "file"\nold = "before"\nnew = "after"\n'


def story(dialect: str, kind: str, values: tuple[str, ...]) -> tuple[list[Call], str]:
    """(the calls: a read where the dialect has one, then one change per step of
    ``values``), and the path."""
    path, kinds = DIALECTS[dialect]
    calls = [READS[dialect](path)] if dialect in READS else []
    for i, (old, new) in enumerate(itertools.pairwise(values)):
        calls.append(kinds[kind](f"edit-{i + 1}", path, old, new))
    return calls, path


QUESTION = "What does settings.py say about MAX_RETRIES now?"
TURNS = 4


# --- writers --------------------------------------------------------------------------------

def _jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _ts(i: int) -> str:
    return f"2026-03-01T10:{i // 60:02d}:{i % 60:02d}Z"


def write_claude_code(folder: Path, calls: list[Call]) -> Path:
    records: list[dict[str, Any]] = [{"type": "permission-mode", "permissionMode": "acceptEdits", "sessionId": "s1"}]
    parent: str | None = None
    n = 0

    def add(kind: str, content: Any) -> None:
        nonlocal parent, n
        n += 1
        uuid = f"{kind[0]}{n}"
        message: dict[str, Any] = {"role": kind, "content": content}
        if kind == "assistant":
            message.update({"id": f"msg_{n}", "model": "claude-sonnet-4-5", "type": "message"})
        records.append({"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/repo", "sessionId": "s1",
                        "version": "2.1.12", "type": kind, "uuid": uuid, "timestamp": _ts(n), "message": message})
        parent = uuid

    add("user", "Raise the retry budget in settings.py.")
    for c in calls:
        add("assistant", [{"type": "tool_use", "id": c.call_id, "name": c.name, "input": c.args}])
        add("user", [{"type": "tool_result", "tool_use_id": c.call_id, "content": c.result}])
    for i in range(TURNS):
        add("assistant", [{"type": "text", "text": f"Done with step {i}. " + FILLER}])
        add("user", QUESTION if i == TURNS - 1 else f"Note {i}: " + FILLER)
    return _jsonl(folder / "session.jsonl", records)


def write_codex(folder: Path, calls: list[Call]) -> Path:
    lines: list[dict[str, Any]] = []

    def env(kind: str, payload: dict[str, Any]) -> None:
        lines.append({"timestamp": _ts(len(lines)).replace("Z", ".000Z"), "type": kind, "payload": payload})

    env("session_meta", {"id": "019e", "timestamp": _ts(0), "cwd": "/repo", "originator": "codex_cli_rs", "cli_version": "0.125.0"})
    env("turn_context", {"cwd": "/repo", "approval_policy": "on-request", "model": "gpt-5-codex"})
    env("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Raise the retry budget in settings.py."}]})
    for c in calls:
        if isinstance(c.args, str):
            env("response_item", {"type": "custom_tool_call", "status": "completed", "call_id": c.call_id, "name": c.name, "input": c.args})
            env("response_item", {"type": "custom_tool_call_output", "call_id": c.call_id, "output": c.result})
        else:
            env("response_item", {"type": "function_call", "name": c.name, "arguments": json.dumps(c.args), "call_id": c.call_id})
            env("response_item", {"type": "function_call_output", "call_id": c.call_id, "output": c.result})
    for i in range(TURNS):
        env("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"Done with step {i}. " + FILLER}]})
        text = QUESTION if i == TURNS - 1 else f"Note {i}: " + FILLER
        env("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
    return _jsonl(folder / "rollout-2026-03-01T10-00-00-019e.jsonl", lines)


def write_gemini(folder: Path, calls: list[Call]) -> Path:
    messages: list[dict[str, Any]] = [{"id": "m0", "timestamp": _ts(0), "type": "user", "content": [{"text": "Raise the retry budget in settings.py."}]}]
    for i, c in enumerate(calls):
        messages.append({"id": f"g{i}", "timestamp": _ts(i + 1), "type": "gemini", "content": "", "model": "gemini-2.5-pro", "toolCalls": [
            {"id": c.call_id, "name": c.name, "args": c.args, "status": "success", "timestamp": _ts(i + 1),
             "result": [{"functionResponse": {"id": c.call_id, "name": c.name, "response": {"output": c.result}}}]}]})
    for i in range(TURNS):
        messages.append({"id": f"a{i}", "timestamp": _ts(40 + 2 * i), "type": "gemini", "content": f"Done with step {i}. " + FILLER, "model": "gemini-2.5-pro"})
        text = QUESTION if i == TURNS - 1 else f"Note {i}: " + FILLER
        messages.append({"id": f"u{i}", "timestamp": _ts(41 + 2 * i), "type": "user", "content": [{"text": text}]})
    session = {"sessionId": "gem-1", "projectHash": "abc", "startTime": _ts(0), "lastUpdated": _ts(59), "messages": messages}
    path = folder / "session-2026-03-01T10-00-gem1.json"
    path.write_text(json.dumps(session), encoding="utf-8")
    return path


def _chat_messages(calls: list[Call]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Raise the retry budget in settings.py."}]
    for c in calls:
        args = c.args if isinstance(c.args, str) else json.dumps(c.args)
        messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": args}}]})
        messages.append({"role": "tool", "tool_call_id": c.call_id, "content": c.result})
    for i in range(TURNS):
        messages.append({"role": "assistant", "content": f"Done with step {i}. " + FILLER})
        messages.append({"role": "user", "content": QUESTION if i == TURNS - 1 else f"Note {i}: " + FILLER})
    return messages


def write_chat(folder: Path, calls: list[Call]) -> Path:
    path = folder / "messages.json"
    path.write_text(json.dumps({"messages": _chat_messages(calls)}), encoding="utf-8")
    return path


def write_aider(folder: Path, calls: list[Call]) -> Path:
    fmt = {"aider_whole_file": "whole", "aider_udiff": "udiff"}.get(calls[0].name if calls else "", "diff")
    out = ["# aider chat started at 2026-03-01 10:00:00", "", f"> Main model: gpt-4o with {fmt} edit format  ", "", "#### Raise the retry budget in settings.py.  ", ""]
    for c in calls:
        out += ["Changing it.", "", str(c.args), "", f"> {c.result}  ", "", "#### go on  ", ""]
    for i in range(TURNS):
        out += [f"Done with step {i}. " + FILLER, "", f"#### {QUESTION if i == TURNS - 1 else f'Note {i}: ' + FILLER}  ", ""]
    path = folder / ".aider.chat.history.md"
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def write_responses(folder: Path, calls: list[Call]) -> Path:
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Raise the retry budget in settings.py."}]}]
    for c in calls:
        items.append({"type": "function_call", "name": c.name, "arguments": json.dumps(c.args), "call_id": c.call_id, "id": f"fc_{c.call_id}"})
        items.append({"type": "function_call_output", "call_id": c.call_id, "output": c.result})
    for i in range(TURNS):
        items.append({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"Done with step {i}. " + FILLER}]})
        text = QUESTION if i == TURNS - 1 else f"Note {i}: " + FILLER
        items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
    path = folder / "responses.json"
    path.write_text(json.dumps({"model": "gpt-5", "input": items}), encoding="utf-8")
    return path


def write_anthropic(folder: Path, calls: list[Call]) -> Path:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Raise the retry budget in settings.py."}]
    for c in calls:
        messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": c.call_id, "name": c.name, "input": c.args}]})
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": c.call_id, "content": c.result}]})
    for i in range(TURNS):
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Done with step {i}. " + FILLER}]})
        messages.append({"role": "user", "content": QUESTION if i == TURNS - 1 else f"Note {i}: " + FILLER})
    path = folder / "body.json"
    path.write_text(json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "You are a coding agent.", "messages": messages}), encoding="utf-8")
    return path


def _text_action_messages(calls: list[Call], *, fenced: bool) -> list[dict[str, Any]]:
    """OpenAI-style messages of a text-action agent: the command in the assistant text
    (a fenced bash block, or SWE-agent's ``action`` field), the output as the next user
    message."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Raise the retry budget in settings.py."}]
    for c in calls:
        action = str(c.args)
        if fenced:
            messages.append({"role": "assistant", "content": f"THOUGHT: next step.\n\n```bash\n{action}\n```"})
        else:
            messages.append({"role": "assistant", "content": f"DISCUSSION\nNext step.\n\n```\n{action}\n```", "action": action, "agent": "main", "message_type": "action"})
        messages.append({"role": "user", "content": c.result or "Your command ran successfully and did not produce any output."})
    for i in range(TURNS):
        messages.append({"role": "assistant", "content": f"Done with step {i}. " + FILLER})
        messages.append({"role": "user", "content": QUESTION if i == TURNS - 1 else f"Note {i}: " + FILLER})
    return messages


def write_swe_agent(folder: Path, calls: list[Call]) -> Path:
    path = folder / "run.traj"
    path.write_text(json.dumps({"environment": "swe_main", "trajectory": [], "history": _text_action_messages(calls, fenced=False), "info": {"exit_status": "submitted"}}), encoding="utf-8")
    return path


def write_mini_text(folder: Path, calls: list[Call]) -> Path:
    path = folder / "run.traj.json"
    path.write_text(json.dumps({"info": {"exit_status": "Submitted"}, "messages": _text_action_messages(calls, fenced=True), "trajectory_format": "mini-swe-agent-1"}), encoding="utf-8")
    return path


WRITERS: dict[str, Callable[[Path, list[Call]], Path]] = {
    "claude-code": write_claude_code,
    "codex": write_codex,
    "gemini-cli": write_gemini,
    "openhands": write_chat,
    "mini-swe-agent": write_chat,
    "aider": write_aider,
    "openai-responses": write_responses,
    "anthropic-messages": write_anthropic,
    "declared": write_chat,
    "fallback": write_chat,
    "swe-agent": write_swe_agent,
    "mini-swe-agent-text": write_mini_text,
}


def payload_texts(value: Any) -> Iterator[str]:
    """Every string in ``value`` (a provider payload: JSON-like dicts, lists and strings),
    depth first in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from payload_texts(v)
    elif isinstance(value, list):
        for v in value:
            yield from payload_texts(v)
