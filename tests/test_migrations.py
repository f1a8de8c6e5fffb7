"""Alembic migrations on both backends: empty → head, the migrated schema equals
``schema.metadata`` (what ``alembic check`` verifies), re-running is a no-op, a step-wise
upgrade keeps data, and two processes upgrading one empty database at once both succeed
(PostgreSQL advisory lock; SQLite write lock)."""

from __future__ import annotations

import multiprocessing as mp
import traceback
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from contextledger.store.connection import make_engine
from contextledger.store.migrate import (
    alembic_config,
    current_revision,
    head_revision,
    script_head,
    upgrade,
)
from contextledger.store.schema import FULLTEXT_OBJECTS, metadata

HEAD = "0010_derivation_queue"


def _fulltext(engine: sa.Engine) -> set[str]:
    """The dialect's full-text objects (outside the metadata, made by migration 0008)."""
    return set(FULLTEXT_OBJECTS[engine.dialect.name])


def _diffs(engine: sa.Engine) -> list[Any]:
    skip = _fulltext(engine)

    def include(name: str | None, type_: str, parent: Any) -> bool:
        return name not in skip

    with engine.connect() as conn:
        return list(compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True, "include_name": include}), metadata))


def _indexes(engine: sa.Engine) -> dict[str, set[tuple[str, tuple[str, ...], bool]]]:
    insp = sa.inspect(engine)
    present = set(insp.get_table_names())
    skip = _fulltext(engine)
    return {
        t: {(ix["name"] or "", tuple(c or "" for c in ix["column_names"]), bool(ix["unique"])) for ix in insp.get_indexes(t) if ix["name"] not in skip}
        for t in metadata.tables
        if t in present
    }


def test_head_is_the_newest_migration() -> None:
    assert head_revision() == HEAD
    assert script_head() == HEAD  # the fast path of Ledger.open reads the files alone


def test_upgrade_from_empty_to_head_matches_metadata(backend_url: str) -> None:
    engine = make_engine(backend_url)
    try:
        assert current_revision(engine) is None
        upgrade(engine)
        assert current_revision(engine) == HEAD
        tables = set(sa.inspect(engine).get_table_names())
        assert tables - _fulltext(engine) == set(metadata.tables) | {"alembic_version"}
        assert _diffs(engine) == []
        expected = {
            t.name: {(ix.name or "", tuple(c.name for c in ix.columns), bool(ix.unique)) for ix in t.indexes}
            for t in metadata.tables.values()
        }
        assert _indexes(engine) == expected
    finally:
        engine.dispose()


def test_rerun_is_idempotent(backend_url: str) -> None:
    engine = make_engine(backend_url)
    try:
        upgrade(engine)
        before = _indexes(engine)
        upgrade(engine)  # fast path: already at head
        cfg = alembic_config()
        with engine.begin() as conn:  # the full Alembic path, forced
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
        assert current_revision(engine) == HEAD
        assert _indexes(engine) == before
        assert _diffs(engine) == []
    finally:
        engine.dispose()


def test_stepwise_upgrade_keeps_rows_and_downgrade_round_trips(backend_url: str) -> None:
    engine = make_engine(backend_url)
    try:
        upgrade(engine, "0001_initial")
        assert current_revision(engine) == "0001_initial"
        with engine.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO tool_memories (id, tenant_id, conversation_id, branch_id, seq, artifact_id, resolution_state, "
                "visibility, token_count, body) VALUES ('mem_1', 'acme', 'conv_1', 'br_1', 3, 'art_1', 'current', 'branch', 4, '{}')"
            ))
        assert ("ix_tool_memories_artifact", ("tenant_id", "artifact_id"), False) in _indexes(engine)["tool_memories"]
        upgrade(engine)
        assert current_revision(engine) == HEAD
        assert _diffs(engine) == []
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT id, artifact_id, seq FROM tool_memories")).all() == [("mem_1", "art_1", 3)]
        cfg = alembic_config()
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0001_initial")
        assert current_revision(engine) == "0001_initial"
        assert ("ix_tool_memories_artifact", ("tenant_id", "artifact_id"), False) in _indexes(engine)["tool_memories"]
        assert not any(ix[0] == "ix_messages_role" for ix in _indexes(engine)["messages"])
        upgrade(engine)
        assert _diffs(engine) == []
    finally:
        engine.dispose()


_Index = tuple[str, tuple[str, ...], bool]


def _index_step_round_trip(
    backend_url: str, before: str, table: str, row_sql: str, select_sql: str, row: tuple[Any, ...], added: _Index, kept: _Index | None = None, dropped: _Index | None = None
) -> None:
    """Upgrade to ``before``, insert a row, upgrade to head: ``added`` (and ``kept``) are
    on ``table`` and ``dropped`` is not, the row is intact; downgrade to ``before``: back
    as it was; upgrade again matches the metadata."""
    engine = make_engine(backend_url)
    try:
        upgrade(engine, before)
        assert added not in _indexes(engine)[table]
        assert dropped is None or dropped in _indexes(engine)[table]
        with engine.begin() as conn:
            conn.execute(sa.text(row_sql))
        upgrade(engine)
        assert current_revision(engine) == HEAD
        assert added in _indexes(engine)[table]
        assert kept is None or kept in _indexes(engine)[table]
        assert dropped is None or dropped not in _indexes(engine)[table]
        with engine.connect() as conn:
            assert conn.execute(sa.text(select_sql)).all() == [row]
        cfg = alembic_config()
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, before)
        assert current_revision(engine) == before
        assert added not in _indexes(engine)[table]
        assert dropped is None or dropped in _indexes(engine)[table]
        upgrade(engine)
        assert _diffs(engine) == []
    finally:
        engine.dispose()


