"""Payload sections of a benchmark report: each case's rows in its own provider's
payload first, then in the other providers' (shared by the Markdown tables and the plots)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["provider_sections"]


def provider_sections(rows: Sequence[Mapping[str, Any]], key: str) -> list[tuple[Any, str, list[Mapping[str, Any]]]]:
    """``(group, providers_label, rows)`` per ``key`` value (scale or budget) and payload
    section, in first-seen order.  A case's rows in its first provider (its own format)
    form section 0 (label ``""``); its rows in a second provider form section 1, and so
    on; a later section's label lists the providers it holds (``"openai-responses"``)."""
    seen: dict[tuple[str, Any], list[str]] = {}
    sections: dict[tuple[Any, int], list[Mapping[str, Any]]] = {}
    for r in rows:
        order = seen.setdefault((r["case"], r.get(key)), [])
        if r["provider"] not in order:
            order.append(r["provider"])
        sections.setdefault((r.get(key), order.index(r["provider"])), []).append(r)
    out: list[tuple[Any, str, list[Mapping[str, Any]]]] = []
    for (group, rank), sel in sections.items():
        label = "" if rank == 0 else ", ".join(sorted({r["provider"] for r in sel}))
        out.append((group, label, sel))
    return out
