"""What a tool call *did*, independent of the agent framework's vocabulary.

The same action has many spellings in real transcripts: Claude Code ``Bash`` / ``Read`` /
``Edit`` / ``Grep``; OpenHands ``execute_bash`` / ``str_replace_editor`` (view, create,
str_replace, insert, undo_edit); SWE-agent and mini-swe-agent ``bash`` plus text actions
(``open``, ``goto``, ``edit``, ``create``, ``search_dir``, ``search_file``, ``find_file``);
Codex ``exec_command`` / ``shell`` / ``apply_patch``.  :func:`resolve_action` maps a
:class:`~contextledger.memory.extractors.base.ToolInput` onto one :class:`Action` so the
extractors match on meaning, not on names.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any, Literal

from contextledger.memory.extractors.base import ToolInput

__all__ = [
    "SEARCH_PROGRAMS",
    "SHELL_TOOLS",
    "TEST_COMMAND",
    "Action",
    "Verb",
    "program_of",
    "resolve_action",
]

Verb = Literal["shell", "read", "write", "create", "search", "web_search", "task", "other"]

SHELL_TOOLS = frozenset(
    {
        "bash",
        "execute_bash",
        "exec_command",
        "shell",
        "local_shell",
        "run_shell_command",
        "run_terminal_cmd",
        "terminal",
        "run_command",
        "write_stdin",
    }
)
"""Tool names (lower-cased) whose calls run a shell command."""

SEARCH_PROGRAMS = frozenset({"find", "grep", "egrep", "fgrep", "rg", "ag", "ack", "fd", "locate"})
"""Programs whose output is a list of matches or paths."""

TEST_COMMAND = re.compile(
    r"(?:^|[\s;&|(/])(?:pytest|py\.test|tox|nox|jest|vitest|mocha|rspec|phpunit|ctest"
    r"|go test|cargo (?:test|nextest)|(?:npm|pnpm|yarn|bun)(?: run)? test"
    r"|python[\d.]* -m (?:pytest|unittest)|manage\.py test|runtests\.(?:py|sh)"
    r"|mvn test|gradle test|make test)\b"
)
"""A command line that runs a test suite."""

_READ_TOOLS = frozenset({"read", "notebookread", "view_file", "read_file"})
_WRITE_TOOLS = frozenset(
    {"edit", "multiedit", "notebookedit", "apply_patch", "write", "write_file"}
)
_SEARCH_TOOLS = frozenset(
    {"grep", "glob", "ls", "list_files", "search_dir", "search_file", "find_file"}
)
_TASK_TOOLS = frozenset({"task", "agent", "delegate_task", "dispatch_agent"})
_TEXT_READ = frozenset({"open", "goto", "scroll_up", "scroll_down"})
_TEXT_SEARCH = frozenset({"search_dir", "search_file", "find_file"})
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")
_WRAPPERS = frozenset({"sudo", "time", "timeout", "nice", "env", "xargs", "command"})
_SED_RANGE = re.compile(r"^sed -n ['\"]?(\d+),(\d+)p['\"]? (\S+)$")
_CAT_ONE = re.compile(r"^cat (\S+)$")


@dataclass(frozen=True, kw_only=True)
class Action:
    """The meaning of one call.

    Attributes:
        verb: what it did.
        command: the shell command line (``shell``), or the typed text action.
        path: the file or directory acted on, when known from the call.
        pattern: the search pattern / query, when known from the call.
        sub: a sub-command (``str_replace_editor`` command, text-action word …).
        line_range: a requested 1-based line range, when known from the call.
    """

    verb: Verb
    command: str | None = None
    path: str | None = None
    pattern: str | None = None
    sub: str | None = None
    line_range: tuple[int, int] | None = None


def _str(args: dict[str, Any] | None, *keys: str) -> str | None:
    if not args:
        return None
    for key in keys:
        value = args.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _command_of(args: dict[str, Any] | None) -> str | None:
    if not args:
        return None
    for key in ("command", "cmd", "script", "commands"):
        value = args.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            if len(value) == 3 and value[0] in ("bash", "sh", "zsh") and value[1] in ("-c", "-lc"):
                return str(value[2])
            return shlex.join(value)
    return None


def program_of(command: str) -> str | None:
    """The first real program of a shell command line (``cd x && FOO=1 rg y`` → ``rg``).

    ``cd`` segments, environment assignments and wrappers (``sudo``, ``time``,
    ``timeout N``) are skipped.
    """
    for segment in re.split(r"&&|\|\||;|\n", command):
        words = segment.strip().split()
        while words and (_ENV_ASSIGN.match(words[0]) or words[0] in _WRAPPERS):
            dropped = words.pop(0)
            if dropped == "timeout" and words and re.match(r"^\d", words[0]):
                words.pop(0)
        if not words or words[0] == "cd":
            continue
        return words[0].rsplit("/", 1)[-1]
    return None


def _shell_action(command: str) -> Action:
    one = command.strip()
    sed = _SED_RANGE.match(one)
    if sed:
        return Action(
            verb="read",
            command=command,
            path=sed.group(3),
            sub="sed",
            line_range=(int(sed.group(1)), int(sed.group(2))),
        )
    cat = _CAT_ONE.match(one)
    if cat and not cat.group(1).startswith("-"):
        return Action(verb="read", command=command, path=cat.group(1), sub="cat")
    program = program_of(command)
    if program in SEARCH_PROGRAMS or (program == "git" and re.search(r"\bgit grep\b", command)):
        pattern, path = _grep_target(command) if program in ("grep", "egrep", "fgrep", "rg") else (None, None)
        return Action(verb="search", command=command, sub=program, pattern=pattern, path=path)
    return Action(verb="shell", command=command, sub=program)


_GREP_VALUE_OPTIONS = frozenset({"-A", "-B", "-C", "-m", "-e", "-f", "-g", "-t", "-T", "--include", "--exclude", "--max-count", "--context", "--glob", "--type"})


def _grep_target(command: str) -> tuple[str | None, str | None]:
    """``(pattern, path)`` of the first pipeline stage of a ``grep``/``rg`` command
    when it searches exactly one path (``grep -n "x" src/a.py | head`` → ``("x",
    "src/a.py")``); ``(None, None)`` when it cannot be told (options with values are
    skipped, ``-e PATTERN`` is honoured)."""
    stage = re.split(r"\s(?:\||&&|;)\s", command.strip(), maxsplit=1)[0]
    try:
        words = shlex.split(stage)
    except ValueError:
        return None, None
    pattern: str | None = None
    operands: list[str] = []
    i = 1
    while i < len(words):
        w = words[i]
        if w in _GREP_VALUE_OPTIONS and i + 1 < len(words):
            if w == "-e":
                pattern = words[i + 1]
            i += 2
            continue
        if w.startswith("-") and w != "-":
            i += 1
            continue
        operands.append(w)
        i += 1
    if pattern is None and operands:
        pattern = operands.pop(0)
    return pattern, operands[0] if len(operands) == 1 else None


def _text_action(text: str) -> Action:
    first = text.strip().split("\n", 1)[0].strip()
    try:
        words = shlex.split(first)
    except ValueError:
        words = first.split()
    if not words:
        return Action(verb="other", command=text)
    word = words[0]
    rest = words[1:]
    if word in _TEXT_READ:
        path = rest[0] if word == "open" and rest else None
        return Action(verb="read", command=text, path=path, sub=word)
    if word == "edit":
        return Action(verb="write", command=text, sub=word)
    if word == "create":
        return Action(verb="create", command=text, path=rest[0] if rest else None, sub=word)
    if word in _TEXT_SEARCH:
        return Action(
            verb="search",
            command=text,
            pattern=rest[0] if rest else None,
            path=rest[1] if len(rest) > 1 else None,
            sub=word,
        )
    if word in ("submit", "exit", "exit_forfeit"):
        return Action(verb="other", command=text, sub=word)
    return _shell_action(text.strip())


def resolve_action(item: ToolInput) -> Action:
    """Map ``item`` onto an :class:`Action` (see the module docstring for vocabularies)."""
    name = item.tool_name.strip()
    low = name.lower()
    args = item.arguments
    if item.action_text is not None and (
        low in SHELL_TOOLS or low in _TEXT_SEARCH or low in _TEXT_READ or not args
    ):
        return _text_action(item.action_text)
    if low == "str_replace_editor" or low == "str_replace_based_edit_tool":
        sub = _str(args, "command") or "view"
        path = _str(args, "path")
        if sub == "view":
            rng = args.get("view_range") if args else None
            line_range = None
            if isinstance(rng, list) and len(rng) == 2 and all(isinstance(v, int) for v in rng):
                line_range = (int(rng[0]), int(rng[1]))
            return Action(verb="read", path=path, sub=sub, line_range=line_range)
        if sub == "create":
            return Action(verb="create", path=path, sub=sub)
        return Action(verb="write", path=path, sub=sub)
    if low in SHELL_TOOLS:
        command = _command_of(args)
        if command is None and low == "write_stdin":
            return Action(verb="shell", command=None, sub="write_stdin")
        if command is None and not args:
            command = item.arguments_json
        return _shell_action(command or "")
    if (
        low in _TEXT_READ
        or low in _TEXT_SEARCH
        or (low in ("edit", "create") and args and "file_path" not in args)
    ):
        words = [str(v) for v in (args or {}).values() if isinstance(v, str | int)]
        return _text_action(" ".join([low, *[shlex.quote(w) for w in words]]))
    if low in _READ_TOOLS:
        path = _str(args, "file_path", "path", "notebook_path")
        offset = args.get("offset") if args else None
        limit = args.get("limit") if args else None
        line_range = None
        if isinstance(offset, int) and isinstance(limit, int):
            line_range = (offset, offset + limit - 1)
        return Action(verb="read", path=path, sub=low, line_range=line_range)
    if low in ("write", "write_file"):
        return Action(verb="create", path=_str(args, "file_path", "path"), sub=low)
    if low in _WRITE_TOOLS:
        return Action(verb="write", path=_str(args, "file_path", "path", "notebook_path"), sub=low)
    if low in _SEARCH_TOOLS:
        return Action(
            verb="search",
            pattern=_str(args, "pattern", "search_term", "file_name", "query", "regex"),
            path=_str(args, "path", "dir", "file", "directory"),
            sub=low,
        )
    if low == "websearch" or low == "web_search":
        return Action(verb="web_search", pattern=_str(args, "query", "q"), sub=low)
    if low in _TASK_TOOLS:
        return Action(verb="task", sub=low)
    return Action(verb="other", sub=low)
