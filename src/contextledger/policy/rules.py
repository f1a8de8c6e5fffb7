"""Rules: hard, soft and situational constraints, and the project rule files they come from.

Seed 001 §6 problem 4 classifies rules as

* **hard** — the runtime must intercept or ask for approval
  (:func:`contextledger.policy.constraints.check_tool_call`);
* **soft** — injected into context, the model decides;
* **situational** — injected only when the target path, tool or task matches.

A :class:`Rule` is one statement, kept verbatim, with its authority (seed 001 §4.2), its
scope (path globs and tool names) and where it came from.  Scope and strength are
separate: a scoped rule with an explicit hard marker stays ``"hard"`` (enforced only in
scope); a scoped rule without one is ``"situational"``.

Project rule files (:func:`load_rule_files`):

* ``AGENTS.md`` and ``CLAUDE.md`` at the project root apply everywhere;
* the same files in a sub-folder apply only to paths under that folder (scope
  ``"<folder>/**"``) and are loaded only when a touched path is under it;
* ``.contextledger/rules/*.md`` files may start with front matter lines
  ``paths: src/api/**`` and/or ``tools: Bash`` (comma separated, optionally between
  ``---`` fences); such a file is loaded only when a touched path/tool matches.

Line heuristic (:func:`is_constraint_line`, :func:`classify_strength`): every bullet or
line outside code fences, headings and HTML comments that contains a constraint word
(``must``, ``never``, ``do not``, ``don't``, ``always``, ``only``, ``should``, ``avoid``,
``prefer``, ``required``, ``forbidden``, ``禁止``, ``しない``, ``必ず``, ``べき`` …)
becomes one rule.  It is hard when it carries an explicit marker — ``[hard]``
(any case), the upper-case RFC 2119 words ``MUST``, ``MUST NOT``, ``SHALL NOT``,
``NEVER``, ``DO NOT``, or ``厳禁`` / ``絶対`` — and ``[soft]`` forces soft.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from contextledger.errors import PolicyError
from contextledger.policy.authority import (
    UNTRUSTED_SOURCES,
    SourceKind,
    authority_for_source,
    cap_authority,
)
from contextledger.records.enums import AuthorityLevel

__all__ = [
    "RULE_FILE_NAMES",
    "Rule",
    "RuleStrength",
    "claimed_authority",
    "classify_strength",
    "is_constraint_line",
    "load_rule_files",
    "parse_rule_text",
    "path_matches",
    "rule_id",
    "scope_applies",
    "tool_matches",
    "write_restricting",
]

RuleStrength = Literal["hard", "soft", "situational"]

RULE_FILE_NAMES: tuple[str, ...] = ("AGENTS.md", "CLAUDE.md")
"""Project rule files, read at the root and in sub-folders."""

_RULES_DIR = (".contextledger", "rules")
_SKIP_DIRS = frozenset({"node_modules", "__pycache__", "venv", "dist", "build", "target"})


def rule_id(source: str, text: str) -> str:
    """Deterministic id: ``"rule_"`` + first 16 hex of sha256(source + newline + text)."""
    return "rule_" + hashlib.sha256(f"{source}\n{text}".encode()).hexdigest()[:16]


_NEGATIONS = re.compile(
    r"\b(?:do\s+not|don't|don’t|does\s+not|doesn't|never|must\s+not|mustn't|shall\s+not|"
    r"should\s+not|shouldn't|not|no|avoid)\b|しないで(?:ください)?|しない|禁止|してはいけない",
    re.IGNORECASE,
)
_MARKER_TAGS = re.compile(r"\[(?:hard|soft)\]", re.IGNORECASE)
_NON_WORD = re.compile(r"[^\w\s/.*-]+")
_SPACES = re.compile(r"\s+")


def _normalise(text: str) -> str:
    text = _MARKER_TAGS.sub(" ", text).casefold()
    text = _NON_WORD.sub(" ", text)
    return _SPACES.sub(" ", text).strip(" .")


class Rule(BaseModel):
    """One rule or claim with its authority and scope (seed 001 §4.2, §6 problem 4).

    Attributes:
        id: ``rule_id(source, text)``; filled in when not given (or empty).
        text: the statement, verbatim.
        authority: its level in the authority chain; never above the ceiling of
            ``source_kind`` (capped on construction, see
            :func:`~contextledger.policy.authority.cap_authority`).  When not given it
            is that ceiling (the declared default is only a placeholder, always replaced).
        strength: ``"hard"`` (runtime-enforced), ``"soft"`` (injected) or
            ``"situational"`` (injected only in scope).  Rules from untrusted sources
            (tool output, imported text) are never hard and never pinned.
        scope_paths: path globs (``**`` spans folders) the rule is about; empty = any.
        scope_tools: tool-name globs the rule is about; empty = any.
        allowed_paths: target-path constraint: writes outside these globs violate it.
        restricts: ``"writes"`` when the rule only concerns modifying calls (its text
            speaks of editing, writing, deleting …), else ``"any"``.
        source: ``"<relative file>:<line>"`` or a message id.
        source_kind: where the text came from.
        source_message_id: the message that stated it, for conversation rules.
        pinned: re-emitted verbatim in every request, after any compaction.
        conflict_key: explicit topic for conflict detection; see :attr:`topic`.
        order: recency; larger is newer (message seq, or load order for files).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = ""
    text: str
    authority: AuthorityLevel = AuthorityLevel.OLD_CONVERSATION  # replaced on validation
    strength: RuleStrength
    scope_paths: tuple[str, ...] = ()
    scope_tools: tuple[str, ...] = ()
    allowed_paths: tuple[str, ...] = ()
    restricts: Literal["any", "writes"] = "any"
    source: str
    source_kind: SourceKind
    source_message_id: str | None = None
    pinned: bool = False
    conflict_key: str | None = None
    order: int = 0

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        kind = data.get("source_kind")
        if kind not in (
            "system",
            "organization",
            "project_file",
            "user_message",
            "task_state",
            "tool_output",
            "imported_text",
            "memory",
            "summary",
        ):
            return data  # field validation reports it
        claimed = data.get("authority")  # absent -> the ceiling of the source kind
        claimed_level = authority_for_source(kind) if claimed is None else AuthorityLevel(claimed)
        data["authority"] = cap_authority(claimed_level, kind)
        if kind in UNTRUSTED_SOURCES:
            if data.get("strength") == "hard":
                data["strength"] = "soft"
            data["pinned"] = False
        if not data.get("id") and isinstance(data.get("text"), str):
            data["id"] = rule_id(str(data.get("source", "")), data["text"])
        return data

    @property
    def scoped(self) -> bool:
        """True when the rule is limited to some paths or tools."""
        return bool(self.scope_paths or self.scope_tools)

    @property
    def claim(self) -> str:
        """The normalised text (case, punctuation and spacing folded)."""
        return _normalise(self.text)

    @property
    def topic(self) -> str:
        """The conflict group: ``conflict_key`` if set, else the claim without negations.

        "Use Redis." and "Do not use Redis" share the topic ``"use redis"``.
        """
        if self.conflict_key:
            return self.conflict_key
        return _SPACES.sub(" ", _NEGATIONS.sub(" ", self.claim)).strip()

    @property
    def code_spans(self) -> tuple[str, ...]:
        """Back-quoted spans of the text (commands or paths the rule names)."""
        return tuple(s for s in re.findall(r"`([^`\n]+)`", self.text) if s.strip())

    def applies_to(self, touched_paths: Iterable[str], touched_tools: Iterable[str]) -> bool:
        """True when the rule is unscoped, or every scope dimension it has matches.

        A rule with both ``scope_paths`` and ``scope_tools`` needs a matching path *and*
        a matching tool.
        """
        return scope_applies(self.scope_paths, self.scope_tools, touched_paths, touched_tools)


