"""Comparing and showing policies (seed 000 §8 R1: before/after evaluation of changes).

* :func:`policy_diff` lists every leaf key whose value differs between two policies.
* :func:`render_diff` renders such a list, one ``key: old -> new`` line per change.
* :func:`policy_to_toml` writes a policy back as TOML (for ``policy show``).  The output
  is deterministic: sections and keys in model order, provider/tool tables sorted by key,
  and it loads back (with ``inherit_defaults=False``) to an equal policy with the same
  version.  Comments of the source file are not kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict

from contextledger.policy.model import Policy

__all__ = ["PolicyChange", "policy_diff", "policy_to_toml", "render_diff"]


class PolicyChange(BaseModel):
    """One changed leaf value.

    Attributes:
        key_path: dotted path (``"budget.buckets.retrieval"``).
        old: the value in the first policy as JSON data (``None`` when absent or unset).
        new: the value in the second policy (``None`` when absent or unset).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    key_path: str
    old: Any
    new: Any


def _leaves(data: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            yield from _leaves(value, path)
        else:
            yield path, value


def policy_diff(a: Policy, b: Policy) -> list[PolicyChange]:
    """Every leaf key whose value differs from ``a`` to ``b``, sorted by key path.

    Arrays are compared whole.  A key present on one side only (a per-tool override, a
    provider route) appears with ``None`` on the other side.  Equal policies give ``[]``.
    """
    old = dict(_leaves(a.content()))
    new = dict(_leaves(b.content()))
    changes = [
        PolicyChange(key_path=key, old=old.get(key), new=new.get(key))
        for key in sorted(old.keys() | new.keys())
        if old.get(key) != new.get(key)
    ]
    return changes


def _show(value: Any) -> str:
    if value is None:
        return "(unset)"
    return json.dumps(value, ensure_ascii=False)


def render_diff(changes: Sequence[PolicyChange]) -> str:
    """Render changes as ``"<key path>: <old JSON> -> <new JSON>"`` lines.

    Unset values render as ``(unset)``; an empty list renders as ``"(no changes)"``.
    The result has no trailing newline.
    """
    if not changes:
        return "(no changes)"
    return "\n".join(f"{c.key_path}: {_show(c.old)} -> {_show(c.new)}" for c in changes)


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def _toml_value(value: Any) -> str:
    if isinstance(value, Enum):
        return _toml_value(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        # JSON string escapes are a subset of TOML basic-string escapes.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as a TOML value")


def _table_items(table: BaseModel | Mapping[str, Any]) -> list[tuple[str, Any]]:
    if isinstance(table, BaseModel):
        return [(name, getattr(table, name)) for name in type(table).model_fields]
    return sorted(table.items())


def _emit(table: BaseModel | Mapping[str, Any], path: tuple[str, ...], out: list[str]) -> None:
    items = _table_items(table)
    scalars = [(k, v) for k, v in items if not isinstance(v, BaseModel | Mapping)]
    tables = [(k, v) for k, v in items if isinstance(v, BaseModel | Mapping)]
    if path:
        if out:
            out.append("")
        out.append("[" + ".".join(_toml_key(p) for p in path) + "]")
    for key, value in scalars:
        if value is not None:
            out.append(f"{_toml_key(key)} = {_toml_value(value)}")
    for key, value in tables:
        _emit(value, (*path, key), out)


def policy_to_toml(policy: Policy) -> str:
    """Write ``policy`` as a complete TOML document (ends with a newline).

    The first line is a comment carrying the computed version.  Unset optional keys
    (``None``) are left out, which loads back as unset.
    """
    out: list[str] = []
    _emit(policy, (), out)
    return f"# version: {policy.version}\n" + "\n".join(out) + "\n"
