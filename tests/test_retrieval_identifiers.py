"""An exact code identifier in a query is never ranked out by fusion (issue 25 item 15):
the keyword hits that hold it whole rank right after each full-weight route's best hit,
in keyword order, in ``search`` and in the assembly's recall; ``search`` shows each
hit's handle (``m12``) and never cuts an id."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from contextledger.cli.main import app
from contextledger.ledger import Ledger
from contextledger.retrieval import search
from contextledger.retrieval.fusion import fuse, lead_tier, lead_with_tops
from contextledger.retrieval.model import RouteHit
from contextledger.retrieval.text import identifier_tokens, tokens


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("permissionFlag", ["permissionflag"]),
        ("why does the permission flag break", []),
        ("E501 in src/app/auth_service.py", ["e501", "src_app_auth_service_py"]),
        ("os.path.join and calendar_list_events", ["os_path_join", "calendar_list_events"]),
        ("a follow-up on HTTPServer", ["httpserver"]),
        ("ORA-00942 Hello JSON 12:80", ["ora_00942"]),
    ],
)
def test_identifier_tokens_are_the_whole_forms_documents_are_indexed_under(query: str, expected: list[str]) -> None:
    assert identifier_tokens(query) == expected
    assert set(expected) <= set(tokens(query, query=True))


def _hits(route: str, ids: list[str], exact: frozenset[str] = frozenset()) -> list[RouteHit]:
    return [RouteHit(record_kind="memory", record_id=i, score=1.0 / n, exact=i in exact) for n, i in enumerate(ids, start=1)]


def test_plain_fusion_ranks_exact_matches_out_and_the_tiers_keep_them() -> None:
    # keyword: e1 (exact), d1..d3 (distractors that share a common word), then e2, e3
    # (exact); semantic and a second full-weight route agree on the distractors
    exact = frozenset({"e1", "e2", "e3"})
    lists = {
        "keyword": _hits("keyword", ["e1", "e2", "e3", "d1", "d2", "d3", "d4", "d5"], exact),
        "semantic": _hits("semantic", ["d1", "d2", "d3", "d4", "d5", "d6"]),
        "artifact": _hits("artifact", ["d2", "d3", "d4", "d5", "d6", "d1"]),
    }
    plain = [f[1] for f in fuse(lists)]
    assert plain.index("e2") >= 5 and plain.index("e3") >= 5  # outranked by d1..d5
    keys = frozenset(("memory", i) for i in exact)
    ordered = [f[1] for f in lead_with_tops(fuse(lists), None, keys)]
    assert ordered[:5] == ["d2", "d1", "e1", "e2", "e3"]  # route tops (fused order), then exact by keyword rank
    tiers = {f[1]: lead_tier(f, None, keys) for f in fuse(lists)}
    assert tiers["e2"] == (1, 2) and tiers["e3"] == (1, 3) and tiers["d1"] == (0, 0) and tiers["d4"] == (2, 0)


def _world(ledger: Ledger) -> tuple[str, list[str]]:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="flags")
    rec.record_message(conv.id, "user", "The permission checks are broken for admins; please fix the flag handling.")
    edits = []
    for i in range(30):
        if i in (7, 15, 22):
            args = {"file_path": f"src/auth/mod{i}.ts", "old_string": "const a = 1", "new_string": f"const permissionFlag = user.role === 'admin' // {i}"}
            _, calls = rec.record_assistant(conv.id, tool_calls=[{"call_id": f"e{i}", "tool_name": "Edit", "arguments": args}])
            _, _, m = rec.record_tool_result(conv.id, calls[0].call_id, f"The file src/auth/mod{i}.ts has been updated.")
            edits.append(str(m.id))
        else:
            _, calls = rec.record_assistant(conv.id, tool_calls=[{"call_id": f"r{i}", "tool_name": "Read", "arguments": {"file_path": f"docs/permission_flags_{i}.md"}}])
            text = f"Permission flags {i}: every permission flag is checked; the admin permission flag comes before the user permission flag." if i % 5 == 0 else f"Release notes {i}: the build pipeline caches dependencies and uploads the bundle."
            rec.record_tool_result(conv.id, calls[0].call_id, text)
    return conv.id, edits[::-1]  # newest first: the keyword route's tie order


def test_search_ranks_every_edit_naming_the_identifier_right_after_the_route_tops(sqlite_ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTLEDGER_EMBEDDINGS", "auto")
    conv, edits = _world(sqlite_ledger)
    result = search(sqlite_ledger, sqlite_ledger.scope("default"), conv, "permissionFlag", limit=10)
    if "semantic" in result.degraded:
        pytest.skip(f"semantic route unavailable: {result.degraded['semantic']}")
    ids = [h.record_id for h in result.hits]
    keyword = [h.record_id for h in search(sqlite_ledger, sqlite_ledger.scope("default"), conv, "permissionFlag", limit=10, routes=("keyword",)).hits]
    assert keyword == edits  # the keyword route alone: the three edits, nothing else
    assert result.exact == frozenset(("memory", e) for e in edits)
    tops = [h.record_id for h in result.hits if 1 in h.ranks.values() and h.record_id not in edits]
    # the semantic route's best (a docs read) leads; the edits follow in keyword order
    assert ids[: len(tops) + 3] == [*tops, *edits]
    assert [h.record_id for h in result.hits if h.record_id in edits] == edits
    assert all(ids.index(e) <= len(result.routes_used) + k for k, e in enumerate(edits, start=1))


def test_search_command_shows_handles_and_whole_ids_at_80_columns(sqlite_ledger: Ledger) -> None:
    conv, _ = _world(sqlite_ledger)
    hits = search(sqlite_ledger, sqlite_ledger.scope("default"), conv, "permissionFlag", limit=5).hits
    url = str(sqlite_ledger.store.engine.url)
    for columns in ("60", "80", "200"):
        out = CliRunner().invoke(app, ["--db", url, "search", conv, "permissionFlag", "--limit", "5"], env={"COLUMNS": columns})
        assert out.exit_code == 0, out.output
        for h in hits:
            assert h.handle == f"m{h.seq}"
            line = next(line for line in out.output.splitlines() if h.record_id in line)
            assert h.handle in line.split()
        assert all(len(line) <= int(columns) for line in out.output.splitlines() if "│" in line)  # the table fits
    json_out = CliRunner().invoke(app, ["--db", url, "search", conv, "permissionFlag", "--limit", "5", "--json"])
    assert [h["handle"] for h in json.loads(json_out.output)["hits"]] == [h.handle for h in hits]
