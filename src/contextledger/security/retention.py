"""Retention as policy data (seed 000 §4.15, §8 R2).

A retention policy is an ordered list of rules, loaded from TOML (the bundled
``retention.toml`` unless ``contextledger gc --retention FILE`` names another); for each
record the first rule that matches applies::

    [[rule]]
    record_kind = "artifact"        # "artifact" (a tool result's raw payload) or "assembly"
    privacy_class = "secret_like"   # optional: only records of this class
    tool = "Read"                   # optional: only artifacts of this tool
    after = "90d"                   # age (s, m, h, d) from the record's creation
    action = "delete"               # keep | archive | redact | hash | delete | sample
    sample_every = 10               # "sample": keep one assembly log in N

Actions on an artifact's raw payload (the row, its sha256, size and memory always stay,
so every reference remains valid and explains itself):

* ``keep`` — nothing;
* ``archive`` — the payload moves to the sealed (encrypted) blob area, never inline;
* ``redact`` — the payload is replaced by its redacted form (every secret replaced by its
  marker; sha256 and size then describe the redacted bytes, the original digest is kept);
* ``hash`` — the payload is deleted; its sha256 stays to verify a copy kept elsewhere, and
  the memory keeps its summary;
* ``delete`` — the payload is deleted and the memory reduced to metadata and provenance
  (``Ledger.apply_retention``): explain says "deleted by retention on <date>".

On assembly logs, ``sample`` keeps one in ``sample_every`` (chosen by the id's hash, so
the same logs survive every run) and deletes the others with their decisions; ``delete``
deletes them all.  Every action is a PolicyDecision of family ``retention``.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from datetime import timedelta
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from contextledger.errors import PolicyError
from contextledger.records.enums import PrivacyClass

__all__ = ["RetentionPolicy", "RetentionRule", "default_retention", "keep_sampled", "load_retention", "parse_duration"]

_DURATION = re.compile(r"^\s*(\d+)\s*([smhd]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str | int) -> timedelta:
    """``"90d"``, ``"12h"``, ``"30m"``, ``"45s"`` or a number of seconds.

    Raises:
        ValueError: anything else.
    """
    if isinstance(text, int):
        return timedelta(seconds=text)
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"not a duration: {text!r} (expected e.g. 90d, 12h, 30m, 45s)")
    return timedelta(seconds=int(m.group(1)) * _UNITS[m.group(2)])


class RetentionRule(BaseModel):
    """One rule (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    record_kind: Literal["artifact", "assembly"]
    action: Literal["keep", "archive", "redact", "hash", "delete", "sample"]
    after: str = "0s"
    privacy_class: PrivacyClass | None = None
    tool: str | None = None
    sample_every: int = Field(default=10, ge=1)

    @field_validator("after")
    @classmethod
    def _duration(cls, v: str) -> str:
        parse_duration(v)
        return v

    @property
    def age(self) -> timedelta:
        """``after`` as a duration."""
        return parse_duration(self.after)

    def matches(self, kind: str, privacy_class: PrivacyClass | None = None, tool: str | None = None) -> bool:
        """Whether this rule applies to a record of ``kind`` / class / tool."""
        return kind == self.record_kind and (self.privacy_class is None or self.privacy_class is privacy_class) and (self.tool is None or self.tool == tool)


class RetentionPolicy(BaseModel):
    """Ordered retention rules; the first match wins, no match means keep."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: tuple[RetentionRule, ...] = ()

    def first(self, kind: str, privacy_class: PrivacyClass | None = None, tool: str | None = None) -> tuple[int, RetentionRule] | None:
        """``(index, rule)`` of the first rule matching, or ``None``."""
        for i, r in enumerate(self.rule):
            if r.matches(kind, privacy_class, tool):
                return i, r
        return None


def load_retention(path: Path) -> RetentionPolicy:
    """Load a retention policy file.

    Raises:
        PolicyError: unreadable TOML or an invalid rule (key path in the message).
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PolicyError(f"cannot read the retention policy: {exc}", source=str(path)) from None
    try:
        return RetentionPolicy.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise PolicyError(err["msg"], key_path=".".join(str(x) for x in err["loc"]), source=str(path)) from None


def default_retention() -> RetentionPolicy:
    """The bundled ``retention.toml``."""
    src = resources.files("contextledger.security").joinpath("retention.toml")
    return RetentionPolicy.model_validate(tomllib.loads(src.read_text(encoding="utf-8")))


def keep_sampled(record_id: str, every: int) -> bool:
    """Whether the sample keeps ``record_id`` (one in ``every``, by its hash: stable)."""
    return int(hashlib.sha256(record_id.encode()).hexdigest()[:8], 16) % every == 0
