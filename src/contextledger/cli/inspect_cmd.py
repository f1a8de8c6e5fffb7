"""``contextledger inspect [CONV]``: the service on loopback, opened at the inspector.

Binds ``127.0.0.1`` (a free port unless ``--port`` names one) before printing the URL, so
the printed address answers as soon as it is shown.  Register with :func:`register`.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Annotated

import typer

from contextledger.cli.common import console, emit_json, fail_cleanly, state
from contextledger.errors import InputError

__all__ = ["inspect", "register"]


def inspect(
    conversation: Annotated[str | None, typer.Argument(help="Open this conversation (default: the list of conversations).")] = None,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port on 127.0.0.1 (0: a free one).")] = 0,
    bench: Annotated[Path | None, typer.Option("--bench", help="A benchmark report folder (contextledger bench … --out DIR) to show on /bench.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the URL as JSON before serving.")] = False,
) -> None:
    """Serve the inspector (and the whole service) on 127.0.0.1 and print its URL."""
    with fail_cleanly(as_json):
        try:
            import uvicorn

            from contextledger.server.settings import ServerSettings
        except ImportError as exc:
            raise InputError(f"the inspector needs the server extra: pip install 'contextledger[server]' ({exc.name} is missing)") from None
        if bench is not None:
            if not bench.is_dir():
                raise InputError(f"--bench {bench}: not a folder")
            os.environ["CONTEXTLEDGER_BENCH_DIR"] = str(bench.resolve())
        ledger = state.ledger()  # migrates once; an unknown conversation fails here (exit 3)
        scope = ledger.scope(state.tenant)
        if conversation is not None:
            ledger.store.get_conversation(scope, conversation)
        state.close()
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
            sock.listen(128)
        except OSError as exc:
            raise InputError(f"--port {port}: cannot listen on 127.0.0.1 ({exc.strerror or exc})") from None
        bound = sock.getsockname()[1]
        settings = ServerSettings.from_env(db=state.db, home=state.home, host="127.0.0.1", port=bound, workers=1, tenant=state.tenant)
    base = f"http://127.0.0.1:{bound}"
    url = f"{base}/conversations/{conversation}" if conversation else f"{base}/"
    if as_json:
        emit_json({"url": url, "base_url": base})
    else:
        console.print(f"inspector: {url}  (Ctrl-C stops it)", markup=False, soft_wrap=True)
    from contextledger.server.app import create_app

    server = uvicorn.Server(uvicorn.Config(create_app(settings), log_level="warning", lifespan="on", timeout_graceful_shutdown=5))
    server.run(sockets=[sock])


def register(app: typer.Typer) -> None:
    """Add ``inspect`` to the main CLI."""
    app.command("inspect")(inspect)
