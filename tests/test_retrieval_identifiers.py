"""An exact code identifier in a query is never ranked out by fusion (issue 25 item 15):
the keyword hits that hold it whole rank right after each full-weight route's best hit,
in keyword order, in ``search`` and in the assembly's recall; ``search`` shows each
hit's handle (``m12``) and never cuts an id."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextledger.cli.main import app
from contextledger.ledger import Ledger
from contextledger.retrieval import search
from contextledger.retrieval.fusion import LEADS, fuse, lead, lead_with_tops
from contextledger.retrieval.model import RouteHit
from contextledger.retrieval.text import identifier_tokens, tokens

DATA = Path(__file__).parent / "data"


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
    leads = {f[1]: lead(f, None, keys) for f in fuse(lists)}
    assert leads["e2"] == 1 and leads["e3"] == 1 and leads["d1"] == 2 and leads["d4"] == 0
    assert lead(fuse(lists)[-1], None, keys, frozenset({("memory", fuse(lists)[-1][1])})) == LEADS


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
    tops = [h.record_id for h in result.hits if (h.record_kind, h.record_id) in result.tops and h.record_id not in edits]
    assert all(h.lead == 2 for h in result.hits if h.record_id in tops)
    # the routes' confident best hits lead (the semantic route's only when it stands
    # clear of its runner-up); the edits follow in keyword order
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


# -- records named exactly: call ids, handles, record ids ---------------------------------

_CALL_IDS = ["toolu_01Hx7VqL2mB9cTz4KpW8sNfR", "call_2J1K2PQtrbiujionpKQtyS6X", "fc_68a1b2c3d4e5f6a7b8c9", "toolu_01Zq3RtY6uI9oP2aS5dF8gHj"]


def _named_world(ledger: Ledger) -> tuple[str, dict[str, str], str]:
    """A conversation of reads whose results but the first (``m3``) share words (and the
    text ``m3``) with the queries below; returns (conversation id, call id → memory id, the assistant message
    of a call that has no result yet)."""
    rec = ledger.recorder()
    conv = rec.start_conversation(title="named")
    rec.record_message(conv.id, "user", "Check the permission flags in the config files.")
    memories: dict[str, str] = {}
    for i, call_id in enumerate(_CALL_IDS * 3):
        cid = call_id if i < len(_CALL_IDS) else f"{call_id}_{i}"
        _, calls = rec.record_assistant(conv.id, tool_calls=[{"call_id": cid, "tool_name": "Read", "arguments": {"file_path": f"conf/flags_{i}.yaml"}}])
        text = "deploy finished without errors" if i == 0 else f"permission flags {i}: admin before user; model m3 config; see a5 and return code 0"
        _, _, m = rec.record_tool_result(conv.id, calls[0].call_id, text)
        memories[cid] = str(m.id)
    pending, _ = rec.record_assistant(conv.id, text="Reading the deploy log next.", tool_calls=[{"call_id": "toolu_01PendingCall9xYz", "tool_name": "Read", "arguments": {"file_path": "deploy.log"}}])
    return conv.id, memories, str(pending.id)


@pytest.mark.parametrize("form", ["bare", "sentence"])
@pytest.mark.parametrize("call_id", _CALL_IDS)
def test_a_tool_call_id_finds_its_memory_first(sqlite_ledger: Ledger, call_id: str, form: str) -> None:
    conv, memories, _ = _named_world(sqlite_ledger)
    query = call_id if form == "bare" else f"what did {call_id} return for the permission flags?"
    result = search(sqlite_ledger, sqlite_ledger.scope("default"), conv, query, limit=5)
    first = result.hits[0]
    assert (first.record_kind, first.record_id, first.lead) == ("memory", memories[call_id], LEADS)
    assert result.named == frozenset({("memory", memories[call_id])})  # not the _4, _8 look-alikes
    assert first.ranks["artifact"] == 1 and first.handle == f"m{first.seq}"


def test_handles_and_record_ids_find_their_record_first(sqlite_ledger: Ledger) -> None:
    conv, memories, pending = _named_world(sqlite_ledger)
    scope = sqlite_ledger.scope("default")
    mems = {m.id: m for m in sqlite_ledger.store.memories(scope, conv)}
    target = mems[memories[_CALL_IDS[2]]]
    # every result says "model m3 … see a5": the keyword route ranks them on the literal
    # text; the handle names one record
    for query in (f"m{target.seq}", f"show a{target.seq} again", target.id, f"the result of {target.source_artifact_ids[0]}"):
        hits = search(sqlite_ledger, scope, conv, query, limit=5).hits
        assert (hits[0].record_id, hits[0].lead) == (target.id, LEADS), query
    call = search(sqlite_ledger, scope, conv, "toolu_01PendingCall9xYz", limit=3)
    assert [(h.record_kind, h.record_id, h.lead) for h in call.hits[:1]] == [("message", pending, LEADS)]  # no result yet: the turn that made the call
    assert search(sqlite_ledger, scope, conv, "release 2024 notes v12", limit=5).named == frozenset()


def test_a_call_on_another_branch_is_not_named(sqlite_ledger: Ledger) -> None:
    conv, _, _ = _named_world(sqlite_ledger)
    rec = sqlite_ledger.recorder()
    scope = sqlite_ledger.scope("default")
    first_user = sqlite_ledger.store.messages(scope, conv)[0]
    side = rec.fork(conv, str(first_user.id), name="side", activate=False)
    _, calls = rec.record_assistant(conv, branch_id=side.id, tool_calls=[{"call_id": "toolu_01SideBranch4Qw", "tool_name": "Read", "arguments": {"file_path": "side.md"}}])
    _, _, m = rec.record_tool_result(conv, calls[0].call_id, "side notes")
    main = search(sqlite_ledger, scope, conv, "toolu_01SideBranch4Qw", limit=5)
    assert main.named == frozenset() and all(h.record_id != m.id for h in main.hits)
    on_side = search(sqlite_ledger, scope, conv, f"toolu_01SideBranch4Qw m{m.seq}", branch_id=side.id, limit=5)
    assert (on_side.hits[0].record_id, on_side.hits[0].lead) == (m.id, LEADS)


# -- the order is the score's ---------------------------------------------------------------


def test_hits_come_in_the_order_of_the_score_shown(sqlite_ledger: Ledger) -> None:
    conv, _, _ = _named_world(sqlite_ledger)
    scope = sqlite_ledger.scope("default")
    url = str(sqlite_ledger.store.engine.url)
    reordered = 0
    for query in ("permission flags admin", "m3 permission flags admin", "toolu_01PendingCall9xYz permission flags", "return code 0 conf/flags_3.yaml"):
        hits = search(sqlite_ledger, scope, conv, query, limit=10).hits
        assert len(hits) >= 3, query
        keys = [(-h.score, -len(h.ranks), h.record_kind, h.seq) for h in hits]
        assert keys == sorted(keys), query  # score, then more routes, kind, transcript order
        assert all(h.score == h.lead + h.fused_score for h in hits)
        reordered += any(a.fused_score < b.fused_score for a, b in itertools.pairwise(hits))
        out = CliRunner().invoke(app, ["--db", url, "search", conv, query, "--limit", "10"], env={"COLUMNS": "250"})
        assert out.exit_code == 0, out.output
        shown = [line.split("│")[5].strip() for line in out.output.splitlines() if line.startswith("│")]
        assert shown == [f"{h.score:.4f}" for h in hits], out.output
        assert shown == sorted(shown, key=float, reverse=True)
        data = json.loads(CliRunner().invoke(app, ["--db", url, "search", conv, query, "--limit", "10", "--json"]).output)
        assert [(h["record_id"], h["score"], h["lead"]) for h in data["hits"]] == [(h.record_id, round(h.score, 6), h.lead) for h in hits]
    assert reordered  # the leads do reorder plain fusion: the score says so


# -- piped output is never cut -------------------------------------------------------------


def _piped(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.run([sys.executable, "-m", "contextledger.cli.main", *args], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_piped_output_keeps_ids_and_lines_whole(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    conv, _, _ = _named_world(sqlite_ledger)
    url = str(sqlite_ledger.store.engine.url)
    hits = search(sqlite_ledger, sqlite_ledger.scope("default"), conv, "permission flags admin", limit=8).hits
    lines = _piped("--db", url, "search", conv, "permission flags admin", "--limit", "8").splitlines()
    for h in hits:
        line = next(line for line in lines if h.record_id in line)
        assert h.handle in line.split() and h.text.splitlines()[0][:100] in line
    assert not any("…" in line for line in lines)
    deep = tmp_path.joinpath(*(["a_rather_long_folder_name_for_exports"] * 4))
    deep.mkdir(parents=True)
    source = deep / "airline_chat_exported_transcript.json"
    shutil.copyfile(DATA / "airline_chat.json", source)
    out = _piped("--db", url, "import", str(source))
    assert any(str(source) in line and "conv_" in line for line in out.splitlines()), out  # path and id on one line
