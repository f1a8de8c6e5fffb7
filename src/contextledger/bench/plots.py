"""PNG plots of benchmark reports (matplotlib, Agg backend — no display needed).

* :func:`plot_tokens` — tokens per strategy per case (log scale), one panel per history
  multiplier or budget; contextledger's bars are outlined.
* :func:`plot_latency` — assembly latency p50/p95/p99 (ms) versus the number of tool
  artifacts in the conversation, one line per backend, history shape and percentile
  (log–log).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

__all__ = ["plot_latency", "plot_tokens"]


def plot_tokens(report: Mapping[str, Any], path: Path) -> Path:
    """Grouped bars of ``tokens`` (log y) per case × strategy, each case in its own
    provider's payload (the first payload section of
    :func:`~contextledger.bench.sections.provider_sections`); returns ``path``."""
    from contextledger.bench.sections import provider_sections

    key = "scale" if report.get("kind") == "scenarios" else "budget_tokens"
    rows = [r for _, label, sel in provider_sections(report.get("rows", []), key) if not label for r in sel]
    groups = sorted({r.get(key) for r in rows}, key=lambda g: (g is None, g))
    strategies: list[str] = []
    for r in rows:
        if r["strategy"] not in strategies:
            strategies.append(r["strategy"])
    fig, axes = plt.subplots(len(groups) or 1, 1, figsize=(14, 4.5 * max(1, len(groups))), squeeze=False)
    width = 0.8 / max(1, len(strategies))
    for ax, g in zip(axes[:, 0], groups, strict=False):
        sel = [r for r in rows if r.get(key) == g]
        cases: list[str] = []
        for r in sel:
            if r["case"] not in cases:
                cases.append(r["case"])
        by = {(r["case"], r["strategy"]): r for r in sel}
        for k, s in enumerate(strategies):
            xs = [i + k * width for i, c in enumerate(cases) if (c, s) in by]
            ys = [max(1, by[(c, s)]["tokens"]) for c in cases if (c, s) in by]
            ax.bar(xs, ys, width, label=s, edgecolor="black" if s == "contextledger" else None, linewidth=1.5 if s == "contextledger" else 0)
        ax.set_yscale("log")
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(cases))])
        ax.set_xticklabels(cases, rotation=35, ha="right", fontsize=8)
        ax.set_ylabel("payload tokens (o200k)")
        ax.set_title(f"{key} = {g}")
    axes[0, 0].legend(fontsize=7, ncol=4)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_latency(report: Mapping[str, Any], path: Path) -> Path:
    """Latency percentiles (ms) versus artifact count, one series per backend × history
    shape (rows without ``shape`` are ``pipeline``), log–log; returns ``path``."""
    points: list[Mapping[str, Any]] = report.get("scale", [])
    fig, ax = plt.subplots(figsize=(8, 5))
    series = sorted({(p["backend"], p.get("shape", "pipeline")) for p in points})
    for k, (backend, shape) in enumerate(series):
        sel = sorted((p for p in points if p["backend"] == backend and p.get("shape", "pipeline") == shape), key=lambda p: p["artifacts"])
        xs = [p["artifacts"] for p in sel]
        # one colour per backend × shape, one line style per percentile
        for pct, style in (("p50_ms", "-o"), ("p95_ms", "--s"), ("p99_ms", ":^")):
            ax.plot(xs, [p[pct] for p in sel], style, color=f"C{k % 10}", label=f"{backend} {shape} {pct[:3]}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tool artifacts in the conversation")
    ax.set_ylabel("assembly latency (ms)")
    ax.axhline(10, color="grey", linewidth=0.8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
