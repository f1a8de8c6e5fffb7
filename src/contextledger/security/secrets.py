"""Secret classification at record time (seed 000 §8 R3, R12: "when in doubt, omit").

Every text an agent loop records — tool-call arguments, tool results, message text — is
scanned with the detectors of ``detect-secrets`` used as a library (their regular
expressions and heuristic filters; no verification, no network):

* the token and key detectors (AWS access key ids, GitHub/GitLab/Slack/Stripe/npm/PyPI/
  SendGrid/Twilio/Discord/Telegram/Mailchimp/Artifactory/IBM/Azure/Cloudant/Square/
  SoftLayer tokens, OpenAI keys, JSON Web Tokens, credentials in URLs, private keys) —
  plus the current key formats of Anthropic, OpenAI (project and service-account keys),
  GitHub fine-grained tokens and Google API keys, from their public documentation;
* the keyword detector (``password = "…"``, ``api_key: …``, ``secret=…``), on the lines
  that name a secret-sounding key;
* high-entropy values in key=value positions whose key names a secret (``.env`` and
  config files, ``export TOKEN=…``, JSON ``"client_secret": "…"``), with the entropy
  measure of the detect-secrets high-entropy plugins.

A hit classifies the record ``secret_like`` (:class:`Screening`); the text kept for
models is the redacted form, each secret replaced by ``[secret: <type> · sha256:<12 hex>]``
(the fingerprint is a truncated SHA-256 of the secret value: it matches equal secrets
across records and tells nothing of a random token; like any unsalted hash it may
confirm a guess of a weak password).  The exact raw text is kept apart (encrypted at rest
when a key is configured) and shown only on an explicit, recorded request.

Cost: the detectors run over the whole text as compiled regular expressions; the keyword
and key=value rules look only at lines a cheap keyword search selects.  The benchmark
harness reports the cost per MB (``contextledger bench secrets``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

__all__ = ["MEMO_MIN_CHARS", "SECRET_MARKER", "Screening", "SecretFinding", "find_secrets", "redact", "redact_json_text", "screen_text"]

SECRET_MARKER = re.compile(r"\[secret: [^\]\n]{1,80} · sha256:[0-9a-f]{12}\]")
"""What a redaction looks like in stored and sent text."""

_FINGERPRINT_HEX = 12


@dataclass(frozen=True, kw_only=True)
class SecretFinding:
    """One secret in a text.

    Attributes:
        secret_type: the detector's name for it (``"AWS Access Key"``, ``"JSON Web Token"``).
        start / end: character offsets of the secret in the scanned text.
        fingerprint: ``sha256:<first 12 hex digits>`` of the secret value.
    """

    secret_type: str
    start: int
    end: int
    fingerprint: str

    @property
    def marker(self) -> str:
        """The text that replaces the secret: ``[secret: <type> · sha256:<hex>]``."""
        return f"[secret: {self.secret_type} · {self.fingerprint}]"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form without the secret (type, fingerprint, offsets)."""
        return {"type": self.secret_type, "fingerprint": self.fingerprint, "start": self.start, "end": self.end}


@dataclass(frozen=True, kw_only=True)
class Screening:
    """A text after classification: ``text`` is the redacted form (the input itself when
    nothing was found) and ``findings`` the secrets that were replaced."""

    text: str
    findings: tuple[SecretFinding, ...] = ()

    @property
    def secret(self) -> bool:
        """Whether the text held at least one secret (the record is ``secret_like``)."""
        return bool(self.findings)

    def summary(self) -> list[dict[str, str]]:
        """``[{"type", "fingerprint"}]`` of each distinct secret, in order of appearance."""
        seen: dict[tuple[str, str], None] = {}
        for f in self.findings:
            seen.setdefault((f.secret_type, f.fingerprint), None)
        return [{"type": t, "fingerprint": fp} for t, fp in seen]


def _fingerprint(value: str) -> str:
    return "sha256:" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:_FINGERPRINT_HEX]


