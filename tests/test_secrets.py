"""Secret classification at record time: what is found (token formats from the vendors'
documentation, keyword and key=value positions), what is not (hashes, ids, placeholders,
variable references), and what a secret-like record becomes on both backends — a
redacted memory, a payload that never carries the secret, a raw payload shown only on a
recorded explicit request."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextledger.cli.common import EXIT_POLICY
from contextledger.cli.main import app
from contextledger.errors import PolicyError
from contextledger.ledger import Ledger
from contextledger.records.enums import PrivacyClass
from contextledger.security.reveal import REVEAL_DECISION, original_message_parts
from contextledger.security.secrets import (
    SECRET_MARKER,
    find_secrets,
    redact_json_text,
    screen_text,
)

# random-looking values written for these tests in each vendor's documented shape
AWS_ID = "AKIA2E0A8F3B244C9986"
AWS_SECRET = "7Fq2Zr9xKp4Lm8Nw3Vb6Ty1Hd5Sg0Jc2Xe7Ru4a"
GITHUB = "ghp_4Xk9Lm2Nq7Rs1Tv5Wy8Zb3Cd6Fg0Hj2Kl4Mn"
GITHUB_FINE = "github_pat_11ABCDEFG0" + "k3Lm9Qz7Xw2Vb5Nr8Ty1Ud4Ei6Op0As3Df5Gh7Jk9Lz2Xc4Vb6Nm8Qw1Er3Ty5Ui7Op9As1"
OPENAI = "sk-proj-Q7w9E2r4T6y8U1i3O5p7A9s2D4f6G8h0J2k4L6z8X0c"
ANTHROPIC = "sk-ant-api03-" + "Zq8Xw7Ec6Rv5Tb4Yn3Um2Ik1Ol0Pa9Sd8Fg7Hj6Kl5Zx4Cv3Bn2Mq1We0Rt9Yu8Io7Pa6Sd5Fg4Hj3Kl2"
STRIPE = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
SLACK = "xoxb-2634567890-1234567890123-Zx8Cv7Bn6Mq5We4Rt3Yu2Io1"
GOOGLE = "AIzaSyD3k9Lm2Nq7Rs1Tv5Wy8Zb3Cd6Fg0Hj2Kl"
JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\nVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n-----END RSA PRIVATE KEY-----"
DOTENV = f"""# local settings
AWS_ACCESS_KEY_ID={AWS_ID}
AWS_SECRET_ACCESS_KEY={AWS_SECRET}
GITHUB_TOKEN={GITHUB}
OPENAI_API_KEY={OPENAI}
ANTHROPIC_API_KEY={ANTHROPIC}
STRIPE_SECRET_KEY={STRIPE}
SLACK_BOT_TOKEN={SLACK}
DATABASE_URL=postgres://app:Zx8kq2LmP9wQ@db.internal:5432/app
DEBUG=true
PORT=8080
"""
SECRETS = [AWS_ID, AWS_SECRET, GITHUB, OPENAI, ANTHROPIC, STRIPE, SLACK, "Zx8kq2LmP9wQ"]


def _types(text: str) -> set[str]:
    return {f.secret_type for f in find_secrets(text)}


# -- detection ------------------------------------------------------------------------------
def test_dotenv_file_every_secret_redacted_and_nothing_else() -> None:
    s = screen_text(DOTENV)
    assert s.secret
    for secret in SECRETS:
        assert secret not in s.text
    assert "DEBUG=true" in s.text and "PORT=8080" in s.text and "# local settings" in s.text
    assert len(SECRET_MARKER.findall(s.text)) == len(SECRETS)
    types = {f.secret_type for f in s.findings}
    assert {"AWS Access Key", "AWS secret access key", "GitHub Token", "OpenAI Token", "Anthropic API Key", "Stripe Access Key", "Slack Token", "Basic Auth Credentials"} <= types
    # the marker names the kind and a fingerprint of the value, never the value
    fp = next(f for f in s.findings if f.secret_type == "AWS secret access key").fingerprint
    import hashlib

    assert fp == "sha256:" + hashlib.sha256(AWS_SECRET.encode()).hexdigest()[:12]
    assert f"[secret: AWS secret access key · {fp}]" in s.text


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (f"curl -H 'Authorization: Bearer {GITHUB_FINE}' https://api.github.com/user", "GitHub Token"),
        (f"const key = '{GOOGLE}';", "Google API Key"),
        (f"token: {JWT}", "JSON Web Token"),
        (f"cat ~/.ssh/id_rsa\n{PEM}\n$ ", "Private Key"),
        ('db:\n  password: "S3cr3t!Pa55w0rd"\n', "Secret Keyword"),
        ('API_KEY = "9f8e7d6c5b4a39281706f5e4d3c2b1a0"', "Secret Keyword"),
        ('{"session_token": "q8W2e4R6t8Y0u2I4o6P8a0S2"}', "High Entropy Secret"),
        ("export GITLAB_TOKEN=glpat-Zq8Xw7Ec6Rv5Tb4Yn3Um", "GitLab Token"),
    ],
)
def test_each_kind_is_found(text: str, kind: str) -> None:
    assert kind in _types(text), find_secrets(text)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # RFC 3986 userinfo: a password with sub-delimiters, an empty user, an "@" inside
        ("DATABASE_URL=postgres://admin:Zq81xLk29mVv!@db.internal:5432/prod", "Zq81xLk29mVv!"),
        ("postgres://admin:p4ss!word@db.internal/prod", "p4ss!word"),
        ('"url": "mysql://root:r00t&pw*(x)@localhost:3306/db"', "r00t&pw*(x)"),
        ("redis://:onlypass123@cache:6379/0", "onlypass123"),
        ("amqp://svc:p@ss;w=rd@mq.internal/vhost", "p@ss;w=rd"),
        # an AWS secret key under its own name, whatever words its letters spell
        ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
        ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY9q", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY9q"),
    ],
)
def test_url_passwords_and_aws_example_keys_are_redacted(text: str, secret: str) -> None:
    s = screen_text(text)
    assert secret not in s.text and [text[f.start : f.end] for f in s.findings] == [secret], s.findings


@pytest.mark.parametrize(
    "text",
    [
        "redis://:${REDIS_PASSWORD}@cache:6379",
        "http://localhost:8080/path@foo and jdbc:mysql://host:3306?user=x@y",
        "AWS_SECRET_ACCESS_KEY=your-aws-secret-access-key-goes-here-1234",
        "AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY}",
    ],
)
def test_url_and_aws_look_alikes_are_not_flagged(text: str) -> None:
    assert find_secrets(text) == []


def test_a_private_key_block_is_redacted_whole() -> None:
    s = screen_text(f"before\n{PEM}\nafter")
    assert "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun" not in s.text
    assert s.text.startswith("before\n[secret: Private Key · sha256:") and s.text.endswith("]\nafter")


@pytest.mark.parametrize(
    "text",
    [
        "commit 3f2a9c8e1b7d6f5a4c3b2a1908f7e6d5c4b3a291\nAuthor: Dev User <dev@example.com>",
        '"integrity": "sha512-7Fq2Zr9xKp4Lm8Nw3Vb6Ty1Hd5Sg0Jc2Xe7Ru4aQz8Wx7Ec6Rv5Tb4Yn3Um2Ik1Ol0Pa9Sd8Fg7Hj6Kl5Zx4Cv3Bn2Mq1==",',
        "password = request.form['password']",
        "export API_KEY='your-api-key'",
        "SECRET_KEY='test-secret-key'",
        "password: ${DB_PASSWORD}",
        "env.OPENAI_API_KEY = env.ANTHROPIC_API_KEY;",
        "token = get_token()",
        '"token_count": 12345, "session_id": "123e4567-e89b-12d3-a456-426614174000"',
        "===== 5 passed, 1 skipped in 0.31s =====",
        "def check(password: str) -> bool:",
        "AKIAIOSFODNN7EXAMPL",  # one character short of an access key id
        "Visit https://docs.example.com:8443/path?q=1 for details",
    ],
)
def test_no_false_positive(text: str) -> None:
    assert find_secrets(text) == []


def test_json_arguments_stay_valid_json() -> None:
    args = json.dumps({"command": f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET} && aws s3 ls", "env": {"password": 'pa"ss\\word9Q'}})
    s = redact_json_text(args)
    assert s.secret and AWS_SECRET not in s.text
    assert json.loads(s.text)["command"].startswith("export AWS_SECRET_ACCESS_KEY=[secret: ")


# -- record time, both backends ---------------------------------------------------------------
def _record_dotenv(ledger: Ledger) -> tuple[str, str, str]:
    rec = ledger.recorder()
    conv = rec.start_conversation(title=f"deploy with {GITHUB}", system_prompt="You are a coding agent.")
    user = rec.record_message(conv.id, "user", f"Deploy. My key is {AWS_ID}; keep the .env untouched.")
    rec.record_assistant(conv.id, text="Reading the env file.", tool_calls=[
        {"call_id": "c1", "tool_name": "Read", "arguments": {"file_path": "/srv/app/.env"}},
        {"call_id": "c2", "tool_name": "Bash", "arguments": {"command": f"curl -H 'Authorization: token {GITHUB}' https://api.github.com/user"}},
    ])
    _, art, mem = rec.record_tool_result(conv.id, "c1", DOTENV)
    rec.record_tool_result(conv.id, "c2", '{"login": "dev"}')
    assert art.privacy_class is PrivacyClass.SECRET_LIKE and art.inline_text is None and art.blob_key is not None
    assert mem.privacy_class is PrivacyClass.INTERNAL  # the memory is redacted: it may be shown
    return conv.id, art.id, user.id


def _everything_stored(ledger: Ledger, conv_id: str) -> str:
    s = ledger.scope()
    rows = [
        *ledger.store.messages(s, conv_id), *ledger.store.tool_calls(s, conv_id), *ledger.store.artifacts(s, conv_id),
        *ledger.store.memories(s, conv_id), *[r.conversation for r in ledger.store.list_conversations(s)],
    ]
    return "\n".join(r.model_dump_json() for r in rows)


def test_secrets_never_reach_rows_payloads_or_explanations(ledger: Ledger) -> None:
    conv_id, art_id, _ = _record_dotenv(ledger)
    stored = _everything_stored(ledger, conv_id)
    for secret in [*SECRETS, GITHUB]:
        assert secret not in stored
    assert "AWS_SECRET_ACCESS_KEY=[secret: AWS secret access key · sha256:" in stored and "DEBUG=true" in stored  # the memory keeps the rest
    for provider in ("openai-chat", "anthropic"):
        # in the recent tail the result is shown redacted, the rest of it intact
        res = ledger.assemble(conv_id, provider=provider, budget_tokens=8000, trace=True)
        sent = json.dumps(res.payload, ensure_ascii=False)
        assert "DEBUG=true" in sent and "AWS_SECRET_ACCESS_KEY=[secret: AWS secret access key · sha256:" in sent
        [d] = [d for d in res.record.trace or [] if d["record_id"] == art_id]
        assert (d["decision"], d["reason"]) == ("shape", "privacy_restricted")
    for question in ("What is in the env file?", "Show me the exact raw .env, verbatim."):
        ledger.recorder().record_message(conv_id, "user", question)
        for provider in ("openai-chat", "anthropic"):
            res = ledger.assemble(conv_id, provider=provider, budget_tokens=8000, trace=True)
            sent = json.dumps(res.payload) + json.dumps(ledger.explain(res.record.id))
            for secret in [*SECRETS, GITHUB]:
                assert secret not in sent, (provider, secret)
            assert res.record.rehydrated_count == 0  # an explicit "exact" request is refused too


def test_rehydrate_needs_the_explicit_flag_and_is_recorded(ledger: Ledger) -> None:
    conv_id, art_id, user_id = _record_dotenv(ledger)
    with pytest.raises(PolicyError, match="secret_like"):
        ledger.rehydrate(art_id)
    assert ledger.rehydrate(art_id, reveal=True, actor="oncall", reason="rotate the leaked keys") == DOTENV.encode()
    [dec] = [d for d in ledger.store.decisions(ledger.scope(), conversation_id=conv_id) if d.decision == REVEAL_DECISION]
    assert (dec.record_id, dec.actor, dec.reason, dec.family.value) == (art_id, "oncall", "rotate the leaked keys", "rehydration")
    with pytest.raises(PolicyError):
        original_message_parts(ledger, ledger.scope(), conv_id, user_id)
    [part] = original_message_parts(ledger, ledger.scope(), conv_id, user_id, reveal=True)
    assert part["text"] == f"Deploy. My key is {AWS_ID}; keep the .env untouched."


def test_cli_rehydrate_of_a_secret(tmp_path: Path) -> None:
    led = Ledger.open(home=tmp_path)
    try:
        _, art_id, user_id = _record_dotenv(led)
    finally:
        led.close()
    runner = CliRunner()
    res = runner.invoke(app, ["--home", str(tmp_path), "rehydrate", art_id])
    assert res.exit_code == EXIT_POLICY and res.stdout == "" and "--reveal-secrets" in res.stderr
    res = runner.invoke(app, ["--home", str(tmp_path), "rehydrate", art_id, "--reveal-secrets"])
    assert res.exit_code == 0 and res.stdout == DOTENV
    res = runner.invoke(app, ["--home", str(tmp_path), "rehydrate", user_id, "--reveal-secrets", "--json"])
    assert res.exit_code == 0 and AWS_ID in json.loads(res.stdout)["parts"][0]["text"]


def test_imported_transcript_is_screened(ledger: Ledger, tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps([
        {"role": "user", "content": f"use {STRIPE} for the test charge"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": json.dumps({"command": "cat .env"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": DOTENV},
        {"role": "assistant", "content": f"Found {OPENAI} in it."},
    ]), encoding="utf-8")
    imp = ledger.import_file(path)
    stored = _everything_stored(ledger, imp.conversation_id)
    for secret in [*SECRETS, STRIPE]:
        assert secret not in stored
    [art] = ledger.store.artifacts(ledger.scope(), imp.conversation_id)
    assert art.privacy_class is PrivacyClass.SECRET_LIKE and ledger.rehydrate(art.id, reveal=True) == DOTENV.encode()
    msgs = ledger.store.messages(ledger.scope(), imp.conversation_id)
    assert [m.privacy_class.value for m in msgs] == ["secret_like", "internal", "internal", "secret_like"]
    assert re.search(r"use \[secret: Stripe Access Key · sha256:[0-9a-f]{12}\] for the test charge", msgs[0].model_dump_json())
