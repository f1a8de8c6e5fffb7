"""ContextAssembly and PolicyDecision records round-trip exactly (DESIGN "ContextAssembly")."""

from __future__ import annotations

import pytest

from contextledger.errors import NotFoundError
from contextledger.store.base import Scope
from contextledger.store.sql import SqlStore

from .builders import make_assembly, make_conversation, make_decision


def test_assembly_and_payload_round_trip(store: SqlStore, scope_a: Scope) -> None:
    conv = make_conversation(store, scope_a)
    branch = conv.root_branch_id
    older = make_assembly(scope_a, conv, branch, created=10)
    newer = make_assembly(scope_a, conv, branch, created=20)
    other_participant = make_assembly(scope_a, conv, branch, created=30, participant_id="part_x")
    payload = {"model": "m", "messages": [{"role": "user", "content": "héllo"}], "max_tokens": 512}
    with store.writer(scope_a) as w:
        for asm in (newer, older, other_participant):
            w.add_assembly(asm, payload if asm is newer else None)
    got, got_payload = store.get_assembly(scope_a, newer.id)
    assert got == newer
    assert got_payload == payload
    assert store.get_assembly(scope_a, older.id) == (older, None)
    assert store.latest_assembly(scope_a, conv.id, branch, None) == newer
    assert store.latest_assembly(scope_a, conv.id, branch, "part_x") == other_participant
    assert store.latest_assembly(scope_a, conv.id, "br_other", None) is None
    with pytest.raises(NotFoundError) as err:
        store.get_assembly(scope_a, "asm_missing")
    assert (err.value.kind, err.value.record_id) == ("assembly", "asm_missing")


def test_decisions_round_trip_and_filters(store: SqlStore, scope_a: Scope) -> None:
    c1 = make_conversation(store, scope_a)
    c2 = make_conversation(store, scope_a)
    d1 = make_decision(scope_a, c1, assembly_id="asm_1", record_id="mem_1", created=3)
    d2 = make_decision(scope_a, c1, assembly_id="asm_1", record_id="mem_2", created=1)
    d3 = make_decision(scope_a, c2, assembly_id=None, record_id="mem_1", created=2)
    with store.writer(scope_a) as w:
        for d in (d1, d2, d3):
            w.add_decision(d)
    assert store.decisions(scope_a, assembly_id="asm_1") == [d2, d1]
    assert store.decisions(scope_a, record_id="mem_1") == [d3, d1]
    assert store.decisions(scope_a, conversation_id=c2.id) == [d3]
    assert store.decisions(scope_a) == [d2, d3, d1]
    assert store.decisions(scope_a, assembly_id="asm_1", record_id="mem_1") == [d1]
