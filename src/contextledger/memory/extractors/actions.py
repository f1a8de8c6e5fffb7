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
from functools import lru_cache
from typing import Any, Literal

from contextledger.memory.dialects import ToolSpec, lookup_tool, spec_by_shape
from contextledger.memory.extractors.base import ToolInput
from contextledger.memory.extractors.shell_reads import shell_reads
from contextledger.memory.extractors.shell_words import split_words
from contextledger.memory.extractors.shell_writes import ShellWrite, shell_effects

__all__ = [
    "SEARCH_PROGRAMS",
    "SHELL_TOOLS",
    "TEST_COMMAND",
    "Action",
    "Verb",
    "is_shell_read",
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

_TEXT_READ = frozenset({"open", "goto", "scroll_up", "scroll_down"})
_TEXT_SEARCH = frozenset({"search_dir", "search_file", "find_file"})
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")
_WRAPPERS = frozenset({"sudo", "time", "timeout", "nice", "env", "xargs", "command"})


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
        kind: the registry kind (:data:`~contextledger.memory.dialects.KINDS`).
        paths: every file the call names (``read_many_files``, ``sed -i a b``, ``rm a b``).
        edits: ``(old, new)`` text pairs of an edit or insert (old is ``""`` for an insert).
        content: the new text of a write, when the call carries it.
        patch: the patch text (``*** Begin Patch`` body or unified diff).
        insert_line: the line an insert goes after.
        append: a shell write that appends.
        effects: every file write of a shell command (a compound command may delete one
            file, write another and run a program: verb ``shell`` with effects).
        verbatim: a shell read whose output is the file's text as it is (no line
            numbers): its lines are file lines from ``start_line`` on.
        start_line: the first line a verbatim shell read shows (``None``: unknown, as for
            ``tail -n N``).
        cwd: the directory a shell command runs in (its ``workdir`` argument).
    """

    verb: Verb
    command: str | None = None
    path: str | None = None
    pattern: str | None = None
    sub: str | None = None
    line_range: tuple[int, int] | None = None
    kind: str = "other"
    paths: tuple[str, ...] = ()
    edits: tuple[tuple[str, str], ...] = ()
    content: str | None = None
    patch: str | None = None
    insert_line: int | None = None
    append: bool = False
    effects: tuple[ShellWrite, ...] = ()
    verbatim: bool = False
    start_line: int | None = None
    cwd: str | None = None


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


def _paths_of(writes: tuple[ShellWrite, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(p for w in writes for p in w.paths))


@lru_cache(maxsize=4096)
def _shell_action(command: str, cwd: str | None = None) -> Action:
    # a pure function of the command text and directory (Action is frozen): the
    # extractors of one result ask for the same command several times, and agents
    # repeat their commands
    one = command.strip()
    reads = shell_reads(one, cwd) if one else None
    if reads:
        first = reads[0]
        window = first.line_range
        return Action(
            verb="read", kind="read", command=command, path=first.path, sub=first.program, cwd=cwd,
            paths=tuple(dict.fromkeys(r.path for r in reads)) if len(reads) > 1 else (),
            line_range=(window[0], window[1]) if len(reads) == 1 and window is not None and window[1] is not None else None,
            verbatim=len(reads) == 1 and not first.numbered,
            start_line=window[0] if len(reads) == 1 and window is not None else None,
        )
    effects = shell_effects(one, cwd) if one else None
    if effects is not None and effects.writes and not effects.runs:
        written = effects.writes[0]
        kind = "write" if written.kind == "write" and not written.append else ("edit" if written.kind == "write" else written.kind)
        edits = ((("", written.content),) if written.content is not None and written.append else ())
        paths = _paths_of(effects.writes)
        return Action(
            verb="write", command=command, sub="shell", kind=kind, path=paths[0] if paths else None,
            paths=paths, edits=edits, content=written.content if not written.append else None,
            patch=written.content if written.kind == "patch" else None, pattern=written.expression, append=written.append,
            effects=effects.writes, cwd=cwd,
        )
    run_effects = effects.writes if effects is not None else ()
    program = program_of(command)
    if not run_effects and (program in SEARCH_PROGRAMS or (program == "git" and re.search(r"\bgit grep\b", command))):
        pattern, path = _grep_target(command) if program in ("grep", "egrep", "fgrep", "rg") else (None, None)
        return Action(verb="search", command=command, sub=program, pattern=pattern, path=path, kind="search", cwd=cwd)
    return Action(verb="shell", command=command, sub=program, kind="shell", effects=run_effects, paths=_paths_of(run_effects), cwd=cwd)


_GREP_VALUE_OPTIONS = frozenset({"-A", "-B", "-C", "-m", "-e", "-f", "-g", "-t", "-T", "--include", "--exclude", "--max-count", "--context", "--glob", "--type"})


def _grep_target(command: str) -> tuple[str | None, str | None]:
    """``(pattern, path)`` of the first pipeline stage of a ``grep``/``rg`` command
    when it searches exactly one path (``grep -n "x" src/a.py | head`` → ``("x",
    "src/a.py")``); ``(None, None)`` when it cannot be told (options with values are
    skipped, ``-e PATTERN`` is honoured)."""
    stage = re.split(r"\s(?:\||&&|;)\s", command.strip(), maxsplit=1)[0]
    try:
        words = split_words(stage)
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
        words = split_words(first)
    except ValueError:
        words = first.split()
    if not words:
        return Action(verb="other", command=text)
    word = words[0]
    rest = words[1:]
    if word in _TEXT_READ:
        path = rest[0] if word == "open" and rest else None
        return Action(verb="read", kind="read", command=text, path=path, sub=word)
    if word == "edit":
        return Action(verb="write", command=text, sub=word, kind="edit")
    if word == "create":
        return Action(verb="create", command=text, path=rest[0] if rest else None, sub=word, kind="write")
    if word in _TEXT_SEARCH:
        return Action(
            verb="search",
            command=text,
            pattern=rest[0] if rest else None,
            path=rest[1] if len(rest) > 1 else None,
            sub=word,
            kind="search",
        )
    if word in ("submit", "exit", "exit_forfeit"):
        return Action(verb="other", command=text, sub=word)
    return _shell_action(text.strip())


def resolve_action(item: ToolInput) -> Action:
    """Map ``item`` onto an :class:`Action`: text actions first, then the tool's spec
    (``item.spec`` declared by the policy, else :data:`~contextledger.memory.extractors.
    dialects.BUILTIN_TOOLS`), else the fallback by argument shape
    (:func:`~contextledger.memory.dialects.spec_by_shape`); a tool none of
    them knows is ``other``."""
    name = item.tool_name.strip()
    low = name.lower()
    args = item.arguments
    if item.action_text is not None and (
        low in SHELL_TOOLS or low in _TEXT_SEARCH or low in _TEXT_READ or not args or set(args) == {"action"}
    ):
        return _text_action(item.action_text)
    if item.spec is None and (
        low in _TEXT_READ
        or low in _TEXT_SEARCH
        or (low in ("edit", "create") and args and "file_path" not in args)
    ):
        words = [str(v) for v in (args or {}).values() if isinstance(v, str | int)]
        return _text_action(" ".join([low, *[shlex.quote(w) for w in words]]))
    spec = item.spec or lookup_tool(name) or spec_by_shape(name, args, item.arguments_json)
    if spec is None:
        return Action(verb="other", sub=low)
    return _spec_action(spec, low, args, item.arguments_json)


def is_shell_read(action: Action) -> bool:
    """Whether ``action`` reads a file through a shell program (``cat a.py``, ``sed -n``):
    its failure is the program's own error line.  A text-action read (SWE-agent ``open``,
    ``goto``, ``scroll_*``) is a read tool, whose failure is its own text
    (``File a.py not found``)."""
    return action.command is not None and action.sub not in _TEXT_READ


def _strs(args: dict[str, Any] | None, keys: tuple[str, ...]) -> list[str]:
    """Every string (or list of strings) the first present key of ``keys`` holds."""
    for key in keys:
        value = (args or {}).get(key)
        if isinstance(value, str) and value:
            return [value]
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return list(value)
    return []


def _pairs(spec: ToolSpec, args: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The (old, new) text pairs of an edit call (one per MultiEdit entry)."""
    entries: list[Any] = [args]
    if spec.edits and isinstance(args.get(spec.edits), list):
        entries = [e for e in args[spec.edits] if isinstance(e, dict)]
    pairs: list[tuple[str, str]] = []
    for e in entries:
        old, new = _str(e, *spec.old), _str(e, *spec.new)
        if old is not None or new is not None or any(isinstance(e.get(k), str) for k in spec.new):
            pairs.append((old or "", new or ""))
    return tuple(pairs)


