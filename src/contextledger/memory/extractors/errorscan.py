"""Finding the error that matters in a command's output (seed 001 §6 problem 2).

A long log is reduced to its error type, its key error line and the last stack frames:
"長大なログはエラーサマリ、重要なスタックトレース、終了コード、関連ファイルのみを残す".

Rules, in order:

1. Python traceback: the *last* ``Traceback (most recent call last):`` block wins; its
   exception line is the key line, its class name (last dotted component) the error type,
   and its last three frames (``File …, line N, in f`` plus the code line) the stack.
2. Otherwise the first line matching a known error form: ``X: command not found``,
   ``…Error: …`` / ``[TypeError: …]``, ``error TS2307``, ``error[E0425]``, ``panic:``,
   ``Permission denied``, ``No such file or directory``, ``timed out``, then any line
   containing the word ``error`` / ``fatal`` / ``failed``.

Only the first and last :data:`SCAN_WINDOW_LINES` lines are scanned, so a 12 MB log costs
the same as a 100 KB one once split.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from contextledger.memory.extractors.textutil import cap

__all__ = ["SCAN_WINDOW_LINES", "ErrorInfo", "find_error"]

SCAN_WINDOW_LINES = 2000
"""Lines scanned from each end of a long output."""

MAX_STACK_LINES = 8
"""Most stack lines kept (frames + code lines + exception line)."""

_BARE_LABELS = frozenset({"error", "errors", "fatal", "failed"})
_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)(?:, in (.+))?$')
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$")
_PATTERNS: tuple[tuple[re.Pattern[str], str | None], ...] = (
    (re.compile(r"(?:^|: )(?:line \d+: )?[^\s:]+: command not found"), "command not found"),
    (re.compile(r"(?:^|[\s\[(])(?:[a-z_][\w]*\.)*([A-Z]\w*(?:Error|Exception))\b(?::|\]|$)"), None),
    (re.compile(r"\berror (TS\d+)\b"), None),
    (re.compile(r"^error\[(E\d+)\]"), None),
    (re.compile(r"^panic: "), "panic"),
    (re.compile(r"Permission denied", re.IGNORECASE), "permission denied"),
    (re.compile(r"No such file or directory"), "No such file or directory"),
    (re.compile(r"\btimed out\b|\btimeout\b", re.IGNORECASE), "timeout"),
    (re.compile(r"\b(?:error|fatal)\b", re.IGNORECASE), "error"),
    (re.compile(r"\bfailed\b", re.IGNORECASE), "failed"),
)


@dataclass(frozen=True, kw_only=True)
class ErrorInfo:
    """The key error of an output.

    Attributes:
        error_type: ``"ModuleNotFoundError"``, ``"command not found"``, ``"TS2307"`` ….
        error_line: the key line, capped at 200 characters.
        line_no: 1-based index of ``error_line`` within the scanned line list.
        stack: last frames and the exception line (≤ 8 lines), empty when not a traceback.
        from_traceback: the error came from a parsed Python traceback.
    """

    error_type: str
    error_line: str
    line_no: int
    stack: tuple[str, ...] = ()
    from_traceback: bool = False


def _window(lines: list[str]) -> list[int]:
    n = len(lines)
    if n <= 2 * SCAN_WINDOW_LINES:
        return list(range(n))
    return list(range(SCAN_WINDOW_LINES)) + list(range(n - SCAN_WINDOW_LINES, n))


def _traceback(lines: list[str], indexes: list[int]) -> ErrorInfo | None:
    starts = [i for i in indexes if lines[i].lstrip().startswith(_TRACEBACK)]
    if not starts:
        return None
    start = starts[-1]
    indent = len(lines[start]) - len(lines[start].lstrip())
    frames: list[tuple[int, int]] = []
    i = start + 1
    n = len(lines)
    while i < n:
        line = lines[i]
        if _FRAME.match(line):
            code_end = i + 1
            while (
                code_end < n
                and lines[code_end].startswith(" " * (indent + 3))
                and not _FRAME.match(lines[code_end])
            ):
                code_end += 1
            frames.append((i, code_end))
            i = code_end
            continue
        body = line[indent:] if len(line) - len(line.lstrip()) <= indent else ""
        m = _EXC_LINE.match(body.strip()) if body.strip() else None
        if m and (":" in body or body.strip()[:1].isupper()):
            stack: list[str] = []
            for f_start, f_end in frames[-3:]:
                stack.append(cap(lines[f_start].strip()))
                stack.extend(
                    cap(lines[j].strip()) for j in range(f_start + 1, min(f_end, f_start + 2))
                )
            stack.append(cap(body.strip()))
            name = m.group(1).rsplit(".", 1)[-1]
            return ErrorInfo(
                error_type=name,
                error_line=cap(body.strip()),
                line_no=i + 1,
                stack=tuple(stack[-MAX_STACK_LINES:]),
                from_traceback=True,
            )
        if not line.strip():
            i += 1
            continue
        i += 1
    return None


def find_error(lines: list[str]) -> ErrorInfo | None:
    """The key error of ``lines`` (see the module rules) or ``None`` when none is found."""
    indexes = _window(lines)
    tb = _traceback(lines, indexes)
    if tb is not None:
        return tb
    for pattern, fixed in _PATTERNS:
        for i in indexes:
            line = lines[i]
            if line.startswith("npm warn") or line.startswith("Exit code "):
                continue
            m = pattern.search(line)
            if m:
                kind = fixed if fixed is not None else m.group(1)
                text = line.strip()
                if text.rstrip(":").lower() in _BARE_LABELS:
                    following = next((ln.strip() for ln in lines[i + 1 : i + 4] if ln.strip()), "")
                    text = f"{text} {following}".strip()
                return ErrorInfo(error_type=kind, error_line=cap(text), line_no=i + 1)
    return None
