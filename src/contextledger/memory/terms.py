"""Content terms: the words a memory can be found by, and the words a request asks about.

One normalisation serves both sides (seed 001 §3, temperature: cold records are recalled
into the prompt when a request hits them): lower-cased runs of letters and digits of at
least three characters, common English function words dropped, and a light suffix
folding so that ``renewal`` / ``renews`` / ``renewed`` and ``invoice`` / ``invoices``
meet.  It is deliberately small and deterministic — no language model, no stemmer
dictionary — and the same on every backend.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from contextledger.records.models import ToolMemory

__all__ = ["MAX_MEMORY_TERMS", "MAX_TERM_LENGTH", "STOPWORDS", "memory_terms", "normalize_term", "query_terms", "terms_of", "text_terms"]

MAX_MEMORY_TERMS = 48
"""At most this many terms are indexed per memory (the first ones in text order)."""

MAX_TERM_LENGTH = 40
"""Longer runs (hashes, base64, minified code) are not terms."""

_WORD = re.compile(r"[a-z0-9]{3,}")
_STOP = frozenset(
    ["the", "and", "for", "are", "but", "not", "you", "your", "with", "this", "that", "what", "which", "who", "whom", "when", "where", "why", "how", "was", "were", "has", "have", "had", "can", "could", "should", "would", "will", "shall", "may", "might", "did", "does", "done", "now", "still", "its", "they", "them", "their", "there", "then", "than", "from", "into", "onto", "over", "also", "just", "only", "very", "any", "all", "some", "one", "two", "yes", "please", "tell", "show", "give", "make", "let", "get", "got", "our", "out", "about", "again", "before", "after", "because", "been", "being", "each", "few", "more", "most", "other", "same", "such", "too", "here"]
)
STOPWORDS = _STOP
"""English function words that are never terms (shared with the retrieval tokeniser)."""

_SUFFIXES = ("ing", "ed", "al", "s")


@lru_cache(maxsize=65536)
def normalize_term(word: str) -> str:
    """Fold one lower-case word: strip one of ``ing``/``ed``/``al``/``s`` (not ``ss``)
    when at least four characters remain, then a trailing ``e``.  ``renewal`` →
    ``renew``; ``invoices`` → ``invoic``; ``invoice`` → ``invoic``; digits unchanged."""
    if word.isdigit():
        return word
    for suf in _SUFFIXES:
        if word.endswith(suf) and not (suf == "s" and word.endswith("ss")) and len(word) - len(suf) >= 4:
            word = word[: -len(suf)]
            break
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def text_terms(text: str) -> list[str]:
    """Distinct folded terms of ``text`` in first-occurrence order (``_`` counts as a
    separator, so ``calendar_list_events`` gives ``calendar``, ``list``, ``event``;
    runs longer than :data:`MAX_TERM_LENGTH` characters are skipped)."""
    seen: dict[str, None] = {}
    for w in _WORD.findall(text.lower().replace("_", " ")):
        if w not in _STOP and len(w) <= MAX_TERM_LENGTH:
            seen.setdefault(normalize_term(w), None)
    return list(seen)


def query_terms(text: str) -> frozenset[str]:
    """The terms of a request (the current user input): what it asks about."""
    return frozenset(text_terms(text))


def _labels(items: Iterable[object]) -> str:
    return " ".join(str(i.get("label") or "") for i in items if isinstance(i, dict))


def memory_terms(mem: ToolMemory) -> list[str]:
    """The terms a memory can be found by, at most :data:`MAX_MEMORY_TERMS`: its tool
    name, its summary and the labels its extractor recorded next to entity ids
    (``payload["ids"][*]["label"]``), in that order."""
    return terms_of(mem.source_tool, mem.summary, mem.payload)


def terms_of(source_tool: object, summary: object, payload: object) -> list[str]:
    """:func:`memory_terms` from a memory's stored fields (a JSON body that may lack
    some of them: missing or non-text fields count as empty)."""
    ids = payload.get("ids") if isinstance(payload, dict) else None
    labels = _labels(ids if isinstance(ids, list) else [])
    text = f"{source_tool if isinstance(source_tool, str) else ''} {summary if isinstance(summary, str) else ''} {labels}"
    return text_terms(text)[:MAX_MEMORY_TERMS]
