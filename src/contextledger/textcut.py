"""Safe cut points for texts cut by characters: a cut never splits a unit.

A payload shows texts cut to a length (a summary line, tool-call arguments, a goal, a
retrieval line, a head and tail of a long result).  A cut at a bare character index can
land inside something that is only meaningful whole — ``… [artifact a84, 929 b`` is our
own reference marker cut in two.  The functions here move such a cut out of the unit:
before it, or after it when before would leave nothing.

The units (each bounded in length, so that finding them near a cut is cheap):

* our bracketed markers (:data:`MARKER`): ``[… 1,234 tokens omitted; …]``, ``[artifact a12,
  5,120 bytes]``, ``[memory m12 · …]``, ``[stale memory m12 · …]``, ``[1,234 chars in the
  ledger]``, ``[superseded by m3]``, ``[conflicts with m3]``, the banners
  (``[contextledger …]``, ``[ledger data, not instructions]``), ``[pending, no result
  yet: …]``, ``[secret: …]``, ``[14 stack frames omitted]`` … — at most
  :data:`MAX_MARKER_CHARS` characters, one level of nested brackets;
* handles (``m12``, ``a12``: :mod:`contextledger.handles`);
* hexadecimal digests (7–128 hex digits, with an optional ``sha256:`` / ``sha1:`` … prefix);
* URLs (``scheme://…`` up to :data:`MAX_URL_CHARS` characters);
* a UTF-16 surrogate pair (a high surrogate code point followed by a low one);
* a combining-character sequence: a character with the combining marks, variation
  selectors, emoji modifiers and zero-width-joined characters that follow it (up to
  :data:`MAX_CLUSTER_CHARS` characters).

A unit longer than its bound is not a unit (a 10 KB hex dump is data, cut like any text).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["MARKER", "MAX_CLUSTER_CHARS", "MAX_MARKER_CHARS", "MAX_URL_CHARS", "cut_index", "cut_prefix", "cut_text", "safe_point", "unit_at"]

MAX_MARKER_CHARS = 600
"""Longest bracketed marker treated as one unit (characters)."""

MAX_URL_CHARS = 2048
"""Longest URL treated as one unit (characters)."""

MAX_CLUSTER_CHARS = 32
"""Longest combining-character sequence treated as one unit (characters)."""

_HEADS = (
    r"… ",
    r"artifact ",
    r"memory ",
    r"stale memory ",
    r"stale result omitted",
    r"result withheld",
    r"result omitted",
    r"superseded by ",
    r"conflicts with ",
    r"contextledger",
    r"ledger data, not instructions",
    r"(?:pending|awaiting approval), no result yet: ",
    r"payload unavailable",
    r"no result recorded",
    r"tool error",
    r"image ",
    r"binary ",
    r"secret: ",
    r"abandoned",
    r"[a-z_]+ data withheld by policy",
    r"\d[\d,]* (?:chars in the ledger|stack frames? omitted|items)",
    r"[^\[\]\n]{1,80} used tool ",
)
MARKER = re.compile(r"\[(?:" + "|".join(_HEADS) + r")[^\[\]\n]*(?:\[[^\[\]\n]*\][^\[\]\n]*)*\]")
"""One of our bracketed markers, whole (the heads our code emits; one nesting level)."""

_SHORT = re.compile(
    "|".join((
        MARKER.pattern,
        r"(?<![0-9A-Za-z_])[ma][1-9][0-9]*(?![0-9A-Za-z_])",
        r"(?<![0-9A-Za-z_])(?:sha(?:1|256|384|512):)?[0-9a-fA-F]{7,128}(?![0-9A-Za-z_])",
    ))
)
"""The units of at most :data:`MAX_MARKER_CHARS` characters: markers, handles, digests."""
_URL = re.compile(rf"(?<![0-9A-Za-z+.-])[A-Za-z][A-Za-z0-9+.-]{{1,15}}://[^\s<>\"'`\[\]]{{1,{MAX_URL_CHARS}}}")
_WINDOW = MAX_URL_CHARS + 32
_SHORT_WINDOW = MAX_MARKER_CHARS + 8
_VIRAMA = 9  # the canonical combining class of a virama (U+094D …)


def _extends(ch: str) -> bool:
    """Whether ``ch`` belongs to the character before it whatever that is: a combining
    mark, a variation selector, an emoji modifier, a zero-width joiner."""
    o = ord(ch)
    return (
        unicodedata.combining(ch) != 0
        or unicodedata.category(ch) in ("Mn", "Me", "Mc")
        or 0xFE00 <= o <= 0xFE0F
        or 0xE0100 <= o <= 0xE01EF
        or 0x1F3FB <= o <= 0x1F3FF
        or o == 0x200D
    )


def _joined(text: str, i: int) -> bool:
    """Whether ``text[i]`` belongs to ``text[i - 1]`` (``0 < i < len(text)``): it extends
    it (:func:`_extends`), follows a zero-width joiner or a virama (an Indic conjunct:
    ``क्ष``), or is the low half of a surrogate pair."""
    ch, before = text[i], text[i - 1]
    if "\udc00" <= ch <= "\udfff":
        return "\ud800" <= before <= "\udbff"
    return before == "\u200d" or unicodedata.combining(before) == _VIRAMA or _extends(ch)


def _cluster(text: str, pos: int) -> tuple[int, int] | None:
    """The combining sequence (or surrogate pair) that ``pos`` falls strictly inside, as
    ``(start, end)``, else ``None`` (also for a sequence of :data:`MAX_CLUSTER_CHARS` or
    more characters)."""
    if not 0 < pos < len(text) or not _joined(text, pos):
        return None
    start = pos - 1
    while start > 0 and _joined(text, start):
        if pos - start >= MAX_CLUSTER_CHARS:
            return None  # longer than a combining sequence is: not a unit
        start -= 1
    end = pos + 1
    while end < len(text) and _joined(text, end):
        if end - start >= MAX_CLUSTER_CHARS:
            return None
        end += 1
    return start, end


def _widest(pattern: re.Pattern[str], text: str, lo: int, hi: int, pos: int, longest: int) -> tuple[int, int] | None:
    """The widest match of ``pattern`` in ``text[lo:hi]`` (at most ``longest``
    characters) with ``start < pos < end``, else ``None``."""
    best: tuple[int, int] | None = None
    for m in pattern.finditer(text, lo, hi):
        if m.start() >= pos:
            break
        if pos < m.end() and m.end() - m.start() <= longest and (best is None or m.end() - m.start() > best[1] - best[0]):
            best = (m.start(), m.end())
    return best


def unit_at(text: str, pos: int) -> tuple[int, int] | None:
    """The widest unit of ``text`` that character position ``pos`` falls strictly inside
    (``start < pos < end``), as ``(start, end)`` character offsets; ``None`` when a cut at
    ``pos`` splits no unit.  No unit spans a line break and none is longer than
    :data:`MAX_URL_CHARS` (a URL has no blank either), so only the line around ``pos`` is
    searched, within that distance: bounded work whatever the text's length."""
    if not 0 < pos < len(text):
        return None
    nl = text.rfind("\n", max(0, pos - _WINDOW), pos)
    lo = nl + 1 if nl >= 0 else max(0, pos - _WINDOW)
    nl = text.find("\n", pos, pos + _WINDOW)
    hi = nl if nl >= 0 else min(len(text), pos + _WINDOW)
    best = _widest(_SHORT, text, max(lo, pos - _SHORT_WINDOW), min(hi, pos + _SHORT_WINDOW), pos, MAX_MARKER_CHARS)
    blank = max(text.rfind(" ", lo, pos), text.rfind("\t", lo, pos))
    url = _widest(_URL, text, max(lo, blank + 1), hi, pos, _WINDOW)
    if url is not None and (best is None or url[1] - url[0] > best[1] - best[0]):
        best = url
    cluster = _cluster(text, pos)
    if cluster is None:
        return best
    return cluster if best is None else (min(cluster[0], best[0]), max(cluster[1], best[1]))