# -- detectors ---------------------------------------------------------------------------
# formats published by the vendors that detect-secrets 1.5 does not know yet
_EXTRA_PATTERNS: tuple[tuple[str, str], ...] = (
    ("Anthropic API Key", r"sk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_-]{40,}"),
    ("OpenAI Token", r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"),
    ("GitHub Token", r"github_pat_[A-Za-z0-9_]{60,}"),
    ("Google API Key", r"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),
    # RFC 3986 userinfo ``scheme://user:password@host``: the password is everything up to
    # the last "@" before the host, sub-delimiters (! $ & ' ( ) * + , ; =) included —
    # detect-secrets' own pattern stops at them and missed ``admin:p4ss!word@db``
    ("Basic Auth Credentials", r"://[^\s/?#@:]*:(?P<value>[^\s/?#]+)@(?=[^\s/?#@]*(?:[/?#\s\"'`]|$))"),
)
"""``(type, pattern)``; each pattern starts with a literal, which is all a search costs on
a text without it.  A pattern with a ``value`` group names the secret in its match."""
_NOT_SECRETS = frozenset({"Public IP (ipv4)", "Secret Keyword", "Base64 High Entropy String", "Hex High Entropy String"})
"""detect-secrets types run by other rules (keyword, key=value entropy) or not secrets at
all (a public IP address is not a credential)."""

_ASSIGNMENT_WORDS = ("key", "pwd", "pw", "pass", "token", "secret", "auth", "credential", "contrase")
"""Lower-case words that select the windows where assignment-style rules run: the
keyword detector, the key=value entropy rule and the detect-secrets detectors built on
``build_assignment_regex`` (:data:`_IN_WINDOWS`)."""

_IN_WINDOWS = frozenset({"Cloudant Credentials", "IBM Cloud IAM Key", "IBM COS HMAC Credentials", "SoftLayer Credentials"})
"""Detectors whose every pattern is an assignment ``<…key|pass|token…> = <value>`` (or a
URL only checked with it): run on the keyword windows, not over the whole text."""

@dataclass(frozen=True)
class _Gate:
    """What a text must contain for a detector to match at all, checked before running
    it (derived from the detector's patterns): one of ``exact`` (case-sensitive), one of
    ``folded`` (in the ASCII-lower-cased text), or a match of ``pattern`` (a cheap
    search with a literal first character)."""

    exact: tuple[str, ...] = ()
    folded: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = None

    def admits(self, text: str, lower: str) -> bool:
        return any(g in text for g in self.exact) or any(g in lower for g in self.folded) or (self.pattern is not None and self.pattern.search(text) is not None)


_GATES: dict[str, _Gate] = {
    # a detector not listed here always runs
    "AWS Access Key": _Gate(exact=("A3T", "ABIA", "ACCA", "AKIA", "ASIA"), folded=("aws",)),
    "Artifactory Credentials": _Gate(exact=("AKC",), pattern=re.compile(r"AP[\dA-F]")),
    "Azure Storage Account access key": _Gate(exact=("AccountKey=",)),
    "Basic Auth Credentials": _Gate(pattern=re.compile(r"://[^\s:/?#@]*:[^\s/?#]+@")),
    "Discord Bot Token": _Gate(pattern=re.compile(r"\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}")),
    "GitHub Token": _Gate(exact=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    "GitLab Token": _Gate(exact=("GR1348941",), pattern=re.compile(r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-")),
    "JSON Web Token": _Gate(exact=("eyJ",)),
    "Mailchimp Access Key": _Gate(pattern=re.compile(r"-us\d")),
    "NPM tokens": _Gate(exact=("_authToken",)),
    "OpenAI Token": _Gate(exact=("T3BlbkFJ", "sk-")),
    "Private Key": _Gate(exact=("PRIVATE KEY", "PuTTY-User-Key-File")),
    "PyPI Token": _Gate(exact=("pypi-",)),
    "SendGrid API Key": _Gate(exact=("SG.",)),
    "Slack Token": _Gate(folded=("xox", "hooks.slack.com")),
    "Square OAuth Secret": _Gate(exact=("sq0csp-",)),
    "Stripe Access Key": _Gate(exact=("k_live_",)),
    "Telegram Bot Token": _Gate(pattern=re.compile(r":[0-9A-Za-z_-]{35}")),
    "Twilio API Key": _Gate(pattern=re.compile(r"AC[a-z0-9]{32}|SK[a-z0-9]{32}")),
    "Anthropic API Key": _Gate(exact=("sk-ant-",)),
    "Google API Key": _Gate(exact=("AIza",)),
}

_LONG_VALUE = re.compile(r"[A-Za-z0-9_-]{24}")
"""The shortest value an :data:`_IN_WINDOWS` detector matches (24 lower-case letters of
a Cloudant key); a window without one is skipped."""
_PEM_BLOCK = re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|\Z)", re.S)
_GENERIC = {"Secret Keyword": 1, "AWS secret access key": 1, "High Entropy Secret": 2}
"""Rank of the generic rules when hits overlap (0, the default, for token formats)."""
_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}

Values = Callable[[str], Iterator[str]]


@dataclass(frozen=True)
class _Detector:
    secret_type: str
    values: Values
    gate: _Gate | None
    in_windows: bool


_DELIMITERS = " \t\r\n=:\"'"


def _value_of(m: re.Match[str]) -> str:
    """The secret in a detector's match.  detect-secrets patterns either match the token
    itself (possibly with the delimiter before and after it, or with a capture group
    for its prefix: ``(ghp|gho|…)_…``), or capture the value at the end of an
    assignment (``://user:(password)@``, ``aws…key…'(value)'``)."""
    if m.re.groups:
        ends = [(m.end(g), g) for g in range(1, m.re.groups + 1) if m.group(g)]
        if ends:
            end, g = max(ends)
            if m.end(0) - end <= 2 and m.start(g) > m.start(0):
                return m.group(g)
    return m.group(0).strip(_DELIMITERS)


def _plugin_values(plugin: Any) -> Values:
    """The secret values a detect-secrets regex plugin finds in a text (its own
    formal-validity check applied when it has one, as the JSON Web Token plugin)."""
    valid = getattr(plugin, "is_formally_valid", None)

    def values(text: str) -> Iterator[str]:
        for regex in plugin.denylist:
            for m in regex.finditer(text):
                value = _value_of(m)
                if value and (valid is None or valid(value)):
                    yield value

    return values


@cache
def _detectors() -> tuple[_Detector, ...]:
    """Every token/key detector of detect-secrets (plus :data:`_EXTRA_PATTERNS`), built
    once per process."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector

    found: list[_Detector] = []
    plugins: dict[str, type[Any]] = get_mapping_from_secret_type_to_class()
    for secret_type, cls in sorted(plugins.items()):
        if secret_type in _NOT_SECRETS or not issubclass(cls, RegexBasedDetector):
            continue
        found.append(_Detector(secret_type, _plugin_values(cls()), _GATES.get(secret_type), secret_type in _IN_WINDOWS))
    for secret_type, pattern in _EXTRA_PATTERNS:
        found.append(_Detector(secret_type, _matches(re.compile(pattern)), _GATES[secret_type], False))
    return tuple(found)


def _matches(regex: re.Pattern[str]) -> Values:
    group = "value" if "value" in regex.groupindex else 0

    def values(text: str) -> Iterator[str]:
        return (m.group(group) for m in regex.finditer(text))

    return values


_SECRET_KEY = re.compile(r"(?:secret|token|passw|passwd|pwd|api_?key|apikey|access_?key|private_?key|credential|auth(?!or)|signature|session_?key|bearer|contrase)", re.I)
_AWS_SECRET_KEY = re.compile(r"aws.{0,20}secret", re.I)
# KEY=value / key: value (optionally quoted, `export`, JSON "key": "value")
_ASSIGNMENT = re.compile(
    r"""(?:^|(?<=[\s{,;(]))(?:export\s+)?["']?(?P<key>[A-Za-z_][\w.-]{0,80})["']?\s*(?::=|=>|[:=])\s*(?P<q>["']?)(?P<value>[A-Za-z0-9+/=_.~-]{12,512})(?P=q)(?=$|[\s,;})\]])""",
    re.M,
)
_PLACEHOLDER = re.compile(r"(?i)^(?:x+|\*+|\.+|-+|_+|none|null|nil|true|false|undefined|changeme|change_me|example\w*|your[_-]?\w*|placeholder|redacted|dummy\w*|test\w*|secret|password|token|\$\{?\w+\}?|<[^>]*>|\{[^}]*\}|%\(?\w+\)?s?)$")
_CHOSEN_PLACEHOLDER = re.compile(r"(?i)example|placeholder|dummy|changeme|change[_-]me|your[_-]|fake|sample|not[_-]for[_-]prod|^test[\w-]*$|^(?:my|some)[_-]")
"""Values a person typed as a stand-in (``your-api-key``, ``test-secret-key``,
``…-placeholder``): never flagged by the keyword and key=value rules (the token formats
are matched by their shape, which no stand-in has)."""
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_="
_HEX = "0123456789abcdefABCDEF"
_PASSWORDISH = re.compile(r"[0-9!@#%^&*+=?~]")
"""A keyword value without a digit or a symbol (``ollama``, ``proxy-handled``,
``REDACTED_API_KEY``) is a name or a stand-in, not a password; nor is one with spaces (a
command: ``node scripts/validate-secrets.js``)."""
_REFERENCE = re.compile(r"[A-Za-z_$][\w$]*(?:\.[\w$]+)*(?:\(\))?;?")


def _reference(value: str, line: str) -> bool:
    """An unquoted keyword value that reads as code — a member or call (``env.API_KEY;``,
    ``settings.password``, ``get_token()``), a statement's last word, or a bare word
    without digits (``password: string``) — is not a password; a quoted one is a literal."""
    if any(f"{q}{value}{q}" in line for q in "\"'`"):
        return False
    if not _REFERENCE.fullmatch(value):
        return False
    return "." in value or value.endswith((";", ")")) or value.isalpha()


def _entropy(value: str, charset: str) -> float:
    n = len(value)
    counts: dict[str, int] = {}
    for ch in value:
        counts[ch] = counts.get(ch, 0) + 1
    return -sum((c / n) * math.log2(c / n) for ch, c in counts.items() if ch in charset)


def _random_looking(value: str) -> bool:
    """Value of a secret-named key that looks random: mixed letters and digits with the
    entropy the detect-secrets high-entropy plugins measure (lowered for short values:
    a 20-character random string cannot reach their 4.5-bit limit)."""
    if not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
        return False
    if all(c in _HEX for c in value):
        return _entropy(value, _HEX) >= 3.0
    return _entropy(value, _B64) >= min(4.0, math.log2(len(value)) - 0.7)


def _filtered(value: str, line: str) -> bool:
    """detect-secrets' heuristic filters (templated, ``$VAR``, sequential strings, indirect
    references) plus placeholders: ``True`` when ``value`` is not a secret."""
    from detect_secrets.filters import heuristic as h

    return (
        len(value) < 4
        or bool(_PLACEHOLDER.match(value))
        or h.is_templated_secret(value)
        or h.is_prefixed_with_dollar_sign(value)
        or h.is_sequential_string(value)
        or SECRET_MARKER.search(value) is not None
        or (bool(line) and h.is_indirect_reference(line))
    )


def _lowered(text: str) -> str:
    """``text`` with ASCII letters lower-cased and every offset unchanged."""
    lower = text.lower()
    return lower if len(lower) == len(text) else text.translate(_ASCII_LOWER)


_ASSIGNED = re.compile(r"""[a-z0-9_.-]{0,40}["'\]]{0,2}\s{0,4}(?::=|=>|==?|!=|:|\()""")
"""What follows a keyword that is being given a value: ``password=``, ``api_key":``,
``secret (`` — a keyword that is not (``5 passed``, ``keyboard``) opens no window."""
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.-")
_WINDOW_CHARS = 512
_KEYWORD_CHARS = 240


