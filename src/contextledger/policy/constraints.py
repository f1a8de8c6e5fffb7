"""Constraints in use: user constraints from conversation, injection, and enforcement.

Seed 001 §6 problem 4: hard constraints are intercepted by the runtime, soft ones are
injected into context, situational ones only when their path/tool matches.  Seed 001 §10:
explicit user requirements belong to the hard constraints of every compaction handoff,
so user constraints are pinned and re-emitted verbatim in every request.

* :func:`extract_user_constraints` finds the constraints of a user message (English,
  Japanese, Chinese; which sentences count, and which earlier sentence gives one its scope,
  is :mod:`contextledger.policy.constraint_text`) and returns pinned user-authority rules
  holding each verbatim — hard, or situational when the scope is borrowed.
* :func:`rules_for_context` selects the rules to inject for the paths/tools in play.
* :func:`check_tool_call` is the pre-execution check a caller runs before a tool runs.

Enforcement heuristic (documented, deliberately conservative — a violation means
"intercept or ask for approval", seed 001 §6 problem 4):

* only ``hard`` rules are enforced, and only when the call is in the rule's tool scope;
* a rule whose text speaks of modifying things (``restricts == "writes"``) is checked
  only against modifying calls: edit/write tools, shell commands that write (redirects,
  ``rm``, ``mv``, ``sed -i`` …), and unknown tools; read-only tools never violate it;
* a path-scoped rule is violated when a touched path matches its scope (back-quoted
  spans are ignored there: they often name the remedy, "run `make gen` instead");
* a rule with ``allowed_paths`` is violated by a modifying call touching a path outside;
* a tool-scoped rule without paths is violated by any call of the tool, or — when the
  rule back-quotes something (``NEVER run `git push --force` ``) — by a call whose
  arguments contain it;
* an unscoped rule is enforced only through its back-quoted spans; other unscoped hard
  rules cannot be checked mechanically and are injected instead.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from contextledger.policy.authority import SourceKind, authority_for_source
from contextledger.policy.constraint_text import (
    EN_TARGET,
    JA_TARGET,
    ZH_TARGET,
    constraint_passages,
)
from contextledger.policy.rules import (
    Rule,
    claimed_authority,
    path_matches,
    tool_matches,
    write_restricting,
)

__all__ = [
    "READ_ONLY_TOOLS",
    "SHELL_TOOLS",
    "WRITE_TOOLS",
    "Violation",
    "check_tool_call",
    "extract_user_constraints",
    "is_modifying_call",
    "rules_for_context",
    "split_sentences",
    "touched_paths",
]

WRITE_TOOLS = frozenset(
    {
        "edit",
        "multiedit",
        "write",
        "notebookedit",
        "apply_patch",
        "write_file",
        "edit_file",
        "create_file",
        "delete_file",
        "str_replace_editor",
        "str_replace_based_edit_tool",
    }
)
"""Tools (case-folded names) that modify files."""

SHELL_TOOLS = frozenset(
    {
        "bash",
        "shell",
        "sh",
        "exec_command",
        "run_command",
        "execute_bash",
        "local_shell",
        "terminal",
        "run_terminal_cmd",
    }
)
"""Tools (case-folded names) that run shell commands."""

READ_ONLY_TOOLS = frozenset(
    {
        "read",
        "glob",
        "grep",
        "ls",
        "webfetch",
        "websearch",
        "notebookread",
        "read_file",
        "list_dir",
        "list_files",
        "view",
        "search",
        "find",
        "todowrite",
        "task",
    }
)
"""Tools (case-folded names) that never modify files."""

_PATH_KEYS = frozenset(
    {
        "file_path",
        "path",
        "notebook_path",
        "filepath",
        "filename",
        "file",
        "target_file",
        "target",
        "destination",
        "source",
        "old_path",
        "new_path",
        "dir",
        "directory",
    }
)
_PATH_LIST_KEYS = frozenset({"paths", "files", "file_paths"})
_TEXT_KEYS = frozenset({"command", "cmd", "script", "input", "patch"})
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)
_FILE_LIKE = re.compile(r"^[\w.@+-]+\.[A-Za-z0-9]{1,10}$")
_SHELL_WRITES = re.compile(
    r"(?:^|[\s;&|])(?:>>?|rm|rmdir|mv|cp|touch|tee|truncate|mkdir|ln|chmod|chown|patch|dd|"
    r"install)(?=[\s]|$)|\bsed\s+(?:-\w*\s+)*-i|\bperl\s+-\w*i|\bgit\s+(?:checkout|apply|"
    r"restore|rm|mv|reset|clean|commit|push|am|cherry-pick|revert|merge|rebase)\b|>",
)


class Violation(BaseModel):
    """A hard rule a tool call would break (the caller intercepts or asks for approval).

    Attributes:
        rule_id: the rule broken.
        reason: one sentence: what in the call breaks it.
        rule_text: the rule, verbatim.
        matched: the path or back-quoted span that triggered it, or the tool name.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule_id: str
    reason: str
    rule_text: str
    matched: str


