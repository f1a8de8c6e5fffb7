"""Shell commands that read files: a file read made through the shell is a file read.

Recognised, when *every* pipeline of the command line (after ``cd DIR`` steps) reads a
file and nothing else (:func:`shell_reads`):

* ``cat [-n|-b|-A …] FILE`` — the whole file (``-n`` / ``-b``: numbered lines);
* ``nl [-ba …] FILE`` — the whole file, numbered;
* ``head [-n N | -N | --lines=N] FILE`` — lines ``1..N`` (10 by default);
* ``tail [-n N | -N] FILE`` — the last N lines (position unknown); ``tail -n +K`` —
  from line K;
* ``sed -n 'A,Bp' FILE`` / ``sed -n 'Ap'`` / ``sed -n -e 'A,Bp'`` / ``'A,$p'`` — that
  line window;
* ``less FILE`` / ``more FILE`` — the whole file;
* any of these followed by ``| sed -n 'A,Bp'``, ``| head -n N`` or ``| tail -n N``
  stages, which narrow the window (``nl -ba f | sed -n '90,108p'`` → lines 90–108).

Redirections of standard error (``2>/dev/null``, ``2>&1``) are allowed; any other
redirection, a here-document, a stage that is not a narrowing filter, or an option the
reader does not know makes the command something other than a read.  Paths are resolved
against the pipeline's directory (:func:`~contextledger.memory.extractors.shell_words.pipelines`:
the call's ``workdir`` and ``cd`` steps) and normalised (``./x``, ``DIR/../x``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from contextledger.memory.extractors.shell_words import (
    UNKNOWN_DIR,
    join_dir,
    pipelines,
    split_heredoc,
)

__all__ = ["ShellRead", "shell_reads"]

_SED_WINDOW = re.compile(r"^\s*(\d+)\s*(?:,\s*(\d+|\$)\s*)?p\s*;?\s*$")
_COUNT = re.compile(r"^\d+$")
_STDERR_REDIRECT = re.compile(r"^2$")
_READERS = frozenset({"cat", "nl", "head", "tail", "sed", "less", "more"})
_CAT_FLAGS = frozenset("nbAeEsTtuv")
_NL_VALUE_OPTIONS = frozenset("bdfhilnsvw")


@dataclass(frozen=True, kw_only=True)
class ShellRead:
    """One file a shell command reads.

    Attributes:
        path: the file, resolved against the command's directory when one is known.
        line_range: ``(first, last)`` 1-based lines shown; ``last`` is ``None`` for "to
            the end of the file"; ``None`` when the position is unknown (``tail -n N``).
        numbered: the output carries line numbers (``cat -n``, ``nl``).
        program: the program that reads it (``cat``, ``nl``, ``sed`` …).
    """

    path: str
    line_range: tuple[int, int | None] | None
    numbered: bool
    program: str


Window = tuple[int, int | None] | None


def _count_option(words: list[str], default: int) -> tuple[str, list[str]] | None:
    """``(the -n value as written, operands)`` of a ``head`` / ``tail`` stage; ``None`` for
    an option it does not know (``-c`` bytes, ``-f`` follow …)."""
    value: str | None = None
    operands: list[str] = []
    i = 1
    while i < len(words):
        w = words[i]
        if w in ("-n", "--lines") and i + 1 < len(words):
            value, i = words[i + 1], i + 2
            continue
        if w.startswith("--lines="):
            value = w.split("=", 1)[1]
        elif w.startswith("-n") and len(w) > 2:
            value = w[2:]
        elif re.fullmatch(r"-\d+", w):
            value = w[1:]
        elif w in ("-q", "--quiet", "--silent"):
            pass
        elif w.startswith("-") and w != "-":
            return None
        else:
            operands.append(w)
        i += 1
    return (str(default) if value is None else value), operands


def _sed_window(words: list[str]) -> tuple[Window, list[str]] | None:
    """``(window, operands)`` of a ``sed -n 'A,Bp'`` stage, else ``None``."""
    quiet = False
    script: str | None = None
    operands: list[str] = []
    i = 1
    while i < len(words):
        w = words[i]
        if w in ("-n", "--quiet", "--silent"):
            quiet = True
        elif w in ("-e", "--expression") and i + 1 < len(words) and script is None:
            script, i = words[i + 1], i + 2
            continue
        elif w.startswith("-") and w != "-":
            return None  # -i and friends write; others are not a plain window
        elif script is None:
            script = w
        else:
            operands.append(w)
        i += 1
    m = _SED_WINDOW.match(script or "")
    if not quiet or m is None:
        return None
    first = int(m.group(1))
    last = None if m.group(2) == "$" else int(m.group(2) or first)
    return (first, last), operands


def _narrow(window: Window, first: int, last: int | None) -> Window:
    """``window`` narrowed to its lines ``first..last`` (1-based within the window)."""
    if window is None:
        return None
    lo, hi = window
    new_lo = lo + first - 1
    new_hi = None if last is None else lo + last - 1
    if hi is not None:
        new_hi = hi if new_hi is None else min(hi, new_hi)
    return (new_lo, new_hi)


def _reader(words: list[str]) -> tuple[str, Window, bool, list[str]] | None:
    """``(program, window, numbered, file operands)`` of a first stage that reads files."""
    prog = words[0].rsplit("/", 1)[-1]
    if prog not in _READERS:
        return None
    if prog in ("cat", "less", "more"):
        flags = [w for w in words[1:] if w.startswith("-") and w != "-"]
        if prog == "cat" and any(not set(f[1:]) <= _CAT_FLAGS for f in flags if not f.startswith("--")):
            return None
        if prog != "cat" and any(not re.fullmatch(r"-[RrSsNnFfXi]+", f) for f in flags):
            return None
        numbered = prog == "cat" and any(("n" in f[1:] or "b" in f[1:]) for f in flags if not f.startswith("--"))
        operands = [w for w in words[1:] if not (w.startswith("-") and w != "-") and not w.startswith("+")]
        return prog, (1, None), numbered, operands
    if prog == "nl":
        operands = []
        i = 1
        while i < len(words):
            w = words[i]
            if len(w) == 2 and w[0] == "-" and w[1] in _NL_VALUE_OPTIONS:
                i += 2
                continue
            if w.startswith("-") and w != "-":
                if w[1:2] not in _NL_VALUE_OPTIONS and not w.startswith("--"):
                    return None
            else:
                operands.append(w)
            i += 1
        return "nl", (1, None), True, operands
    if prog == "sed":
        found = _sed_window(words)
        return None if found is None else ("sed", found[0], False, found[1])
    counted = _count_option(words, 10)
    if counted is None:
        return None
    value, operands = counted
    if prog == "head":
        return ("head", (1, int(value)), False, operands) if _COUNT.match(value) else None
    if value.startswith("+") and _COUNT.match(value[1:]):
        return "tail", (int(value[1:]), None), False, operands
    return ("tail", None, False, operands) if _COUNT.match(value) else None


def _filter(words: list[str], window: Window) -> tuple[bool, Window]:
    """``(is a narrowing filter, the narrowed window)`` of a later pipeline stage."""
    prog = words[0].rsplit("/", 1)[-1]
    if prog == "sed":
        found = _sed_window(words)
        if found is None or found[1]:
            return False, window
        first, last = found[0] or (1, None)
        return True, _narrow(window, first, last)
    if prog in ("head", "tail"):
        counted = _count_option(words, 10)
        if counted is None or counted[1] or not _COUNT.match(counted[0]):
            return False, window
        n = int(counted[0])
        if prog == "head":
            return True, _narrow(window, 1, n)
        if window is not None and window[1] is not None:
            return True, (max(window[0], window[1] - n + 1), window[1])
        return True, None
    return False, window


def _without_stderr_redirects(words: tuple[str, ...]) -> list[str] | None:
    """The stage without ``2>…`` / ``2>&1`` redirections; ``None`` when another
    redirection (``>``, ``<``, ``&>``) is present."""
    out: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        if set(w) <= set("<>&|") and ("<" in w or ">" in w):
            if out and _STDERR_REDIRECT.match(out[-1]) and w in (">", ">>", ">&") and i + 1 < len(words):
                out.pop()
                i += 2
                continue
            return None
        out.append(w)
        i += 1
    return out


def shell_reads(command: str, cwd: str | None = None) -> tuple[ShellRead, ...] | None:
    """The files ``command`` reads when reading files is all it does (rules in the
    module docstring), in command order; ``None`` otherwise.

    Args:
        command: the shell command line.
        cwd: the directory the command runs in (Codex's ``workdir``), when known.
    """
    if split_heredoc(command.strip())[1] is not None:
        return None
    found = pipelines(command, cwd)
    if not found:
        return None
    reads: list[ShellRead] = []
    for pipeline in found:
        stages = [_without_stderr_redirects(s) for s in pipeline.stages]
        if any(s is None or not s for s in stages) or pipeline.cwd == UNKNOWN_DIR:
            return None
        words = [s for s in stages if s is not None]
        first = _reader(words[0])
        if first is None:
            return None
        prog, window, numbered, operands = first
        if len(operands) != 1 or operands[0] == "-" or any(c in operands[0] for c in "*?[$`"):
            return None
        for stage in words[1:]:
            ok, window = _filter(stage, window)
            if not ok:
                return None
        reads.append(ShellRead(path=join_dir(pipeline.cwd, operands[0]), line_range=window, numbered=numbered, program=prog))
    return tuple(reads)