def _windows(text: str, lower: str) -> list[tuple[int, int]]:
    """Spans where assignment-style rules run: for each :data:`_ASSIGNMENT_WORDS` hit
    followed by an assignment (:data:`_ASSIGNED`), from the start of the key holding the
    word to the end of its line (at most :data:`_WINDOW_CHARS` characters on, extended to
    the end of the token there so a value is never cut).  Sorted, overlaps merged."""
    spans: list[tuple[int, int]] = []
    for word in _ASSIGNMENT_WORDS:
        i = lower.find(word)
        while i >= 0:
            after = _ASSIGNED.match(lower, i + len(word))
            if after is None:
                i = lower.find(word, i + len(word))
                continue
            start = i
            while start > 0 and i - start < 64 and lower[start - 1] in _KEY_CHARS:
                start -= 1
            if start > 0 and text[start - 1] in "\"'[":
                start -= 1
            end = text.find("\n", after.end(), after.end() + _WINDOW_CHARS)
            if end < 0:
                end = min(len(text), after.end() + _WINDOW_CHARS)
                while end < len(text) and not text[end].isspace() and text[end] not in "\"',;":
                    end += 1
            spans.append((start, end))
            i = lower.find(word, after.end())
    spans.sort()
    merged: list[tuple[int, int]] = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def _line_of(window: str, at: int) -> str:
    return window[window.rfind("\n", 0, at) + 1 : (window.find("\n", at) + 1 or len(window) + 1) - 1]