# --- arguments ----------------------------------------------------------------------


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key in sorted(value, key=str):
            yield from _strings(value[key])
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _command_text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value)
    return str(value)


def _path_tokens(command: str) -> Iterator[str]:
    yield from (m.strip() for m in _PATCH_FILE.findall(command))
    try:
        tokens = shlex.split(command, comments=False)
    except ValueError:
        tokens = command.split()
    for token in tokens:
        token = token.lstrip("<>&|;(").rstrip(";&|)")
        if not token or token.startswith("-") or "://" in token or "=" in token:
            continue
        if "/" in token or _FILE_LIKE.match(token):
            yield token


def _walk_paths(arguments: Mapping[str, Any]) -> Iterator[str]:
    for key in sorted(arguments, key=str):
        value = arguments[key]
        lowered = str(key).casefold()
        if lowered in _PATH_KEYS and isinstance(value, str) and value:
            yield value
        elif lowered in _PATH_LIST_KEYS and isinstance(value, list | tuple):
            yield from (v for v in value if isinstance(v, str) and v)
        elif lowered in _TEXT_KEYS and isinstance(value, str | list | tuple):
            yield from _path_tokens(_command_text(value))
        elif isinstance(value, Mapping):
            yield from _walk_paths(value)
        elif isinstance(value, list | tuple):
            for item in value:
                if isinstance(item, Mapping):
                    yield from _walk_paths(item)


def touched_paths(arguments: Mapping[str, Any]) -> tuple[str, ...]:
    """Paths a tool call touches, in first-seen order without duplicates.

    Read from path-like keys (``file_path``, ``path``, ``notebook_path``, ``paths`` …,
    at any depth) and from path-looking tokens of command/patch text (``command``,
    ``cmd``, ``script``, ``input``, ``patch``: tokens containing ``/`` or shaped like
    ``name.ext``, and ``*** Update File:`` lines).
    """
    seen: dict[str, None] = {}
    for path in _walk_paths(arguments):
        seen.setdefault(path, None)
    return tuple(seen)


def is_modifying_call(tool_name: str, arguments: Mapping[str, Any]) -> bool:
    """True when the call may modify files (see module doc; unknown tools count as yes)."""
    name = tool_name.casefold()
    if name in WRITE_TOOLS:
        return str(arguments.get("command", "")).casefold() != "view"
    if name in SHELL_TOOLS:
        text = " ".join(_command_text(arguments[k]) for k in arguments if k in _TEXT_KEYS)
        return _SHELL_WRITES.search(text) is not None
    return name not in READ_ONLY_TOOLS


def rules_for_context(
    rules: Sequence[Rule], touched_paths: Iterable[str] = (), touched_tools: Iterable[str] = ()
) -> list[Rule]:
    """The rules to inject: unscoped ones always, scoped ones only when in scope.

    Hard and soft rules are both injected (hard rules are also enforced); input order is
    kept.
    """
    paths = list(touched_paths)
    tools = list(touched_tools)
    return [rule for rule in rules if rule.applies_to(paths, tools)]


def check_tool_call(
    rules: Sequence[Rule], tool_name: str, arguments: Mapping[str, Any]
) -> list[Violation]:
    """The hard rules a tool call would break, in rule order (one violation per rule).

    Run by the caller before the tool executes (seed 001 §6 problem 4: hard constraints
    are intercepted by the system).  See the module doc for the exact heuristic.

    Args:
        rules: all rules in force (soft and situational ones are ignored).
        tool_name: the tool about to run.
        arguments: its arguments as the model sent them.
    """
    paths = touched_paths(arguments)
    text = "\n".join(_strings(arguments))
    modifying = is_modifying_call(tool_name, arguments)
    violations: list[Violation] = []
    for rule in rules:
        if rule.strength != "hard":
            continue
        if rule.scope_tools and not any(tool_matches(t, tool_name) for t in rule.scope_tools):
            continue
        if rule.restricts == "writes" and not modifying:
            continue
        found = _check_rule(rule, tool_name, paths, text, modifying)
        if found is not None:
            violations.append(found)
    return violations