# --- globs --------------------------------------------------------------------------

_GLOB_CACHE: dict[str, re.Pattern[str]] = {}


def _glob_regex(pattern: str) -> re.Pattern[str]:
    compiled = _GLOB_CACHE.get(pattern)
    if compiled is not None:
        return compiled
    out = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("(?:/.*)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        out.append("[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char))
        i += 1
    compiled = re.compile("".join(out), re.DOTALL)
    _GLOB_CACHE[pattern] = compiled
    return compiled


def _clean_path(path: str) -> str:
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path.rstrip("/") if len(path) > 1 else path


def path_matches(pattern: str, path: str) -> bool:
    """Glob match of a file path: ``*`` within a folder, ``**`` across folders.

    ``"dir/**"`` matches ``dir`` and everything below it.  A relative pattern also
    matches at any folder boundary of an absolute or longer path, so ``"generated/**"``
    matches ``"/repo/generated/api.py"``.
    """
    regex = _glob_regex(_clean_path(pattern))
    path = _clean_path(path)
    if regex.fullmatch(path):
        return True
    if pattern.startswith("/"):
        return False
    parts = path.split("/")
    return any(regex.fullmatch("/".join(parts[i:])) for i in range(1, len(parts)))


def scope_applies(
    scope_paths: Sequence[str],
    scope_tools: Sequence[str],
    touched_paths: Iterable[str],
    touched_tools: Iterable[str],
) -> bool:
    """True when every non-empty scope dimension matches a touched path / tool."""
    if scope_paths and not any(path_matches(p, t) for t in touched_paths for p in scope_paths):
        return False
    return not scope_tools or any(tool_matches(p, t) for t in touched_tools for p in scope_tools)


