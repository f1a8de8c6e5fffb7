"""File writes, edits, patches and deletions: path, diff stats and the change itself.

Seed 001 §4.4 "Diff" shape ("ファイル全体よりコード変更が重要なとき").  A write makes every
earlier read of the same path stale (:func:`contextledger.memory.links.file_staleness`).

Recognised through the tool registry (:mod:`~contextledger.memory.dialects`):
every ``edit`` / ``insert`` / ``patch`` / ``undo_edit`` / ``delete`` kind, a ``write`` that
replaced an existing file (the result says so: "has been updated", "overwrote",
"Applied edit to" …), SWE-agent ``edit N:M`` text actions and shell commands that write
files (:mod:`~contextledger.memory.extractors.shell_writes`).

Payload keys: ``path``, ``paths`` (every file touched), ``operation``, ``applied`` (False
when the tool rejected the edit; a shell command only when the call was refused before it
ran, :func:`~contextledger.memory.extractors.write_failures.call_refused`), ``command_failed``
(a shell command that ran and failed: its redirections and ``tee`` files were written all
the same: the summary ends "(command failed)"), ``not_written`` (the files its output
says it could not open, :func:`~contextledger.memory.extractors.write_failures.unopened_paths`:
left out of ``paths``; when that is every file, ``applied`` is False and the summary says
"not written"), ``added_lines``, ``removed_lines`` (None when unknown),
``new_content_sha256`` (when the full new content is known), ``diff`` (the unified diff,
cut to the :class:`ChangeLimits`; None when there is none), ``diff_lines`` (its full
length), ``new_text`` (the newest text of the edited region: the new side of every edit,
the ``+`` lines of a patch, a write's content, a sed expression; cut to the limits),
``new_text_lines`` (its full length) and ``new_text_omitted`` (lines left out, to be
read from the recorded call); for a shell command that writes files, ``command``, and
when it makes several writes, ``effects`` (one phrase each, ``"deleted x"``, ``"wrote
t.js"``, which is also the summary).  A deletion says what it deleted (``delete a.txt,
b.txt``) and carries no line counts.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass
from typing import Any

from contextledger.memory.dialects import unified_diff_paths
from contextledger.memory.extractors.actions import Action, resolve_action
from contextledger.memory.extractors.base import Extraction, ToolInput
from contextledger.memory.extractors.errorscan import find_error
from contextledger.memory.extractors.shell_writes import (
    MAX_DESCRIBED_PATHS,
    describe_writes,
    opened_writes,
)
from contextledger.memory.extractors.textutil import (
    body_ranges,
    byte_len,
    cap,
    count_of,
    normalise_path,
    sha256_text,
    split_lines,
    unwrap,
)
from contextledger.memory.extractors.write_failures import (
    call_refused,
    unopened_paths,
    write_failed,
)
from contextledger.records.enums import ConfidenceBasis, ContextKind, FreshnessClass, Shape

__all__ = ["ChangeLimits", "FileWriteExtractor", "bound_lines", "looks_like_patch", "overwrote_existing"]

_PATCH_FILE = re.compile(r"^\*\*\* (Update File|Add File|Delete File|Move to): (.+?)\s*$")
"""A file header of Codex's ``apply_patch`` grammar (codex-rs/apply-patch): ``*** Update
File: P`` (optionally followed by ``*** Move to: Q``, which writes Q), ``*** Add File``,
``*** Delete File``."""
_SWE_EDIT = re.compile(r"^edit (\d+):(\d+)")
_SWE_HEADER = re.compile(r"^\[File: (.+?) \((\d+) lines total\)\]$", re.M)
_SED_SUB = re.compile(r"^s(.)((?:\\.|(?!\1).)*)\1((?:\\.|(?!\1).)*)\1([gIip0-9]*)$")
_OVERWROTE = re.compile(r"has been updated|has been overwritten|[Oo]verwrote|Successfully modified|Applied edit to")


@dataclass(frozen=True, kw_only=True)
class ChangeLimits:
    """How much of a change an edit's memory carries (policy ``[edits]``).

    Attributes:
        max_lines: most lines of the diff and of the new text kept inline.
        max_bytes: most UTF-8 bytes of each; the rest stays in the recorded call.
    """

    max_lines: int = 20
    max_bytes: int = 1500


def bound_lines(lines: list[str], limits: ChangeLimits) -> tuple[list[str], int]:
    """``(the first lines within limits.max_lines and limits.max_bytes, count left out)``;
    a first line longer than the byte limit is cut to fit it, ending in ``…``."""
    kept: list[str] = []
    used = 0
    for line in lines[: limits.max_lines]:
        size = byte_len(line) + 1
        if used + size > limits.max_bytes:
            if not kept:  # one line over the byte limit: its head, cut on a character
                head = line.encode("utf-8", "surrogatepass")[: max(0, limits.max_bytes - 4)]
                kept.append(head.decode("utf-8", "ignore") + "…")
            break
        kept.append(line)
        used += size
    return kept, len(lines) - len(kept)


_DIFF_LINE = re.compile(r"^(?:\d+(?:,\d+)?[acd]\d+(?:,\d+)?|@@ .*@@.*|--- \S.*|\+\+\+ \S.*|\*\*\* Begin Patch|diff --git .*)$")


def looks_like_patch(lines: list[str]) -> bool:
    """Content that is itself a diff or patch (unified, normal ``158,163c158,163``,
    ``*** Begin Patch``): writing it changes no source text, so its lines are not shown as
    a file's new text (the old side would read as current)."""
    return sum(1 for ln in lines[:200] if _DIFF_LINE.match(ln)) >= 1 and any(ln[:1] in "<>-+" for ln in lines[:200])


