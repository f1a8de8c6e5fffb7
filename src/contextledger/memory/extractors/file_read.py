"""File reads: path, line range, content hash, size and top-level symbols.

Seed 001 §6 problem 3: a file read records a version (hash) and read time so that a later
edit can mark it stale (:func:`contextledger.memory.links.file_staleness`); problem 2: a
large file is represented by line numbers and a symbol index rather than its text.

Recognised renderings: Claude Code ``Read`` (``"   12→text"``), OpenHands
``str_replace_editor view`` (``"   12\\ttext"`` after a ``cat -n`` banner), SWE-agent
``open``/``goto`` (``[File: /p (N lines total)]`` then ``"12:text"``), and shell reads
(:mod:`~contextledger.memory.extractors.shell_reads`: ``cat``, ``cat -n``, ``nl``,
``head``, ``tail``, ``sed -n``, ``less``, ``more``): a read whose output is the file's
text as it is has its lines numbered from the window's first line (``sed -n '40,60p'``
shows lines 40–…), whatever the text looks like; numbered output (``cat -n``, ``nl``) is
parsed.  A shell read that exits non-zero failed.

Payload keys: ``path``, ``line_range`` ([first, last] or None), ``total_lines`` (when the
tool states it), ``lines_returned``, ``content_sha256`` (``"sha256:…"`` of the returned
file text with line-number prefixes removed, lines joined by ``"\\n"``), ``size_bytes`` of
that text, ``mtime`` (when the call states it), ``symbols`` (≤ 30 ``"def name"`` …) and
``symbols_total``; ``paths`` when one command read several files (their outputs
are one text).
"""

from __future__ import annotations

import re
from typing import Any

from contextledger.memory.extractors.actions import Action, is_shell_read, resolve_action
from contextledger.memory.extractors.base import Extraction, ToolInput
from contextledger.memory.extractors.errorscan import find_error
from contextledger.memory.extractors.textutil import (
    body_ranges,
    byte_len,
    cap,
    count_of,
    fmt_int,
    normalise_path,
    sha256_text,
    split_lines,
    unwrap,
)
from contextledger.memory.extractors.write_failures import read_failed
from contextledger.records.enums import ConfidenceBasis, ContextKind, FreshnessClass, Shape

__all__ = ["FileReadExtractor", "parse_numbered", "top_level_symbols"]

MAX_SYMBOLS = 30

_ARROW = re.compile(r"^\s*(\d+)→(.*)$")
_TAB = re.compile(r"^\s*(\d+)\t(.*)$")
_COLON = re.compile(r"^(\d+):(.*)$")
_SWE_HEADER = re.compile(r"^\[File: (.+?) \((\d+) lines total\)\]$")
_SWE_MORE = re.compile(r"^\(\d+ more lines (?:above|below)\)$")
_CAT_N = re.compile(r"^Here's the result of running `cat -n` on (.+?):$")
_SYMBOL_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^(?:async\s+)?def\s+([A-Za-z_]\w*)"), "def"),
    (re.compile(r"^class\s+([A-Za-z_]\w*)"), "class"),
    (
        re.compile(r"^(?:export\s+(?:default\s+)?)?(?:async\s+)?function\*?\s+([A-Za-z_$][\w$]*)"),
        "function",
    ),
    (
        re.compile(r"^(?:export\s+(?:default\s+)?)?(?:abstract\s+)?class\s+([A-Za-z_$][\w$]*)"),
        "class",
    ),
    (re.compile(r"^export\s+(?:const|let|var|type|interface|enum)\s+([A-Za-z_$][\w$]*)"), "export"),
    (re.compile(r"^func\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*)"), "func"),
    (re.compile(r"^type\s+([A-Za-z_]\w*)\s+(?:struct|interface|func|\w)"), "type"),
    (re.compile(r"^(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+([A-Za-z_]\w*)"), "fn"),
    (re.compile(r"^(?:pub(?:\([^)]*\))?\s+)?(struct|enum|trait)\s+([A-Za-z_]\w*)"), "rust"),
)


def parse_numbered(lines: list[str]) -> tuple[list[int], list[str], str | None, int | None]:
    """(line numbers, file lines, path from a banner, total lines from a banner).

    Accepts the arrow, tab and ``N:`` numbering styles; lines that carry no number are
    dropped when most lines are numbered, otherwise the text is treated as unnumbered
    (numbers ``1..n``).
    """
    path: str | None = None
    total: int | None = None
    numbers: list[int] = []
    texts: list[str] = []
    start = 0
    if lines:
        cat = _CAT_N.match(lines[0])
        swe = _SWE_HEADER.match(lines[0])
        if cat:
            path, start = cat.group(1), 1
        elif swe:
            path, total, start = swe.group(1), int(swe.group(2)), 1
    style: re.Pattern[str] | None = None
    for pattern in (_ARROW, _TAB, _COLON):
        sample = [ln for ln in lines[start : start + 20] if ln and not _SWE_MORE.match(ln)]
        if sample and sum(1 for ln in sample if pattern.match(ln)) * 2 > len(sample):
            style = pattern
            break
    if style is None:
        body = lines[start:]
        return list(range(1, len(body) + 1)), body, path, total
    for line in lines[start:]:
        m = style.match(line)
        if m:
            numbers.append(int(m.group(1)))
            texts.append(m.group(2))
    return numbers, texts, path, total


