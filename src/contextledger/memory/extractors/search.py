"""Search, grep, glob and find results: pattern, counts, first files and matches.

Seed 001 §6 problem 2: "検索結果はまずマッチの概要を返し" — a search is represented by its
match summary; problem 3: "検索結果はあくまで手がかりとして扱い" — it is a clue, not a
current fact, so its freshness class is ``session`` (``volatile`` for web search).  The
``find . -name "*.log"`` that returned 12 MB (problem 2) becomes counts plus the first
entries; extraction is one linear pass over the lines.

Recognised: Claude Code ``Grep`` (files / content / count modes) and ``Glob``, SWE-agent
``find_file`` / ``search_file`` / ``search_dir``, OpenHands directory ``view``, shell
``find`` / ``grep`` / ``rg`` / ``fd`` …, and ``WebSearch``.

Payload keys: ``pattern``, ``root``, ``match_count`` (matches, or entries for a file
list), ``file_count``, ``files`` (≤ :data:`MAX_FILES`), ``matches`` (≤
:data:`MAX_MATCHES` of ``{"path", "line", "text"}``), ``truncated`` (the tool itself
truncated), ``exit_code``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from contextledger.memory.extractors.actions import resolve_action
from contextledger.memory.extractors.base import Extraction, ToolInput
from contextledger.memory.extractors.command import command_status
from contextledger.memory.extractors.errorscan import find_error
from contextledger.memory.extractors.textutil import (
    body_ranges,
    cap,
    count_of,
    looks_like_file,
    normalise_path,
    split_lines,
    unwrap,
)
from contextledger.records.enums import ConfidenceBasis, ContextKind, FreshnessClass, Shape

__all__ = ["MAX_FILES", "MAX_MATCHES", "SearchExtractor"]

MAX_FILES = 20
MAX_MATCHES = 10
MATCH_TEXT_CHARS = 160
FILE_ENTRY_CHARS = 200

_FOUND = re.compile(r'^Found (\d+) (?:matches|files?)(?: for "(.*)" in (.+?))?:?$')
_NO_MATCH = re.compile(r'^(?:No matches found for "(.*)" in (.+)|No (?:files|matches) found\.?)$')
_MORE_THAN = re.compile(r'^More than (\d+) files matched for "(.*)" in (.+?)\.')
_END = re.compile(r"^End of matches for ")
_SEARCH_DIR_FILE = re.compile(r"^(.+?) \((\d+) matches\)$")
_LINE_MATCH = re.compile(r"^Line (\d+):(.*)$")
_PATH_LINE = re.compile(r"^([^\s:][^:]*?):(\d+):(.*)$")
_PATH_COUNT = re.compile(r"^([^\s:][^:]*?):(\d+)$")
_TRUNCATED = re.compile(r"\(Results are truncated|results truncated|\[truncated\]", re.IGNORECASE)
_DIR_LISTING = re.compile(r"^Here's the files and directories up to \d+ levels deep in (.+?),")


def _web_search(item: ToolInput, pattern: str | None) -> dict[str, Any]:
    text = item.result_text
    links: list[dict[str, Any]] = []
    start = text.find("Links: [")
    if start != -1:
        decoder = json.JSONDecoder()
        try:
            value, _ = decoder.raw_decode(text, start + len("Links: "))
        except ValueError:
            value = []
        if isinstance(value, list):
            links = [v for v in value if isinstance(v, dict)]
    files = [str(v.get("url", "")) for v in links][:MAX_FILES]
    matches = [
        {
            "path": str(v.get("url", "")),
            "line": None,
            "text": cap(str(v.get("title", "")), MATCH_TEXT_CHARS),
        }
        for v in links[:MAX_MATCHES]
    ]
    return {
        "pattern": pattern,
        "root": None,
        "match_count": len(links),
        "file_count": len(links),
        "files": files,
        "matches": matches,
        "truncated": False,
        "exit_code": None,
    }


def _parse_lines(lines: list[str], mode: str | None) -> dict[str, Any]:
    stated: int | None = None
    pattern: str | None = None
    root: str | None = None
    truncated = False
    files: list[str] = []
    seen_files: set[str] = set()
    file_count = 0
    matches: list[dict[str, Any]] = []
    match_count = 0
    current_file: str | None = None
    start = 0
    if lines:
        found = _FOUND.match(lines[0])
        none = _NO_MATCH.match(lines[0])
        more = _MORE_THAN.match(lines[0])
        listing = _DIR_LISTING.match(lines[0])
        if found:
            stated = int(found.group(1))
            pattern, root = found.group(2), found.group(3)
            start = 1
            if root and not root.endswith("/") and "." in root.rsplit("/", 1)[-1]:
                current_file = root
        elif none:
            return {
                "pattern": none.group(1),
                "root": none.group(2),
                "match_count": 0,
                "file_count": 0,
                "files": [],
                "matches": [],
                "truncated": False,
            }
        elif more:
            return {
                "pattern": more.group(2),
                "root": more.group(3),
                "match_count": int(more.group(1)),
                "file_count": int(more.group(1)),
                "files": [],
                "matches": [],
                "truncated": True,
            }
        elif listing:
            root = listing.group(1)
            start = 1

    def add_file(path: str) -> None:
        nonlocal file_count
        if path not in seen_files:
            seen_files.add(path)
            file_count += 1
            if len(files) < MAX_FILES:
                files.append(path)

    for line in lines[start:]:
        if not line.strip() or (line.startswith("End of matches") and _END.match(line)):
            continue
        if "runcated" in line and _TRUNCATED.search(line):
            truncated = True
            continue
        m = _LINE_MATCH.match(line) if line.startswith("Line ") else None
        if m and current_file is not None:
            match_count += 1
            add_file(current_file)
            if len(matches) < MAX_MATCHES:
                matches.append(
                    {
                        "path": current_file,
                        "line": int(m.group(1)),
                        "text": cap(m.group(2).strip(), MATCH_TEXT_CHARS),
                    }
                )
            continue
        d = _SEARCH_DIR_FILE.match(line) if line.endswith(" matches)") else None
        if d:
            add_file(d.group(1))
            match_count += int(d.group(2))
            continue
        if mode == "count":
            c = _PATH_COUNT.match(line)
            if c:
                add_file(c.group(1))
                match_count += int(c.group(2))
                continue
        p = _PATH_LINE.match(line) if mode != "files_with_matches" and ":" in line else None
        if p:
            match_count += 1
            add_file(p.group(1))
            if len(matches) < MAX_MATCHES:
                matches.append(
                    {
                        "path": p.group(1),
                        "line": int(p.group(2)),
                        "text": cap(p.group(3).strip(), MATCH_TEXT_CHARS),
                    }
                )
            continue
        add_file(cap(line.strip(), FILE_ENTRY_CHARS))
        match_count += 1
    return {
        "pattern": pattern,
        "root": root,
        "match_count": stated
        if stated is not None and not matches
        else max(match_count, stated or 0),
        "file_count": file_count,
        "files": files,
        "matches": matches,
        "truncated": truncated,
    }


class SearchExtractor:
    """Extractor for searches and file listings."""

    name = "search"

    def matches(self, item: ToolInput) -> bool:
        """True for search actions, web searches and directory listings."""
        action = resolve_action(item)
        if action.verb in ("search", "web_search"):
            return True
        return action.verb == "read" and unwrap(item.result_text).text.lstrip().startswith(
            "Here's the files and directories"
        )

    def extract(self, item: ToolInput) -> Extraction:
        """The search extract of ``item``: counts plus the first files and matches."""
        action = resolve_action(item)
        body = unwrap(item.result_text)
        args = item.arguments or {}
        if action.verb == "web_search":
            payload = _web_search(item, action.pattern)
            exit_code: int | None = None
            failed = item.is_error
        else:
            lines = split_lines(body.text)
            mode = args.get("output_mode") if isinstance(args.get("output_mode"), str) else None
            if action.sub == "grep" and action.command is None and mode is None:
                mode = "files_with_matches"
            status, exit_code, _ = command_status(item, body, False)
            # grep/rg exit with 1 when nothing matched: that is an empty result, not a failure
            failed = item.is_error and not (exit_code == 1 and not body.text.strip())
            if status == "failed" and exit_code not in (None, 1):
                failed = True
            payload = (
                _parse_lines(lines if not failed else [], mode)
                if not failed
                else {
                    "pattern": None,
                    "root": None,
                    "match_count": 0,
                    "file_count": 0,
                    "files": [],
                    "matches": [],
                    "truncated": False,
                }
            )
            payload["exit_code"] = exit_code
        payload["pattern"] = action.pattern or payload.get("pattern") or action.command
        payload["root"] = payload.get("root") or action.path
        pattern = str(payload["pattern"] or "")
        count = int(payload["match_count"])
        err = find_error(split_lines(body.text)) if failed else None
        label = "web search" if action.verb == "web_search" else (action.sub or "search")
        unit = "matches" if payload["matches"] or action.verb == "web_search" else "entries"
        first = f"{label} {cap(pattern, 120)!r}"
        if payload["root"]:
            first += f" in {cap(str(payload['root']), 80)}"
        if failed:
            summary = f"{first} failed\n{err.error_line if err else cap(body.text.strip().splitlines()[0] if body.text.strip() else 'no output')}"
        else:
            first += f" → {count_of(count, unit[:-2] if unit == 'matches' else 'entry', unit)}"
            if payload["file_count"] and payload["matches"]:
                first += f" in {count_of(int(payload['file_count']), 'file')}"
            summary = first
            shown = (
                payload["files"][:5]
                if not payload["matches"]
                else [
                    f"{m['path']}:{m['line']}" if m["line"] is not None else m["path"]
                    for m in payload["matches"][:5]
                ]
            )
            if shown:
                more = ", …" if count > len(shown) else ""
                summary += "\nfirst: " + ", ".join(cap(str(s), 100) for s in shown) + more
        limit_parts: list[str] = []
        if int(payload["file_count"]) > len(payload["files"]):
            limit_parts.append(
                f"first {len(payload['files'])} of {count_of(int(payload['file_count']), 'file')}"
            )
        if count > len(payload["matches"]) and payload["matches"]:
            limit_parts.append(f"first {len(payload['matches'])} of {count_of(count, 'match', 'matches')}")
        if payload["truncated"]:
            limit_parts.append("the tool truncated its own results")
        prov_lines, prov_bytes = body_ranges(item.result_text, body)
        # a search inside one file is a partial read of that file: its subject is the
        # file, so a later write makes it stale and the working set lists the file
        root = payload.get("root")
        # the same pattern in another folder is another subject (never superseded by it)
        subject = (f"search:{pattern} in {root}" if isinstance(root, str) and root else f"search:{pattern}") if pattern else None
        if action.verb != "web_search" and isinstance(root, str) and looks_like_file(root):
            subject = f"file:{normalise_path(root)}"
            payload["kind"] = "file_search"
        return Extraction(
            kind="search",
            summary=summary,
            payload=payload,
            shape=Shape.EXTRACT,
            context_kind=ContextKind.RECOVERY if failed else ContextKind.KNOWLEDGE,
            freshness_class=FreshnessClass.VOLATILE
            if action.verb == "web_search"
            else FreshnessClass.SESSION,
            subject_key=subject,
            revalidation_tool=item.tool_name,
            revalidation_args=dict(item.arguments)
            if item.arguments is not None
            else ({"action": item.action_text} if item.action_text is not None else {}),
            confidence=1.0,
            confidence_basis=ConfidenceBasis.DETERMINISTIC_PARSE,
            limits="; ".join(limit_parts) or None,
            error_type=(err.error_type if err else "error") if failed else None,
            line_range=prov_lines,
            byte_range=prov_bytes,
        )
