"""``contextledger bench cost``: cost after prompt caching, replay vs contextledger vs peers."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from contextledger.cli.common import console, emit_json, fail_cleanly

if TYPE_CHECKING:
    from contextledger.bench.strategies import Strategy

__all__ = ["cost"]


def cost(
    data: Annotated[Path | None, typer.Option("--data", help="Folder with manifest.json (default: ../shared/data/real or $CONTEXTLEDGER_REAL_DATA; absent: scripted sessions only).")] = None,
    budgets: Annotated[str, typer.Option("--budgets", help="Context budgets beside the fixed prefix, comma separated.")] = "8000,32000",
    match: Annotated[str | None, typer.Option("--match", help="Only real sessions whose path contains this text.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=0, help="Only the first N real sessions (0: none).")] = None,
    min_calls: Annotated[int, typer.Option("--min-calls", min=1, help="Only real sessions with at least this many main-thread calls.")] = 20,
    scripted: Annotated[str, typer.Option("--scripted", help="Scripted sessions to add, as their numbers of calls, comma separated ('' for none).")] = "200",
    peers: Annotated[str, typer.Option("--peers", help="Peer strategies, comma separated ('all', or '' for none).")] = "all",
    probe_every: Annotated[int, typer.Option("--probe-every", min=0, help="Check must-see recall every N calls (0: never).")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON report instead of the Markdown tables.")] = False,
    out: Annotated[Path, typer.Option("--out", help="Folder for bench-cost.json and bench-cost.md.")] = Path("bench-results"),
) -> None:
    """Real Claude Code sessions and scripted ones replayed turn by turn: cost with caching for replay, contextledger and the peers."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    root = data or Path(os.environ.get("CONTEXTLEDGER_REAL_DATA", "../shared/data/real"))
    with fail_cleanly(as_json), _needs_extras():
        from contextledger.bench.cost import Session, cost_markdown, cost_report, run_cost
        from contextledger.bench.cost_sessions import real_sessions, scripted_session
        from contextledger.cli.bench_cmd import _ints
        from contextledger.providers.prices import load_prices

        budget_list = _ints(budgets, "--budgets")
        strategies = _strategies(peers)
        sessions = [Session(f"scripted-{n}", tuple(scripted_session(n))) for n in (_ints(scripted, "--scripted") if scripted.strip() else [])]
        if (root / "manifest.json").exists() and limit != 0:
            sessions = [Session(rel, tuple(calls)) for rel, calls in real_sessions(root, match=match, limit=limit, min_calls=min_calls)] + sessions
        total = sum(len(s.calls) for s in sessions) * (1 + len(budget_list))
        with Progress(TextColumn("cost"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console, disable=as_json, transient=True) as bar:
            task = bar.add_task("cost", total=total)
            rows = run_cost(sessions, budget_list, strategies, probe_every=probe_every, progress=lambda n: bar.advance(task, n))
        report = cost_report(rows, sessions=[s.name for s in sessions], prices_version=load_prices().version)
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench-cost.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        (out / "bench-cost.md").write_text("# Cost after prompt caching\n\n" + cost_markdown(report) + "\n", encoding="utf-8")
    if as_json:
        emit_json(report)
    else:
        console.print(cost_markdown(report), markup=False, soft_wrap=True)
        console.print(f"written: {out / 'bench-cost.json'}, {out / 'bench-cost.md'}", markup=False)


@contextlib.contextmanager
def _needs_extras() -> Iterator[None]:
    """A missing optional module (the proxy's ``server`` extra, a peer's ``bench`` extra)
    as one line naming the extra, not an internal error."""
    from contextledger.errors import InputError
    from contextledger.extras import missing_extra

    try:
        yield
    except ModuleNotFoundError as exc:
        raise InputError(missing_extra(exc, "contextledger bench cost")) from None


def _strategies(names: str) -> list[Strategy]:
    """The peer strategies named (``all``: every one; ``''``: none).

    Raises:
        InputError: an unknown name.
    """
    from contextledger.bench.strategies import all_strategies
    from contextledger.errors import InputError

    wanted = [n.strip() for n in names.split(",") if n.strip()]
    every = all_strategies()
    if wanted == ["all"]:
        return [s for s in every if s.name != "replay"]
    by_name = {s.name: s for s in every}
    unknown = [n for n in wanted if n not in by_name]
    if unknown:
        raise InputError(f"--peers: unknown strategy {unknown[0]!r}; expected all or some of {', '.join(sorted(by_name))}")
    return [by_name[n] for n in wanted]