def top_level_symbols(lines: list[str]) -> list[str]:
    """Top-level definitions (``"def f"``, ``"class C"``, ``"func F"``, ``"fn f"`` …), in
    file order, duplicates removed."""
    found: list[str] = []
    seen: set[str] = set()
    for line in lines:
        if not line or line[0] in " \t#/*":
            continue
        for pattern, label in _SYMBOL_PATTERNS:
            m = pattern.match(line)
            if m:
                symbol = (
                    f"{m.group(1)} {m.group(2)}" if label == "rust" else f"{label} {m.group(1)}"
                )
                if symbol not in seen:
                    seen.add(symbol)
                    found.append(symbol)
                break
    return found


def _numbered(action: Action, lines: list[str]) -> tuple[list[int], list[str], str | None, int | None]:
    """:func:`parse_numbered`, except for a verbatim shell read: its lines are the file's
    own, numbered from the window's first line (none when the position is unknown)."""
    if not action.verbatim or action.command is None:
        return parse_numbered(lines)
    if action.start_line is None:
        return [], lines, None, None
    return list(range(action.start_line, action.start_line + len(lines))), lines, None, None


class FileReadExtractor:
    """Extractor for file reads (``Read``, ``str_replace_editor view``, ``open``, ``cat``)."""

    name = "file_read"

    def matches(self, item: ToolInput) -> bool:
        """True for read actions on a file (not a directory listing)."""
        action = resolve_action(item)
        if action.verb != "read":
            return False
        return not unwrap(item.result_text).text.lstrip().startswith("Here's the files and directories")

    def extract(self, item: ToolInput) -> Extraction:
        """The file-read extract of ``item``."""
        action = resolve_action(item)
        body = unwrap(item.result_text)
        lines = split_lines(body.text)
        numbers, texts, banner_path, total = _numbered(action, lines)
        path = normalise_path(banner_path or action.path or "")
        args = item.arguments or {}
        failed = item.is_error or (action.command is not None and body.exit_code not in (None, 0)) or read_failed(item.result_text, shell=is_shell_read(action))
        err = find_error(lines) if failed else None
        content = "\n".join(texts)
        line_range = [numbers[0], numbers[-1]] if numbers and not failed else None
        symbols = top_level_symbols(texts) if not failed else []
        payload: dict[str, Any] = {
            "path": path,
            "line_range": line_range,
            "total_lines": total,
            "lines_returned": 0 if failed else len(texts),
            "content_sha256": None if failed else sha256_text(content),
            "size_bytes": 0 if failed else byte_len(content),
            "mtime": args.get("mtime")
            if isinstance(args.get("mtime"), str | int | float)
            else None,
            "symbols": symbols[:MAX_SYMBOLS],
            "symbols_total": len(symbols),
        }
        if len(action.paths) > 1:
            payload["paths"] = [normalise_path(p) for p in action.paths]
        if failed:
            first = f"read {path or '(unknown path)'} failed"
            summary = f"{first}\n{err.error_line if err else cap(body.text.strip().splitlines()[0] if body.text.strip() else 'no output')}"
        else:
            rng = f"lines {line_range[0]}-{line_range[1]}" if line_range else (f"{count_of(len(texts), 'line')} (position unknown)" if texts else "empty")
            of_total = f" of {fmt_int(total)}" if total is not None else ""
            first = f"read {path} {rng}{of_total} · {fmt_int(payload['size_bytes'])} bytes · {str(payload['content_sha256'])[:19]}"
            summary = first
            if symbols:
                more = f" (+{len(symbols) - 8} more)" if len(symbols) > 8 else ""
                summary += "\nsymbols: " + ", ".join(symbols[:8]) + more
        prov_lines, prov_bytes = body_ranges(item.result_text, body)
        return Extraction(
            kind="file_read",
            summary=summary,
            payload=payload,
            shape=Shape.EXTRACT,
            context_kind=ContextKind.RECOVERY if failed else ContextKind.KNOWLEDGE,
            freshness_class=FreshnessClass.SESSION,
            subject_key=f"file:{path}" if path else None,
            revalidation_tool=item.tool_name,
            revalidation_args=dict(item.arguments)
            if item.arguments is not None
            else ({"action": item.action_text} if item.action_text is not None else {}),
            confidence=1.0,
            confidence_basis=ConfidenceBasis.DETERMINISTIC_PARSE,
            limits=(
                f"first {MAX_SYMBOLS} of {fmt_int(len(symbols))} symbols"
                if len(symbols) > MAX_SYMBOLS
                else None
            ),
            error_type=(err.error_type if err else "error") if failed else None,
            line_range=prov_lines,
            byte_range=prov_bytes,
        )