def _keyword_values(window: str) -> Iterator[tuple[str, str]]:
    from detect_secrets.plugins.keyword import CONFIG_DENYLIST_REGEX_TO_GROUP, KeywordDetector

    detector = KeywordDetector()
    for line in window.split("\n"):
        # the detector's patterns cost time quadratic in the line: a window starts at the
        # key, so its value begins within the first characters; a value the cut shortens
        # is extended to its end in the whole line below
        head = line[:_KEYWORD_CHARS]
        values = list(detector.analyze_string(head)) or [v for v in detector.analyze_string(head, CONFIG_DENYLIST_REGEX_TO_GROUP) if " " not in v.strip()]
        for v in values:
            v = v.strip()
            at = line.find(v)
            if at >= 0 and at + len(v) >= len(head):
                end = at + len(v)
                while end < len(line) and not line[end].isspace() and line[end] not in "\"'`,;":
                    end += 1
                v = line[at:end]
            if len(v) >= 6 and _PASSWORDISH.search(v) and not v[0].isspace() and " " not in v and not _reference(v, line) and not _CHOSEN_PLACEHOLDER.search(v) and not _filtered(v, line):
                yield "Secret Keyword", v


_AWS_SECRET_VALUE = re.compile(r"\A(?=.*[0-9])(?=.*[a-z])(?=.*[A-Z])[A-Za-z0-9/+=]{40,64}\Z")
"""An AWS secret access key's shape (40 base64 characters, mixed case and digits): under an
``aws…secret`` key it is a secret whatever words it spells (the documentation's
``…EXAMPLEKEY`` included — a real key can contain any letters)."""


