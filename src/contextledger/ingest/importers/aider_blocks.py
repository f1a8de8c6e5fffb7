"""Edit blocks and reasoning in Aider replies.

Aider's coders ask the model for edits in one of its *edit formats* and apply what they
find in the reply:

* ``diff`` / ``diff-fenced`` / ``editor-diff``: SEARCH/REPLACE blocks — a file name line
  (or, for ``diff-fenced``, the first line inside the fence), then ``<<<<<<< SEARCH``,
  the lines to find, ``=======``, the replacement, ``>>>>>>> REPLACE``; an empty SEARCH
  part creates the file;
* ``whole`` / ``editor-whole``: a file name line followed by a fenced block holding the
  file's whole new content;
* ``udiff``: fenced ``diff`` blocks with ``--- path`` / ``+++ path`` headers and hunks.

The file name rules follow Aider's: up to three lines before the block are looked at,
fence lines are skipped unless they carry the name, and ``#``, ``*``, backticks and a
trailing ``:`` are stripped.  Reasoning that Aider wrapped in ``<thinking-content-…>``
tags (or ``<think>``) is split off first, so a block quoted while thinking is never taken
for an edit.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

__all__ = ["EditBlock", "find_edit_blocks", "split_thinking"]

_THINKING = re.compile(r"<(thinking-content-[0-9a-f]+|think)>(.*?)(?:</\1>|\Z)", re.S)
_HEAD = re.compile(r"^\s*<{5,9} SEARCH>?\s*$")
_DIVIDER = re.compile(r"^\s*={5,9}\s*$")
_UPDATED = re.compile(r"^\s*>{5,9} REPLACE\s*$")
_FENCE = re.compile(r"^\s*(```+|~~~+)(.*)$")
_MAX_NAME = 250


@dataclass(frozen=True)
class EditBlock:
    """One edit found in a reply.

    Attributes:
        tool: ``aider_search_replace``, ``aider_whole_file`` or ``aider_udiff``.
        path: the file it edits.
        search / replace: the SEARCH and REPLACE parts (SEARCH/REPLACE blocks).
        content: the whole new file (whole-file blocks).
        diff: the unified diff of one file (udiff blocks).
    """

    tool: str
    path: str
    search: str | None = None
    replace: str | None = None
    content: str | None = None
    diff: str | None = None

    def arguments_json(self) -> str:
        """The call arguments: ``path`` plus the block's own fields, compact JSON."""
        fields = {"path": self.path, "search": self.search, "replace": self.replace, "content": self.content, "diff": self.diff}
        return json.dumps({k: v for k, v in fields.items() if v is not None}, ensure_ascii=False, separators=(",", ":"))


def split_thinking(text: str) -> tuple[list[str], str]:
    """``(reasoning texts, reply without them)``; an unclosed tag runs to the end."""
    thoughts = [m.group(2).strip("\n") for m in _THINKING.finditer(text)]
    return [t for t in thoughts if t.strip()], _THINKING.sub("", text).strip("\n")


def _strip_name(line: str) -> str | None:
    name = line.strip()
    if not name or name == "...":
        return None
    fence = _FENCE.match(name)
    if fence:
        rest = fence.group(2).strip()
        return rest if rest and ("." in rest or "/" in rest) and " " not in rest else None
    name = name.rstrip(":").lstrip("#").strip().strip("`").strip("*").strip()
    if not name or len(name) > _MAX_NAME or " " in name:
        return None
    return name


def _name_before(lines: list[str], index: int) -> str | None:
    for line in reversed(lines[max(0, index - 3):index]):
        if _FENCE.match(line) and _strip_name(line) is None:
            continue
        return _strip_name(line)
    return None


def _search_replace(lines: list[str]) -> list[EditBlock]:
    blocks: list[EditBlock] = []
    current: str | None = None
    i = 0
    while i < len(lines):
        if not _HEAD.match(lines[i]):
            i += 1
            continue
        name = _name_before(lines, i) or current
        j = i + 1
        while j < len(lines) and not _DIVIDER.match(lines[j]):
            j += 1
        k = j + 1
        while k < len(lines) and not _UPDATED.match(lines[k]):
            k += 1
        if j >= len(lines) or k >= len(lines) or name is None:
            i += 1  # an unfinished or unnamed block is prose, not an edit
            continue
        current = name
        search, replace = "\n".join(lines[i + 1:j]), "\n".join(lines[j + 1:k])
        blocks.append(EditBlock("aider_search_replace", name, search=search, replace=replace))
        i = k + 1
    return blocks


def _fenced(lines: list[str]) -> list[tuple[int, str, list[str]]]:
    """``(opening line index, info string, body lines)`` of every fenced block."""
    out: list[tuple[int, str, list[str]]] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(opening.group(1)) and not lines[j].strip()[len(opening.group(1)):].strip()):
            j += 1
        out.append((i, opening.group(2).strip(), lines[i + 1:j]))
        i = j + 1
    return out


def _whole_files(lines: list[str]) -> list[EditBlock]:
    blocks: list[EditBlock] = []
    for start, info, body in _fenced(lines):
        name = _strip_name(lines[start - 1]) if start > 0 else None
        if name is None and info and " " not in info and ("." in info or "/" in info):
            name = info
        if name is not None and not any(_HEAD.match(b) for b in body):
            blocks.append(EditBlock("aider_whole_file", name, content="\n".join(body) + ("\n" if body else "")))
    return blocks


def _udiffs(lines: list[str]) -> list[EditBlock]:
    blocks: list[EditBlock] = []
    for _, info, body in _fenced(lines):
        if info not in ("diff", "patch", ""):
            continue
        starts = [i for i, line in enumerate(body) if line.startswith("--- ") and i + 1 < len(body) and body[i + 1].startswith("+++ ")]
        for n, s in enumerate(starts):
            end = starts[n + 1] if n + 1 < len(starts) else len(body)
            new = body[s + 1][4:].strip()
            old = body[s][4:].strip()
            path = old if new == "/dev/null" else new
            path = path[2:] if path.startswith(("a/", "b/")) else path
            blocks.append(EditBlock("aider_udiff", path, diff="\n".join(body[s:end])))
    return blocks


def find_edit_blocks(reply: str, edit_format: str = "") -> list[EditBlock]:
    """The edit blocks of ``reply`` for Aider's ``edit_format`` (``""`` when unknown:
    SEARCH/REPLACE blocks only), in reply order."""
    lines = reply.split("\n")
    if edit_format in ("whole", "editor-whole"):
        return _whole_files(lines)
    if edit_format.startswith("udiff"):
        return _udiffs(lines)
    return _search_replace(lines)