def tool_matches(pattern: str, tool_name: str) -> bool:
    """Case-insensitive glob match of a tool name (``"mcp__github__*"``)."""
    return _glob_regex(pattern.casefold()).fullmatch(tool_name.casefold()) is not None


# --- line heuristics ------------------------------------------------------------------

_CONSTRAINT_WORDS = re.compile(
    r"\b(?:must|mustn't|never|do\s+not|don't|don’t|always|only|should|shouldn't|shall|"
    r"avoid|prefer|required?|forbidden|prohibited|not\s+allowed)\b"
    r"|禁止|しない|してはいけない|してはならない|ないこと|ないで|必ず|べき|厳禁|絶対",
    re.IGNORECASE,
)
_HARD_MARKERS = re.compile(
    r"\[hard\]|(?-i:\bMUST(?:\s+NOT)?\b|\bSHALL\s+NOT\b|\bNEVER\b|\bDO\s+NOT\b)|厳禁|絶対",
    re.IGNORECASE,
)
_SOFT_MARKER = re.compile(r"\[soft\]", re.IGNORECASE)
_WRITE_WORDS = re.compile(
    r"\b(?:modify|modifies|modifying|edit|edits|editing|change|changes|changing|write|"
    r"writes|writing|overwrite|delete|deleting|remove|removing|touch|rename|move|"
    r"regenerate|hand-edit|patch)\b|変更|編集|書き換|削除|修正|更新",
    re.IGNORECASE,
)
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?")
_CLAIMED = re.compile(
    r"^\W*(system|organi[sz]ation|project(?:\s+rules?)?|developer|user)\s*[:：\]]",
    re.IGNORECASE,
)
_CLAIMED_LEVELS = {
    "system": AuthorityLevel.SYSTEM,
    "developer": AuthorityLevel.SYSTEM,
    "organisation": AuthorityLevel.ORGANIZATION,
    "organization": AuthorityLevel.ORGANIZATION,
    "project": AuthorityLevel.PROJECT,
    "user": AuthorityLevel.USER,
}


def is_constraint_line(text: str) -> bool:
    """True when ``text`` states a constraint (contains a constraint word, see module doc)."""
    return _CONSTRAINT_WORDS.search(text) is not None


def classify_strength(text: str, *, scoped: bool) -> RuleStrength:
    """``"hard"`` with an explicit hard marker, else ``"situational"`` if scoped, else soft."""
    if _HARD_MARKERS.search(text) and not _SOFT_MARKER.search(text):
        return "hard"
    return "situational" if scoped else "soft"


def write_restricting(text: str) -> bool:
    """True when the rule text speaks of modifying things (edit, write, delete, 変更 …)."""
    return _WRITE_WORDS.search(text) is not None


def claimed_authority(text: str) -> AuthorityLevel | None:
    """The level a text claims for itself with a prefix like ``"SYSTEM:"``, or ``None``.

    Only informative: the claim is always capped by the source kind.
    """
    found = _CLAIMED.match(text)
    if found is None:
        return None
    return _CLAIMED_LEVELS[found.group(1).split()[0].casefold()]


def parse_rule_text(
    text: str,
    *,
    source_path: str,
    source_kind: SourceKind = "project_file",
    scope_paths: Sequence[str] = (),
    scope_tools: Sequence[str] = (),
    first_line: int = 1,
    first_order: int = 0,
) -> list[Rule]:
    """Turn every constraint line of a rule document into a :class:`Rule`.

    Skips code fences, headings, HTML comments, blank lines and lines without a
    constraint word.  The bullet marker is removed; the rest of the line is kept verbatim.

    Args:
        text: the document.
        source_path: file path used in ``Rule.source`` (``"<path>:<line>"``).
        source_kind: decides authority (project files: ``project``; tool output and
            imported text: at most ``retrieval``, whatever the line claims).
        scope_paths / scope_tools: the scope of the whole document.
        first_line: line number of the first line of ``text`` in its file.
        first_order: ``order`` of the first rule; later rules count up from it.
    """
    rules: list[Rule] = []
    in_fence = False
    in_comment = False
    scoped = bool(scope_paths or scope_tools)
    for offset, line in enumerate(text.splitlines()):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_comment:
            in_comment = "-->" not in stripped
            continue
        if stripped.startswith("<!--"):
            in_comment = "-->" not in stripped
            continue
        if in_fence or not stripped or stripped.startswith("#"):
            continue
        statement = _BULLET.sub("", line).strip()
        if not statement or not is_constraint_line(statement):
            continue
        claimed = claimed_authority(statement)
        rules.append(
            Rule(
                id="",
                text=statement,
                authority=claimed if claimed is not None else authority_for_source(source_kind),
                strength=classify_strength(statement, scoped=scoped),
                scope_paths=tuple(scope_paths),
                scope_tools=tuple(scope_tools),
                restricts="writes" if write_restricting(statement) else "any",
                source=f"{source_path}:{first_line + offset}",
                source_kind=source_kind,
                order=first_order + len(rules),
            )
        )
    return rules


