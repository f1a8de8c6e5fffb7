"""``bench cost``: sessions as model calls, and the cost table of a small scripted session
replayed through the real proxy (and, with the data, of a real Claude Code session)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import real_data_dir
from contextledger.bench.cost import (
    CostRow,
    Session,
    cost_markdown,
    cost_report,
    run_cost,
    session_tools,
)
from contextledger.bench.cost_sessions import (
    claude_code_calls,
    client_body,
    fixed_prefix,
    real_sessions,
    scripted_session,
)
from contextledger.bench.strategies import LastNStrategy
from contextledger.cli.main import app
from contextledger.providers.cost import request_blocks

DATA = Path(__file__).parent / "data"


def test_claude_code_transcript_as_model_calls() -> None:
    calls = claude_code_calls(DATA / "claude_code_session.jsonl")
    assert [[m["role"] for m in c.history] for c in calls] == [["user"], ["user", "assistant", "user"],
                                                               ["user", "assistant", "user", "assistant", "user"],
                                                               ["user", "assistant", "user", "assistant", "user", "assistant", "user"]]
    # two assistant lines in a row are one answer, in the call and in the next history
    assert [b["type"] for b in calls[0].answer["content"]] == ["text", "tool_use"]
    assert calls[1].history[1]["content"] == calls[0].answer["content"]
    assert {c.model for c in calls} == {"claude-sonnet-4-5"}


def test_client_body_carries_the_fixed_prefix_and_claude_codes_breakpoints() -> None:
    label, system, tools = fixed_prefix()
    assert label.startswith("Claude Code 2.1.197")
    assert len(tools) == 24 and [b.get("cache_control") for b in system] == [None, {"type": "ephemeral"}, {"type": "ephemeral"}]
    call = scripted_session(3)[2]
    body = client_body(call)
    blocks = request_blocks("anthropic", body)
    prefix = sum(b.tokens for b in request_blocks("anthropic", {"system": system, "tools": tools}))
    assert prefix == 1389 + 14745 + 346 + 7 * 24 + 3 + 3  # shape sizes + tool framing + system framing + priming
    assert [i for i, b in enumerate(blocks) if b.breakpoint] == [25, 26, len(blocks) - 1]
    assert "cache_control" not in json.dumps(call.history)  # the call itself is not marked


def test_scripted_session_is_deterministic_and_declares_its_tools() -> None:
    assert scripted_session(30) == scripted_session(30)
    assert scripted_session(30, seed=8) != scripted_session(30)
    assert session_tools(scripted_session(30)) == []  # Read, Edit, Bash are in the fixed prefix
    assert "Never edit setup.cfg" in scripted_session(1)[0].history[0]["content"][0]["text"]


def test_bench_cost_on_a_small_scripted_session() -> None:
    rows = run_cost([Session("s", tuple(scripted_session(6)))], (8000,), [LastNStrategy()], probe_every=3)
    replay, ours, peer = rows
    assert replay == CostRow(session="s", strategy="replay", budget=0, requests=6, tokens=118765, cache_read_tokens=96898, cache_write_tokens=21867,
                             uncached_tokens=0, usd=0.111071, vs_replay=1.0, must_see_recall=1.0, probed_turns=1, extension_ratio=1.0,
                             turns_per_break=5.0, model="claude-sonnet-4-5", price="claude-sonnet-4-5")
    # the whole history fits: the peer's requests are the client's own, byte for byte in tokens
    assert peer == dataclasses.replace(replay, strategy="last_n", budget=8000)
    # contextledger through the proxy: every turn assembled, figures consistent
    assert (ours.strategy, ours.budget, ours.requests, ours.errors, ours.probed_turns, ours.must_see_recall) == ("contextledger", 8000, 6, [], 1, 1.0)
    assert ours.tokens == ours.cache_read_tokens + ours.cache_write_tokens + ours.uncached_tokens
    assert ours.vs_replay == round(ours.usd / replay.usd, 4)
    report = cost_report(rows, sessions=["s"], prices_version="2026-12-02")
    table = cost_markdown(report)
    assert "| replay | - | 6 | 118,765 | 0.1111 | 1.00 | 100.0% | 100.0% |" in table
    assert "| s | last_n | 8000 | 6 | 96,898 | 21,867 | 0 | 0.1111 | 1.00 | 100.0% | 100.0% | 5.0 | - |" in table


def test_bench_cost_cli_json(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["bench", "cost", "--data", str(tmp_path / "none"), "--scripted", "3", "--budgets", "8000",
                                      "--peers", "", "--json", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert [(r["strategy"], r["budget"], r["requests"]) for r in report["rows"]] == [("replay", 0, 3), ("contextledger", 8000, 3)]
    assert report["prices"] == "2026-12-02" and (tmp_path / "bench-cost.md").exists()
    bad = CliRunner().invoke(app, ["bench", "cost", "--scripted", "3", "--peers", "nobody", "--out", str(tmp_path)])
    assert bad.exit_code != 0 and "--peers: unknown strategy 'nobody'" in bad.output


def test_bench_cost_needs_no_peer_module_when_it_runs_no_peer() -> None:
    import subprocess
    import sys

    code = "import sys, contextledger.bench.cost, contextledger.cli.bench_cost_cmd; print(sorted(m for m in ('autogen_core', 'langchain', 'agents') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


@pytest.mark.skipif(not (real_data_dir() / "manifest.json").exists(), reason="needs the real transcripts")
def test_bench_cost_on_a_real_claude_code_session() -> None:
    [(name, calls)] = real_sessions(real_data_dir(), match="stop-hook-reflection-first-stop", min_calls=1)
    rows = run_cost([Session(name, tuple(calls))], (8000,), [], probe_every=2)
    replay, ours = rows
    assert (replay.requests, ours.requests) == (len(calls), len(calls)) and len(calls) == 6
    assert ours.errors == []
    assert replay.recorded_usd is not None and replay.recorded_usd > 0  # the transcript's own usage, priced
    assert replay.extension_ratio == 1.0
    assert ours.tokens == ours.cache_read_tokens + ours.cache_write_tokens + ours.uncached_tokens
