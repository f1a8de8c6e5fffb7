"""Code-aware tokenisation for the keyword route (seed 001 §4.5: "keyword search —
function names, error codes, field names, configuration keys").

One function, :func:`tokens`, turns text into index tokens; documents and queries go
through it alike, and the database only stores and matches the tokens it gives
(SQLite FTS5 over space-separated tokens, PostgreSQL ``array_to_tsvector``), so the
two backends match the same way.  A token is lower-case letters, digits, ``_`` or CJK
characters:

* words: folded with :func:`contextledger.memory.terms.normalize_term`
  (``renewal`` / ``renewed`` → ``renew``), English function words dropped;
* identifiers kept whole and split: ``getUserById`` → ``getuserbyid``, ``get``,
  ``user``, ``id``; ``calendar_list_events`` → itself, ``calendar``, ``list``, ``event``;
  ``os.path.join`` → ``os_path_join`` and its parts;
* paths: ``src/app/auth_service.py`` → ``src_app_auth_service_py`` (whole),
  ``auth_service_py`` (file name) and every component's parts;
* error codes kept whole and split: ``E501`` → ``e501``, ``e``, ``501``; ``TS2345`` →
  ``ts2345``, ``ts``, ``2345``; ``ORA-00942`` → ``ora_00942``, ``ora``, ``00942``;
  ``HTTP 404`` / ``status 503`` / ``exit code 137`` → ``http_404`` … and the number;
* hexadecimal digests (8+ hex characters mixing digits and letters: ``8e927421a04b``,
  a commit or ``sha256:`` handle) kept whole only — their digit fragments would match
  any number in any other record;
* Japanese and Chinese runs: split by script (kanji, katakana, hiragana), then
  character bigrams within each piece (a single character alone); hiragana pieces are
  dropped (particles and inflections carry no topic).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from contextledger.limits import scan_window
from contextledger.memory.terms import STOPWORDS, normalize_term
from contextledger.security.screen import credential_shaped

__all__ = ["MAX_DOC_TOKENS", "MAX_QUERY_TOKENS", "MAX_TOKEN_LENGTH", "identifier_tokens", "query_tokens", "tokens"]

MAX_TOKEN_LENGTH = 64
"""Longer whole forms (hashes, base64, minified code) are dropped; their parts stay."""

MAX_DOC_TOKENS = 400
"""Distinct tokens indexed per record (the first in text order)."""

MAX_QUERY_TOKENS = 32
"""Distinct tokens of one query (the first in text order)."""

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
_CHUNK = re.compile(rf"[{_CJK}]+|[A-Za-z0-9_][A-Za-z0-9_.:/\\-]*")
_CODE_PAIR = re.compile(r"\b(https?|status|code|error|errno|exit|signal|sig)[\s:=#-]*(\d{2,5})\b", re.IGNORECASE)
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_SPLIT = re.compile(r"[_.:/\\-]+")
_SCRIPT = re.compile(r"[\u30a0-\u30ff\uff66-\uff9f]+|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_SHORT_STOP = frozenset(["an", "in", "of", "is", "it", "to", "on", "at", "by", "or", "as", "be", "do", "if", "so", "no", "we", "my", "me", "up", "us", "he", "am"])


def _fold(text: str) -> str:
    """NFKC (full-width → ASCII, half-width kana → kana), accents removed."""
    text = unicodedata.normalize("NFKC", text)
    if text.isascii():
        return text
    nfd = unicodedata.normalize("NFD", text)
    marks: dict[int, str | int | None] = {ord(c): None for c in set(nfd) if unicodedata.combining(c) and c not in "\u3099\u309a"}
    return nfd.translate(marks) if marks else nfd


def _cjk(run: str, out: dict[str, None]) -> None:
    for piece in _SCRIPT.findall(unicodedata.normalize("NFC", run)):
        if len(piece) == 1:
            out.setdefault(piece, None)
        for i in range(len(piece) - 1):
            out.setdefault(piece[i : i + 2], None)


def _word(part: str, out: dict[str, None]) -> None:
    """One alphanumeric piece: camelCase split, each piece folded."""
    pieces = _CAMEL.findall(part)
    if len(pieces) > 1:
        whole = part.lower()
        if len(whole) <= MAX_TOKEN_LENGTH:
            out.setdefault(whole, None)
    for p in pieces:
        low = p.lower()
        if low in STOPWORDS or low in _SHORT_STOP or (len(low) < 2 and not low.isdigit()) or len(low) > MAX_TOKEN_LENGTH:
            continue
        out.setdefault(low if low.isdigit() else normalize_term(low), None)


_CODE = re.compile(r"([A-Za-z]{1,6})(\d{2,6})")
_PATH_SEP = re.compile(r"[/\\]")


def _chunk(chunk: str, out: dict[str, None], query: bool = False) -> None:
    for t in _chunk_tokens(chunk, query):
        out.setdefault(t, None)


RANDOM_PART_CHARS = 16
"""A query part this long or longer that reads as a random token
(:func:`contextledger.security.screen.credential_shaped`) is matched whole only."""

SHORT_RANDOM_PART_CHARS = 8
"""A shorter query part (from this many characters) is matched whole only when it also
has no letter run longer than three (``q8Rk3Zt1``, ``Zq81xLk2``; not ``getUserById2``,
``i18nKeys``): a guessed prefix of a secret must not match through its one-digit and
two-letter fragments."""

_LONG_LETTERS = re.compile(r"[A-Za-z]{4}")

_HEX = frozenset("0123456789abcdefABCDEF")


def _hex_digest(part: str) -> bool:
    """8+ hexadecimal characters mixing digits and letters (a digest or commit id)."""
    return len(part) >= 8 and not part.isdigit() and not part.isalpha() and _HEX.issuperset(part)


@lru_cache(maxsize=65536)
def _chunk_tokens(chunk: str, query: bool = False) -> tuple[str, ...]:
    """The tokens of one chunk in order (memoised: logs and code repeat their chunks).
    ``query``: a random-looking part (:data:`RANDOM_PART_CHARS`) gives its whole form
    only — its two-letter and digit fragments would match any document (and would make
    a typed secret look found)."""
    out: dict[str, None] = {}
    chunk = chunk.strip("_.:/\\-")
    if not chunk:
        return ()
    parts = [p for p in _SPLIT.split(chunk) if p]
    if len(parts) > 1:
        whole = "_".join(parts).lower()
        if len(whole) <= MAX_TOKEN_LENGTH:
            out.setdefault(whole, None)
        if "/" in chunk or "\\" in chunk:
            name = _SPLIT.split(_PATH_SEP.split(chunk)[-1])
            if len(name) > 1:
                out.setdefault("_".join(name).lower()[:MAX_TOKEN_LENGTH], None)
    for p in parts:
        m = _CODE.fullmatch(p)
        if m:  # E501, TS2345, CVE2024 …: whole, letters, digits
            out.setdefault(p.lower(), None)
            if len(m.group(1)) > 1:
                out.setdefault(m.group(1).lower(), None)
            out.setdefault(m.group(2), None)
            continue
        if _hex_digest(p) or (query and _random_part(p)):
            if len(p) <= MAX_TOKEN_LENGTH:
                out.setdefault(p.lower(), None)
            continue
        _word(p, out)
    return tuple(out)


def _random_part(part: str) -> bool:
    """Whether a query part reads as a random token (:data:`RANDOM_PART_CHARS`,
    :data:`SHORT_RANDOM_PART_CHARS`)."""
    if len(part) < SHORT_RANDOM_PART_CHARS or not credential_shaped(part, min_runs=0.55):
        return False
    return len(part) >= RANDOM_PART_CHARS or _LONG_LETTERS.search(part) is None


def tokens(text: str, *, limit: int = MAX_DOC_TOKENS, query: bool = False) -> list[str]:
    """Distinct index tokens of ``text`` in first-occurrence order, at most ``limit``
    (see the module docstring for the rules).  Deterministic; the same for documents
    and queries, except that a query's random-looking parts are kept whole only
    (``query``, see :func:`_chunk_tokens`).  A huge text is read through
    :func:`~contextledger.limits.scan_window` (its head and tail)."""
    out: dict[str, None] = {}
    text = _fold(scan_window(text))
    for m in _CODE_PAIR.finditer(text):
        word = m.group(1).lower()
        out.setdefault(f"{'http' if word == 'https' else word}_{m.group(2)}", None)
    for m in _CHUNK.finditer(text):
        chunk = m.group(0)
        if chunk[0] >= "\u3040" and not chunk[0].isascii():
            _cjk(chunk, out)
        else:
            _chunk(chunk, out, query)
        if len(out) >= limit:
            break
    return list(out)[:limit]


def query_tokens(text: str) -> list[str]:
    """:func:`tokens` of a query, at most :data:`MAX_QUERY_TOKENS`."""
    return tokens(text, limit=MAX_QUERY_TOKENS, query=True)


_PROSE_HYPHEN = re.compile(r"(?<![a-z])[a-z]+(?:-[a-z]+)+")


def identifier_tokens(text: str) -> list[str]:
    """The whole-form index tokens of the code identifiers ``text`` names, in order:
    camelCase / PascalCase words of two pieces or more (``permissionFlag`` →
    ``permissionflag``), names joined by ``_ . : / \\ -`` (``calendar_list_events``,
    ``os.path.join`` → ``os_path_join``, paths) and error codes (``E501`` → ``e501``).
    Plain words, capitalised words and hyphenated prose (``follow-up``) are not
    identifiers.  Each token is one :func:`tokens` gives for the same text, so a
    document holding the identifier holds the token (seed 001 §4.5: keyword search of
    "function names, error codes, field names, configuration keys")."""
    out: dict[str, None] = {}
    for m in _CHUNK.finditer(_fold(text)):
        chunk = m.group(0).strip("_.:/\\-")
        if not chunk or not chunk[0].isascii() or _PROSE_HYPHEN.fullmatch(chunk):
            continue
        parts = [p for p in _SPLIT.split(chunk) if p]
        if len(parts) > 1:
            whole = "_".join(parts).lower()
        elif _CODE.fullmatch(chunk) or len(_CAMEL.findall(chunk)) > 1:
            whole = chunk.lower()
        else:
            continue
        if len(whole) <= MAX_TOKEN_LENGTH and any(c.isalpha() for c in whole) and whole in _chunk_tokens(m.group(0), True):
            out.setdefault(whole, None)
    return list(out)