def _assignment_values(window: str) -> Iterator[tuple[str, str]]:
    for m in _ASSIGNMENT.finditer(window):
        key, value = m.group("key"), m.group("value")
        if not _SECRET_KEY.search(key) or _filtered(value, _line_of(window, m.start("value"))):
            continue
        aws = _AWS_SECRET_KEY.search(key) is not None
        if aws and _AWS_SECRET_VALUE.fullmatch(value):
            yield "AWS secret access key", value
        elif _random_looking(value) and not _CHOSEN_PLACEHOLDER.search(value):
            yield ("AWS secret access key" if aws else "High Entropy Secret"), value


def _occurrences(text: str, value: str, start: int = 0, end: int | None = None) -> Iterator[int]:
    end = len(text) if end is None else end
    i = text.find(value, start, end)
    while i >= 0:
        yield i
        i = text.find(value, i + len(value), end)


@cache
def _all_gates() -> tuple[tuple[str, ...], tuple[str, ...], tuple[re.Pattern[str], ...]]:
    """The union of every gate: a text that passes none of it skips every gated detector."""
    gates = [d.gate for d in _detectors() if d.gate is not None]
    return (
        tuple(sorted({x for g in gates for x in g.exact})),
        tuple(sorted({x for g in gates for x in g.folded})),
        tuple(g.pattern for g in gates if g.pattern is not None),
    )


def _scan(text: str, lower: str, windows: list[tuple[int, int]]) -> Iterator[tuple[int, int, str]]:
    """``(start, end, type)`` of each detector hit (gated detectors skipped cheaply)."""
    exact, folded, patterns = _all_gates()
    gated = any(map(text.__contains__, exact)) or any(map(lower.__contains__, folded)) or any(p.search(text) for p in patterns)
    for d in _detectors():
        g = d.gate
        if g is not None and not (
            gated and (any(map(text.__contains__, g.exact)) or any(map(lower.__contains__, g.folded)) or (g.pattern is not None and g.pattern.search(text)))
        ):
            continue
        if d.in_windows and not windows:
            continue
        if d.in_windows:
            spans = [w for w in windows if _LONG_VALUE.search(text, w[0], w[1])]
        else:
            spans = [(0, len(text))]
        for s, e in spans:
            for value in set(d.values(text[s:e] if d.in_windows else text)):
                if not value or _filtered(value, ""):
                    continue
                if d.secret_type == "Private Key":
                    yield from ((m.start(), m.end(), d.secret_type) for m in _PEM_BLOCK.finditer(text))
                else:
                    yield from ((i, i + len(value), d.secret_type) for i in _occurrences(text, value, s, e))
    for s, e in windows:
        window = text[s:e]
        for secret_type, value in [*_assignment_values(window), *_keyword_values(window)]:
            yield from ((s + i, s + i + len(value), secret_type) for i in _occurrences(window, value))


