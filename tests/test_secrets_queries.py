"""Secrets and the read side: ``explain --why-not`` (library, CLI text and JSON, the
inspector page) and ``search`` match and quote a secret-like record only through its
redacted text — a raw secret value, or a guessed prefix of one, never matches and is
never printed (both backends)."""

from __future__ import annotations

import json
from pathlib import Path

import sqlalchemy as sa
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from contextledger.cli.main import app
from contextledger.inspector.whynot import why_not
from contextledger.ledger import Ledger
from contextledger.retrieval import search
from contextledger.security.screen import credential_shaped, strip_secrets
from contextledger.server.app import create_app
from contextledger.server.settings import ServerSettings
from contextledger.store import schema as S

AWS_ID = "AKIAQYLPMN5HHHFPZAM2"
AWS_SECRET = "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"
DB_PASSWORD = "Zq81xLk29mVv"
DOTENV = f"AWS_ACCESS_KEY_ID={AWS_ID}\nAWS_SECRET_ACCESS_KEY={AWS_SECRET}\nDATABASE_URL=postgres://admin:{DB_PASSWORD}@db.internal:5432/prod\nDEBUG=true\n"
SECRETS = (AWS_ID, AWS_SECRET, DB_PASSWORD)
# what a user might type to probe: each whole value and an 8-character prefix of it
PROBES = (*SECRETS, *(s[:8] for s in SECRETS), f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}")


def _record(led: Ledger) -> tuple[str, str, str]:
    rec = led.recorder()
    conv = rec.start_conversation(title="env check", system_prompt="You are a coding agent.")
    rec.record_message(conv.id, "user", "Check the env config.")
    rec.record_assistant(conv.id, text="Reading it.", tool_calls=[{"call_id": "c1", "tool_name": "read_file", "arguments": {"path": ".env"}}])
    _, art, _ = rec.record_tool_result(conv.id, "c1", DOTENV)
    rec.record_message(conv.id, "user", f"the key {AWS_ID} is wrong, deploy anyway")
    res = led.assemble(conv.id, provider="openai-chat", budget_tokens=4000)
    return conv.id, art.id, res.record.id


def test_why_not_quotes_and_matches_redacted_text_only(ledger: Ledger) -> None:
    _, art_id, asm = _record(ledger)
    sc = ledger.scope()
    hits = why_not(ledger, sc, asm, "AWS_SECRET")
    assert art_id in [h.record_id for h in hits]
    dumped = json.dumps([h.as_dict() for h in hits], ensure_ascii=False)
    assert "AWS_SECRET_ACCESS_KEY=[secret: AWS secret access key · sha256:" in dumped
    for secret in SECRETS:
        assert secret not in dumped
    # the redacted user message is found by its own words and quoted redacted
    [msg] = why_not(ledger, sc, asm, "deploy anyway")
    assert msg.kind == "message" and "AWS Access Key · sha256:" in msg.excerpt and AWS_ID not in msg.excerpt
    for probe in PROBES:
        assert why_not(ledger, sc, asm, probe) == [], probe


def test_search_never_matches_a_secret_value(ledger: Ledger) -> None:
    conv_id, _, _ = _record(ledger)
    sc = ledger.scope()
    with ledger.store.reader() as conn:
        indexed = " ".join(r.tokens for r in conn.execute(sa.select(S.retrieval_docs.c.tokens)))
    for secret in SECRETS:
        assert secret.lower() not in indexed
    assert search(ledger, sc, conv_id, "DATABASE_URL env").hits  # the record itself is searchable
    routes = ("keyword", "rules", "memory", "artifact")
    for probe in (*SECRETS, *(s[:8] for s in SECRETS)):
        res = search(ledger, sc, conv_id, probe, routes=routes)
        assert res.hits == [], probe
        assert AWS_SECRET not in res.query
    # a probe with a secret in context ("NAME=<guess>", a URL with a password) is searched
    # by its other words alone: the hits are the same whatever value is guessed (no
    # oracle for the value), they are the record whose redacted text has those words,
    # and they quote no secret
    for probe in ("AWS_SECRET_ACCESS_KEY={}", "postgres://admin:{}@db.internal"):
        named = search(ledger, sc, conv_id, probe.format(AWS_SECRET if "AWS" in probe else DB_PASSWORD), routes=routes)
        guessed = search(ledger, sc, conv_id, probe.format("w7Tq2Lm0Zx9VbN4sKf1Yh8Jp3Rc5Ga6DuEiTo2Q" if "AWS" in probe else "Pz47kWq0Rt8n"), routes=routes)
        assert named.query == guessed.query and AWS_SECRET not in named.query and DB_PASSWORD not in named.query
        assert [(h.record_id, h.fused_score) for h in named.hits] == [(h.record_id, h.fused_score) for h in guessed.hits]
        assert named.hits and all(h.text.startswith("read_file succeeded: read .env") for h in named.hits), probe
        assert not any(s in json.dumps([h.text + h.excerpt for h in named.hits]) for s in SECRETS)


