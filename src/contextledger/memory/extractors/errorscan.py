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

:func:`fold_stack_frames` is the memory-derivation rule for failed calls: stack frames
are folded into one ``[N stack frames omitted]`` marker (see its docstring).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from contextledger.memory.extractors.textutil import cap

__all__ = ["SCAN_WINDOW_LINES", "ErrorInfo", "find_error", "fold_stack_frames", "frame_marker"]

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


# --- stack-frame folding ---------------------------------------------------------------

_AT_FRAME = re.compile(
    r"^\s+at (?:async )?\S.*(?::\d+(?::\d+)?\)?|\((?:Native Method|Unknown Source|native|<anonymous>)\))$"
)
"""JavaScript / Java / C# frame: ``    at f (file.js:53:13)``, ``\tat a.B.c(B.java:42)``;
also the ``at file.rs:12:5`` location line of a Rust backtrace frame."""
_JAVA_MORE = re.compile(r"^\s+\.\.\. \d+ more$")
_GO_LOCATION = re.compile(r"^\t\S.*\.go:\d+(?: \+0x[0-9a-f]+)?$")
_GO_FUNCTION = re.compile(r"^(?:created by )?[\w./*()\[\]{}-]+(?:\(.*\))?(?: in goroutine \d+)?$")
_GO_HEADER = re.compile(r"^goroutine \d+ \[[^\]]+\]:$")
_RUST_FRAME = re.compile(r"^\s*\d+: (?:0x[0-9a-f]+ - )?(\S+(?: as \S+)?)$")
_TRACE_HEADERS = frozenset({_TRACEBACK, "stack backtrace:"})


def frame_marker(frames: int) -> str:
    """``"[1 stack frame omitted]"`` / ``"[14 stack frames omitted]"``."""
    return f"[{frames} stack frame{'' if frames == 1 else 's'} omitted]"


def _frame_span(lines: Sequence[str], i: int) -> tuple[int, int]:
    """(lines the stack frame starting at ``i`` spans, frames it counts); (0, 0) when
    line ``i`` starts no frame."""
    line = lines[i]
    n = len(lines)
    if _FRAME.match(line):  # Python: the File line, then its more-indented code lines
        indent = len(line) - len(line.lstrip())
        end = i + 1
        while end < n and lines[end].strip() and len(lines[end]) - len(lines[end].lstrip()) > indent and not _FRAME.match(lines[end]):
            end += 1
        return end - i, 1
    if _AT_FRAME.match(line):
        return 1, 1
    if _JAVA_MORE.match(line):
        return 1, 0
    if _GO_LOCATION.match(line):
        return 1, 1
    if i + 1 < n and _GO_LOCATION.match(lines[i + 1]) and _GO_FUNCTION.match(line.strip()):
        return 2, 1
    rust = _RUST_FRAME.match(line)  # Rust: "  3: path::to::fn", then its "at file.rs:N:M" line
    if rust:
        if i + 1 < n and _AT_FRAME.match(lines[i + 1]):
            return 2, 1
        if "::" in rust.group(1):
            return 1, 1
    return 0, 0


def fold_stack_frames(lines: Sequence[str]) -> tuple[list[str], int]:
    """Fold every run of stack frames in a failed call's output into one marker line.

    Memory-derivation rule for failures (seed 000 §4.5–4.6: a retry-critical error keeps
    its error line; stack noise is not recovery state).  A run of consecutive frames —
    Python ``File "…", line N, in f`` lines with their code lines, JavaScript / Java
    ``    at …(file:N)`` lines and Java ``... N more``, Go ``goroutine N [state]:``
    headers with ``pkg.fn(…)`` / ``\t/path/file.go:NN`` pairs, Rust backtrace frames
    ``  N: path::fn`` with their ``at file.rs:N:M`` lines — and the ``Traceback (most
    recent call last):`` / ``stack backtrace:`` header right before it become one line
    :func:`frame_marker` (``"[14 stack frames omitted]"``).  Every other line — the lines
    naming the exception or error, ``Caused by: …``, ``During handling of …``, the final
    message — is kept verbatim and in order.  A header with no frame after it is kept.

    Args:
        lines: the output's lines (no newlines).

    Returns:
        (the folded lines, the number of frames folded).  Linear in the input.
    """
    out: list[str] = []
    folded = 0
    i = 0
    n = len(lines)
    while i < n:
        header = 1 if lines[i].strip() in _TRACE_HEADERS or _GO_HEADER.match(lines[i].strip()) else 0
        j = i + header
        frames = 0
        spanned = False
        while j < n:
            span, count = _frame_span(lines, j)
            if not span:
                break
            spanned = True
            frames += count
            j += span
        if not spanned:
            out.append(lines[i])
            i += 1
            continue
        out.append(frame_marker(frames))
        folded += frames
        i = j
    return out, folded
