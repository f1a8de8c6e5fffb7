"""``contextledger search CONV QUERY`` and ``contextledger index [CONV]``: the retrieval
router from the command line (seed 001 §4.5).

Register with :func:`register` (adds both commands to the main app).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from contextledger.cli.common import (
    console,
    emit_json,
    fail_cleanly,
    parse_now,
    rich_console,
    state,
    warn_if_now_before_newest,
)

if TYPE_CHECKING:
    from rich.progress import TaskID

__all__ = ["SCORE_NOTE", "register"]

SCORE_NOTE = "score: lead + fused RRF; lead 3 named by the query (id, handle, call id), 2 a route's best hit, 1 holds a query identifier whole"
"""The line under the hits that says what the score column is."""


def search_cmd(
    conversation: Annotated[str, typer.Argument(help="Conversation id.")],
    query: Annotated[str, typer.Argument(help="What to recall, in your own words.")],
    branch: Annotated[str | None, typer.Option("--branch", help="Branch id (default: the active branch).")] = None,
    participant: Annotated[str | None, typer.Option("--participant", help="Search as this participant (default: the main view).")] = None,
    provider: Annotated[str | None, typer.Option("--provider", help="Only what may be sent to this provider (privacy routing).")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Most hits.")] = 10,
    route: Annotated[list[str] | None, typer.Option("--route", help="Run only these routes (repeatable).")] = None,
    now: Annotated[str | None, typer.Option("--now", help="Freshness reference time (ISO 8601).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Recall records of CONVERSATION that answer QUERY: each hit with its handle (m12),
    the routes that found it, its rank in each, and its score, highest first (lead + the
    fused reciprocal-rank score; a record QUERY names by id, handle or tool call id
    leads)."""
    from contextledger.retrieval import SEARCH_ROUTES, search

    with fail_cleanly(as_json):
        ledger, at = state.ledger(), parse_now(now)
        warn_if_now_before_newest(ledger, ledger.scope(state.tenant), conversation, at)
        result = search(
            ledger, ledger.scope(state.tenant), conversation, query, branch_id=branch, participant_id=participant,
            provider=provider, now=at, limit=limit, routes=tuple(route) if route else SEARCH_ROUTES,
        )
    if as_json:
        emit_json(result.to_json())
        return
    # handles, ids, ranks and scores are never cut: the text column alone gives way to a
    # narrow terminal
    rows = [
        (str(i), h.handle, h.record_id, " ".join(f"{r}:{k}" for r, k in sorted(h.ranks.items())), f"{h.score:.4f}",
         (h.text.strip().splitlines() or [""])[0][:100] + (" [stale]" if h.stale else ""))
        for i, h in enumerate(result.hits, start=1)
    ]
    names = ("#", "handle", "record", "routes (rank)", "score")
    widths = [max([len(name), *(len(r[j]) for r in rows)]) for j, name in enumerate(names)]
    # each column takes its width + 3 (borders, padding), and one border closes the row
    room = console.width - sum(widths) - 3 * (len(names) + 1) - 1
    if room >= 12:
        from rich.table import Table

        table = Table(show_lines=False)
        for name, width in zip(names, widths, strict=True):
            table.add_column(name, no_wrap=True, width=width)
        table.add_column("text", no_wrap=True, overflow="ellipsis", max_width=room)
        for row in rows:
            table.add_row(*row)
        console.print(table)
    else:  # too narrow for the table: one hit per two lines, nothing cut
        for n, handle, rid, ranks, fused, text in rows:
            head = " ".join(x for x in (f"{n}.", handle, rid) if x)
            console.print(f"{head}  {ranks}  score {fused}", markup=False, soft_wrap=True)
            console.print(f"   {text}", markup=False, soft_wrap=True)
    console.print(f"routes: {', '.join(result.routes_used)} (RRF k={result.rrf_k})", markup=False)
    if rows:
        console.print(SCORE_NOTE, markup=False)
    for name, why in result.degraded.items():
        console.print(f"route {name} unavailable: {why}", markup=False)
    if result.withheld:
        console.print("withheld by a boundary: " + ", ".join(f"{k} {v}" for k, v in sorted(result.withheld.items())), markup=False)


def index_cmd(
    conversations: Annotated[list[str] | None, typer.Argument(help="Conversation ids (default: every conversation).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Derive the tool results still queued (a recording process stopped between its
    two tiers), then complete the retrieval index: keyword documents for records that
    have none and, with the retrieval extra, embeddings (for ledgers recorded before, or
    with CONTEXTLEDGER_EMBEDDINGS=off)."""
    from contextledger.ingest.drain import drain
    from contextledger.retrieval.index import backfill

    out = []
    with fail_cleanly(as_json):
        ledger = state.ledger()
        scope = ledger.scope(state.tenant)
        derived: dict[str, int] = {}
        targets: list[str | None] = list(conversations) if conversations else [None]
        for conv_id in targets:
            for mem in drain(ledger.runtime, scope, conversation_id=conv_id).memories:
                derived[mem.conversation_id] = derived.get(mem.conversation_id, 0) + 1
        ids = conversations or [c.conversation.id for c in ledger.store.list_conversations(scope)]
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=rich_console(), disable=as_json, transient=True)
        with progress:
            for conv in ids:
                task = progress.add_task(f"indexing {conv}", total=None)

                def step(done: int, total: int, t: TaskID = task) -> None:
                    progress.update(t, completed=done, total=total)

                counts = backfill(ledger.store, scope, conv, progress=step)
                out.append({"conversation_id": conv, "derived": derived.get(conv, 0), **counts})
    if as_json:
        emit_json(out)
    else:
        for r in out:
            console.print(f"{r['conversation_id']}: {r['derived']} queued results derived, {r['documents']} documents, {r['vectors']} vectors added", markup=False)


def register(app: typer.Typer) -> None:
    """Add ``search`` and ``index`` to ``app``."""
    app.command("search")(search_cmd)
    app.command("index")(index_cmd)
