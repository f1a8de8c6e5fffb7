"""HTTP / JSON API payloads: status, top-level keys, ids and schema-hinted fields.

Seed 000 §4.7: an API snapshot (a CRM record, a reservation) is valid for a bounded time,
so its freshness class is ``time_bounded``, and it can be revalidated by calling the same
tool with the same arguments.

Payload keys: ``status`` (an HTTP-like status when the body states one), ``json_type``
(``object`` / ``array``), ``keys`` (≤ 30 top-level keys in document order), ``key_count``,
``item_count`` (arrays), ``ids`` (≤ 20 ``{"path", "value"}`` for keys named ``id`` or
ending in ``_id`` / ``Id`` / ``ID``, depth-first in document order, plus ``label`` —
the object's ``title`` / ``name`` / ``subject`` / ``label`` / ``summary`` text, ≤ 80
characters — when it has one: what the id is about, for relevance), ``ids_total``,
``fields`` (the values of the per-tool schema-hint fields; dotted paths such as
``flights.0.flight_number`` are allowed; scalars kept, containers summarised).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from contextledger.limits import loads_json
from contextledger.memory.extractors.actions import resolve_action
from contextledger.memory.extractors.base import Extraction, ToolInput
from contextledger.memory.extractors.textutil import body_ranges, cap, count_of, fmt_int, unwrap
from contextledger.records.enums import ConfidenceBasis, ContextKind, FreshnessClass, Shape

__all__ = ["HttpJsonExtractor", "is_id_key"]

MAX_KEYS = 30
MAX_IDS = 20
MAX_DEPTH = 6
_LABEL_KEYS = ("title", "name", "subject", "label", "summary")
"""Sibling keys whose text labels an id (kept as ``ids[*].label``, ≤ 80 characters)."""
_STATUS_KEYS = ("status_code", "statusCode", "http_status", "status", "code")


def is_id_key(key: str) -> bool:
    """True for ``id``, ``*_id``, ``*Id`` and ``*ID`` keys."""
    return key.lower() == "id" or key.endswith("_id") or key.endswith("Id") or key.endswith("ID")


def _parse(text: str) -> Any:
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        value = loads_json(stripped)
    except ValueError:
        return None
    return value if isinstance(value, dict | list) else None


def _collect_ids(
    value: Any, path: str, out: list[dict[str, Any]], depth: int, total: list[int]
) -> None:
    if depth > MAX_DEPTH:
        return
    if isinstance(value, dict):
        for key, child in value.items():
            here = f"{path}.{key}" if path else str(key)
            if is_id_key(str(key)) and isinstance(child, str | int) and not isinstance(child, bool):
                total[0] += 1
                if len(out) < MAX_IDS:
                    item: dict[str, Any] = {"path": here, "value": child}
                    label = next((value[k] for k in _LABEL_KEYS if isinstance(value.get(k), str) and value[k].strip()), None)
                    if label is not None:
                        item["label"] = cap(" ".join(label.split()), 80)
                    out.append(item)
            else:
                _collect_ids(child, here, out, depth + 1, total)
    elif isinstance(value, list):
        for i, child in enumerate(value):
            _collect_ids(child, f"{path}.{i}" if path else str(i), out, depth + 1, total)


def _lookup(value: Any, dotted: str) -> tuple[bool, Any]:
    current = value
    for part in dotted.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return False, None
    return True, current


def _compact(value: Any) -> Any:
    if isinstance(value, str):
        return cap(value, 200)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, list):
        return f"[{count_of(len(value), 'item')}]"
    if isinstance(value, dict):
        return f"{{{count_of(len(value), 'key')}}}"
    return cap(str(value), 200)


def _status(value: Any) -> int | str | None:
    if not isinstance(value, dict):
        return None
    for key in _STATUS_KEYS:
        v = value.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and 100 <= v <= 599:
            return v
        if key == "status" and isinstance(v, str) and len(v) <= 40:
            return v
    return None


class HttpJsonExtractor:
    """Extractor for JSON object / array results of API tools (tau-bench, MCP, HTTP)."""

    name = "http_json"

    def __init__(self, schema_hints: Mapping[str, Sequence[str]] | None = None) -> None:
        """``schema_hints`` maps a tool name to the fields worth keeping verbatim."""
        self.schema_hints: dict[str, tuple[str, ...]] = {
            k: tuple(v) for k, v in (schema_hints or {}).items()
        }

    def matches(self, item: ToolInput) -> bool:
        """True when the result is a JSON object or array and the tool is not a shell,
        file or search tool."""
        if resolve_action(item).verb not in ("other", "task"):
            return False
        head = item.result_text.lstrip()[:1]
        return head in ("{", "[") and _parse(unwrap(item.result_text).text) is not None

    def extract(self, item: ToolInput) -> Extraction:
        """The JSON extract of ``item`` (freshness ``time_bounded``)."""
        body = unwrap(item.result_text)
        value = _parse(body.text)
        ids: list[dict[str, Any]] = []
        total = [0]
        _collect_ids(value, "", ids, 0, total)
        keys = list(value.keys()) if isinstance(value, dict) else []
        fields: dict[str, Any] = {}
        for name in self.schema_hints.get(item.tool_name, ()):
            found, v = _lookup(value, name)
            if found:
                fields[name] = _compact(v)
        payload: dict[str, Any] = {
            "status": _status(value),
            "json_type": "object" if isinstance(value, dict) else "array",
            "keys": [str(k) for k in keys[:MAX_KEYS]],
            "key_count": len(keys),
            "item_count": len(value) if isinstance(value, list) else None,
            "ids": ids,
            "ids_total": total[0],
            "fields": fields,
        }
        args = item.arguments or {}
        arg_ids = sorted(
            (k, v)
            for k, v in args.items()
            if is_id_key(k) and isinstance(v, str | int) and not isinstance(v, bool)
        )
        if arg_ids:
            subject = ",".join(f"{k}={v}" for k, v in arg_ids)
        else:
            top = [i for i in ids if "." not in i["path"]]
            if top:
                subject = ",".join(f"{i['path']}={i['value']}" for i in top[:3])
            else:
                canonical = json.dumps(args, sort_keys=True, separators=(",", ":"))
                subject = "args-" + hashlib.sha256(canonical.encode()).hexdigest()[:12]
        if isinstance(value, dict):
            first = f"JSON object · {count_of(len(keys), 'key')}"
        else:
            first = f"JSON array · {count_of(len(value) if isinstance(value, list) else 0, 'item')}"
        if payload["status"] is not None:
            first += f" · status {payload['status']}"
        top_ids = [f"{i['path']}={i['value']}" for i in ids[:4]]
        if isinstance(value, dict):
            # generated-file handles and locations are what a later turn needs most
            for key in ("path", "file_path", "filename", "name", "url", "uri"):
                v = value.get(key)
                if isinstance(v, str) and 0 < len(v) <= 200 and len(top_ids) < 6:
                    top_ids.append(f"{key}={v}")
        if top_ids:
            first += " · " + ", ".join(cap(t, 60) for t in top_ids)
        summary_lines = [first]
        if fields:
            summary_lines.append(
                cap(
                    ", ".join(
                        f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in fields.items()
                    ),
                    400,
                )
            )
        elif isinstance(value, dict) and _scalars(value):
            # a small object says more by its values than by its key names
            summary_lines.append(cap(", ".join(f"{k}={v}" for k, v in _scalars(value)), 400))
        elif keys:
            summary_lines.append("keys: " + cap(", ".join(str(k) for k in keys[:15]), 300))
        limits: list[str] = []
        if len(keys) > MAX_KEYS:
            limits.append(f"first {MAX_KEYS} of {fmt_int(len(keys))} keys")
        if total[0] > MAX_IDS:
            limits.append(f"first {MAX_IDS} of {fmt_int(total[0])} ids")
        limits.append("values other than ids and hinted fields are in the artifact")
        prov_lines, prov_bytes = body_ranges(item.result_text, body)
        return Extraction(
            kind="http_json",
            summary="\n".join(summary_lines),
            payload=payload,
            shape=Shape.STRUCTURED,
            context_kind=ContextKind.RECOVERY if item.is_error else ContextKind.KNOWLEDGE,
            freshness_class=FreshnessClass.TIME_BOUNDED,
            subject_key=f"api:{item.tool_name}:{subject}",
            revalidation_tool=item.tool_name,
            revalidation_args=dict(args),
            confidence=1.0,
            confidence_basis=ConfidenceBasis.DETERMINISTIC_PARSE,
            limits="; ".join(limits),
            error_type="error" if item.is_error else None,
            line_range=prov_lines,
            byte_range=prov_bytes,
        )


def _scalars(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """``(key, value)`` of the scalar top-level fields of a small object (at most 12
    fields, strings of at most 80 characters), ids and status excluded (shown already);
    empty when the object is larger than that."""
    if len(obj) > 12:
        return []
    out: list[tuple[str, str]] = []
    for k, v in obj.items():
        if k == "status" or k == "id" or str(k).endswith("_id"):
            continue
        if isinstance(v, bool) or v is None or isinstance(v, (int, float)):
            out.append((str(k), json.dumps(v)))
        elif isinstance(v, str) and len(v) <= 80:
            out.append((str(k), v))
    return out
