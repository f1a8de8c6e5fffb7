"""The scenario suite at CI size (1×, plus one 10× case): contextledger's invariants are
asserted, the peer strategies' numbers are recorded (never asserted).

Where contextledger currently fails an invariant, the assertion is ``xfail(strict=True)``
with the exact gap (see ``KNOWN_GAPS``); the scenarios themselves are not weakened.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextledger.bench.harness import CONTEXTLEDGER, NATIVE, run_scenarios
from contextledger.bench.lenient import lenient_payload
from contextledger.bench.probes import Fact, check_probes, content_texts, payload_texts
from contextledger.bench.report import build_report, markdown, write_report
from contextledger.bench.scenarios import all_scenarios, get_scenario
from contextledger.bench.scenarios.base import SEED_REPLAY_TOKENS, seed_budget
from contextledger.bench.strategies import all_strategies
from contextledger.cli.bench_cmd import app
from contextledger.ledger import Ledger
from contextledger.providers.base import NeutralRequest, WireMessage
from contextledger.providers.registry import count_payload_tokens, validate_payload
from contextledger.records.parts import TextPart, ToolCallPart, ToolResultPart

CASES = [s.name for s in all_scenarios()]
SEEDS = [s.name for s in all_scenarios() if s.seed_scenario]
STRATEGIES = [CONTEXTLEDGER, *(s.name for s in all_strategies())]

KNOWN_GAPS: dict[tuple[str, str], str] = {
}
RESPONSES = "openai-responses"
RESPONSES_GAPS: dict[tuple[str, str], str] = {
}


def _gap(case: str, invariant: str) -> Any:
    reason = KNOWN_GAPS.get((case, invariant))
    return pytest.param(case, marks=pytest.mark.xfail(strict=True, reason=reason)) if reason else case


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return [r.as_dict() for r in run_scenarios((1,))]


def _row(rows: list[dict[str, Any]], case: str, strategy: str = CONTEXTLEDGER, scale: int = 1, provider: str = NATIVE) -> dict[str, Any]:
    """The row of ``case`` × ``strategy`` × ``scale`` in ``provider`` (``NATIVE``: the
    scenario's own provider, whose rows come first)."""
    found = [r for r in rows if r["case"] == case and r["strategy"] == strategy and r["scale"] == scale]
    assert len(found) == 2 and found[1]["provider"] == RESPONSES, (case, strategy, scale)
    return found[1] if provider == RESPONSES else found[0]


def test_every_case_has_one_row_per_strategy_and_provider(rows: list[dict[str, Any]]) -> None:
    assert [r["case"] for r in rows if r["strategy"] == CONTEXTLEDGER] == [c for c in CASES for _ in range(2)]
    assert CASES[:6] == ["seed-1", "seed-2", "seed-3", "seed-4", "seed-5", "seed-6"]
    for case in CASES:
        providers = [r["provider"] for r in rows if r["case"] == case]
        assert providers[len(STRATEGIES):] == [RESPONSES] * len(STRATEGIES)
        assert len(set(providers[: len(STRATEGIES)])) == 1 and providers[0] != RESPONSES
        assert [r["strategy"] for r in rows if r["case"] == case] == STRATEGIES * 2
    required = {"strategy", "case", "provider", "tokens", "replay_tokens", "reduction", "must_see_tokens", "must_see_recall", "must_not_see_leaks", "valid", "assembly_ms"}
    assert all(required <= set(r) for r in rows)


@pytest.mark.parametrize("case", [c for c in CASES if c != "coding-walkthrough"])
def test_replay_sized_like_the_seed(rows: list[dict[str, Any]], case: str) -> None:
    assert 900 <= _row(rows, case)["replay_tokens"] <= 2100


@pytest.mark.parametrize("case", SEEDS)
def test_seed_scenarios_replay_at_least_the_seeds_size(rows: list[dict[str, Any]], case: str) -> None:
    """At 1× each seed scenario's naive replay is the seed's reported size (seed 000 §9.1)
    up to 5 % above it, so a ≥ 90 % reduction at the budget (10 % of the seed's size) is
    reachable and not inflated by a larger replay."""
    replay = _row(rows, case)["replay_tokens"]
    assert SEED_REPLAY_TOKENS[case] <= replay <= 1.05 * SEED_REPLAY_TOKENS[case]


def test_seed_budgets_are_a_tenth_of_the_seed_replays(rows: list[dict[str, Any]]) -> None:
    assert {c: _row(rows, c)["budget_tokens"] for c in SEEDS} == {"seed-1": 102, "seed-2": 190, "seed-3": 105, "seed-4": 101, "seed-5": 96, "seed-6": 199}
    assert all(seed_budget(c) == round(SEED_REPLAY_TOKENS[c] / 10) for c in SEEDS)


def test_coding_walkthrough_replays_the_12_mb_output(rows: list[dict[str, Any]]) -> None:
    assert _row(rows, "coding-walkthrough")["replay_tokens"] > 3_000_000


def test_coding_walkthrough_project_rule_comes_from_the_rule_file_not_the_tool_read(ledger: Ledger) -> None:
    """The project rule is loaded from the checkout's AGENTS.md (project authority) and
    rendered in the system slot; the agent's Read of the same file stays tool output."""
    built = get_scenario("coding-walkthrough").build(ledger, 1)
    rules = ledger.rules(built.conversation_id)
    assert sorted((r.text, r.source_kind, r.authority.value, r.pinned) for r in rules) == [
        ("Don't change the public API of src/auth.", "user_message", "user", True),
        ("Use pnpm for every script; never use npm in this repo.", "project_file", "project", False),
    ]
    assert [r.source for r in rules if r.source_kind == "project_file"] == ["AGENTS.md:2"]
    res = ledger.assemble(built.conversation_id, provider=built.provider, budget_tokens=built.budget_tokens, now=built.now, persist=False)
    system = res.payload["system"]
    assert "Rules:\n- Use pnpm for every script; never use npm in this repo." in system
    # the task that states the user's constraint is sent raw, so it is not restated
    assert "Constraints stated by the user" not in system
    assert "Don't change the public API of src/auth." in res.payload["messages"][0]["content"][0]["text"]
    assert "I'd prefer you use npm" not in system


def test_replay_strategy_counts_the_same_replay_as_the_assembly_record(rows: list[dict[str, Any]]) -> None:
    for case in CASES:
        for provider in (NATIVE, RESPONSES):
            r = _row(rows, case, "replay", provider=provider)
            assert (r["tokens"], r["reduction"]) == (r["replay_tokens"], 0.0)


def _responses_gap(case: str, invariant: str) -> Any:
    reason = RESPONSES_GAPS.get((case, invariant))
    return pytest.param(case, marks=pytest.mark.xfail(strict=True, reason=reason)) if reason else case


@pytest.mark.parametrize("case", [_responses_gap(c, "recall") for c in CASES])
def test_responses_payload_sees_every_must_see_fact(rows: list[dict[str, Any]], case: str) -> None:
    r = _row(rows, case, provider=RESPONSES)
    assert (r["must_see_recall"], r["missing"]) == (1.0, [])


@pytest.mark.parametrize("case", CASES)
def test_responses_payload_is_valid_within_budget_and_leaks_nothing(rows: list[dict[str, Any]], case: str) -> None:
    r = _row(rows, case, provider=RESPONSES)
    assert (r["valid"], r["validity_errors"], r["error"]) == (True, [], None)
    assert r["tokens"] <= r["budget_tokens"]
    assert (r["must_not_see_leaks"], r["leaked"]) == (0, [])


@pytest.mark.parametrize("case", [_gap(c, "recall") for c in CASES])
def test_contextledger_sees_every_must_see_fact(rows: list[dict[str, Any]], case: str) -> None:
    r = _row(rows, case)
    assert (r["must_see_recall"], r["missing"]) == (1.0, [])


@pytest.mark.parametrize("case", [_gap(c, "leaks") for c in CASES])
def test_contextledger_leaks_nothing(rows: list[dict[str, Any]], case: str) -> None:
    r = _row(rows, case)
    assert (r["must_not_see_leaks"], r["leaked"]) == (0, [])


@pytest.mark.parametrize("case", [_gap(c, "valid") for c in CASES])
def test_contextledger_payload_is_provider_valid(rows: list[dict[str, Any]], case: str) -> None:
    r = _row(rows, case)
    assert (r["valid"], r["validity_errors"]) == (True, [])


@pytest.mark.parametrize("case", [_gap(c, "reduction") for c in SEEDS])
def test_contextledger_cuts_seed_scenarios_by_ninety_percent(rows: list[dict[str, Any]], case: str) -> None:
    assert _row(rows, case)["reduction"] >= 0.90


def test_naive_replay_shows_what_must_not_be_seen(rows: list[dict[str, Any]]) -> None:
    """The probes do detect leaks: the replay hands model B all four private facts."""
    r = _row(rows, "seed-5", "replay")
    assert r["leaked"] == ["overcharging by 12%", "401 invalid_grant", "ya29.a0AfH6SMBx-private", "1//0gPrivateRefresh"]
    assert _row(rows, "seed-1", "replay")["leaked"] == ["thumb-a7d402", "ops-lead@example.com"]


def test_must_see_floor_ratio(rows: list[dict[str, Any]]) -> None:
    r = _row(rows, "seed-5")
    assert r["must_see_tokens"] > 0
    assert r["floor_ratio"] == round(r["tokens"] / r["must_see_tokens"], 2)


def test_history_multiplier_grows_the_replay_tenfold() -> None:
    rows = [r.as_dict() for r in run_scenarios((1, 10), ["seed-5"], strategies=[], providers=(NATIVE,))]
    one, ten = (next(r for r in rows if r["scale"] == s) for s in (1, 10))
    assert 7 <= ten["replay_tokens"] / one["replay_tokens"] <= 13
    assert ten["tokens"] <= ten["budget_tokens"] * 1.5


def test_lenient_payload_scores_an_orphan_result_invalid() -> None:
    orphan = NeutralRequest(
        system=("sys",),
        messages=(
            WireMessage(role="tool", parts=(ToolResultPart(call_id="c9", text="late result"),)),
            WireMessage(role="user", parts=(TextPart(text="go on"),)),
            WireMessage(role="assistant", parts=(ToolCallPart(call_id="c10", tool_name="run", arguments_json="{}"),)),
        ),
    )
    responses, strict = lenient_payload(RESPONSES, orphan)
    assert strict is False
    assert responses["input"] == [
        {"type": "function_call_output", "call_id": "c9", "output": "late result"},
        {"type": "message", "role": "user", "content": "go on"},
        {"type": "function_call", "call_id": "c10", "name": "run", "arguments": "{}"},
    ]
    assert validate_payload(RESPONSES, responses) == [
        "input[0].call_id: 'c9' answers no function_call before it",
        "input[2]: no function_call_output answers call 'c10'",
    ]
    chat, strict = lenient_payload("openai-chat", orphan)
    assert strict is False
    assert [m["role"] for m in chat["messages"]] == ["system", "tool", "user", "assistant"]
    assert validate_payload("openai-chat", chat) != []
    anth, strict = lenient_payload("anthropic", orphan)
    assert strict is False
    assert anth["messages"][0] == {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c9", "content": "late result"}, {"type": "text", "text": "go on"}]}
    assert validate_payload("anthropic", anth) != []
    fine = NeutralRequest(messages=(WireMessage(role="user", parts=(TextPart(text="hi"),)),))
    assert lenient_payload("anthropic", fine) == ({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}, True)


def test_probes_separate_call_arguments() -> None:
    payload = {"messages": [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "Edit", "arguments": json.dumps({"old_string": "old  line\nx"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]}
    everything, outside = payload_texts(payload)
    assert "old line x" in everything and "old line" not in outside
    res = check_probes(payload, [Fact("done"), Fact("absent")], [Fact("old line", outside_call_arguments=True), Fact("Edit")])
    assert (res.recall, res.missing, res.leaks, res.leaked) == (0.5, ("absent",), 1, ("Edit",))
    responses = {"instructions": "sys", "input": [
        {"type": "function_call", "call_id": "c1", "name": "Edit", "arguments": json.dumps({"old_string": "old  line\nx"})},
        {"type": "function_call_output", "call_id": "c1", "output": "done"},
    ]}
    assert payload_texts(responses) == ("sys function_call c1 Edit {\"old_string\": \"old line\\nx\"} old line x function_call_output c1 done", "sys function_call c1 Edit function_call_output c1 done")
    res = check_probes(responses, [Fact("done"), Fact("sys")], [Fact("old line", outside_call_arguments=True), Fact("Edit")])
    assert (res.recall, res.leaks, res.leaked) == (1.0, 1, ("Edit",))


def test_probes_read_file_content_in_responses_payloads() -> None:
    """A pre-edit line counts as presented only in the output of a read of that path or in
    user/system text (as for the other shapes)."""
    read = json.dumps({"file_path": "src/a.py"})
    payload = {"instructions": "rules", "input": [
        {"type": "message", "role": "user", "content": "fix src/a.py"},
        {"type": "function_call", "call_id": "r1", "name": "Read", "arguments": read},
        {"type": "function_call_output", "call_id": "r1", "output": "OLD LINE of a"},
        {"type": "function_call", "call_id": "g1", "name": "Grep", "arguments": read},
        {"type": "function_call_output", "call_id": "g1", "output": "OLD LINE from grep"},
        {"type": "message", "role": "assistant", "content": "assistant quotes OLD LINE"},
    ]}
    assert content_texts(payload, "src/a.py") == "rules fix src/a.py OLD LINE of a"


def test_report_markdown_and_files(rows: list[dict[str, Any]], tmp_path: Path) -> None:
    report = build_report("scenarios", rows)
    assert set(report) == {"kind", "machine", "versions", "rows"}
    assert report["versions"]["assembler"].startswith("contextledger-assembler/")
    md = markdown(report)
    assert "| case | replay tokens | contextledger | replay | last_n |" in md
    assert "| seed-1 | " in md and "## contextledger detail" in md
    paths = write_report(report, tmp_path)
    assert [p.name for p in paths] == ["bench-scenarios.json", "bench-scenarios.md", "bench-scenarios-tokens.png"]
    assert paths[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads(paths[0].read_text())["rows"] == rows


def test_cli_scenarios_json(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["scenarios", "--scales", "1", "--case", "seed-4", "--no-peers", "--json", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert [(r["strategy"], r["case"], r["provider"], r["must_see_recall"]) for r in report["rows"]] == [
        ("contextledger", "seed-4", "anthropic", 1.0), ("contextledger", "seed-4", RESPONSES, 1.0),
    ]
    assert "## 1× history, openai-responses payloads" in (tmp_path / "bench-scenarios.md").read_text()
    bad = CliRunner().invoke(app, ["scenarios", "--scales", "1", "--case", "seed-4", "--no-peers", "--providers", "native,gemini", "--out", str(tmp_path)])
    assert (bad.exit_code, bad.output.strip().splitlines()[-1]) == (2, "error: unknown provider 'gemini'; expected native or one of openai-chat, anthropic, openai-responses")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench-scenarios-tokens.png", "bench-scenarios.json", "bench-scenarios.md"]


# -- contextledger alone at 10× history: the facts survive a longer history -----------


@pytest.fixture(scope="module")
def rows_10x() -> dict[str, dict[str, Any]]:
    return {r.case: r.as_dict() for r in run_scenarios((10,), strategies=[], providers=(NATIVE,))}


@pytest.mark.parametrize("case", CASES)
def test_contextledger_invariants_at_ten_times_the_history(rows_10x: dict[str, dict[str, Any]], case: str) -> None:
    r = rows_10x[case]
    assert (r["must_see_recall"], r["missing"]) == (1.0, [])
    assert (r["must_not_see_leaks"], r["leaked"]) == (0, [])
    assert r["valid"] and r["tokens"] <= r["budget_tokens"]
    if case in SEEDS:
        assert r["reduction"] >= 0.9


# -- every scenario in every provider format: a payload never exceeds its budget ------

FORMATS = ("openai-chat", "anthropic", "openai-responses")


@pytest.fixture(scope="module")
def rows_formats() -> dict[tuple[str, str], dict[str, Any]]:
    return {(r.case, r.provider): r.as_dict() for r in run_scenarios((1,), strategies=[], providers=FORMATS)}


@pytest.mark.parametrize("provider", FORMATS)
@pytest.mark.parametrize("case", CASES)
def test_every_format_payload_fits_its_budget(rows_formats: dict[tuple[str, str], dict[str, Any]], case: str, provider: str) -> None:
    r = rows_formats[(case, provider)]
    assert r["valid"], r["validity_errors"]
    assert r["tokens"] <= r["budget_tokens"], (r["tokens"], r["budget_tokens"])


FORMAT_GAPS: dict[tuple[str, str], str] = {
}


@pytest.mark.parametrize("provider", FORMATS)
@pytest.mark.parametrize("case", CASES)
def test_every_format_payload_sees_every_must_see_fact(rows_formats: dict[tuple[str, str], dict[str, Any]], case: str, provider: str) -> None:
    """Format parity (issue 26): the facts a scenario must show, debate speaker labels
    (``[pro] …``) included, are in the payload of every format."""
    gap = FORMAT_GAPS.get((case, provider))
    if gap is not None:
        pytest.xfail(gap)
    r = rows_formats[(case, provider)]
    assert (r["must_see_recall"], r["missing"]) == (1.0, [])


def test_rehydrated_csv_gives_up_tool_framing_in_messages_format(ledger: Ledger) -> None:
    """csv-rehydration in Messages format: the raw CSV sent as a tool_result needs the
    tools block and its 346-token tool-use prompt, more than the 700 budget leaves.  The
    exchange goes as data text instead (its call named by id), so the exact rows are
    shown; Chat Completions, whose framing fits, keeps the tool result."""
    from contextledger.assembly.rehydrate import UNFRAMED_DETAIL
    from contextledger.assembly.render import DATA_BANNER

    b = get_scenario("csv-rehydration").build(ledger, 1)
    res = ledger.assemble(b.conversation_id, provider="anthropic", budget_tokens=700, now=b.now, persist=False, trace=True)
    assert res.record.assembled_tokens == count_payload_tokens("anthropic", res.payload) <= 700
    assert "tools" not in res.payload and validate_payload("anthropic", res.payload) == []
    texts = [p["text"] for m in res.payload["messages"] for p in m["content"] if p["type"] == "text"]
    assert [p["type"] for m in res.payload["messages"] for p in m["content"] if p["type"] != "text"] == []
    assert '[called export_invoices({"format":"csv","month":"2026-02"}) · call call_005]' in texts
    data = next(t for t in texts if t.startswith(f"{DATA_BANNER}\nresult of call call_005:\n"))
    assert "2026-02-07,south,INV-3307,1211.49\n" in data and "2026-02-12,north,INV-3312,76.84\n" in data
    assert [(d["decision"], d["reason"]) for d in res.trace if d.get("detail") == UNFRAMED_DETAIL] == [("shape", "budget")]
    chat = ledger.assemble(b.conversation_id, provider="openai-chat", budget_tokens=700, now=b.now, persist=False)
    assert [m["content"].splitlines()[3] for m in chat.payload["messages"] if m["role"] == "tool"] == ["2026-02-03,north,INV-3303,519.21"]


def test_pending_call_exchange_gives_up_tool_framing_before_the_budget(ledger: Ledger) -> None:
    """subagent-continuation in Messages format: the protected exchange (one Task call
    done, one pending) sent as tool_use/tool_result needs the tools block and its
    346-token tool-use prompt, 497 tokens of a 400 budget.  Its done call becomes an
    evidence line naming its call id, the pending call keeps its recovery text."""
    b = get_scenario("subagent-continuation").build(ledger, 1)
    res = ledger.assemble(b.conversation_id, provider="anthropic", budget_tokens=400, now=b.now, persist=False, trace=True)
    # the checkpoint's random id is in the runtime state: its token count varies by a few
    assert res.record.assembled_tokens == count_payload_tokens("anthropic", res.payload) <= 340
    assert "tools" not in res.payload
    texts = [p["text"] for m in res.payload["messages"] for p in m["content"] if p["type"] == "text"]
    assert [p["type"] for m in res.payload["messages"] for p in m["content"] if p["type"] != "text"] == []
    assert any(t.endswith("REPORT: Paylane supports EU data residency (Frankfurt region). · call call_005") for t in texts)
    assert '[pending, no result yet: call_006 Task({"description":"research Wageflow"})]' in texts
    assert [(d["decision"], d["reason"], d["detail"]) for d in res.trace if "pending call" in (d.get("detail") or "")] == [
        ("shape", "budget", "resolved calls kept as evidence lines beside the pending call's recovery text: the tool framing does not fit the budget"),
    ]
    for provider in ("openai-chat", "openai-responses"):  # the framing fits there: the exchange stays raw
        other = ledger.assemble(b.conversation_id, provider=provider, budget_tokens=400, now=b.now, persist=False)
        assert ("tools" in other.payload, other.record.assembled_tokens <= 400) == (True, True)
