"""Deletion and garbage collection on both backends (SQLite with the blob folder,
PostgreSQL with the shared blob table): ``forget`` leaves zero rows of its scope in every
table and zero blobs only it referenced, other tenants untouched; ``gc`` leaves exactly the
referenced blobs, applies retention rules, samples assembly logs; both are audited without
content."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from contextledger.cli.common import EXIT_INPUT, EXIT_NOT_FOUND
from contextledger.cli.main import app
from contextledger.ledger import Ledger
from contextledger.security.crypto import Keyring
from contextledger.security.forget import forget_conversation, forget_tenant
from contextledger.security.gc import collect
from contextledger.security.references import iter_stored_blobs, referenced_blob_keys
from contextledger.security.retention import RetentionPolicy, RetentionRule, keep_sampled
from contextledger.store import schema as S
from test_secrets import DOTENV

BIG = "line of build output that repeats\n" * 400  # above the inline threshold: a blob
SHARED = "the same large payload in two tenants\n" * 300
MARK = "ZEBRA-canary-7731"


@pytest.fixture
def led(backend_url: str, tmp_path: Path) -> Iterator[Ledger]:
    ledger = Ledger.open(backend_url, home=tmp_path / "home", keys=Keyring((("ka", bytes(32)),)))
    try:
        yield ledger
    finally:
        ledger.close()


def _conversation(led: Ledger, tenant: str, *, shared: bool) -> str:
    rec = led.recorder(led.scope(tenant))
    conv = rec.start_conversation(title=f"{MARK} {tenant}")
    rec.record_message(conv.id, "user", f"{MARK}: build it")
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "c1", "tool_name": "Bash"}, {"call_id": "c2", "tool_name": "Read"}, {"call_id": "c3", "tool_name": "Bash"}])
    rec.record_tool_result(conv.id, "c1", BIG + conv.id)
    rec.record_tool_result(conv.id, "c2", DOTENV)  # secret-like: a sealed blob
    rec.record_tool_result(conv.id, "c3", SHARED if shared else SHARED + conv.id)
    led.assemble(conv.id, scope=led.scope(tenant), trace=True)
    return conv.id


def _rows(led: Ledger, column: str, value: str) -> dict[str, int]:
    out = {}
    with led.store.engine.connect() as conn:
        for t in S.metadata.sorted_tables:
            if column in t.c and t.name != "deletion_audit":
                out[t.name] = int(conn.execute(sa.select(sa.func.count()).select_from(t).where(t.c[column] == value)).scalar_one())
    return out


def _stored(led: Ledger) -> set[str]:
    return {k for k, _, _ in iter_stored_blobs(led.store.blobs)}


def _referenced(led: Ledger) -> set[str]:
    with led.store.reader() as conn:
        return referenced_blob_keys(conn)


def test_forget_a_conversation_then_a_tenant(led: Ledger) -> None:
    a1, a2 = _conversation(led, "acme", shared=True), _conversation(led, "acme", shared=False)
    b1 = _conversation(led, "beta", shared=True)
    beta_before = _rows(led, "tenant_id", "beta")
    beta_blobs = {k for k in _referenced(led) if k in _blobs_of(led, "beta")}
    assert _stored(led) == _referenced(led)

    report = forget_conversation(led, led.scope("acme"), a1, actor="test")
    assert report["blobs_deleted"] >= 2  # its own large result and its sealed payloads
    assert all(n == 0 for n in _rows(led, "conversation_id", a1).values())
    with led.store.engine.connect() as conn:
        assert conn.execute(sa.select(S.conversations.c.id).where(S.conversations.c.id == a1)).first() is None
    assert _stored(led) == _referenced(led)  # nothing only a1 referenced is left …
    assert beta_blobs <= _stored(led)  # … and the blob shared with beta stays
    assert _rows(led, "tenant_id", "beta") == beta_before

    forget_tenant(led, "acme", actor="test")
    assert all(n == 0 for n in _rows(led, "tenant_id", "acme").values())
    assert _stored(led) == _referenced(led) and beta_blobs <= _stored(led)
    assert _rows(led, "tenant_id", "beta") == beta_before
    led.rehydrate(led.store.artifacts(led.scope("beta"), b1)[0].id, scope=led.scope("beta"))

    # the audit: one row per deletion, counts and ids, never content
    with led.store.engine.connect() as conn:
        audit = conn.execute(sa.select(S.deletion_audit.c.event, S.deletion_audit.c.subject, sa.cast(S.deletion_audit.c.body, sa.Text)).order_by(S.deletion_audit.c.created_at)).all()
    assert [(e, s) for e, s, _ in audit] == [("forget_conversation", a1), ("forget_conversation", a2), ("forget_tenant", "acme")]
    assert all(MARK not in body and "DEBUG" not in body for _, _, body in audit)


def _blobs_of(led: Ledger, tenant: str) -> set[str]:
    with led.store.reader() as conn:
        return referenced_blob_keys(conn, S.tool_artifacts.c.tenant_id == tenant, S.messages.c.tenant_id == tenant)


def test_gc_deletes_exactly_the_unreferenced_blobs(led: Ledger) -> None:
    _conversation(led, "acme", shared=False)
    orphan = led.store.blobs.put(b"left behind by a killed import " * 200)
    sealed_orphan = led.runtime.put_restricted_blob(b"a sealed payload no row names")
    assert {orphan, sealed_orphan} <= _stored(led)

    dry = collect(led, dry_run=True, grace=timedelta(0))
    assert dry.blobs_deleted == 2 and {orphan, sealed_orphan} <= _stored(led)
    young = collect(led, grace=timedelta(hours=1))  # a write in progress is spared
    assert young.blobs_deleted == 0 and young.blobs_spared_young == 2
    done = collect(led, grace=timedelta(0))
    assert done.blobs_deleted == 2 and done.blob_bytes_freed > 6000
    assert _stored(led) == _referenced(led)
    with led.store.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(S.deletion_audit).where(S.deletion_audit.c.event == "gc")).scalar_one() == 2


def test_retention_rules_and_sampled_assembly_logs(led: Ledger) -> None:
    conv = _conversation(led, "acme", shared=False)
    scope = led.scope("acme")
    for _ in range(24):
        led.assemble(conv, scope=scope)
    asm_ids = _assembly_ids(led)
    policy = RetentionPolicy(rule=(
        RetentionRule(record_kind="artifact", privacy_class="secret_like", after="1d", action="delete"),
        RetentionRule(record_kind="artifact", tool="Bash", after="1d", action="archive"),
        RetentionRule(record_kind="assembly", after="7d", action="sample", sample_every=4),
    ))
    later = datetime.now(UTC) + timedelta(days=10)
    report = collect(led, policy=policy, now=later, grace=timedelta(0))
    assert dict(report.retention) == {"delete": 1, "archive": 2}
    kept = {i for i in asm_ids if keep_sampled(i, 4)}
    assert set(_assembly_ids(led)) == kept and report.assemblies_deleted == len(asm_ids) - len(kept)
    arts = {a.tool_name: a for a in led.store.artifacts(scope, conv)}
    secret = arts["Read"]
    assert secret.deleted_at is not None and secret.blob_key is None
    assert _stored(led) == _referenced(led)
    [mem] = led.store.memories(scope, conv, artifact_ids=[secret.id])
    assert f"payload deleted by retention on {later.date().isoformat()}" in mem.summary
    # an archived payload is sealed and still reads back exactly
    from contextledger.security.crypto import is_sealed

    for a in led.store.artifacts(scope, conv):
        if a.tool_name == "Bash":
            assert a.retention_class == "archive" and a.inline_text is None and is_sealed(led.store.blobs.get_raw(a.blob_key or ""))
            assert led.rehydrate(a.id, scope=scope).endswith(conv.encode())
    # explain says why the payload is gone
    res = led.assemble(conv, scope=scope, trace=True)
    expl = led.explain(res.record.id, record_id=mem.id, scope=scope)
    assert expl["retention"].startswith(f"payload deleted by retention on {later.date().isoformat()}")


def _assembly_ids(led: Ledger) -> list[str]:
    with led.store.engine.connect() as conn:
        return [str(i) for (i,) in conn.execute(sa.select(S.assemblies.c.id))]


def test_forget_an_unknown_tenant_is_not_found_and_audits_nothing(led: Ledger) -> None:
    from contextledger.errors import NotFoundError

    _conversation(led, "acme", shared=False)
    with pytest.raises(NotFoundError, match=r"^tenant 'nobody' not found: no conversation or other record of it; nothing deleted$"):
        forget_tenant(led, "nobody", actor="test")
    with led.store.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(S.deletion_audit)).scalar_one() == 0
    assert _rows(led, "tenant_id", "acme")["messages"] == 5


def test_cli_forget_and_gc(tmp_path: Path) -> None:
    led = Ledger.open(home=tmp_path)
    try:
        conv = _conversation(led, "default", shared=False)
    finally:
        led.close()
    runner = CliRunner()
    res = runner.invoke(app, ["--home", str(tmp_path), "forget", "--conversation", conv])
    assert res.exit_code == EXIT_INPUT and "--yes" in res.stderr
    res = runner.invoke(app, ["--home", str(tmp_path), "gc", "--dry-run", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["dry_run"] is True
    res = runner.invoke(app, ["--home", str(tmp_path), "forget", "--conversation", conv, "--yes", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["rows"]["messages"] == 5
    res = runner.invoke(app, ["--home", str(tmp_path), "conversations", "--json"])
    assert json.loads(res.stdout) == []
    res = runner.invoke(app, ["--home", str(tmp_path), "forget", "--tenant", "nobody", "--yes"])
    assert res.exit_code == EXIT_NOT_FOUND and res.stdout == ""
    assert res.stderr.strip() == "error: tenant 'nobody' not found: no conversation or other record of it; nothing deleted"
