"""``contextledger keys`` and ``contextledger serve`` start-up checks."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from contextledger.cli.common import EXIT_INPUT
from contextledger.cli.main import app
from contextledger.ledger import Ledger
from contextledger.server.keys import key_hash, tenant_of_key

runner = CliRunner()


def test_keys_create_prints_the_key_once_and_stores_its_hash(tmp_path: Path) -> None:
    home = ["--home", str(tmp_path)]
    created = runner.invoke(app, [*home, "keys", "create", "--tenant", "acme", "--label", "ci", "--json"])
    assert created.exit_code == 0, created.output
    out = json.loads(created.stdout)
    key = out["key"]
    listed = runner.invoke(app, [*home, "keys", "list", "--json"])
    assert key not in listed.stdout and json.loads(listed.stdout)[0]["tenant_id"] == "acme"
    ledger = Ledger.open(home=tmp_path)
    try:
        assert tenant_of_key(ledger, key) == "acme"
        assert key.encode() not in (tmp_path / "ledger.db").read_bytes() and key_hash(key).encode() in (tmp_path / "ledger.db").read_bytes()
    finally:
        ledger.close()
    revoked = runner.invoke(app, [*home, "keys", "revoke", out["id"]])
    assert revoked.exit_code == 0 and "revoked" in revoked.stdout


def test_serve_refuses_a_public_address_without_keys(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--home", str(tmp_path), "serve", "--host", "0.0.0.0"])
    assert result.exit_code == EXIT_INPUT
    assert "refusing to serve on 0.0.0.0: no API key exists" in result.stderr
