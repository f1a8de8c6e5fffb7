"""``contextledger serve`` and ``contextledger keys create|list|revoke``.

``serve`` runs the service (REST API, provider-compatible proxy) with uvicorn; its
options also come from ``CONTEXTLEDGER_*`` variables (:mod:`contextledger.server.settings`).
Register with :func:`register`.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from contextledger.cli.common import console, emit_json, fail_cleanly, state
from contextledger.errors import InputError

__all__ = ["keys_app", "register", "serve"]

keys_app = typer.Typer(rich_markup_mode=None, help="API keys of the service: each maps to one tenant; only its hash is stored.", no_args_is_help=True)


def serve(
    host: Annotated[str, typer.Option("--host", envvar="CONTEXTLEDGER_HOST", help="Address to bind (non-loopback needs an API key).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", envvar="CONTEXTLEDGER_PORT", min=0, max=65535, help="Port to listen on.")] = 8787,
    workers: Annotated[int, typer.Option("--workers", envvar="CONTEXTLEDGER_WORKERS", min=1, help="Worker processes (use PostgreSQL for more than one host).")] = 1,
    openai_upstream: Annotated[str | None, typer.Option("--openai-upstream", envvar="CONTEXTLEDGER_OPENAI_UPSTREAM", help="OpenAI base URL, /v1 included.")] = None,
    anthropic_upstream: Annotated[str | None, typer.Option("--anthropic-upstream", envvar="CONTEXTLEDGER_ANTHROPIC_UPSTREAM", help="Anthropic base URL, without /v1.")] = None,
    proxy_mode: Annotated[str | None, typer.Option("--proxy-mode", envvar="CONTEXTLEDGER_PROXY_MODE",
                                                   help="assemble (send the assembled request) or shadow (send the client's own, record what would have been sent).")] = None,
    stream_usage: Annotated[bool | None, typer.Option("--stream-usage/--no-stream-usage", envvar="CONTEXTLEDGER_STREAM_USAGE",
                                                      help="Ask for usage in streamed OpenAI Chat requests (adds stream_options.include_usage).")] = None,
) -> None:
    """Serve the REST API (/api, OpenAPI at /docs) and the proxy (/v1/chat/completions,
    /v1/responses, /v1/messages).  GET /healthz answers once the ledger is open."""
    with fail_cleanly():
        try:
            import uvicorn

            from contextledger.server.keys import any_active_key
            from contextledger.server.settings import ServerSettings, is_loopback
        except ImportError as exc:
            raise InputError(f"the service needs the server extra: pip install 'contextledger[server]' ({exc.name} is missing)") from None
        try:
            settings = ServerSettings.from_env(db=state.db, home=state.home, host=host, port=port, workers=workers, tenant=state.tenant,
                                               openai_upstream=openai_upstream, anthropic_upstream=anthropic_upstream,
                                               proxy_mode=proxy_mode.strip().lower() if proxy_mode else None, stream_usage=stream_usage)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        ledger = state.ledger(create=True)  # migrates once, before the workers start
        if not is_loopback(host) and not any_active_key(ledger):
            raise InputError(f"refusing to serve on {host}: no API key exists; create one with `contextledger keys create --tenant T`")
        state.close()
    os.environ.update(settings.to_env())
    console.print(f"contextledger serving on http://{host}:{port} ({workers} worker{'s' if workers > 1 else ''}); OpenAI upstream {settings.openai_upstream}, Anthropic upstream {settings.anthropic_upstream}"
                  + (" — shadow mode: clients' requests are forwarded as sent" if settings.proxy_mode == "shadow" else ""))
    uvicorn.run("contextledger.server.app:app_from_env", factory=True, host=host, port=port, workers=workers, log_level="warning", timeout_graceful_shutdown=10)


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option("--tenant", help="The tenant the key acts for.")],
    label: Annotated[str, typer.Option("--label", help="A note to recognise the key by.")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Create a key and print it once (only its sha256 is stored)."""
    from contextledger.server.keys import create_key

    with fail_cleanly(as_json):
        key, record = create_key(state.ledger(create=True), tenant, label=label)
    if as_json:
        emit_json({"key": key, "id": record.id, "tenant": record.tenant_id, "label": record.label})
        return
    console.print(f"API key for tenant {record.tenant_id!r} (id {record.id}); it is shown only now:")
    console.print(key, markup=False)


@keys_app.command("list")
def keys_list(as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False) -> None:
    """List keys (ids, tenants, labels; never the keys)."""
    from contextledger.server.keys import list_keys

    with fail_cleanly(as_json):
        keys = list_keys(state.ledger())
    if as_json:
        emit_json([k.__dict__ for k in keys])
        return
    for k in keys:
        console.print(f"{k.id}  tenant={k.tenant_id}  created={k.created_at}{'  REVOKED ' + k.revoked_at if k.revoked_at else ''}  {k.label}", markup=False)


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="The key id (key_…).")]) -> None:
    """Revoke a key: every worker refuses it from the next request on."""
    from contextledger.server.keys import revoke_key

    with fail_cleanly():
        record = revoke_key(state.ledger(), key_id)
    console.print(f"revoked {record.id} (tenant {record.tenant_id})")


def register(app: typer.Typer) -> None:
    """Add ``serve`` and the ``keys`` group to the main CLI."""
    app.command("serve")(serve)
    app.add_typer(keys_app, name="keys")
