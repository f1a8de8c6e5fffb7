"""The assembly page and ``explain --json`` agree on every record's decision, for the
requests of five real transcripts of different agents (assembled without a trace)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from conftest import real_data_dir, require_real_data
from contextledger.cli.main import app as cli
from contextledger.ledger import Ledger
from contextledger.server.app import create_app
from contextledger.server.settings import ServerSettings
from contextledger.store import schema as S

FILES = [
    "claude-code-viewer-dkimuson/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
    "marot-spotter/tool_heavy.jsonl",
    "aider-chat-history/afi-core.aider.chat.history.md",
    "tau-bench-airline-gpt4o/task017_trial3_idx167.json",
    "swe-agent/ctf__crypto__BabyEncryption.traj",
    "adp-swe-gym-openhands/Project-MONAI__MONAI-3715_4.json",
]
SENT = {"raw", "memory", "stale_marker", "reference"}
ROW = re.compile(r'<tr data-decision="([^"]*)" data-reason="([^"]*)">\s*<td>(?:<span class="handle">[^<]*</span> )?<a class="id" href="/records/([^"?]+)\?')


def page_decisions(client: TestClient, assembly_id: str) -> list[tuple[str, str, str]]:
    res = client.get(f"/assemblies/{assembly_id}")
    assert res.status_code == 200
    return [(html.unescape(rid), d, html.unescape(r)) for d, r, rid in ROW.findall(res.text)]


def test_page_and_explain_json_agree_on_every_record(tmp_path: Path) -> None:
    require_real_data()
    led = Ledger.open(home=tmp_path)
    made = []
    for name in FILES:
        conv = led.import_file(real_data_dir() / name).conversation_id
        for provider, budget in (("anthropic", 4000), ("openai-chat", 16000)):
            made.append(led.assemble(conv, provider=provider, budget_tokens=budget).record.id)
    runner = CliRunner()
    with TestClient(create_app(ServerSettings(), ledger=led)) as client:
        for asm in made:
            res = runner.invoke(cli, ["--home", str(tmp_path), "explain", asm, "--json"])
            assert res.exit_code == 0, res.output
            expl = json.loads(res.stdout)
            assert expl["decision_source"] == "stored"
            from_cli = [(d["record_id"], d["decision"], d["reason"]) for d in expl["decisions"]]
            assert from_cli, asm
            assert sorted(page_decisions(client, asm)) == sorted(from_cli), asm  # the page lists them in transcript order
            # every omission counted in the summary is listed by id on both
            listed = {r: sum(1 for _, d, x in from_cli if d == "omitted" and x == r) for r in ("outside_window", "out_of_lineage")}
            assert listed == {r: expl["summary"].get(r, 0) for r in listed}, asm
            # every record the request carries has a decision saying it was sent
            decided = {d["record_id"]: d for d in expl["decisions"]}
            for ref in expl["selected"]:
                assert ref in decided and decided[ref]["decision"] in SENT, (asm, ref, decided.get(ref))
    led.close()


def test_why_not_reports_every_sent_memory_as_sent(tmp_path: Path) -> None:
    """A memory the payload shows by its handle (``[memory m42 …``) is reported sent by
    ``explain --why-not`` (the trial found m42 of this transcript reported
    ``outside_window``), and a raw artifact of a unit dropped later is not."""
    require_real_data()
    led = Ledger.open(home=tmp_path)
    conv = led.import_file(real_data_dir() / FILES[-1]).conversation_id
    res = led.assemble(conv, provider="openai-chat", budget_tokens=4000)
    text = json.dumps(res.payload)
    asm = res.record.id
    mems = [r for r in res.record.selected_refs if r.startswith("mem_")]
    assert len(mems) >= 10
    runner = CliRunner()
    expl = json.loads(runner.invoke(cli, ["--home", str(tmp_path), "explain", asm, "--json"]).stdout)
    decided = {d["record_id"]: d for d in expl["decisions"]}
    with led.runtime.store.reader() as conn:
        seqs = dict(conn.execute(sa.select(S.tool_memories.c.id, S.tool_memories.c.seq).where(S.tool_memories.c.id.in_(mems))).all())
    for mem in mems:
        handle = f"m{seqs[mem]}"
        out = runner.invoke(cli, ["--home", str(tmp_path), "explain", asm, "--why-not", handle, "--json"])
        assert out.exit_code == 0, out.output
        hit = next(h for h in json.loads(out.stdout) if h["record_id"] == mem)
        assert hit["decision"] in SENT and hit["decision"] == decided[mem]["decision"], (handle, hit)
    assert "[memory m42 " in text
    m42 = next(m for m in mems if seqs[m] == 42)
    assert decided[m42]["decision"] == "memory" and decided[m42]["detail"].startswith("shown in the exchange of msg_")
    # the raw artifacts decided ``raw`` are exactly the ones the request carries
    raw = {d["record_id"] for d in expl["decisions"] if d["kind"] == "artifact" and d["decision"] == "raw"}
    assert raw == {r for r in res.record.selected_refs if r.startswith("art_")}
    led.close()


@pytest.mark.parametrize("path", ["/assemblies/asm_nope", "/assemblies/asm_nope/why-not?q=x", "/conversations/conv_nope", "/records/msg_nope"])
def test_unknown_ids_are_404_pages(tmp_path: Path, path: str) -> None:
    led = Ledger.open(home=tmp_path)
    with TestClient(create_app(ServerSettings(), ledger=led)) as client:
        res = client.get(path)
        assert res.status_code == 404 and res.headers["content-type"].startswith("text/html") and "not found" in res.text.lower()
    led.close()


def test_bench_page_shows_the_report_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = Path(__file__).resolve().parents[1] / "docs"
    led = Ledger.open(home=tmp_path)
    with TestClient(create_app(ServerSettings(), ledger=led)) as client:
        monkeypatch.delenv("CONTEXTLEDGER_BENCH_DIR", raising=False)
        assert "No report folder given" in client.get("/bench").text
        monkeypatch.setenv("CONTEXTLEDGER_BENCH_DIR", str(docs))
        page = client.get("/bench").text
        assert '<img src="/bench/files/bench-real-tokens.png"' in page and '<img src="/bench/files/bench-scale-latest/bench-scale-latency.png"' in page
        assert "<th scope=\"col\">contextledger</th>" in page  # the scenario table's columns
        png = client.get("/bench/files/bench-real-tokens.png")
        assert png.status_code == 200 and png.content.startswith(b"\x89PNG")
        assert client.get("/bench/files/../README.md").status_code == 404
        assert client.get("/bench/files/benchmark.md").status_code == 404
    led.close()