# --- rule files ---------------------------------------------------------------------


def _split_list(value: str) -> list[str]:
    value = value.strip().strip("[]")
    return [v.strip().strip("'\"") for v in value.split(",") if v.strip().strip("'\"")]


def _front_matter(text: str) -> tuple[list[str], list[str], int]:
    """Return ``(paths, tools, number of lines consumed)`` of a rule file's front matter.

    Front matter is either a block between ``---`` lines or the leading lines of the
    form ``paths: …`` / ``tools: …`` (YAML-style ``- item`` continuation lines allowed).
    An unclosed ``---`` block is not front matter.
    """
    lines = text.splitlines()
    paths: list[str] = []
    tools: list[str] = []
    fenced = bool(lines) and lines[0].strip() == "---"
    index = 1 if fenced else 0
    current: list[str] | None = None
    while index < len(lines):
        stripped = lines[index].strip()
        if fenced and stripped == "---":
            return paths, tools, index + 1
        key, sep, value = stripped.partition(":")
        if sep and key.strip().casefold() in ("paths", "tools"):
            current = paths if key.strip().casefold() == "paths" else tools
            current.extend(_split_list(value))
        elif current is not None and stripped.startswith("- "):
            current.extend(_split_list(stripped[2:]))
        elif not fenced and stripped:
            break
        else:
            current = None
        index += 1
    if fenced:
        return [], [], 0
    return paths, tools, index


def _read(path: Path, root: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError(
            f"rule file is not UTF-8 (byte {exc.start})", None, path.relative_to(root).as_posix()
        ) from exc


def _relative_touched(root: Path, touched_paths: Sequence[str]) -> list[str]:
    out = []
    resolved_root = root.resolve().as_posix().rstrip("/") + "/"
    for path in touched_paths:
        clean = path.replace("\\", "/")
        if clean.startswith(resolved_root):
            clean = clean[len(resolved_root) :]
        elif clean.startswith(root.as_posix().rstrip("/") + "/"):
            clean = clean[len(root.as_posix().rstrip("/")) + 1 :]
        out.append(clean)
    return out


def _sub_folder_rule_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS)
        if Path(dirpath) == root:
            continue
        found.extend(Path(dirpath) / name for name in RULE_FILE_NAMES if name in filenames)
    return found


def load_rule_files(
    root: Path, touched_paths: Sequence[str] = (), touched_tools: Sequence[str] = ()
) -> list[Rule]:
    """Load the project rules that apply to this request (seed 001 §6 problem 4).

    Order: root ``AGENTS.md`` then ``CLAUDE.md``; sub-folder rule files in sorted folder
    order (loaded only when a touched path is under the folder); then
    ``.contextledger/rules/*.md`` sorted by name (loaded when unscoped or when their
    front matter matches).  Authority is ``project``; ``Rule.source`` is
    ``"<path relative to root>:<line>"``; ``order`` counts up across all files.

    Args:
        root: the project root.
        touched_paths: paths the current task touches (relative to ``root`` or absolute
            below it).
        touched_tools: tool names the current task uses.

    Raises:
        PolicyError: a rule file is not UTF-8.
    """
    touched = _relative_touched(root, touched_paths)
    rules: list[Rule] = []

    def add(
        path: Path,
        text: str,
        scope_paths: Sequence[str],
        scope_tools: Sequence[str],
        first_line: int,
    ) -> None:
        rules.extend(
            parse_rule_text(
                text,
                source_path=path.relative_to(root).as_posix(),
                scope_paths=scope_paths,
                scope_tools=scope_tools,
                first_line=first_line,
                first_order=len(rules),
            )
        )

    for name in RULE_FILE_NAMES:
        path = root / name
        if path.is_file():
            add(path, _read(path, root), (), (), 1)

    for path in _sub_folder_rule_files(root):
        folder = PurePosixPath(path.parent.relative_to(root).as_posix())
        scope = (f"{folder}/**",)
        if any(path_matches(scope[0], t) for t in touched):
            add(path, _read(path, root), scope, (), 1)

    rules_dir = root.joinpath(*_RULES_DIR)
    if rules_dir.is_dir():
        for path in sorted(rules_dir.glob("*.md")):
            text = _read(path, root)
            paths, tools, consumed = _front_matter(text)
            if scope_applies(paths, tools, touched, touched_tools):
                body = "\n".join(text.splitlines()[consumed:])
                add(path, body, paths, tools, consumed + 1)
    return rules
