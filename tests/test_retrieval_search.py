"""The retrieval router end to end on both backends: the keyword route finds error codes
and identifiers through the full-text index, the semantic route recalls a fact asked in
other words, every hit carries its routes, ranks and fused score, and no route crosses a
boundary (tenant, branch, participant-private, audit-only)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from typer.testing import CliRunner

from contextledger.cli.main import app
from contextledger.errors import ScopeError
from contextledger.ledger import Ledger
from contextledger.records.enums import Visibility
from contextledger.retrieval import ALL_ROUTES, search
from contextledger.store.base import Scope


@dataclass
class World:
    ledger: Ledger
    conv: str
    fact: str  # memory id of the staging fact (main branch)
    private: str  # memory id private to the reviewer
    audit: str  # memory id audit-only
    sibling: str  # memory id on a sibling branch
    reviewer: str  # participant id
    url: str


def _call(rec, conv: str, tool: str, args: dict, result: str, **kw) -> str:  # type: ignore[no-untyped-def]
    pid = kw.pop("participant_id", None)
    branch = kw.pop("branch_id", None)
    _, calls = rec.record_assistant(conv, tool_calls=[{"call_id": f"c_{tool}_{len(result)}", "tool_name": tool, "arguments": args}], participant_id=pid, branch_id=branch)
    _, _, mem = rec.record_tool_result(conv, calls[0].call_id, result, **kw)
    return str(mem.id)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One database per backend for the whole module (recording is the slow part)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('retrieval') / 'ledger.db'}"
        return
    import uuid

    from conftest import _admin_exec

    admin = request.getfixturevalue("pg_admin")
    name = f"test_{uuid.uuid4().hex[:16]}"
    _admin_exec(admin, f'CREATE DATABASE "{name}"')
    try:
        yield f"{admin.rsplit('/', 1)[0]}/{name}"
    finally:
        _admin_exec(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def world(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    before = os.environ.get("CONTEXTLEDGER_EMBEDDINGS")
    os.environ["CONTEXTLEDGER_EMBEDDINGS"] = "auto"
    ledger = Ledger.open(backend, blobs=tmp_path_factory.mktemp("blobs"))
    rec = ledger.recorder()
    conv = rec.start_conversation(title="ops")
    reviewer = rec.add_participant(conv.id, "reviewer")
    first = rec.record_message(conv.id, "user", "Set up the staging environment and run the checks.")
    fact = _call(rec, conv.id, "get_config", {"env": "staging"}, "staging database: host db-stg.internal, port 5433, connection pool size 20")
    _call(rec, conv.id, "lint", {"path": "src/app/auth_service.py"}, "src/app/auth_service.py:12:80: E501 line too long (97 > 79 characters)")
    _call(rec, conv.id, "weather", {"city": "Oslo"}, "Oslo: light rain, 7 degrees, wind from the north-west")
    private = _call(rec, conv.id, "notes", {}, "reviewer scratch: staging database port 5433 looks wrong", participant_id=reviewer.id, visibility=Visibility.PARTICIPANT_PRIVATE)
    audit = _call(rec, conv.id, "audit", {}, "audit trail: staging database port 5433 opened by ops", visibility=Visibility.AUDIT_ONLY)
    branch = rec.fork(conv.id, first.id, activate=False)
    sibling = _call(rec, conv.id, "get_config", {"env": "staging"}, "sibling: staging database moved to port 6543", branch_id=branch.id)
    rec.record_message(conv.id, "user", "Thanks. Now summarise the lint output.")
    other = ledger.recorder(ledger.scope("other-tenant"))
    oconv = other.start_conversation(title="other")
    _call(other, oconv.id, "get_config", {}, "other tenant: staging database port 5433")
    try:
        yield World(ledger=ledger, conv=conv.id, fact=fact, private=private, audit=audit, sibling=sibling, reviewer=reviewer.id, url=backend)
    finally:
        ledger.close()
        if before is None:
            os.environ.pop("CONTEXTLEDGER_EMBEDDINGS", None)
        else:
            os.environ["CONTEXTLEDGER_EMBEDDINGS"] = before


def test_keyword_route_finds_codes_and_paths_and_explains_each_hit(world: World) -> None:
    res = search(world.ledger, world.ledger.scope(), world.conv, "why E501 in auth_service.py?", routes=("keyword",), encoder=None)
    assert res.routes_used == ["keyword"]
    top = res.hits[0]
    assert top.record_kind == "memory" and "E501" in top.text
    assert top.ranks == {"keyword": 1} and top.fused_score == pytest.approx(1 / 61)
    assert top.to_json()["routes"] == ["keyword"]


def test_no_route_crosses_a_boundary(world: World) -> None:
    res = search(world.ledger, world.ledger.scope(), world.conv, "staging database port 5433", routes=ALL_ROUTES, limit=50)
    found = {h.record_id for h in res.hits}
    assert world.fact in found
    assert not found & {world.private, world.audit, world.sibling}
    assert not any("other tenant" in h.text for h in res.hits)
    assert res.withheld.get("participant_private", 0) >= 1 and res.withheld.get("audit_only", 0) >= 1
    # the reviewer sees its own private note; the sibling branch sees its own value
    as_reviewer = search(world.ledger, world.ledger.scope(), world.conv, "staging database port 5433", participant_id=world.reviewer, limit=50)
    assert world.private in {h.record_id for h in as_reviewer.hits}
    sibling_branch = world.ledger.store.get_memory(world.ledger.scope(), world.sibling).branch_id
    on_sibling = search(world.ledger, world.ledger.scope(), world.conv, "staging database port", branch_id=sibling_branch, limit=50)
    assert world.sibling in {h.record_id for h in on_sibling.hits}
    with pytest.raises(ScopeError):
        search(world.ledger, None, world.conv, "staging")


def test_other_tenant_cannot_search_a_conversation(world: World) -> None:
    from contextledger.errors import NotFoundError

    with pytest.raises(NotFoundError):
        search(world.ledger, Scope(tenant_id="other-tenant"), world.conv, "staging database port 5433")


def test_semantic_route_recalls_a_paraphrase_keyword_cannot(world: World) -> None:
    question = "How do I reach the pre-production data store?"
    keyword = search(world.ledger, world.ledger.scope(), world.conv, question, routes=("keyword", "memory"))
    assert world.fact not in {h.record_id for h in keyword.hits}
    hybrid = search(world.ledger, world.ledger.scope(), world.conv, question)
    top = {h.record_id: h for h in hybrid.hits[:3]}
    assert world.fact in top and "semantic" in top[world.fact].ranks and hybrid.degraded == {}


def test_without_embeddings_the_router_degrades_and_says_so(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTLEDGER_EMBEDDINGS", "off")
    res = search(world.ledger, world.ledger.scope(), world.conv, "How do I reach the pre-production data store?")
    assert "semantic" not in res.routes_used
    assert res.degraded == {"semantic": "embeddings are switched off (CONTEXTLEDGER_EMBEDDINGS=off)"}
    assert {"keyword", "memory", "graph"} <= set(res.routes_used)


def test_search_command_prints_routes_ranks_and_scores(world: World) -> None:
    backend_url = world.url
    runner = CliRunner()
    out = runner.invoke(app, ["--db", backend_url, "search", world.conv, "E501 line too long", "--json", "--route", "keyword", "--route", "artifact"])
    assert out.exit_code == 0, out.output
    import json

    data = json.loads(out.stdout)
    assert data["routes_used"] == ["keyword", "artifact"] and data["rrf_k"] == 60
    assert data["hits"][0]["ranks"]["keyword"] == 1 and "E501" in data["hits"][0]["text"]
    bad = runner.invoke(app, ["--db", backend_url, "search", world.conv, "x", "--route", "vector"])
    assert bad.exit_code == 2 and "unknown retrieval route(s) vector" in bad.output  # InputError: a usage error


def test_readme_retrieval_example_runs(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S) if "contextledger.retrieval" in b)
    ns: dict[str, object] = {"ledger": world.ledger, "conversation_id": world.conv}
    exec(compile(block, "README.md", "exec"), ns)
    result = ns["result"]
    assert world.fact in {h.record_id for h in result.hits}  # type: ignore[attr-defined]
    assert world.fact in capsys.readouterr().out