def test_role_kind_index_added_on_0004_and_dropped_on_downgrade(backend_url: str) -> None:
    _index_step_round_trip(
        backend_url, "0004_memory_terms", "messages",
        "INSERT INTO messages (id, tenant_id, conversation_id, branch_id, seq, role, kind, visibility, token_count, body) "
        "VALUES ('msg_1', 'acme', 'conv_1', 'br_1', 1, 'system', 'progress', 'branch', 3, '{}')",
        "SELECT id, role, kind, seq FROM messages", ("msg_1", "system", "progress", 1),
        added=("ix_messages_role_kind", ("tenant_id", "conversation_id", "role", "kind", "branch_id", "seq"), False),
        kept=("ix_messages_role", ("tenant_id", "conversation_id", "role", "branch_id", "seq"), False),
    )


def test_memory_lineage_index_covers_the_working_set_on_0006(backend_url: str) -> None:
    _index_step_round_trip(
        backend_url, "0005_messages_role_kind", "tool_memories",
        "INSERT INTO tool_memories (id, tenant_id, conversation_id, branch_id, seq, subject_key, resolution_state, "
        "visibility, token_count, body) VALUES ('mem_1', 'acme', 'conv_1', 'br_1', 3, 'file:a.py', 'current', 'branch', 4, '{}')",
        "SELECT id, subject_key, seq FROM tool_memories", ("mem_1", "file:a.py", 3),
        added=("ix_tool_memories_lineage", ("tenant_id", "conversation_id", "branch_id", "seq", "subject_key", "visibility", "owner_participant_id", "id"), False),
        dropped=("ix_tool_memories_lineage", ("tenant_id", "conversation_id", "branch_id", "seq"), False),
    )


def _upgrade_in_process(url: str, start: Any, out: Any) -> None:
    try:
        engine = make_engine(url)
        start.wait(120)
        upgrade(engine)
        out.put(("ok", current_revision(engine)))
        engine.dispose()
    except BaseException:
        out.put(("error", traceback.format_exc()))


def test_concurrent_upgrade_from_two_processes(backend_url: str) -> None:
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_upgrade_in_process, args=(backend_url, start, out)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(180)
    assert results == [("ok", HEAD), ("ok", HEAD)], results
    assert [p.exitcode for p in procs] == [0, 0]
    engine = make_engine(backend_url)
    try:
        assert current_revision(engine) == HEAD
        assert _diffs(engine) == []
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM alembic_version")).scalar_one() == 1
    finally:
        engine.dispose()


def test_retrieval_index_backfilled_on_0008_and_dropped_on_downgrade(backend_url: str) -> None:
    """0007 → 0008 indexes the stored user message for keywords (the full-text index
    finds it on both backends); the downgrade removes the tables and full-text objects."""
    import json
    from datetime import UTC, datetime

    from contextledger.records.enums import Role
    from contextledger.records.models import Message
    from contextledger.records.parts import TextPart

    engine = make_engine(backend_url)
    try:
        upgrade(engine, "0007_service_keys_blobs")
        msg = Message(
            id="msg_1", tenant_id="acme", conversation_id="conv_1", branch_id="br_1", seq=2, role=Role.USER,
            parts=(TextPart(text="The deploy fails with ORA-00942 in db/migrate.sql"),), created_at=datetime(2025, 1, 1, tzinfo=UTC),
        )
        with engine.begin() as conn:
            conn.execute(
                sa.text("INSERT INTO messages (id, tenant_id, conversation_id, branch_id, seq, role, kind, visibility, token_count, body) "
                        "VALUES ('msg_1', 'acme', 'conv_1', 'br_1', 2, 'user', 'chat', 'branch', 9, :body)"),
                {"body": json.dumps(msg.model_dump(mode="json"))},
            )
        upgrade(engine)
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT record_kind, record_id, tokens FROM retrieval_docs")).all()
            assert rows == [("message", "msg_1", "deploy fail ora_00942 ora 00942 db_migrate_sql migrate_sql db migrat sql")]
            if engine.dialect.name == "sqlite":
                found = conn.execute(sa.text("SELECT rowid FROM retrieval_fts WHERE retrieval_fts MATCH 'tokens : ora_00942'")).all()
            else:
                found = conn.execute(sa.text("SELECT doc_id FROM retrieval_docs WHERE array_to_tsvector(string_to_array(tokens, ' ')) @@ 'ora_00942'::tsquery")).all()
            assert len(found) == 1
        cfg = alembic_config()
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0007_service_keys_blobs")
        assert not {"retrieval_docs", "retrieval_vectors", *_fulltext(engine)} & set(sa.inspect(engine).get_table_names())
        assert not any(ix[0] == "ix_tool_artifacts_sha256" for ix in _indexes(engine)["tool_artifacts"])
        upgrade(engine)
        assert _diffs(engine) == []
    finally:
        engine.dispose()


@pytest.mark.parametrize("revision", ["0001_initial", HEAD])
def test_each_revision_file_is_reachable(revision: str) -> None:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    assert script.get_revision(revision) is not None
    assert [r.revision for r in script.walk_revisions()] == [HEAD, "0009_deletion_audit", "0008_retrieval_index", "0007_service_keys_blobs", "0006_memory_lineage_covering", "0005_messages_role_kind", "0004_memory_terms", "0003_branch_counters", "0002_candidate_indexes", "0001_initial"]