def test_cli_and_inspector_why_not_show_no_secret(tmp_path: Path) -> None:
    led = Ledger.open(home=tmp_path)
    try:
        conv_id, _, asm = _record(led)
        with TestClient(create_app(ServerSettings(), ledger=led)) as client:
            page = client.get(f"/assemblies/{asm}/why-not", params={"q": "AWS_SECRET"})
            assert page.status_code == 200 and "AWS_SECRET_ACCESS_KEY=[secret: AWS secret access key" in page.text
            assert not any(s in page.text for s in SECRETS)
            page = client.get(f"/assemblies/{asm}/why-not", params={"q": AWS_SECRET[:8]})
            assert page.status_code == 200 and AWS_SECRET[:8] not in page.text.replace(f"q={AWS_SECRET[:8]}", "").split("</h1>", 1)[-1].split("value=")[0]
    finally:
        led.close()
    runner = CliRunner()
    for extra in ([], ["--json"]):
        res = runner.invoke(app, ["--home", str(tmp_path), "explain", asm, "--why-not", "AWS_SECRET", *extra])
        assert res.exit_code == 0, res.output
        assert "[secret: AWS secret access key · sha256:" in res.stdout and not any(s in res.stdout for s in SECRETS)
    res = runner.invoke(app, ["--home", str(tmp_path), "explain", asm, "--why-not", AWS_SECRET[:8], "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout) == []
    res = runner.invoke(app, ["--home", str(tmp_path), "search", conv_id, AWS_SECRET, "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["hits"] == [] and AWS_SECRET not in res.stdout


def test_strip_secrets_keeps_ids_words_and_hashes() -> None:
    assert strip_secrets(f"why {AWS_SECRET} fails").split() == ["why", "fails"]
    assert strip_secrets(f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}").strip() == "AWS_SECRET_ACCESS_KEY="
    kept = "toolu_01DLmMyr3AnW34gp2p8Cw9Bm getUserById2FromDatabase 35520f64cf0a777c3ff6ce06679c3cb39f03dd3f src/app/main.py"
    assert strip_secrets(kept) == kept
    assert credential_shaped(AWS_SECRET) and not credential_shaped("HTTPServerV2ConfigurationBuilder")


ENV_MISSED = (
    "# production env\nAWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY9q\n"
    "DATABASE_URL=postgres://admin:S3cr3tPassw0rd!@db.internal:5432/prod\nDEBUG=true\n"
)


def test_imported_env_with_url_password_and_example_key_never_sent(ledger: Ledger, tmp_path: Path) -> None:
    path = tmp_path / "env.json"
    path.write_text(json.dumps([
        {"role": "user", "content": "Check the env config."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \".env\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": ENV_MISSED},
        {"role": "user", "content": "ok now deploy"},
    ]), encoding="utf-8")
    imp = ledger.import_file(path)
    for provider in ("openai-chat", "anthropic", "openai-responses"):
        for budget in (300, 4000):
            sent = json.dumps(ledger.assemble(imp.conversation_id, provider=provider, budget_tokens=budget).payload, ensure_ascii=False)
            assert "EXAMPLEKEY" not in sent and "S3cr3tPassw0rd" not in sent, (provider, budget)
    sent = json.dumps(ledger.assemble(imp.conversation_id, provider="openai-chat", budget_tokens=4000).payload, ensure_ascii=False)
    assert "postgres://admin:[secret: Basic Auth Credentials · sha256:" in sent and "AWS_SECRET_ACCESS_KEY=[secret: AWS secret access key · sha256:" in sent
