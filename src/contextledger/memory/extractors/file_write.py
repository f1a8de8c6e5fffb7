"""File writes, edits and patches: path, diff stats, the diff itself when small.

Seed 001 §4.4 "Diff" shape ("ファイル全体よりコード変更が重要なとき").  A write makes every
earlier read of the same path stale (:func:`contextledger.memory.links.file_staleness`).

Recognised: Claude Code ``Edit`` / ``MultiEdit`` / ``Write`` (update) / ``NotebookEdit``,
OpenHands ``str_replace_editor`` ``str_replace`` / ``insert`` / ``undo_edit``, SWE-agent
``edit N:M`` text actions, Codex ``apply_patch``.

Payload keys: ``path``, ``paths`` (every file touched), ``operation``, ``applied`` (False
when the tool rejected the edit), ``added_lines``, ``removed_lines`` (None when unknown),
``new_content_sha256`` (when the full new content is known), ``diff`` (unified diff text
when at most :data:`MAX_DIFF_LINES` lines, else None), ``diff_lines``.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from contextledger.memory.extractors.actions import resolve_action
from contextledger.memory.extractors.base import Extraction, ToolInput
from contextledger.memory.extractors.errorscan import find_error
from contextledger.memory.extractors.textutil import (
    body_ranges,
    cap,
    normalise_path,
    sha256_text,
    split_lines,
    unwrap,
)
from contextledger.records.enums import ConfidenceBasis, ContextKind, FreshnessClass, Shape

__all__ = ["MAX_DIFF_LINES", "FileWriteExtractor"]

MAX_DIFF_LINES = 40
"""Largest diff (lines) kept inline in the payload."""

_PATCH_FILE = re.compile(r"^\*\*\* (Update|Add|Delete) File: (.+)$")
_SWE_EDIT = re.compile(r"^edit (\d+):(\d+)")
_SWE_HEADER = re.compile(r"^\[File: (.+?) \((\d+) lines total\)\]$", re.M)
_REJECTED = (
    "Your proposed edit has introduced new syntax error",
    "No replacement was performed",
    "String to replace not found",
    "did not appear verbatim",
    "Found 0 matches",
)


def _unified(path: str, old: str, new: str) -> list[str]:
    return list(
        difflib.unified_diff(
            old.splitlines(),
            new.splitlines(),
            fromfile=f"a/{path}",
            tofile=f"b/{path}",
            lineterm="",
            n=1,
        )
    )


def _stats(diff: list[str]) -> tuple[int, int]:
    added = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
    removed = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
    return added, removed


def _edit_pairs(args: dict[str, Any]) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    edits = args.get("edits")
    if isinstance(edits, list):
        for e in edits:
            if isinstance(e, dict):
                pairs.append((str(e.get("old_string", "")), str(e.get("new_string", ""))))
        return pairs
    old = args.get("old_string", args.get("old_str"))
    new = args.get("new_string", args.get("new_str", args.get("new_source")))
    if isinstance(old, str) or isinstance(new, str):
        pairs.append((old if isinstance(old, str) else "", new if isinstance(new, str) else ""))
    return pairs


class FileWriteExtractor:
    """Extractor for edits, writes of existing files and patches."""

    name = "file_write"

    def matches(self, item: ToolInput) -> bool:
        """True for write actions and for ``Write`` calls that updated an existing file."""
        action = resolve_action(item)
        if action.verb == "write":
            return True
        return (
            action.verb == "create"
            and action.sub in ("write", "write_file")
            and (
                "has been updated" in item.result_text[:300]
                or "has been overwritten" in item.result_text[:300]
            )
        )

    def extract(self, item: ToolInput) -> Extraction:
        """The write extract of ``item`` (shape ``diff``)."""
        action = resolve_action(item)
        args = item.arguments or {}
        body = unwrap(item.result_text)
        raw_args = item.arguments_json
        operation = action.sub or "edit"
        paths: list[str] = []
        diff: list[str] = []
        added: int | None = None
        removed: int | None = None
        new_hash: str | None = None
        confidence = 1.0
        if operation == "apply_patch" or raw_args.lstrip().startswith("*** Begin Patch"):
            patch = str(args.get("input", args.get("patch", raw_args))) if args else raw_args
            operation = "apply_patch"
            patch_lines = split_lines(patch)
            for line in patch_lines:
                m = _PATCH_FILE.match(line)
                if m:
                    paths.append(normalise_path(m.group(2)))
            diff = [
                ln
                for ln in patch_lines
                if not ln.startswith("*** Begin Patch") and not ln.startswith("*** End Patch")
            ]
            added, removed = _stats([ln for ln in diff if not ln.startswith("***")])
        elif operation == "edit" and action.command is not None:
            header = _SWE_HEADER.search(body.text)
            if header:
                paths.append(normalise_path(header.group(1)))
            span = _SWE_EDIT.match(action.command.strip())
            new_lines = action.command.strip().split("\n")[1:]
            if new_lines and new_lines[-1].strip() == "end_of_edit":
                new_lines = new_lines[:-1]
            if span:
                removed = int(span.group(2)) - int(span.group(1)) + 1
                added = len(new_lines)
                diff = [f"@@ -{span.group(1)},{removed} @@", *(f"+{ln}" for ln in new_lines)]
            confidence = 0.9
        elif operation in ("write", "write_file"):
            content = args.get("content", args.get("file_text"))
            path = normalise_path(str(args.get("file_path", args.get("path", ""))))
            paths.append(path)
            if isinstance(content, str):
                new_hash = sha256_text(content)
                added, removed = len(content.splitlines()), None
        else:
            path = normalise_path(action.path or str(args.get("file_path", args.get("path", ""))))
            paths.append(path)
            if operation == "insert":
                text = args.get("new_str", args.get("insert_text", ""))
                added = len(str(text).splitlines())
                removed = 0
                diff = [
                    f"@@ insert after line {args.get('insert_line')} @@",
                    *(f"+{ln}" for ln in str(text).splitlines()),
                ]
            elif operation == "undo_edit":
                added = removed = None
            else:
                for old, new in _edit_pairs(args):
                    chunk = _unified(path, old, new)
                    diff.extend(chunk if not diff else chunk[2:])
                a, r = _stats(diff)
                added, removed = a, r
        paths = [p for p in dict.fromkeys(paths) if p]
        main_path = paths[0] if paths else ""
        rejected = item.is_error or any(marker in body.text[:2000] for marker in _REJECTED)
        err = find_error(split_lines(body.text)) if rejected else None
        payload: dict[str, Any] = {
            "path": main_path,
            "paths": paths,
            "operation": operation,
            "applied": not rejected,
            "added_lines": added,
            "removed_lines": removed,
            "new_content_sha256": new_hash,
            "diff": "\n".join(diff) if diff and len(diff) <= MAX_DIFF_LINES else None,
            "diff_lines": len(diff),
        }
        stats = f"+{added if added is not None else '?'} -{removed if removed is not None else '?'}"
        where = main_path + (f" (+{len(paths) - 1} files)" if len(paths) > 1 else "")
        if rejected:
            summary = f"{operation} {where} rejected\n{err.error_line if err else cap(body.text.strip().splitlines()[0] if body.text.strip() else 'no output')}"
        else:
            summary = f"{operation} {where} {stats}"
            if new_hash:
                summary += f" · {new_hash[:19]}"
        prov_lines, prov_bytes = body_ranges(item.result_text, body)
        return Extraction(
            kind="file_write",
            summary=summary,
            payload=payload,
            shape=Shape.DIFF,
            context_kind=ContextKind.RECOVERY if rejected else ContextKind.OPERATIONAL,
            freshness_class=FreshnessClass.SESSION,
            subject_key=f"file:{main_path}" if main_path else None,
            revalidation_tool=None,
            revalidation_args={},
            confidence=confidence,
            confidence_basis=ConfidenceBasis.DETERMINISTIC_PARSE
            if confidence == 1.0
            else ConfidenceBasis.HEURISTIC,
            limits=(
                f"diff of {len(diff)} lines not inlined (limit {MAX_DIFF_LINES})"
                if len(diff) > MAX_DIFF_LINES
                else None
            ),
            error_type=(err.error_type if err else "rejected") if rejected else None,
            line_range=prov_lines,
            byte_range=prov_bytes,
        )
