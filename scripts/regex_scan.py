"""Find regular expressions of the package whose search time grows faster than linearly
on long pathological inputs (catastrophic backtracking: a hostile tool result or message
could stall recording).

Every compiled pattern at module level (or in a module-level tuple/list of patterns) is
searched on runs of one character class at two lengths; a pattern whose time grows more
than ``--ratio`` times when the input grows 4x is reported.  Exit code 1 when any is.

    python scripts/regex_scan.py [--ratio 8]
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
import sys
import time

import contextledger

RUNS = ["x", "x#", ", ", " ", "a/", "。", "please ", "-", "{", "1.", "a ", "\t", "0", "=", "a=", "A", "/", "a.", "..", "\n", "x\n", "'", '"', "\\", "ab1", "*", "#", "e"]


def patterns() -> dict[str, re.Pattern[str]]:
    found: dict[int, tuple[str, re.Pattern[str]]] = {}
    for info in pkgutil.walk_packages(contextledger.__path__, "contextledger."):
        try:
            module = importlib.import_module(info.name)
        except Exception:  # an optional extra is missing: its patterns are not scanned
            continue
        for name, value in vars(module).items():
            group = [value] if isinstance(value, re.Pattern) else list(value) if isinstance(value, tuple | list) and value and all(isinstance(v, re.Pattern) for v in value) else []
            for i, p in enumerate(group):
                if isinstance(p.pattern, str):
                    found.setdefault(id(p), (f"{info.name}.{name}" + (f"[{i}]" if len(group) > 1 else ""), p))
    return dict(found.values())


def cost(p: re.Pattern[str], text: str, repeats: int = 1) -> float:
    """The least of ``repeats`` timings of one search (seconds): a scheduling pause on a
    busy machine lengthens one timing, never the least of several."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        p.search(text)
        best = min(best, time.perf_counter() - t0)
    return best


def superlinear(p: re.Pattern[str], short: str, ratio: float) -> tuple[float, float] | None:
    """``(short time, 4x time)`` when searching 4x the input costs more than ``ratio`` times
    as long (and over 50 ms), confirmed by the least of three timings of each; else None."""
    b = cost(p, short * 4)
    if b <= 0.05 or b <= ratio * max(cost(p, short), 1e-6):
        return None
    a, b = cost(p, short, 3), cost(p, short * 4, 3)
    return (a, b) if b > 0.05 and b > ratio * max(a, 1e-6) else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ratio", type=float, default=8.0, help="report when 4x the input costs more than this many times the time")
    ap.add_argument("--length", type=int, default=4000, help="characters of the shorter input")
    args = ap.parse_args()
    bad = 0
    pats = patterns()
    for name, p in sorted(pats.items()):
        for unit in RUNS:
            short = (unit * (args.length // len(unit) + 1))[: args.length]
            if found := superlinear(p, short, args.ratio):
                a, b = found
                print(f"{name}: {b * 1000:.0f} ms on {len(short) * 4:,} x {unit!r} ({b / max(a, 1e-6):.0f}x the time for 4x the input)")
                bad += 1
                break
    print(f"{len(pats)} patterns scanned, {bad} superlinear", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