def overwrote_existing(item: ToolInput) -> bool:
    """A ``write`` whose result says it replaced an existing file."""
    return bool(_OVERWROTE.search(item.result_text[:300]))


def _unified(path: str, old: str, new: str) -> list[str]:
    return list(difflib.unified_diff(old.splitlines(), new.splitlines(), fromfile=f"a/{path}", tofile=f"b/{path}", lineterm="", n=1))


def _stats_text(change: _Change) -> str:
    """``" +3 -1"``; an unknown side is ``?``; nothing when both are unknown (a write
    whose content the call does not carry)."""
    if change.added is None and change.removed is None:
        return ""
    return f" +{change.added if change.added is not None else '?'} -{change.removed if change.removed is not None else '?'}"


def _stats(diff: list[str]) -> tuple[int, int]:
    added = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
    removed = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
    return added, removed


@dataclass
class _Change:
    operation: str
    paths: list[str]
    diff: list[str]
    new_text: list[str]
    added: int | None = None
    removed: int | None = None
    new_hash: str | None = None
    confidence: float = 1.0
    effects: list[str] = dataclasses.field(default_factory=list)


def _patch_change(action: Action, raw_args: str) -> _Change:
    patch = action.patch if action.patch is not None else ("" if action.sub == "shell" else raw_args)
    lines = split_lines(patch)
    paths: list[str] = []
    deletes = 0
    for line in lines:
        m = _PATCH_FILE.match(line)
        if m:
            paths.append(normalise_path(m.group(2)))
            deletes += m.group(1) == "Delete File"
    if action.sub == "shell" and action.paths:
        paths = [normalise_path(p) for p in action.paths]  # resolved against the command's directory
    elif not paths:
        paths = [normalise_path(p) for p in (*unified_diff_paths(patch), *action.paths)]
    diff = [ln for ln in lines if not ln.startswith(("*** Begin Patch", "*** End Patch"))]
    added, removed = _stats([ln for ln in diff if not ln.startswith("***")])
    new = [ln[1:] for ln in diff if ln.startswith("+") and not ln.startswith("+++")]
    operation = "delete" if paths and deletes == len(paths) else ("apply_patch" if action.sub in ("apply_patch", "shell") or lines[:1] == ["*** Begin Patch"] else action.sub or "patch")
    return _Change(operation, paths, diff, new, added, removed)


