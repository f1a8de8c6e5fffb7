"""Loading policies from TOML files and mappings (seed 000 §4.5, §5.6: a policy is data).

A policy file only needs the keys it changes: by default its mapping is merged over the
bundled ``contextledger/policy/default.toml`` (tables merge key by key, arrays and scalars
replace whole) and the result is validated as a complete :class:`Policy`.  Unknown keys
are errors, never ignored.

Every failure raises :class:`~contextledger.errors.PolicyError` whose ``key_path`` is the
dotted path of the offending key (``"budget.buckets.recent_tail"``, list items as
``"budget.drop_order[2]"``) and whose message reads
``"<source>: <key path>: <reason>"``.  TOML syntax errors raise :class:`PolicySyntaxError`
with the line and column reported by :mod:`tomllib`.
"""

from __future__ import annotations

import copy
import functools
import re
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from contextledger.errors import PolicyError, PolicyFileError
from contextledger.policy.model import KeyedValueError, Policy

__all__ = [
    "DEFAULT_POLICY_RESOURCE",
    "PolicySyntaxError",
    "default_policy",
    "default_policy_mapping",
    "load_policy",
    "merge_policy_data",
    "policy_from_mapping",
]

DEFAULT_POLICY_RESOURCE = "contextledger/policy/default.toml"
"""Package-data location of the bundled default policy."""

_TOML_POSITION = re.compile(r"(?<!\s)\s*\(at line (\d+), column (\d+)\)\s*$")


class PolicySyntaxError(PolicyError):
    """A policy file is not valid TOML.

    Attributes:
        line: 1-based line of the error as reported by tomllib (``None`` if unknown).
        column: 1-based column of the error (``None`` if unknown).
    """

    def __init__(self, message: str, source: str | None, line: int | None, column: int | None):
        self.line = line
        self.column = column
        super().__init__(message, None, source)


def _parse_toml(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        reason = str(exc)
        found = _TOML_POSITION.search(reason)
        if found is None:
            raise PolicySyntaxError(f"TOML syntax error: {reason}", source, None, None) from exc
        line, column = int(found.group(1)), int(found.group(2))
        reason = reason[: found.start()]
        raise PolicySyntaxError(
            f"TOML syntax error at line {line}, column {column}: {reason}", source, line, column
        ) from exc


@functools.cache
def _default_text() -> str:
    return resources.files("contextledger.policy").joinpath("default.toml").read_text("utf-8")


def default_policy_mapping() -> dict[str, Any]:
    """A fresh, mutable copy of the bundled default policy as parsed TOML data."""
    return _parse_toml(_default_text(), DEFAULT_POLICY_RESOURCE)


@functools.cache
def default_policy() -> Policy:
    """The bundled default policy (cached; policies are immutable).

    Raises:
        PolicyError: the bundled file is invalid (a packaging bug).
    """
    return policy_from_mapping(
        default_policy_mapping(), DEFAULT_POLICY_RESOURCE, inherit_defaults=False
    )


def merge_policy_data(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``override`` over ``base``: tables merge recursively, other values replace.

    Neither argument is modified; the result shares no mutable state with them.
    """
    merged: dict[str, Any] = copy.deepcopy(dict(base))
    for key, value in override.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = merge_policy_data(current, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def load_policy(path: Path, *, inherit_defaults: bool = True) -> Policy:
    """Load a policy from a TOML file.

    Args:
        path: the TOML file.
        inherit_defaults: merge the file over the bundled default policy (default); when
            false the file must define every key.

    Raises:
        PolicySyntaxError: the file is not valid TOML (line and column set).
        PolicyFileError: the file cannot be read (an :class:`InputError` too).
        PolicyError: a value is invalid (``key_path`` set), or the file is not UTF-8.
    """
    source = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise PolicyFileError(f"cannot read policy file: {exc.strerror or exc}", None, source) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError(f"policy file is not UTF-8 (byte {exc.start})", None, source) from exc
    return policy_from_mapping(_parse_toml(text, source), source, inherit_defaults=inherit_defaults)


def policy_from_mapping(
    data: Mapping[str, Any], source: str = "<mapping>", *, inherit_defaults: bool = True
) -> Policy:
    """Validate ``data`` (section -> key -> value, as tomllib returns it) as a policy.

    Args:
        data: the policy content.
        source: where it came from, used in error messages.
        inherit_defaults: merge ``data`` over the bundled default policy first.

    Raises:
        PolicyError: with the dotted ``key_path`` of the first invalid value; the message
            names every invalid value (``"a.b: reason; c.d: reason"``).
    """
    if not isinstance(data, Mapping):
        raise PolicyError(f"expected a table, got {type(data).__name__}", None, source)
    merged = merge_policy_data(default_policy_mapping(), data) if inherit_defaults else data
    try:
        return Policy.model_validate(merged)
    except ValidationError as exc:
        described = [_describe_error(e) for e in exc.errors()]
        key_path, reason = described[0]
        for other_path, other_reason in described[1:]:  # every error, on the one line
            reason += f"; {other_path}: {other_reason}" if other_path else f"; {other_reason}"
        problems = tuple((path or None, why) for path, why in described)
        raise PolicyError(reason, key_path or None, source, problems) from None


def _describe_error(error: ErrorDetails) -> tuple[str, str]:
    """Return ``(dotted key path, reason)`` for one pydantic error."""
    path = _key_path(error["loc"])
    kind = error["type"]
    ctx = error.get("ctx") or {}
    value = error.get("input")
    cause = ctx.get("error")
    if isinstance(cause, KeyedValueError):
        return (f"{path}.{cause.subpath}" if path else cause.subpath), cause.message
    if kind == "value_error" and cause is not None:
        return path, str(cause)
    if kind == "extra_forbidden":
        return path, "unknown key"
    if kind == "missing":
        return path, "missing required key"
    if kind in ("enum", "literal_error"):
        return path, f"must be one of {ctx.get('expected')}, got {value!r}"
    expected = _EXPECTED.get(kind)
    if expected is not None:
        return path, f"expected {expected}, got {type(value).__name__} {value!r}"
    return path, error["msg"]


_EXPECTED = {
    "model_type": "a table",
    "model_attributes_type": "a table",
    "dict_type": "a table",
    "tuple_type": "an array",
    "list_type": "an array",
    "int_type": "an integer",
    "bool_type": "true or false",
    "string_type": "a string",
}


def _key_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