MEMO_MIN_CHARS = 256 * 1024
"""Texts of at least this many characters have their findings remembered (see
:func:`find_secrets`)."""
_MEMO_SIZE = 16
_memo: dict[tuple[int, bytes], tuple[SecretFinding, ...]] = {}
_memo_lock = threading.Lock()


def find_secrets(text: str) -> list[SecretFinding]:
    """Every secret in ``text`` with its position (overlapping hits merged, the earliest
    and longest first).  Pure and deterministic.

    The findings of the last :data:`_MEMO_SIZE` texts of at least :data:`MEMO_MIN_CHARS`
    characters are remembered by length and BLAKE2b digest (the text itself is not
    kept), so a multi-megabyte text that two stages screen (the proxy screens a request
    body, then records its messages) is scanned once; every character is still read by
    the digest, and a text that differs in any character is scanned anew."""
    if len(text) < 8:
        return []
    if len(text) < MEMO_MIN_CHARS:
        return _find(text)
    key = (len(text), hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest())
    with _memo_lock:
        hit = _memo.pop(key, None)
    if hit is None:
        hit = tuple(_find(text))
    with _memo_lock:
        _memo.pop(key, None)
        while len(_memo) >= _MEMO_SIZE:
            del _memo[next(iter(_memo))]
        _memo[key] = hit
    return list(hit)


def _find(text: str) -> list[SecretFinding]:
    lower = _lowered(text)
    hits = sorted(_scan(text, lower, _windows(text, lower)), key=lambda h: (h[0], -h[1]))
    merged: list[list[Any]] = []
    for start, end, secret_type in hits:
        if merged and start < merged[-1][1]:
            # overlapping hits become one redaction covering both, named by the most
            # specific detector (a token format before a keyword before an entropy rule)
            last = merged[-1]
            last[1] = max(last[1], end)
            if _GENERIC.get(secret_type, 0) < _GENERIC.get(last[2], 0):
                last[2] = secret_type
            continue
        merged.append([start, end, secret_type])
    return [SecretFinding(secret_type=t, start=a, end=b, fingerprint=_fingerprint(text[a:b])) for a, b, t in merged]


def redact(text: str, findings: list[SecretFinding] | tuple[SecretFinding, ...]) -> str:
    """``text`` with each finding replaced by its :attr:`SecretFinding.marker`."""
    if not findings:
        return text
    pieces: list[str] = []
    pos = 0
    for f in findings:
        pieces.append(text[pos : f.start])
        pieces.append(f.marker)
        pos = f.end
    pieces.append(text[pos:])
    return "".join(pieces)


def screen_text(text: str) -> Screening:
    """Classify and redact one text (see the module docstring)."""
    findings = find_secrets(text)
    return Screening(text=redact(text, findings), findings=tuple(findings))


def redact_json_text(text: str) -> Screening:
    """Like :func:`screen_text` for a JSON text (tool-call arguments): secrets are found
    in the text as written (so ``"password": "…"`` keeps its key context) and the result
    stays valid JSON when the input was — a replacement that would break an escape
    sequence falls back to redacting the decoded string values."""
    from contextledger.limits import loads_json

    screening = screen_text(text)
    if not screening.secret:
        return screening
    try:
        loads_json(text)
    except ValueError:
        return screening  # not JSON to begin with: textual redaction is all there is
    try:
        loads_json(screening.text)
        return screening
    except ValueError:
        pass
    values = {text[f.start : f.end]: f.marker for f in screening.findings}

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            for secret, marker in values.items():
                v = v.replace(secret, marker)
            return v
        if isinstance(v, dict):
            return {walk(k): walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    redacted = json.dumps(walk(loads_json(text)), ensure_ascii=False)
    if any(secret in redacted for secret in values):  # an escape hid a secret: keep none of it
        redacted = json.dumps({"_redacted": [f.marker for f in screening.findings]}, ensure_ascii=False)
    return Screening(text=redacted, findings=screening.findings)
