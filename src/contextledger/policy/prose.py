"""The user's own prose in a message, as sentences: what the constraint classifier reads.

Seed 001 §6 problem 3/4 and §10 (see :mod:`contextledger.policy.constraint_text`): text
the user pasted or quoted is never the user's rule.  Code fences, indented code, block
quotes (``>``), quoted e-mails (``On … wrote:``, an ``Original Message`` header and
everything after it), HTML comments, example blocks (``START OF EXAMPLE`` …
``END OF EXAMPLE``, ``<example>`` … ``</example>``) and log lines (timestamps,
``[ERROR]``, ``WARNING:root:``, tracebacks, shell and REPL prompts, ``file:line:``
compiler output) are skipped; what is left is split into sentences.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from contextledger.ingest.preambles import wrapper_bounds

__all__ = ["BULLET", "Sentence", "prose_lines", "prose_sentences"]


@dataclass(frozen=True)
class Sentence:
    """One prose sentence: ``text[start:end]`` of the message, stripped; ``block`` numbers
    its paragraph (a blank line or a skipped region starts a new one)."""

    start: int
    end: int
    block: int


# --- regions that are not the user's prose ----------------------------------------------

_FENCE = ("```", "~~~")
_EXAMPLE_OPEN = re.compile(r"(?:START|BEGIN(?:NING)?)\s+OF\s+(?:THE\s+)?EXAMPLE|^\s*<example>", re.IGNORECASE)
_EXAMPLE_CLOSE = re.compile(r"END\s+OF\s+(?:THE\s+)?EXAMPLE|</example>", re.IGNORECASE)
_MAIL_TAIL = re.compile(
    r"^\s*(?:On\s.{4,200}\swrote:\s*$|-{2,}\s*(?:Original\s+Message|Forwarded\s+message)\s*-{2,}|"
    r"Begin\s+forwarded\s+message:)",
    re.IGNORECASE,
)
_LOG_LINE = re.compile(
    r"^\s*(?:\[?\d{4}-\d{2}-\d{2}[T\s]\d{1,2}:\d{2}|\[?\d{1,2}:\d{2}:\d{2}[\].,\s]|"
    r"\[(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|FATAL|CRITICAL)\]|"
    r"(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL|CRITICAL):[\w.]+:|"
    r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+|at [\w.$<>]+\(.*\)\s*$|"
    r"E {2,}\S|\$ \S|>>> |npm (?:ERR|WARN)!|[\w./\\-]+\.\w+:\d+(?::\d+)?:\s)"
)
BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s")


def _lines(text: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        out.append((pos, line.rstrip("\r\n")))
        pos += len(line)
    return out


def prose_lines(text: str) -> list[tuple[int, str, int]]:
    """``(offset, line, block)`` of every line that is the user's own prose."""
    kept: list[tuple[int, str, int]] = []
    block = 0
    fence = example = comment = traceback = False
    lines = _lines(text)
    for i, (offset, line) in enumerate(lines):
        stripped = line.strip()
        if fence or stripped.startswith(_FENCE):
            fence = fence != stripped.startswith(_FENCE)
            block += 1
            continue
        if example:
            example = _EXAMPLE_CLOSE.search(line) is None
            continue
        opened = _EXAMPLE_OPEN.search(line)
        if opened is not None:
            example = _EXAMPLE_CLOSE.search(line, opened.end()) is None
            block += 1
            continue
        if comment or stripped.startswith("<!--"):
            comment = "-->" not in stripped
            block += 1
            continue
        if _MAIL_TAIL.match(line):
            break  # a quoted e-mail runs to the end of the message
        if not stripped:
            traceback = False
            block += 1
            continue
        if traceback or stripped.startswith(">") or _LOG_LINE.match(line):
            traceback = traceback or stripped.startswith("Traceback")
            block += 1
            continue
        if _indented_code(lines, i):
            block += 1
            continue
        kept.append((offset, line, block))
    return kept


def _indented_code(lines: list[tuple[int, str]], i: int) -> bool:
    """A line of a paragraph whose lines are all indented by a tab or 4+ spaces (and not
    list items): an indented code block."""
    def indented(line: str) -> bool:
        return line.startswith(("\t", "    ")) and BULLET.match(line) is None

    if not indented(lines[i][1]):
        return False
    lo = i
    while lo > 0 and lines[lo - 1][1].strip():
        lo -= 1
    hi = i
    while hi + 1 < len(lines) and lines[hi + 1][1].strip():
        hi += 1
    return all(indented(line) for _, line in lines[lo : hi + 1])


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")
_ABBREVIATION = re.compile(r"(?:^|[\s(\[])(?:e\.g|i\.e|cf|vs|approx|incl|resp|viz)\.$", re.IGNORECASE)


def prose_sentences(text: str) -> list[Sentence]:
    """The sentences of ``text``'s own prose (module doc), as spans of ``text``.

    Lines are split at ``. ! ?`` followed by space (not after ``e.g.``, ``i.e.``, ``cf.``,
    ``vs.``) and after ``。！？``; each sentence is stripped of surrounding whitespace and
    of the wrapper tags at its two ends (``<pr_description>``, a stray
    ``</pr_description>`` or ``</NOTE>``:
    :func:`~contextledger.ingest.preambles.wrapper_bounds`), otherwise verbatim; a
    sentence of tags alone is none."""
    out: list[Sentence] = []
    for offset, line, block in prose_lines(text):
        pos = 0
        # "e.g. python" does not end a sentence
        seps = [m for m in _SENTENCE_END.finditer(line) if not _ABBREVIATION.search(line[max(0, m.start() - 12) : m.start()])]
        for sep in [*seps, None]:
            end = sep.start() if sep is not None else len(line)
            piece = line[pos:end]
            lead = len(piece) - len(piece.lstrip())
            body = piece.strip()
            if body:
                start, stop = wrapper_bounds(text, offset + pos + lead, offset + pos + lead + len(body))
                if stop > start:
                    out.append(Sentence(start=start, end=stop, block=block))
            if sep is not None:
                pos = sep.end()
    return out
