"""The memory term index (migration 0004): the writer indexes every memory under its
terms; the migration backfills the same rows from stored memories; on SQLite and
PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import sqlalchemy as sa
from alembic import command

from contextledger.ledger import Ledger
from contextledger.memory.terms import memory_terms, terms_of
from contextledger.store import schema as S
from contextledger.store.migrate import alembic_config, current_revision, upgrade


def _rows(ledger: Ledger) -> list[tuple[str, str, str, int]]:
    t = S.memory_terms
    with ledger.store.engine.connect() as c:
        return sorted((r.memory_id, r.term, r.branch_id, int(r.seq)) for r in c.execute(sa.select(t)))


def test_writer_indexes_terms_and_migration_backfills_the_same_rows(backend_url: str, tmp_path: Path) -> None:
    led = Ledger.open(backend_url, blobs=str(tmp_path / "blobs"))
    try:
        rec = led.recorder()
        conv = rec.start_conversation(title="t")
        rec.record_message(conv.id, "user", "check the calendar")
        rec.record_assistant(conv.id, tool_calls=[{"call_id": "c1", "tool_name": "calendar_list_events", "arguments": {}}])
        rec.record_tool_result(conv.id, "c1", json.dumps({"events": [{"id": "evt_1", "title": "Northwind renewal sync"}]}))
        rec.record_assistant(conv.id, tool_calls=[{"call_id": "c2", "tool_name": "Bash", "arguments": {"command": "ls"}}])
        rec.record_tool_result(conv.id, "c2", "README.md\nsrc\n" + "x" * 90)
        mems = led.store.memories(led.scope(), conv.id)
        written = [r for r in _rows(led) if r[0] in {m.id for m in mems}]
        assert written == sorted((m.id, term, m.branch_id, m.seq) for m in mems for term in memory_terms(m))
        assert ("northwind" in {r[1] for r in written}) and all(len(r[1]) <= 40 for r in written)
        before = _rows(led)
        cfg = alembic_config()
        with led.store.engine.begin() as c:
            cfg.attributes["connection"] = c
            command.downgrade(cfg, "0003_branch_counters")
        assert current_revision(led.store.engine) == "0003_branch_counters"
        assert "memory_terms" not in sa.inspect(led.store.engine).get_table_names()
        upgrade(led.store.engine)
        assert _rows(led) == before
    finally:
        led.close()


def test_terms_of_a_partial_body() -> None:
    assert terms_of(None, None, None) == []
    assert terms_of("crm_get_account", "Northwind stage", {"ids": [{"label": "Renewal"}, "junk"]}) == ["crm", "account", "northwind", "stag", "renew"]


def test_reads_by_id_stay_inside_the_scope(backend_url: str, tmp_path: Path) -> None:
    from contextledger.store.base import Scope

    led = Ledger.open(backend_url, blobs=str(tmp_path / "blobs"))
    try:
        rec = led.recorder()
        conv = rec.start_conversation(title="t")
        rec.record_message(conv.id, "user", "read it")
        rec.record_assistant(conv.id, tool_calls=[{"call_id": "c1", "tool_name": "Read", "arguments": {"file_path": "src/a.py"}}])
        rec.record_tool_result(conv.id, "c1", "1\tx = 1")
        scope = led.scope()
        [mem] = led.store.memories(scope, conv.id)
        [art] = led.store.artifacts(scope, conv.id)
        other = Scope(tenant_id="someone-else")
        assert led.store.memories(scope, conv.id, ids=[mem.id]) == [mem]
        assert led.store.memories(other, conv.id, ids=[mem.id]) == []
        assert led.store.memories(scope, "conv_other", ids=[mem.id]) == []
        assert led.store.artifacts(scope, conv.id, ids=[art.id]) == [art]
        assert led.store.artifacts(other, conv.id, ids=[art.id]) == []
        segs = led.store.lineage(scope, conv.root_branch_id)
        assert [m.id for m in led.store.recent_subject_memories(scope, conv.id, segs, "file:")] == [mem.id]
        assert led.store.recent_subject_memories(other, conv.id, segs, "file:") == []
    finally:
        led.close()