def _spec_action(spec: ToolSpec, low: str, args: dict[str, Any] | None, raw: str) -> Action:
    kind = spec.kind_of(args)
    sub = str((args or {}).get(spec.sub)) if spec.sub and (args or {}).get(spec.sub) else ("view" if spec.sub else low)
    paths = tuple(_strs(args, spec.path))
    path = paths[0] if len(paths) == 1 else None
    a = args or {}
    if kind == "shell":
        command = _command_of({k: a[k] for k in spec.command if k in a}) if spec.command else None
        if command is None and low == "write_stdin":
            return Action(verb="shell", command=None, sub="write_stdin", kind="shell")
        if command is None and not args:
            command = raw
        workdir = _str(a, *spec.workdir) if spec.workdir else None
        return _shell_action(command or "", workdir)
    if kind == "read":
        line_range = _window(spec, a)
        return Action(verb="read" if path or not paths else "other", path=path, paths=paths, sub=sub, line_range=line_range, kind=kind)
    if kind in ("write", "edit", "insert", "undo_edit", "delete"):
        content = _str(a, *spec.content)
        pairs = _pairs(spec, a) if kind in ("edit", "insert") else ()
        insert_at = a.get(spec.insert_line) if spec.insert_line else None
        return Action(
            verb="create" if kind == "write" else "write", path=path, paths=paths, sub=sub, kind=kind,
            edits=pairs, content=content, insert_line=insert_at if isinstance(insert_at, int) else None,
        )
    if kind == "patch":
        text = _str(a, *spec.patch) if args else None
        return Action(verb="write", path=path, paths=paths, sub=low, kind=kind, patch=text if text is not None else (raw if not args else None))
    if kind in ("search", "list"):
        return Action(verb="search", pattern=_str(a, *spec.pattern), path=_str(a, *spec.path), sub=low, kind=kind)
    if kind == "web_search":
        return Action(verb="web_search", pattern=_str(a, *spec.pattern), sub=low, kind=kind)
    if kind == "subagent":
        return Action(verb="task", sub=low, kind=kind)
    return Action(verb="other", sub=low, kind=kind)


def _window(spec: ToolSpec, args: dict[str, Any]) -> tuple[int, int] | None:
    if spec.view_range:
        rng = args.get(spec.view_range)
        if isinstance(rng, list) and len(rng) == 2 and all(isinstance(v, int) for v in rng):
            return (int(rng[0]), int(rng[1]))
        return None
    offset = args.get(spec.offset) if spec.offset else None
    limit = args.get(spec.limit) if spec.limit else None
    if isinstance(offset, int) and isinstance(limit, int):
        return (offset, offset + limit - 1)
    return None
