"""Tool-call id bookkeeping: one unique, well-formed id per call within a transcript.

Real transcripts reuse call ids (tau-bench runs, SWE-agent function-calling demos), use ids
with characters providers reject, or omit them.  A faithful replay of such a transcript
would be invalid for every provider, so each call gets an id that is unique within the
transcript and matches ``[A-Za-z0-9_-]{1,64}``; every rewrite is recorded as a note.  A
result is linked to the *nearest preceding unanswered* call that carried its raw id.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter

__all__ = ["MAX_CALL_ID_CHARS", "CallIdRegistry"]

MAX_CALL_ID_CHARS = 64
"""Longest call id kept as is, in characters."""

_VALID = re.compile(r"[A-Za-z0-9_-]+")
_INVALID_CHAR = re.compile(r"[^A-Za-z0-9_-]")


def _well_formed(raw: str) -> str:
    """``raw`` itself when valid; else a deterministic valid rewrite of it."""
    if len(raw) <= MAX_CALL_ID_CHARS and _VALID.fullmatch(raw):
        return raw
    cleaned = _INVALID_CHAR.sub("_", raw) or "call"
    if len(cleaned) > MAX_CALL_ID_CHARS:
        digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        cleaned = f"{cleaned[: MAX_CALL_ID_CHARS - 17]}_{digest}"
    return cleaned


class CallIdRegistry:
    """Issues unique call ids and links results to calls, writing notes as it goes.

    Args:
        notes: the transcript's note list; rewrites and unanswered calls are appended.
    """

    def __init__(self, notes: list[str]) -> None:
        self._notes = notes
        self._issued: set[str] = set()
        self._raw_seen: Counter[str] = Counter()
        self._pending: dict[str, list[str]] = {}
        self._unanswered: dict[str, str] = {}
        self._order: dict[str, int] = {}
        self._count = 0
        self._synthetic = 0

    def _unique(self, base: str, occurrence: int) -> str:
        if base not in self._issued and occurrence <= 1:
            return base
        n = max(occurrence, 2)
        while True:
            suffix = f"_dup{n}"
            candidate = base[: MAX_CALL_ID_CHARS - len(suffix)] + suffix
            if candidate not in self._issued:
                return candidate
            n += 1

    def call(self, raw: str | None, where: str) -> str:
        """Register a call seen at ``where`` and return its transcript-unique id.

        ``raw`` is the source id (``None`` or ``""`` when missing: a synthetic
        ``call_synthetic_<n>`` id is issued).
        """
        if not raw:
            self._synthetic += 1
            issued = self._unique(f"call_synthetic_{self._synthetic}", 1)
            self._notes.append(f"{where}: tool call without an id was given id {issued!r}")
            key = ""
        else:
            key = raw
            base = _well_formed(raw)
            if base != raw:
                self._notes.append(
                    f"{where}: call id {raw!r} rewritten to {base!r} "
                    f"(only [A-Za-z0-9_-], at most {MAX_CALL_ID_CHARS} characters)"
                )
            self._raw_seen[raw] += 1
            issued = self._unique(base, self._raw_seen[raw])
            if issued != base:
                self._notes.append(f"{where}: duplicate call id {raw!r} renamed to {issued!r}")
        self._issued.add(issued)
        self._pending.setdefault(key, []).append(issued)
        self._unanswered[issued] = where
        self._order[issued] = self._count
        self._count += 1
        return issued

    def result(self, raw: str | None, where: str) -> str | None:
        """Return the issued id of the call a result at ``where`` answers, or ``None``.

        A result with an id answers the nearest preceding unanswered call with that raw id;
        a result without an id answers the earliest unanswered call (noted).  ``None``
        means an orphan result (the caller keeps it as an observation).
        """
        if not raw:
            if not self._unanswered:
                return None
            issued = next(iter(self._unanswered))
            for stack in self._pending.values():
                if issued in stack:
                    stack.remove(issued)
                    break
            del self._unanswered[issued]
            self._notes.append(f"{where}: tool result without a call id linked to call {issued!r}")
            return issued
        waiting = self._pending.get(raw)
        if not waiting:
            return None
        # the newest run of consecutively issued calls with this id is one turn's
        # parallel calls: answer them first-in first-out; an older unanswered call
        # (interrupted) keeps waiting
        start = len(waiting) - 1
        while start > 0 and self._order[waiting[start - 1]] == self._order[waiting[start]] - 1:
            start -= 1
        issued = waiting.pop(start)
        del self._unanswered[issued]
        return issued

    def finish(self) -> None:
        """Append ``"call X has no result"`` notes for every call still unanswered."""
        for issued, where in self._unanswered.items():
            self._notes.append(f"{where}: call {issued} has no result")
