"""The tool registry: every agent's tools mapped to the kinds the memory layer knows.

One table (:data:`BUILTIN_TOOLS`) names, for each tool of each agent dialect, what kind
of action it is and which of its arguments hold the path, the content, the old and new
text, the patch, the command, the pattern, the URL …  The extractors read calls through
it (:func:`contextledger.memory.extractors.actions.resolve_action`), never by matching
names of their own.  Argument names follow each agent's public tool schemas:

* Claude Code: ``Read`` (file_path, offset, limit), ``Write`` (file_path, content),
  ``Edit`` (file_path, old_string, new_string), ``MultiEdit`` (file_path, edits[]),
  ``NotebookEdit`` (notebook_path, new_source), ``Bash`` (command), ``BashOutput``
  (bash_id), ``Grep`` / ``Glob`` (pattern, path), ``LS`` (path), ``Task``, ``TodoWrite``
  (todos), ``WebFetch`` (url, prompt), ``WebSearch`` (query);
* Codex CLI: ``shell`` (command as argv), ``exec_command`` (cmd), ``local_shell``
  (the ``local_shell_call`` action: command argv), ``apply_patch`` (input: a
  ``*** Begin Patch`` body), ``update_plan`` (plan[]);
* OpenHands / SWE-agent: ``str_replace_editor`` (command view / create / str_replace /
  insert / undo_edit; path, file_text, old_str, new_str, insert_line, view_range),
  ``execute_bash`` / ``bash`` (command);
* Gemini CLI: ``read_file`` (absolute_path, later file_path; offset, limit),
  ``read_many_files`` (paths), ``write_file`` (file_path, content), ``replace``
  (file_path, old_string, new_string), ``run_shell_command`` (command), ``glob``,
  ``search_file_content`` (pattern, path), ``list_directory`` (path), ``web_fetch``
  (prompt), ``google_web_search`` (query), ``write_todos`` (todos);
* Aider edit blocks as the importer records them: ``aider_search_replace`` (path,
  search, replace), ``aider_whole_file`` (path, content), ``aider_udiff`` (path, diff),
  ``aider_run`` (command);
* mini-swe-agent and SWE-agent text actions go through the shell and text-action
  readers of :mod:`~contextledger.memory.extractors.actions`.

A policy may declare more tools (``[tools.<name>]``, see
:mod:`contextledger.policy.tools`); a declaration wins over this table.  Tools in neither
go through the documented fallback by argument shape (:func:`spec_by_shape`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

__all__ = [
    "BUILTIN_TOOLS",
    "KINDS",
    "ToolKind",
    "ToolSpec",
    "begin_patch_paths",
    "lookup_tool",
    "spec_by_shape",
    "unified_diff_paths",
]

ToolKind = Literal[
    "read", "write", "edit", "insert", "patch", "undo_edit", "delete", "list", "search",
    "shell", "shell_output", "fetch", "web_search", "subagent", "plan", "editor", "other",
]
"""What a call does: ``editor`` tools pick one of the others by a sub-command argument."""

KINDS: tuple[str, ...] = get_args(ToolKind)
"""Every kind, in declaration order."""


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """How to read one tool's calls.

    Attributes:
        kind: what it does.
        agents: the agent dialects that use this name (documentation only).
        path / content / old / new / patch / command / pattern / url: argument names, tried
            in order (the first present string wins; ``path`` may also name a list).
        edits: argument naming a list of ``{old, new}`` objects (MultiEdit); the objects'
            own keys are read with ``old`` / ``new``.
        offset / limit: arguments of a line window (reads).
        insert_line / view_range: ``str_replace_editor`` arguments.
        sub: argument naming a sub-command; ``subs`` maps each sub-command to its kind.
        workdir: arguments naming the directory a shell command runs in (Codex
            ``workdir``); relative paths of the command are resolved against it.
    """

    kind: ToolKind
    agents: tuple[str, ...] = ()
    path: tuple[str, ...] = ()
    content: tuple[str, ...] = ()
    old: tuple[str, ...] = ()
    new: tuple[str, ...] = ()
    edits: str | None = None
    patch: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    pattern: tuple[str, ...] = ()
    url: tuple[str, ...] = ()
    offset: str | None = None
    limit: str | None = None
    insert_line: str | None = None
    view_range: str | None = None
    sub: str | None = None
    subs: tuple[tuple[str, ToolKind], ...] = ()
    workdir: tuple[str, ...] = ()

    def kind_of(self, args: Mapping[str, Any] | None) -> ToolKind:
        """The kind of one call: ``kind``, or for an editor the kind of its sub-command
        (``view`` when the sub-command is missing, ``other`` when it is unknown)."""
        if self.kind != "editor" or self.sub is None:
            return self.kind
        value = (args or {}).get(self.sub)
        name = value if isinstance(value, str) and value else "view"
        return dict(self.subs).get(name, "other")


_CC = ("claude-code",)
_CODEX = ("codex",)
_OH = ("openhands", "swe-agent")
_GEM = ("gemini-cli",)
_AIDER = ("aider",)
_EDITOR = ToolSpec(
    kind="editor", agents=_OH, path=("path",), content=("file_text",), old=("old_str",), new=("new_str",),
    insert_line="insert_line", view_range="view_range", sub="command",
    subs=(("view", "read"), ("create", "write"), ("str_replace", "edit"), ("insert", "insert"), ("undo_edit", "undo_edit")),
)
_SHELL = ("command", "cmd", "script", "commands")
_WORKDIR = ("workdir", "cwd", "working_directory", "directory", "dir_path")


def _shell(*agents: str) -> ToolSpec:
    return ToolSpec(kind="shell", agents=agents, command=_SHELL, workdir=_WORKDIR)


BUILTIN_TOOLS: Mapping[str, ToolSpec] = {
    # Claude Code
    "read": ToolSpec(kind="read", agents=_CC, path=("file_path", "path"), offset="offset", limit="limit"),
    "notebookread": ToolSpec(kind="read", agents=_CC, path=("notebook_path",)),
    "write": ToolSpec(kind="write", agents=_CC, path=("file_path", "path"), content=("content",)),
    "edit": ToolSpec(kind="edit", agents=_CC, path=("file_path", "path"), old=("old_string",), new=("new_string",)),
    "multiedit": ToolSpec(kind="edit", agents=_CC, path=("file_path",), old=("old_string",), new=("new_string",), edits="edits"),
    "notebookedit": ToolSpec(kind="edit", agents=_CC, path=("notebook_path",), new=("new_source",)),
    "bash": _shell("claude-code", "swe-agent", "mini-swe-agent"),
    "bashoutput": ToolSpec(kind="shell_output", agents=_CC),
    "grep": ToolSpec(kind="search", agents=_CC, pattern=("pattern",), path=("path",)),
    "glob": ToolSpec(kind="search", agents=(*_CC, *_GEM), pattern=("pattern",), path=("path",)),
    "ls": ToolSpec(kind="list", agents=_CC, path=("path",)),
    "task": ToolSpec(kind="subagent", agents=_CC),
    "agent": ToolSpec(kind="subagent", agents=_CC),
    "todowrite": ToolSpec(kind="plan", agents=_CC),
    "exitplanmode": ToolSpec(kind="plan", agents=_CC),
    "webfetch": ToolSpec(kind="fetch", agents=_CC, url=("url",)),
    "websearch": ToolSpec(kind="web_search", agents=_CC, pattern=("query",)),
    # Codex CLI
    "shell": _shell("codex"),
    "exec_command": _shell("codex"),
    "local_shell": _shell("codex"),
    "write_stdin": _shell("codex"),
    "apply_patch": ToolSpec(kind="patch", agents=_CODEX, patch=("input", "patch")),
    "update_plan": ToolSpec(kind="plan", agents=_CODEX),
    "view_image": ToolSpec(kind="read", agents=_CODEX, path=("path",)),
    "web_search": ToolSpec(kind="web_search", agents=_CODEX, pattern=("query", "q")),
    # OpenHands, SWE-agent (function calling)
    "str_replace_editor": _EDITOR,
    "str_replace_based_edit_tool": _EDITOR,
    "file_editor": _EDITOR,
    "execute_bash": _shell("openhands"),
    "terminal": _shell("openhands"),
    # Gemini CLI
    "read_file": ToolSpec(kind="read", agents=_GEM, path=("absolute_path", "file_path", "path"), offset="offset", limit="limit"),
    "read_many_files": ToolSpec(kind="read", agents=_GEM, path=("paths",)),
    "write_file": ToolSpec(kind="write", agents=_GEM, path=("file_path", "absolute_path", "path"), content=("content",)),
    "replace": ToolSpec(kind="edit", agents=_GEM, path=("file_path", "absolute_path"), old=("old_string",), new=("new_string",)),
    "run_shell_command": _shell("gemini-cli"),
    "search_file_content": ToolSpec(kind="search", agents=_GEM, pattern=("pattern",), path=("path",)),
    "list_directory": ToolSpec(kind="list", agents=_GEM, path=("path", "dir_path")),
    "web_fetch": ToolSpec(kind="fetch", agents=_GEM, url=("url",)),
    "google_web_search": ToolSpec(kind="web_search", agents=_GEM, pattern=("query",)),
    "write_todos": ToolSpec(kind="plan", agents=_GEM),
    # Aider (edit blocks and /run as the importer records them)
    "aider_search_replace": ToolSpec(kind="edit", agents=_AIDER, path=("path",), old=("search",), new=("replace",)),
    "aider_whole_file": ToolSpec(kind="write", agents=_AIDER, path=("path",), content=("content",)),
    "aider_udiff": ToolSpec(kind="patch", agents=_AIDER, path=("path",), patch=("diff",)),
    "aider_run": _shell("aider"),
    "aider_test": _shell("aider"),
    # other agents seen in public transcripts
    "view_file": ToolSpec(kind="read", agents=("other",), path=("path", "file_path")),
    "run_terminal_cmd": _shell("cursor"),
    "run_command": _shell("other"),
    "list_files": ToolSpec(kind="list", agents=("other",), path=("path", "dir")),
    "delegate_task": ToolSpec(kind="subagent", agents=("other",)),
    "dispatch_agent": ToolSpec(kind="subagent", agents=("other",)),
}
"""Lower-cased tool name → how to read its calls."""


def lookup_tool(name: str, declared: Mapping[str, ToolSpec] | None = None) -> ToolSpec | None:
    """The spec of tool ``name``: a declaration (exact name, then lower-cased) wins over
    :data:`BUILTIN_TOOLS` (lower-cased name); ``None`` when neither knows it."""
    if declared:
        spec = declared.get(name) or declared.get(name.lower())
        if spec is not None:
            return spec
    return BUILTIN_TOOLS.get(name.strip().lower())


_PATH_KEYS = ("file_path", "path", "filepath", "file", "filename", "target_file", "absolute_path", "notebook_path")
_OLD_KEYS = ("old_string", "old_str", "old", "old_text", "search", "before", "original", "find")
_NEW_KEYS = ("new_string", "new_str", "new", "new_text", "replace", "after", "replacement", "updated")
_CONTENT_KEYS = ("content", "contents", "file_text", "text", "code", "body", "new_content")
_PATCH_KEYS = ("patch", "diff", "input")
_READ_NAME = re.compile(r"read|view|open|cat|show", re.I)
_SHELL_NAME = re.compile(r"shell|bash|terminal|exec|command|run|sh$", re.I)
_DIFF_HEAD = re.compile(r"^\+\+\+ (?:b/)?(\S+)", re.M)
_PATCH_HEAD = re.compile(r"^\*\*\* (?:Update File|Add File|Delete File|Move to): (.+?)\s*$", re.M)


def _first(args: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if isinstance(args.get(k), str)), None)


def _is_patch_text(text: str) -> bool:
    head = text.lstrip()[:4000]
    return head.startswith("*** Begin Patch") or (
        ("--- " in head and "\n+++ " in head and "\n@@" in head) or head.startswith("diff --git ")
    )


def spec_by_shape(name: str, args: Mapping[str, Any] | None, raw: str) -> ToolSpec | None:
    """The documented fallback for a tool no table knows, read from its arguments.

    In order: a ``*** Begin Patch`` body or unified diff (the raw arguments, or any
    string argument) is a ``patch``; a path argument (``file_path``, ``path``, ``file`` …)
    with old and new text (``old_string``/``new_string``, ``old_str``/``new_str``,
    ``old``/``new``, ``search``/``replace``, ``before``/``after`` …) is an ``edit``; a path
    with content (``content``, ``file_text``, ``text``, ``code`` …) is a ``write``; a path
    alone, for a tool whose name says read / view / open / cat / show, is a ``read``; a
    ``command`` / ``cmd`` string, for a tool whose name says shell / bash / terminal / exec /
    run / command, is a ``shell`` command (whose file writes are then recognised as such).
    ``None`` otherwise.
    """
    if _is_patch_text(raw) and not raw.lstrip().startswith("{"):
        return ToolSpec(kind="patch", agents=("fallback",))
    if not args:
        return None
    patch_key = next((k for k, v in args.items() if isinstance(v, str) and _is_patch_text(v)), None)
    path = _first(args, _PATH_KEYS)
    if patch_key is not None:
        return ToolSpec(kind="patch", agents=("fallback",), patch=(patch_key,), path=(path,) if path else ())
    if path is not None:
        old, new = _first(args, _OLD_KEYS), _first(args, _NEW_KEYS)
        if new is not None:
            return ToolSpec(kind="edit", agents=("fallback",), path=(path,), old=(old,) if old else (), new=(new,))
        content = _first(args, _CONTENT_KEYS)
        if content is not None:
            return ToolSpec(kind="write", agents=("fallback",), path=(path,), content=(content,))
        if _READ_NAME.search(name):
            return ToolSpec(kind="read", agents=("fallback",), path=(path,), offset="offset", limit="limit")
    command = _first(args, _SHELL)
    if command is not None and _SHELL_NAME.search(name):
        return ToolSpec(kind="shell", agents=("fallback",), command=(command,), workdir=_WORKDIR)
    return None


def unified_diff_paths(text: str) -> list[str]:
    """Paths named by the ``+++`` headers of a unified diff (``/dev/null`` left out)."""
    return [p for p in _DIFF_HEAD.findall(text) if p != "/dev/null"]


def begin_patch_paths(text: str) -> list[str]:
    """Paths named by the file headers of a ``*** Begin Patch`` body (Codex
    ``apply_patch``: ``*** Update File:``, ``*** Add File:``, ``*** Delete File:``,
    ``*** Move to:``), in order."""
    return _PATCH_HEAD.findall(text)