def _swe_edit_change(action: Action, body: str) -> _Change:
    header = _SWE_HEADER.search(body)
    command = (action.command or "").strip()
    span = _SWE_EDIT.match(command)
    new_lines = command.split("\n")[1:]
    if new_lines and new_lines[-1].strip() == "end_of_edit":
        new_lines = new_lines[:-1]
    change = _Change("edit", [normalise_path(header.group(1))] if header else [], [], new_lines, confidence=0.9)
    if span:
        change.removed = int(span.group(2)) - int(span.group(1)) + 1
        change.added = len(new_lines)
        change.diff = [f"@@ -{span.group(1)},{change.removed} @@", *(f"+{ln}" for ln in new_lines)]
    return change


def _edit_change(action: Action, args: dict[str, Any]) -> _Change:
    paths = [normalise_path(p) for p in (action.paths or ((action.path,) if action.path else ()))]
    path = paths[0] if paths else ""
    operation = action.sub or action.kind
    if action.sub == "shell":
        operation = {"edit": "sed -i" if action.pattern else "append", "delete": "delete"}.get(action.kind, "shell write")
    change = _Change(operation, paths, [], [])
    if action.kind == "delete":
        return change
    if action.kind == "write" or (action.content is not None and not action.edits):
        content = action.content
        if content is not None:
            change.new_hash = sha256_text(content) if not action.append else None
            change.new_text = content.splitlines()
            change.added = len(change.new_text)
        return change
    if action.kind == "insert":
        text = action.edits[0][1] if action.edits else ""
        change.new_text = text.splitlines()
        change.added, change.removed = len(change.new_text), 0
        change.diff = [f"@@ insert after line {action.insert_line} @@", *(f"+{ln}" for ln in change.new_text)]
        return change
    if action.kind == "undo_edit":
        return change
    if action.pattern and not action.edits:
        sub = _SED_SUB.match(action.pattern.strip())
        if sub is None:
            change.new_text = [action.pattern]
            return change
        old, new = (sub.group(i).replace("\\" + sub.group(1), sub.group(1)) for i in (2, 3))
        change.diff = [f"@@ sed {action.pattern.strip()[:1]}/…/…/{sub.group(4)} @@", f"-{old}", f"+{new}"]
        change.new_text = [new]
        return change
    for old, new in action.edits:
        chunk = _unified(path, old, new)
        change.diff.extend(chunk if not change.diff else chunk[2:])
        change.new_text.extend(new.splitlines())
    change.added, change.removed = _stats(change.diff)
    return change


