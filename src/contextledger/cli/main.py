"""``contextledger`` command line (typer + rich).  Every command takes ``--json``.

Global options: ``--db URL`` (or ``CONTEXTLEDGER_DB``), ``--home DIR`` (or
``CONTEXTLEDGER_HOME``, default ``~/.contextledger``), ``--tenant``.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from contextledger.cli import coercion
from contextledger.cli.common import (
    backend_error,
    console,
    emit_error,
    emit_json,
    err_console,
    fail_cleanly,
    is_database_error,
    parse_now,
    print_rows,
    rich_console,
    rich_err_console,
    state,
    usage_error,
    warn_if_now_before_newest,
)
from contextledger.errors import ContextLedgerError, InputError
from contextledger.store.base import Scope

if TYPE_CHECKING:
    from contextledger.store.sqlite_direct import ConversationRow

coercion.install()

app = typer.Typer(
    rich_markup_mode=None,
    name="contextledger",
    help="A durable runtime graph for tool-using agents, with policy-assembled, explainable model context.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


@app.callback()
def _global(
    ctx: typer.Context,
    db: Annotated[str | None, typer.Option("--db", envvar="CONTEXTLEDGER_DB", help="Database URL or SQLite file path.")] = None,
    home: Annotated[str | None, typer.Option("--home", envvar="CONTEXTLEDGER_HOME", help="Data directory (default ~/.contextledger).")] = None,
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant scope.")] = "default",
) -> None:
    state.close()
    state.db, state.home, state.tenant = db, home, tenant
    ctx.call_on_close(state.close)


def _scope() -> Scope:
    return state.ledger().scope(state.tenant)


# -- import ---------------------------------------------------------------------------------
@app.command("import")
def import_cmd(
    paths: Annotated[list[Path], typer.Argument(help="Transcript files (OpenAI chat JSON/JSONL, Claude Code JSONL, SWE-agent trajectories).", readable=False)],
    format: Annotated[str, typer.Option("--format", help="auto, or one of: claude-code, codex-rollout, aider-history, gemini-cli, openai-chat, tau2-bench, swe-agent, openai-responses, anthropic-messages")] = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Import transcripts; each file is one transaction (a failure leaves nothing behind)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    results = []
    failures: list[ContextLedgerError] = []
    with fail_cleanly(as_json):
        ledger = state.ledger(create=True)
        progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=rich_err_console(), disable=as_json or len(paths) < 2, transient=True)
        with progress:
            task = progress.add_task("importing", total=len(paths))
            for p in paths:
                try:
                    results.append(ledger.import_file(p, format=format, scope=_scope()).as_dict())
                except ContextLedgerError as exc:
                    failures.append(exc)
                progress.advance(task)
    if as_json:
        if results or not failures:  # a failed run prints nothing on stdout (the errors go to stderr)
            emit_json(results)
    else:
        for r in results:
            if not r["created"]:
                # nothing was written: the counts of this call are zero, the conversation's are not
                console.print(f"already imported: {r['path']} → [bold]{r['conversation_id']}[/bold] ({r['format']})")
            else:
                console.print(
                    f"imported: {r['path']} → [bold]{r['conversation_id']}[/bold] ({r['format']}): "
                    f"{r['messages']} messages, {r['tool_calls']} tool calls, {r['artifacts']} artifacts, "
                    f"{r['pending_calls']} pending, {r['branches']} branch{'' if r['branches'] == 1 else 'es'}"
                )
            for n in r["notes"][:10]:
                console.print(f"  note: {n}", soft_wrap=True)
            if len(r["notes"]) > 10:
                console.print(f"  … {len(r['notes']) - 10} more notes (see --json)")
    # every failed file on stderr (the others were imported: one transaction per file)
    codes = [emit_error(exc, as_json, path=getattr(exc, "path", None)) for exc in failures]
    if codes:
        raise typer.Exit(max(codes))


# -- conversations --------------------------------------------------------------------------
@app.command("conversations")
def conversations_cmd(as_json: JsonOpt = False) -> None:
    """List conversations with message / tool-call / artifact counts."""
    with fail_cleanly(as_json):
        rows = _conversation_rows()
    if as_json:
        emit_json([r.as_dict() for r in rows])
        return
    print_rows(
        ("conversation", "title", "messages", "tool calls", "artifacts", "source"),
        [(r.conversation_id, r.title[:40], str(r.messages), str(r.tool_calls), str(r.artifacts), r.source) for r in rows],
        right=(2, 3, 4),
    )


def _conversation_rows() -> list[ConversationRow]:
    """The conversations of the CLI's tenant: read directly from an SQLite ledger when
    that path applies (:mod:`contextledger.store.sqlite_direct`), else through the store."""
    from contextledger.config import resolve_config
    from contextledger.store.sqlite_direct import ConversationRow, list_conversations

    direct = list_conversations(resolve_config(state.db, state.home).db_url, state.tenant)
    if direct is not None:
        return direct
    return [
        ConversationRow(
            conversation_id=r.conversation.id, title=r.conversation.title, source=r.conversation.source,
            source_path=r.conversation.source_path, messages=r.message_count, tool_calls=r.tool_call_count,
            artifacts=r.artifact_count, created_at=r.conversation.created_at,
        )
        for r in state.ledger().store.list_conversations(_scope())
    ]


# -- assemble -------------------------------------------------------------------------------
@app.command("assemble")
def assemble_cmd(
    conversation: Annotated[str, typer.Argument(help="Conversation id.")],
    branch: Annotated[str | None, typer.Option("--branch", help="Branch id (default: the active branch).")] = None,
    participant: Annotated[str | None, typer.Option("--participant", help="Participant id or name to assemble for.")] = None,
    provider: Annotated[str, typer.Option("--provider", help="openai-chat | anthropic | openai-responses")] = "openai-chat",
    budget: Annotated[int | None, typer.Option("--budget", help="Token budget (default from the policy).")] = None,
    now: Annotated[str | None, typer.Option("--now", help="Evaluation time, ISO 8601 (default: for an imported conversation the time of its newest record, else the current time).")] = None,
    policy: Annotated[Path | None, typer.Option("--policy", help="Policy TOML file (default: bundled).", readable=False)] = None,
    trace: Annotated[bool, typer.Option("--trace", help="Keep and show every candidate's decision chain.")] = False,
    out: Annotated[Path | None, typer.Option("--out", help="Write the JSON result to this file.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Assemble the next request's context and record the ContextAssembly."""
    with fail_cleanly(as_json):
        pol = None
        if policy is not None:
            from contextledger.policy.loader import load_policy

            pol = load_policy(policy)
        at = parse_now(now)
        warn_if_now_before_newest(state.ledger(), _scope(), conversation, at)
        res = state.ledger().assemble(conversation, branch_id=branch, participant_id=participant, provider=provider, budget_tokens=budget, now=at, policy=pol, trace=trace, scope=_scope())
    data = res.as_dict()
    if out is not None:
        import json

        try:
            out.write_text(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n", encoding="utf-8")
        except OSError as exc:
            with fail_cleanly(as_json):
                raise InputError(f"--out {out}: cannot write ({exc.strerror or exc}); the assembly {res.record.id} was recorded") from None
    cost_error = (res.record.cost or {}).get("error")
    if cost_error:
        err_console.print(f"warning: no cost figures for {res.record.id}: {cost_error}", markup=False, highlight=False, soft_wrap=True)
    if as_json:
        emit_json(data)
        return
    _print_assembly(data)
    if trace and res.record.trace:
        from rich.table import Column, Table

        table = Table("kind", "family", "decision", "reason", "detail")
        table.columns.insert(0, Column("record", no_wrap=True, min_width=30))
        for d in res.record.trace:
            table.add_row(str(d["record_id"]), str(d["record_kind"]), str(d["family"]), str(d["decision"]), str(d["reason"]), str(d.get("detail", d.get("shape", ""))))
        console.print(table)
    if out is not None:
        console.print(f"written: {out}")


def _print_assembly(d: dict[str, object]) -> None:
    console.print(f"assembly [bold]{d['assembly_id']}[/bold] ({d['provider']}, policy {d['policy_version']})")
    console.print(f"replay {d['replay_tokens']:,} tokens → assembled {d['assembled_tokens']:,} tokens (budget {d['budget_tokens']:,}; reduction {float(d['reduction']):.1%})")  # type: ignore[arg-type]
    omitted = d["omitted"]
    if isinstance(omitted, dict) and omitted:
        console.print("omitted / reshaped by reason: " + ", ".join(f"{k}={v}" for k, v in sorted(omitted.items())))
    if d.get("over_budget"):
        err_console.print(f"warning: the mandatory content (system prompt, constraints, current request, recovery state) needs {d['assembled_tokens']:,} tokens, more than the budget ({d['budget_tokens']:,})", markup=False, soft_wrap=True)
    console.print(f"messages {d['legacy_message_count']} → {d['assembled_message_count']}; memories {d['selected_memory_count']}; raw artifacts {d['raw_artifact_count']}; timings {d['timings_ms']}")


# -- explain / rehydrate --------------------------------------------------------------------
@app.command("explain")
def explain_cmd(
    assembly: Annotated[str, typer.Argument(help="Assembly id.")],
    record: Annotated[str | None, typer.Option("--record", help="Explain one record.")] = None,
    why_not: Annotated[str | None, typer.Option("--why-not", help="Every message, tool result or memory whose text or id contains TEXT, with its decision and reason in this request.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Why each record was included, shaped or omitted (by reason)."""
    from contextledger.explain import render_explanation, render_why_not
    from contextledger.explain import why_not as find_why_not

    with fail_cleanly(as_json):
        if record is not None and why_not is not None:
            raise InputError("--record and --why-not exclude each other")
        if why_not is not None:
            ledger = state.ledger()
            hits = find_why_not(ledger, _scope(), assembly, why_not)
        else:
            expl = state.ledger().explain(assembly, record_id=record, scope=_scope())
    if why_not is not None:
        if as_json:
            emit_json([h.as_dict() for h in hits])
        else:
            console.print(render_why_not(why_not, hits), soft_wrap=True, markup=False)
        return
    if as_json:
        emit_json(expl)
    else:
        console.print(render_explanation(expl), soft_wrap=True, markup=False)


@app.command("messages")
def messages_cmd(
    conversation: Annotated[str, typer.Argument(help="Conversation id.")],
    branch: Annotated[str | None, typer.Option("--branch", help="Only this branch's lineage (default: every branch).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List a conversation's messages with their ids (the ids other commands take)."""
    from contextledger.inspector.views import message_rows

    with fail_cleanly(as_json):
        rows = message_rows(state.ledger(), _scope(), conversation, branch_id=branch)
    if as_json:
        emit_json(rows)
        return
    from rich.table import Column, Table

    table = Table("seq", "role", "kind", "branch", "text")
    table.columns.insert(0, Column("message", no_wrap=True, min_width=30))
    for r in rows:
        table.add_row(r["message_id"], str(r["seq"]), r["role"], r["kind"], r["branch_id"], r["text"][:60])
    console.print(table)


@app.command("rehydrate")
def rehydrate_cmd(
    record: Annotated[str, typer.Argument(help="Artifact id, or the handle a payload shows (a12; m12: the artifact memory m12 was derived from) with --conversation; or a message id: the message as recorded, before redaction.")],
    conversation: Annotated[str | None, typer.Option("--conversation", help="The conversation a handle (a12, m12) is numbered in.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the bytes to a file instead of stdout.")] = None,
    reveal_secrets: Annotated[bool, typer.Option("--reveal-secrets", help="Show a secret-like payload (recorded as a PolicyDecision).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Print the exact raw bytes of an artifact, verified against its sha256.  A
    secret-like payload needs --reveal-secrets; each use is recorded."""
    import json

    with fail_cleanly(as_json):
        ledger = state.ledger()
        if record.startswith("msg_"):
            conv = _message_conversation(record)
            from contextledger.security.reveal import original_message_parts

            parts = original_message_parts(ledger, _scope(), conv, record, reveal=reveal_secrets, actor="cli")
            data = json.dumps(parts, ensure_ascii=False, indent=2).encode("utf-8", "surrogatepass") + b"\n"
            art = None
        else:
            from contextledger.handles import resolve_artifact_ref

            art_id = resolve_artifact_ref(ledger.store, _scope(), conversation, record)
            data = ledger.rehydrate(art_id, scope=_scope(), reveal=reveal_secrets, actor="cli")
            art = ledger.store.get_artifact(_scope(), art_id)
    if out is not None:
        try:
            out.write_bytes(data)
        except OSError as exc:
            with fail_cleanly(as_json):
                raise InputError(f"--out {out}: cannot write ({exc.strerror or exc})") from None
    if as_json:
        if art is None:
            emit_json({"message_id": record, "parts": json.loads(data)})
        else:
            emit_json({"artifact_id": art.id, "sha256": art.sha256, "size_bytes": art.size_bytes, "verified": True, "content_type": art.content_type,
                       "privacy_class": art.privacy_class.value,
                       "text": data.decode("utf-8") if out is None and art.content_type.startswith(("text/", "application/json")) else None})
    elif out is None:
        sys.stdout.buffer.write(data)


def _message_conversation(message_id: str) -> str:
    """The conversation of a message id in the CLI's tenant.

    Raises:
        NotFoundError: no such message.
    """
    import sqlalchemy as sa

    from contextledger.errors import NotFoundError
    from contextledger.store.schema import messages

    with state.ledger().store.reader() as conn:
        row = conn.execute(sa.select(messages.c.conversation_id).where(messages.c.id == message_id, messages.c.tenant_id == state.tenant)).first()
    if row is None:
        raise NotFoundError("message", message_id)
    return str(row[0])


# -- demo -----------------------------------------------------------------------------------
DEMO_MARKER = ".contextledger-demo"
"""File that marks a data directory made by ``demo`` (only such a folder is replaced)."""

@app.command("demo")
def demo_cmd(
    budget: Annotated[int, typer.Option("--budget", help="Token budget.")] = 4000,
    provider: Annotated[str, typer.Option("--provider", help="openai-chat | anthropic | openai-responses")] = "anthropic",
    keep: Annotated[bool, typer.Option("--keep", help="Keep the demo data directory.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Import a bundled real transcript into a fresh data directory, assemble, explain."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from contextledger.explain import render_explanation
    from contextledger.ledger import Ledger

    home = Path(state.home) / "demo" if state.home else Path(tempfile.mkdtemp(prefix="contextledger-demo-"))
    if state.home and home.exists():
        # only a folder an earlier demo made (it carries the marker) is replaced; anything
        # else at that path is the user's and is never touched
        if not (home / DEMO_MARKER).is_file():
            with fail_cleanly(as_json):
                raise InputError(f"{home} exists and was not made by `contextledger demo`; it is left alone — move it or pick another --home")
        shutil.rmtree(home)
    with fail_cleanly(as_json):
        src = resources.files("contextledger.data").joinpath("demo-session.jsonl")
        with resources.as_file(src) as path:
            ledger = Ledger.open(home=home)
            (home / DEMO_MARKER).write_text("made by `contextledger demo`; the next demo with the same --home replaces this folder\n")
            with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=rich_console(), disable=as_json, transient=True) as progress:
                t = progress.add_task("importing the bundled Claude Code session", total=3)
                imp = ledger.import_file(path)
                progress.update(t, advance=1, description="assembling")
                res = ledger.assemble(imp.conversation_id, provider=provider, budget_tokens=budget, trace=True)
                progress.update(t, advance=1, description="explaining")
                expl = ledger.explain(res.record.id)
                progress.update(t, advance=1)
            from contextledger.providers.registry import validate_payload

            problems = validate_payload(provider, res.payload)
            ledger.close()
    if not keep and not state.home:
        shutil.rmtree(home, ignore_errors=True)
    if as_json:
        emit_json({"import": imp.as_dict(), "assembly": res.as_dict(), "explanation": expl, "payload_problems": problems, "data_dir": str(home) if keep or state.home else None})
        return
    console.print(f"imported the bundled session: {imp.messages} messages, {imp.tool_calls} tool calls, {imp.artifacts} raw artifacts kept")
    _print_assembly(res.as_dict())
    console.print(f"provider payload valid: {'yes' if not problems else 'NO: ' + '; '.join(problems)}")
    console.print()
    console.print(render_explanation(expl), soft_wrap=True, markup=False)
    if keep or state.home:
        console.print(f"\ndata directory: {home} (per-record decisions: contextledger --home {home} explain {res.record.id} --json)")
        console.print(f"open it in the inspector: contextledger --home {home} inspect {imp.conversation_id}")
    if problems:
        raise typer.Exit(1)


@app.command("mcp")
def mcp_cmd() -> None:
    """Serve the ledger to MCP clients over stdio: tools rehydrate_artifact, search_ledger, explain_assembly, why_not and ledger:// resources (pip install 'contextledger[mcp]')."""
    with fail_cleanly():
        try:
            from contextledger.adapters.mcp import build_server
        except ImportError as exc:
            raise InputError(str(exc)) from None
        server = build_server(state.ledger(), scope=_scope())
    server.run("stdio")


def _register_groups() -> None:
    from contextledger.cli import (
        bench_cmd,
        bench_cost_cmd,
        compact_cmd,
        encryption_cmd,
        inspect_cmd,
        lifecycle_cmd,
        policy_cmd,
        search_cmd,
        serve_cmd,
    )

    search_cmd.register(app)
    app.add_typer(policy_cmd.app, name="policy")
    app.add_typer(compact_cmd.app, name="compact")
    bench_cmd.app.command("cost")(bench_cost_cmd.cost)
    app.add_typer(bench_cmd.app, name="bench")
    app.add_typer(encryption_cmd.app, name="encryption")
    lifecycle_cmd.register(app)
    serve_cmd.register(app)
    inspect_cmd.register(app)


_register_groups()


def main() -> None:  # pragma: no cover - console entry, exercised as a process in tests
    """Console entry point: runs the app; an error that escaped a command still ends in
    one line on stderr and a documented exit status (:data:`~contextledger.cli.common.EXIT_CODES`),
    and so does a usage error (missing argument, bad option value: status 2; with
    ``--json`` one ``{"error": "UsageError", …}`` object).
    An unexpected failure prints its traceback only with ``CONTEXTLEDGER_DEBUG=1``."""
    import os

    as_json = "--json" in sys.argv[1:]
    try:
        rv = app(standalone_mode=False, prog_name="contextledger")
    except typer.TyperException as exc:  # typer's click exceptions (public base class)
        code = int(getattr(exc, "exit_code", 2))
        if type(exc).__name__ == "NoArgsIsHelpError":  # a group or the tool without arguments: its help on stdout
            ctx = getattr(exc, "ctx", None)
            if ctx is not None:
                typer.echo(ctx.get_help())
            raise SystemExit(code) from None
        # usage: one line (one JSON object with --json), status 2
        raise SystemExit(emit_error(usage_error(exc), as_json)) from None
    except typer.Abort:
        typer.echo("Aborted!", err=True)
        raise SystemExit(1) from None
    except (ContextLedgerError, OSError) as exc:
        raise SystemExit(emit_error(exc, as_json)) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except Exception as exc:
        if is_database_error(exc):
            raise SystemExit(emit_error(backend_error(exc), as_json)) from None
        if os.environ.get("CONTEXTLEDGER_DEBUG"):
            raise
        internal = RuntimeError(f"internal error ({type(exc).__name__}: {str(exc)[:200]}); this is a defect — CONTEXTLEDGER_DEBUG=1 shows the traceback")
        raise SystemExit(emit_error(internal, as_json)) from None
    # typer.Exit / click's exit status (returned when not standalone); a command's own return value is not one
    raise SystemExit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
