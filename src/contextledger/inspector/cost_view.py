"""Cost per request and per conversation, from the assembly records' ``cost`` figures
(:mod:`contextledger.assembly.cost_record`), for ``explain``, the inspector and ``/api``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from contextledger.records.models import ContextAssembly

__all__ = ["conversation_cost", "cost_words", "request_costs"]

_TOKEN_KEYS = ("total_tokens", "cache_read_tokens", "cache_write_tokens", "uncached_tokens")


def request_costs(assemblies: Iterable[ContextAssembly]) -> list[dict[str, Any]]:
    """``[{"assembly_id", "created_at" (ISO), "cost"}]`` for the assemblies that carry
    cost figures, in the given order."""
    return [{"assembly_id": a.id, "created_at": a.created_at.isoformat(), "cost": a.cost} for a in assemblies if a.cost and "assembled" in a.cost]


def conversation_cost(assemblies: Iterable[ContextAssembly]) -> dict[str, Any]:
    """Totals over the assemblies with cost figures: ``requests``, ``assembled`` and
    ``replay`` (token sums of :data:`_TOKEN_KEYS` and ``usd``, rounded to 1e-9) and
    ``ratio`` (assembled USD / replay USD; ``None`` when replay is 0)."""
    sums: dict[str, dict[str, Any]] = {side: dict.fromkeys((*_TOKEN_KEYS, "usd"), 0) for side in ("assembled", "replay")}
    count = 0
    for item in request_costs(assemblies):
        count += 1
        for side in ("assembled", "replay"):
            figures: Mapping[str, Any] = item["cost"][side]
            for key in (*_TOKEN_KEYS, "usd"):
                sums[side][key] += figures.get(key, 0)
    for figures in sums.values():
        figures["usd"] = round(float(figures["usd"]), 9)
    replay = float(sums["replay"]["usd"])
    ratio = round(float(sums["assembled"]["usd"]) / replay, 4) if replay else None
    return {"requests": count, "assembled": sums["assembled"], "replay": sums["replay"], "ratio": ratio}


def cost_words(cost: Mapping[str, Any] | None) -> str:
    """One line for a request's cost figures: USD and cached / written / uncached tokens
    of the assembled request and of the plain replay, and the price row used."""
    if not cost:
        return "cost: not recorded (assembly made before cost figures existed)"
    if "error" in cost:
        return f"cost: not estimated ({cost['error']})"
    a, r = cost["assembled"], cost["replay"]

    def side(f: Mapping[str, Any]) -> str:
        return f"${f['usd']:.6f} ({f['cache_read_tokens']:,} cached, {f['cache_write_tokens']:,} written, {f['uncached_tokens']:,} uncached)"

    return f"cost (estimated after prompt caching, prices {cost['prices']}, {cost['price']}): assembled {side(a)}; replay {side(r)}"