class FileWriteExtractor:
    """Extractor for edits, writes of existing files, patches and deletions.

    Args:
        limits: how much of the change the memory carries (default 20 lines / 1,500 bytes).
    """

    name = "file_write"

    def __init__(self, limits: ChangeLimits | None = None) -> None:
        self.limits = limits or ChangeLimits()

    def matches(self, item: ToolInput) -> bool:
        """True for write actions and for ``write`` calls that replaced an existing file."""
        action = resolve_action(item)
        if action.verb == "write":
            return True
        return action.verb == "create" and action.kind == "write" and overwrote_existing(item)

    def extract(self, item: ToolInput) -> Extraction:
        """The write extract of ``item`` (shape ``diff``)."""
        action = resolve_action(item)
        body = unwrap(item.result_text)
        if action.kind == "patch" or item.arguments_json.lstrip().startswith("*** Begin Patch"):
            change = _patch_change(action, item.arguments_json)
        elif action.kind == "edit" and action.command is not None and action.sub == "edit":
            change = _swe_edit_change(action, body.text)
        else:
            change = _edit_change(action, item.arguments or {})
        if len(action.effects) > 1:
            change.paths = [normalise_path(p) for p in action.paths]
            written, _ = opened_writes(action.effects, item.result_text) if not call_refused(item.result_text) else (action.effects, [])
            change.effects = describe_writes(written or action.effects)
        extraction = self._extraction(item, body, change, shell=action.sub == "shell")
        if action.sub == "shell" and action.command:
            extraction.payload["command"] = action.command
        return extraction

    def _extraction(self, item: ToolInput, body: Any, change: _Change, *, shell: bool = False) -> Extraction:
        paths = [p for p in dict.fromkeys(change.paths) if p]
        unopened: list[str] = []
        if shell:  # a command that ran wrote its redirections whatever its exit status
            rejected = call_refused(item.result_text)
            command_failed = not rejected and (item.is_error or write_failed(item.result_text))
            # ... except the files its output says it could not open
            unopened = unopened_paths(item.result_text, paths) if not rejected else []
            if unopened and len(unopened) == len(paths):
                rejected, command_failed = True, False
            elif unopened:
                paths = [p for p in paths if p not in unopened]
        else:
            rejected, command_failed = item.is_error or write_failed(item.result_text), False
        main_path = paths[0] if paths else ""
        err = find_error(split_lines(body.text)) if rejected or command_failed else None
        diff, diff_omitted = bound_lines(change.diff, self.limits)
        new_text, new_omitted = bound_lines(change.new_text, self.limits) if not looks_like_patch(change.new_text) else ([], len(change.new_text))
        payload: dict[str, Any] = {
            "path": main_path,
            "paths": paths,
            "operation": change.operation,
            "applied": not rejected,
            "added_lines": change.added,
            "removed_lines": change.removed,
            "new_content_sha256": change.new_hash,
            "diff": "\n".join(diff) if diff else None,
            "diff_lines": len(change.diff),
            "new_text": "\n".join(new_text) if new_text else None,
            "new_text_lines": len(change.new_text),
            "new_text_omitted": new_omitted,
        }
        if change.effects:
            payload["effects"] = change.effects
        if command_failed:
            payload["command_failed"] = True
        if unopened:
            payload["not_written"] = unopened
        where = main_path + (f" (+{count_of(len(paths) - 1, 'file')})" if len(paths) > 1 else "")
        first = body.text.strip().splitlines()[0] if body.text.strip() else "no output"
        if rejected:
            verdict = "not written" if unopened else "rejected"
            summary = f"{change.operation} {where} {verdict}\n{err.error_line if err else cap(first)}"
        elif command_failed:
            done = "; ".join(change.effects) if change.effects else f"{change.operation} {where}"
            summary = f"{done} (command failed)\n{err.error_line if err else cap(first)}"
        elif change.effects:
            summary = "; ".join(change.effects)
        elif change.operation == "delete":
            summary = "delete " + ", ".join(paths[:MAX_DESCRIBED_PATHS]) + (f" (+{len(paths) - MAX_DESCRIBED_PATHS} more)" if len(paths) > MAX_DESCRIBED_PATHS else "")
        else:
            summary = f"{change.operation} {where}{_stats_text(change)}"
            if change.new_hash:
                summary += f" · {change.new_hash[:19]}"
        prov_lines, prov_bytes = body_ranges(item.result_text, body)
        omitted = max(diff_omitted, new_omitted)
        return Extraction(
            kind="file_write",
            summary=summary,
            payload=payload,
            shape=Shape.DIFF,
            context_kind=ContextKind.RECOVERY if rejected or command_failed else ContextKind.OPERATIONAL,
            freshness_class=FreshnessClass.SESSION,
            subject_key=f"file:{main_path}" if main_path else None,
            revalidation_tool=None,
            revalidation_args={},
            confidence=change.confidence,
            confidence_basis=ConfidenceBasis.DETERMINISTIC_PARSE if change.confidence == 1.0 else ConfidenceBasis.HEURISTIC,
            limits=f"{omitted} more changed lines in the recorded call" if omitted else None,
            error_type=(err.error_type if err else (("not_written" if unopened else "rejected") if rejected else "command_failed")) if rejected or command_failed else None,
            line_range=prov_lines,
            byte_range=prov_bytes,
        )