def _check_rule(
    rule: Rule, tool_name: str, paths: Sequence[str], text: str, modifying: bool
) -> Violation | None:
    def violation(reason: str, matched: str) -> Violation:
        return Violation(rule_id=rule.id, reason=reason, rule_text=rule.text, matched=matched)

    if rule.allowed_paths:
        if not modifying:
            return None
        outside = [p for p in paths if not any(path_matches(a, p) for a in rule.allowed_paths)]
        if outside:
            allowed = ", ".join(rule.allowed_paths)
            return violation(f"{outside[0]} is outside the allowed paths ({allowed})", outside[0])
        return None
    if rule.scope_paths:
        for path in paths:
            pattern = next((s for s in rule.scope_paths if path_matches(s, path)), None)
            if pattern is not None:
                return violation(f"{path} is in the scope {pattern} of a hard rule", path)
        return None
    spans = rule.code_spans
    span = next((s for s in spans if s in text), None)
    if span is not None:
        return violation(f"the call contains `{span}`, forbidden by a hard rule", span)
    if rule.scope_tools and not spans:
        return violation(f"tool {tool_name} is forbidden by a hard rule", tool_name)
    return None


# --- user constraints ---------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")
_PATH_TOKEN = re.compile(r"^[`'\"「(]*(?P<p>[\w.*\-][\w./*\-]*)[`'\"」).,;:!]*$")
_STOPWORDS = frozenset({"the", "this", "that", "these", "those", "a", "an", "my", "our"})


def split_sentences(text: str) -> list[str]:
    """Split a message into sentences: per line (outside code fences), then at ``. ! ?``
    followed by space and after ``。！？``.  Sentences are stripped, otherwise verbatim."""
    out: list[str] = []
    in_fence = False
    for line in text.splitlines():
        if line.strip().startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        out.extend(s.strip() for s in _SENTENCE_END.split(line) if s.strip())
    return out


def _glob_for(token: str) -> str | None:
    found = _PATH_TOKEN.match(token)
    if found is None:
        return None
    path = found.group("p").rstrip(".")
    if not path or path.casefold() in _STOPWORDS:
        return None
    if "/" not in path and "*" not in path and "." not in path:
        return None
    if "*" in path:
        return path
    return path.rstrip("/") + "/**"


def _target_globs(sentence: str) -> tuple[str, ...]:
    found = EN_TARGET.search(sentence)
    if found is not None:
        for token in found.group("rest").split():
            if token.casefold() in _STOPWORDS:
                continue
            glob = _glob_for(token)
            if glob is not None:
                return (glob,)
            if token.casefold() not in ("files", "file", "code", "folder", "directory"):
                break
        return ()
    for pattern in (JA_TARGET, ZH_TARGET):
        found_path = pattern.search(sentence)
        if found_path is not None:
            glob = _glob_for(found_path.group("path"))
            return (glob,) if glob is not None else ()
    return ()


def extract_user_constraints(
    text: str,
    *,
    message_id: str,
    source_kind: SourceKind = "user_message",
    order: int = 0,
) -> list[Rule]:
    """User constraints stated in a message, one :class:`Rule` per constraint (in text order).

    Which sentences are constraints, and which earlier sentence gives one its scope, is
    decided by :func:`~contextledger.policy.constraint_text.constraint_passages`: only the
    user's own prose (never client-injected blocks, code, logs, block quotes, quoted
    e-mails or quoted text), never questions, and only prohibitions, obligations, approval
    gates, target paths and request limits that are about the work (never chit-chat) — in
    English, Japanese and Chinese.

    Each rule keeps its passage verbatim and is ``pinned`` with authority ``user`` and
    ``source = source_message_id = message_id``.  A constraint that names its own target
    path (``only change files under src/api/`` -> ``allowed_paths=("src/api/**",)``) or none
    is ``hard`` (seed 001 §10: explicit user requirements are hard constraints of every
    handoff).  A constraint that borrows its scope from an earlier sentence ("In
    CONVENTIONS.md, reorder the lists. DO NOT CHANGE the contents.") keeps that sentence in
    its text, has ``scope_paths``/``scope_tools`` from it and is ``situational``: what it
    forbids inside the scope cannot be checked mechanically, so it is injected, not
    enforced.  With an untrusted ``source_kind`` (``tool_output``, ``imported_text``) the
    rules are capped: authority at most ``retrieval``, soft, not pinned — whatever the text
    claims.

    Args:
        text: the message text.
        message_id: id of the message (``Rule.source`` and ``source_message_id``).
        source_kind: where the text came from.
        order: ``Rule.order`` of every rule (the message's sequence number).
    """
    rules: list[Rule] = []
    for passage in constraint_passages(text):
        sentence = passage.sentence
        claimed = claimed_authority(passage.text)
        scoped = bool(passage.scope_paths or passage.scope_tools)
        rules.append(
            Rule(
                id="",
                text=passage.text,
                authority=claimed if claimed is not None else authority_for_source(source_kind),
                strength="situational" if scoped else "hard",
                scope_paths=passage.scope_paths,
                scope_tools=passage.scope_tools,
                allowed_paths=_target_globs(sentence),
                restricts="writes" if write_restricting(sentence) else "any",
                source=message_id,
                source_kind=source_kind,
                source_message_id=message_id,
                pinned=True,
                order=order,
            )
        )
    return rules
