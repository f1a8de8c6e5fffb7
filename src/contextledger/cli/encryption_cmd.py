"""``contextledger encryption rotate``: a new encryption key, every sealed payload re-sealed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from contextledger.cli.common import console, emit_json, fail_cleanly, state

app = typer.Typer(rich_markup_mode=None, help="Encryption keys of restricted payloads.", no_args_is_help=True)


@app.command("rotate")
def rotate(as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False) -> None:
    """Add a new current key and re-seal every sealed payload with it.  With keys from
    CONTEXTLEDGER_KEYS the new value is printed: install it on every process."""
    from contextledger.config import resolve_config
    from contextledger.security.rotate import rotate_keys

    with fail_cleanly(as_json):
        cfg = resolve_config(state.db, state.home, None)
        key_file = Path(os.environ.get("CONTEXTLEDGER_KEY_FILE") or cfg.blob_root.parent / "keys")
        report = rotate_keys(state.ledger(), key_file=key_file)
    if as_json:
        emit_json(report)
        return
    console.print(f"new current key {report['key_id']}; re-sealed {report['resealed']} payloads; sealed by key: {report['sealed_by_key']}")
    if report["written_to"]:
        console.print(f"keys written to {report['written_to']} (old keys kept: remove them once no payload names them)")
    else:
        console.print("install on every process: CONTEXTLEDGER_KEYS=" + str(report["keys_value"]), soft_wrap=True, markup=False)
