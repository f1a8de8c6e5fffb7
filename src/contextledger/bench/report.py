"""Benchmark reports: the JSON result, the Markdown tables, and writing both to a folder.

JSON shape (issue "Prove it")::

    {"kind": "scenarios" | "real" | "scale",
     "machine": {...}, "versions": {...},
     "rows": [{"strategy", "case", "provider", "tokens", "replay_tokens", "reduction",
               "must_see_tokens", "must_see_recall", "must_not_see_leaks", "valid",
               "assembly_ms", ...details}, ...],
     ...kind-specific keys ("scale": latency/throughput series)}

Markdown: for ``scenarios`` and ``real``, one pivot table per history multiplier / budget
and payload section (rows = cases, columns = strategies, a cell = reduction, recall, leaks
and ✗ when the payload is provider-invalid; the first section holds each case's first
provider — its own —, the next one its second provider, e.g. OpenAI Responses, see
:func:`provider_sections`) plus contextledger's detail table (tokens, must-see tokens,
floor ratio, what was missing or leaked); for ``scale``, the latency and throughput table
(one row per backend × history shape × size; a row without ``shape`` is ``pipeline``;
"calibration ms" is the machine's speed just before the point, ``ScalePoint.calibration_ms``).
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from contextledger.bench.harness import CONTEXTLEDGER, Row
from contextledger.bench.sections import provider_sections

__all__ = ["build_report", "detail_table", "machine_info", "markdown", "pivot_table", "provider_sections", "versions", "write_report"]

_PACKAGES = ("contextledger", "langchain-core", "langchain", "autogen-core", "openai-agents", "tiktoken", "sqlalchemy", "psycopg")


def machine_info() -> dict[str, Any]:
    """Platform, Python, CPU model and count, total memory (bytes, Linux only)."""
    cpu = platform.processor() or ""
    mem: int | None = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
                break
    except OSError:
        pass
    return {"platform": platform.platform(), "python": platform.python_version(), "cpu": cpu, "cpu_count": os.cpu_count(), "memory_bytes": mem}


def versions() -> dict[str, str | None]:
    """Installed versions of contextledger, its assembler and default policy, and the
    peer libraries."""
    from contextledger.assembly.assembler import ASSEMBLER_VERSION
    from contextledger.policy.loader import default_policy

    out: dict[str, str | None] = {"assembler": ASSEMBLER_VERSION, "policy": default_policy().version}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def build_report(kind: str, rows: Iterable[Row | Mapping[str, Any]], **extra: Any) -> dict[str, Any]:
    """The JSON report of one run (see module docstring)."""
    body: dict[str, Any] = {"kind": kind, "machine": machine_info(), "versions": versions()}
    body["rows"] = [r.as_dict() if isinstance(r, Row) else dict(r) for r in rows]
    body.update(extra)
    return body


def _cell(r: Mapping[str, Any]) -> str:
    if r.get("error"):
        return "error"
    cell = f"{r['reduction'] * 100:.1f}% r{r['must_see_recall']:.2f} L{r['must_not_see_leaks']}"
    return cell if r["valid"] else cell + " ✗"


def _strategies(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    seen: list[str] = []
    for r in rows:
        if r["strategy"] not in seen:
            seen.append(r["strategy"])
    return seen


def pivot_table(rows: Sequence[Mapping[str, Any]], *, group_key: str = "scale", group_value: Any = 1) -> str:
    """Markdown: one line per case, one column per strategy, for the rows whose
    ``group_key`` equals ``group_value``.  A cell reads ``<reduction>% r<recall> L<leaks>``
    with ``✗`` when the payload breaks the provider's pairing/order rules."""
    sel = [r for r in rows if r.get(group_key) == group_value]
    strategies = _strategies(sel)
    cases: list[str] = []
    for r in sel:
        if r["case"] not in cases:
            cases.append(r["case"])
    lines = ["| case | replay tokens | " + " | ".join(strategies) + " |", "|---|---:|" + "---|" * len(strategies)]
    by = {(r["case"], r["strategy"]): r for r in sel}
    for case in cases:
        replay = next((by[(case, s)]["replay_tokens"] for s in strategies if (case, s) in by), 0)
        cells = [_cell(by[(case, s)]) if (case, s) in by else "" for s in strategies]
        lines.append(f"| {case} | {replay} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def detail_table(rows: Sequence[Mapping[str, Any]], strategy: str = CONTEXTLEDGER) -> str:
    """Markdown: ``strategy``'s rows with tokens, budget, must-see tokens, floor ratio
    (assembled / must-see), timing and what was missing or leaked."""
    lines = [
        "| case | scale | provider | budget | tokens | replay | reduction | must-see tokens | floor ratio | recall | leaks | valid | ms | missing / leaked |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    for r in rows:
        if r["strategy"] != strategy:
            continue
        notes = "; ".join([*(f"missing `{m}`" for m in r.get("missing", [])[:4]), *(f"leaked `{x}`" for x in r.get("leaked", [])[:4])])
        floor = "" if r.get("floor_ratio") is None else f"{r['floor_ratio']:.1f}"
        lines.append(
            f"| {r['case']} | {r.get('scale', 1)} | {r['provider']} | {r.get('budget_tokens', '')} | {r['tokens']} | {r['replay_tokens']} | "
            f"{r['reduction'] * 100:.1f}% | {r['must_see_tokens']} | {floor} | {r['must_see_recall']:.2f} | {r['must_not_see_leaks']} | "
            f"{'yes' if r['valid'] else 'NO'} | {r['assembly_ms']:.1f} | {notes.replace('|', '/')} |"
        )
    return "\n".join(lines)


def _scale_table(report: Mapping[str, Any]) -> str:
    lines = [
        "| backend | shape | artifacts | p50 ms | p95 ms | p99 ms | peak KiB | candidates | record/s (inline) | record/s (blobs) | calibration ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in report.get("scale", []):
        calib = p.get("calibration_ms")
        lines.append(
            f"| {p['backend']} | {p.get('shape', 'pipeline')} | {p['artifacts']} | {p['p50_ms']:.2f} | {p['p95_ms']:.2f} | {p['p99_ms']:.2f} | {p['peak_bytes'] / 1024:.0f} | "
            f"{p.get('candidate_messages', '')} | {p['record_per_s']:.0f} | {p.get('record_blob_per_s', 0):.0f} | {f'{calib:.1f}' if calib else ''} |"
        )
    return "\n".join(lines)


def markdown(report: Mapping[str, Any]) -> str:
    """The Markdown rendering of a report (see module docstring)."""
    kind = report.get("kind")
    rows: list[Mapping[str, Any]] = report.get("rows", [])
    v = report.get("versions", {})
    head = [f"# contextledger bench {kind}", "", f"assembler `{v.get('assembler')}`, policy `{v.get('policy')}`; machine: {report.get('machine', {}).get('cpu')} × {report.get('machine', {}).get('cpu_count')}", ""]
    if kind == "scale":
        head += ["Assembly latency (replay counted by estimate: `replay=\"estimate\"`).", "", _scale_table(report), ""]
        return "\n".join(head)
    key = "scale" if kind == "scenarios" else "budget_tokens"
    groups: list[Any] = []
    for r in rows:
        if r.get(key) not in groups:
            groups.append(r.get(key))
    head.append("Cell: reduction vs replay, must-see recall (r), must-not-see leaks (L), ✗ = provider-invalid payload.")
    head.append("")
    for g, providers, sel in sorted(provider_sections(rows, key), key=lambda x: (groups.index(x[0]), x[1])):
        label = f"{g}× history" if kind == "scenarios" else f"budget {g} tokens"
        label += f", {providers} payloads" if providers else ""
        head += [f"## {label}", "", pivot_table(sel, group_key=key, group_value=g), ""]
    head += ["## contextledger detail", "", detail_table(rows), ""]
    return "\n".join(head)


def write_report(report: Mapping[str, Any], out_dir: Path, *, plots: bool = True) -> list[Path]:
    """Write ``bench-<kind>.json``, ``bench-<kind>.md`` and (``plots``) the PNG plots into
    ``out_dir`` (created if missing); returns the written paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    kind = str(report.get("kind"))
    jpath = out_dir / f"bench-{kind}.json"
    jpath.write_text(json.dumps(report, indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    mpath = out_dir / f"bench-{kind}.md"
    mpath.write_text(markdown(report), encoding="utf-8")
    written = [jpath, mpath]
    if plots:
        from contextledger.bench.plots import plot_latency, plot_tokens

        if kind == "scale":
            written.append(plot_latency(report, out_dir / "bench-scale-latency.png"))
        else:
            written.append(plot_tokens(report, out_dir / f"bench-{kind}-tokens.png"))
    return written
