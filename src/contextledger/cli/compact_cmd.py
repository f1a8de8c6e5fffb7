"""``contextledger compact CONVERSATION [--branch ID] [--keep N] [--now ISO] [--json]``.

Writes one compaction message (a handoff summary, seed 001 §10) on the branch and prints
it: the covered sequence range, the record ids it cites, and the rendered handoff text.
Register with ``app.add_typer(compact_cmd.app, name="compact")``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from contextledger.cli.common import (
    console,
    emit_json,
    fail_cleanly,
    parse_now,
    state,
    warn_if_now_before_newest,
)

__all__ = ["app", "compact_cmd"]

app = typer.Typer(
    rich_markup_mode=None,
    help="Fold old history into a handoff summary; the recent tail stays raw.",
    invoke_without_command=True,
    context_settings={"allow_interspersed_args": True},
)


@app.callback(invoke_without_command=True)
def compact_cmd(
    conversation: Annotated[str, typer.Argument(help="Conversation id.")],
    branch: Annotated[str | None, typer.Option("--branch", help="Branch id (default: the active branch).")] = None,
    keep: Annotated[int, typer.Option("--keep", min=0, help="Recent user/assistant/tool units left raw.")] = 6,
    now: Annotated[str | None, typer.Option("--now", help="Evaluation time (ISO 8601) for staleness; default: now.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Compact CONVERSATION: every unit before the last --keep ones becomes one handoff
    message (user goal, hard constraints, current state, verified facts, files read and
    modified, failed attempts, latest verification, next step).  Nothing is deleted;
    every covered record can still be rehydrated."""
    from contextledger.compaction import compact

    with fail_cleanly(as_json):
        ledger = state.ledger()
        warn_if_now_before_newest(ledger, ledger.scope(state.tenant), conversation, parse_now(now))
        result = compact(
            ledger,
            ledger.scope(state.tenant),
            conversation,
            branch_id=branch,
            keep_recent_units=keep,
            now=parse_now(now),
        )
    if as_json:
        emit_json(
            {
                "compaction_id": result.id,
                "conversation_id": conversation,
                "branch_id": result.message.branch_id,
                "seq": result.message.seq,
                "covers": {"from_seq": result.from_seq, "to_seq": result.to_seq},
                "covered_units": result.covered_units,
                "kept_units": result.kept_units,
                "previous_compaction_id": result.previous_compaction_id,
                "token_count": result.message.token_count,
                "sections": {k: v for k, v in result.document.items() if k != "source_range"},
                "source_refs": list(result.source_refs),
            }
        )
        return
    console.print(
        f"compaction {result.id}: seq {result.from_seq}-{result.to_seq} "
        f"({result.covered_units} units covered, {result.kept_units} kept raw, {result.message.token_count} tokens)",
        markup=False,
    )
    text = "".join(p.text for p in result.message.parts if hasattr(p, "text") and isinstance(p.text, str))
    console.print(text, markup=False, soft_wrap=True)