def safe_point(text: str, pos: int, *, forward: bool = False, floor: int = 0) -> int:
    """The cut point nearest ``pos`` (clamped to ``[0, len(text)]``) that splits no unit:
    ``pos`` itself when it is safe, else the start of the unit it falls inside (the end
    with ``forward``, or when the start is not above ``floor``: before would leave
    nothing).  The result is in ``[0, len(text)]``; units nest (a handle inside a marker),
    so the move repeats until the point is safe."""
    p = min(max(pos, 0), len(text))
    for _ in range(8):
        unit = unit_at(text, p)
        if unit is None:
            return p
        p = unit[1] if forward or unit[0] <= floor else unit[0]
    return p


def cut_index(text: str, limit: int) -> int:
    """Where to cut ``text`` so that ``text[:i]`` holds at most ``limit`` characters and
    splits no unit: ``len(text)`` when the text fits, else the largest safe ``i ≤ limit``
    — or, when the unit at ``limit`` starts the text (before it would leave nothing), the
    end of that unit, so ``i`` exceeds ``limit`` by less than the unit's length (a bounded
    one: see the module notes).  ``limit < 0`` counts as ``0``."""
    if len(text) <= limit:
        return len(text)
    return safe_point(text, max(0, limit))


def cut_prefix(text: str, limit: int) -> str:
    """``text[:cut_index(text, limit)]``: the longest prefix of at most ``limit``
    characters that splits no unit, with no mark (see :func:`cut_index` for a unit that
    opens the text)."""
    return text[: cut_index(text, limit)]


def cut_text(text: str, limit_chars: int, *, mark: str = "…") -> str:
    """``text`` when it has at most ``limit_chars`` characters, else its prefix up to
    :func:`cut_index` of ``limit_chars - len(mark)`` followed by ``mark``: at most
    ``max(limit_chars, len(mark))`` characters (a cut text always ends with ``mark``) unless
    a unit opens the text and is longer (then that unit whole, then ``mark``).  Never splits a marker, handle, digest, URL, surrogate pair or
    combining sequence."""
    if len(text) <= limit_chars:
        return text
    return text[: cut_index(text, max(0, limit_chars - len(mark)))] + mark
