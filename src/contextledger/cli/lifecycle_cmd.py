"""``contextledger forget`` and ``contextledger gc``: deletion and garbage collection."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from contextledger.cli.common import console, emit_json, fail_cleanly, parse_now, state

__all__ = ["register"]

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def forget(
    conversation: Annotated[str | None, typer.Option("--conversation", help="Delete this conversation of --tenant.")] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Delete every conversation and record of this tenant.")] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm the deletion (it cannot be undone).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Delete a conversation (of the global --tenant) or a whole tenant: every row and
    every blob only that scope references, recorded in the deletion audit (no content)."""
    from contextledger.errors import InputError
    from contextledger.security.forget import forget_conversation, forget_tenant

    with fail_cleanly(as_json):
        if (conversation is None) == (tenant is None):
            raise InputError("forget: give exactly one of --conversation ID or --tenant T")
        if not yes:
            raise InputError("forget deletes data for good: add --yes to confirm")
        ledger = state.ledger()
        if conversation is not None:
            report = forget_conversation(ledger, ledger.scope(state.tenant), conversation, actor="cli")
        else:
            report = forget_tenant(ledger, str(tenant), actor="cli")
    if as_json:
        emit_json(report)
        return
    rows = sum(report["rows"].values())
    console.print(f"deleted {rows} rows and {report['blobs_deleted']} blobs (audit {report['audit_id']})")


def gc(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report what would be deleted; change nothing.")] = False,
    retention: Annotated[Path | None, typer.Option("--retention", help="Retention policy TOML (default: the bundled one).")] = None,
    now: Annotated[str | None, typer.Option("--now", help="Evaluation time, ISO 8601 (default: now).")] = None,
    grace_minutes: Annotated[int, typer.Option("--grace-minutes", help="Spare unreferenced blobs younger than this.")] = 60,
    as_json: JsonOpt = False,
) -> None:
    """Apply the retention policy, prune assembly logs to a sampled subset and delete
    blobs no row references (e.g. those a killed import left)."""
    from datetime import timedelta

    from contextledger.security.gc import collect
    from contextledger.security.retention import load_retention

    with fail_cleanly(as_json):
        policy = load_retention(retention) if retention is not None else None
        report = collect(state.ledger(), policy=policy, dry_run=dry_run, now=parse_now(now), grace=timedelta(minutes=max(0, grace_minutes)))
    data = report.as_dict()
    if as_json:
        emit_json(data)
        return
    verb = "would delete" if dry_run else "deleted"
    console.print(
        f"{verb}: {data['blobs_deleted']} unreferenced blobs ({data['blob_bytes_freed']:,} bytes), {data['assemblies_deleted']} assembly logs "
        f"({data['assemblies_kept']} sampled logs kept), retention actions {data['retention'] or 'none'}"
    )


def register(app: typer.Typer) -> None:
    """Add ``forget`` and ``gc`` to the root command."""
    app.command("forget")(forget)
    app.command("gc")(gc)
