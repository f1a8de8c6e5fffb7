"""Epochs (append-stable assembly): between two persisted requests of one conversation
the request is the previous one byte for byte plus the new records, re-planned only at
epoch boundaries, each with its reason (contextledger.assembly.epoch)."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import real_params
from contextledger.explain import explain_assembly, render_explanation
from contextledger.ingest.transcript import ImportedMessage
from contextledger.ledger import Ledger
from contextledger.policy.epoch import EpochSection
from contextledger.policy.loader import load_policy
from contextledger.records.enums import Role
from contextledger.records.parts import TextPart, ToolCallPart, ToolResultPart
from contextledger.server.proxy.chain import chain_keys
from contextledger.server.proxy.reconcile import (
    ParsedRequest,
    conversation_for,
    record_chain,
    root_key,
)
from epoch_support import conversation_items, extends, extends_blocks, main_thread, replay

CLAUDE_CODE = real_params(
    "marot-spotter/*.jsonl", "claude-code-viewer-dkimuson/*.jsonl", "claude-reliability-snapshots/*.jsonl", "moredip-session-share/*.jsonl",
    "moredip-session-share/samples/*.jsonl", "randlee-claude-history/simple/session.jsonl", "codemie-code/claude-code/*.jsonl",
    "codemie-code/claude-code/incremental-subagents/*.jsonl",
)
ONE_SESSION = real_params("claude-reliability-snapshots/python-to-rust-port.jsonl")
T0 = datetime(2026, 5, 1, 10, 0, tzinfo=UTC)
TOOLS = [{"name": n, "description": f"The {n} tool.", "input_schema": {"type": "object", "properties": {}}} for n in ("Bash", "Edit", "Read")]


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger.open(home=tmp_path / "home")


def _id(p: Path) -> str:
    return str(p) if p is None else "/".join(p.parts[-2:])


def _transitions(ledger: Ledger, path: Path, provider: str, budget: int) -> tuple[int, int, int, list[str]]:
    """``(requests, in-epoch transitions, exact extensions among them, reasons)``.  For
    the Messages API an extension is exact when every block of the previous request is
    where it was (the junction note is one more block of its last user message); every
    other in-epoch transition extends the message list item for item."""
    prev: dict[str, Any] | None = None
    prev_id = None
    n = inside = exact = 0
    reasons: list[str] = []
    for turn in replay(ledger, path, provider=provider, budget=budget, name=f"{path.name}:{provider}:{budget}"):
        rec = turn.result.record
        assert rec.epoch is not None
        n += 1
        reasons.append(rec.epoch["reason"])
        if prev is not None and not rec.epoch["first"]:
            inside += 1
            assert rec.epoch["extends"] == prev_id and rec.epoch["reason"] == "extends epoch"
            strict = extends(prev, turn.result.payload)
            exact += strict or (provider == "anthropic" and extends_blocks(prev, turn.result.payload))
            if not strict:  # only a junction note may join the previous request's last message
                assert provider == "anthropic" and "no longer current:" in json.dumps(turn.result.payload["messages"][len(prev["messages"]) - 1])
        elif prev is None:
            assert rec.epoch["first"] and rec.epoch["reason"] == "first request" and rec.epoch["target_tokens"] == budget
        else:  # a boundary after a previous request: re-planned to the low-water mark
            assert rec.epoch["target_tokens"] < budget and rec.epoch["number"] > 1
        prev, prev_id = turn.result.payload, rec.id
    return n, inside, exact, reasons


@pytest.mark.parametrize("budget", [8000, 32000])
@pytest.mark.parametrize("path", CLAUDE_CODE, ids=_id)
def test_real_claude_code_sessions_extend_the_previous_request_inside_an_epoch(ledger: Ledger, path: Path, budget: int, record_property: Any) -> None:
    n, inside, exact, reasons = _transitions(ledger, path, "anthropic", budget)
    boundaries = sum(1 for r in reasons if r != "extends epoch")
    record_property("epoch_boundary_interval", round(n / boundaries, 2) if boundaries else None)
    if inside:
        assert exact / inside >= 0.9, (exact, inside, reasons)


@pytest.mark.parametrize("provider", ["openai-responses", "openai-chat"])
@pytest.mark.parametrize("path", ONE_SESSION, ids=_id)
def test_one_real_session_extends_for_the_openai_providers_too(ledger: Ledger, path: Path, provider: str) -> None:
    n, inside, exact, reasons = _transitions(ledger, path, provider, 8000)
    assert n == 38 and inside >= 30 and exact == inside, reasons
    assert reasons[0] == "first request" and any(r.startswith("re-planned: tail over high water (") for r in reasons)


@pytest.mark.parametrize("path", ONE_SESSION, ids=_id)
def test_same_transcript_policy_now_and_earlier_requests_give_the_same_assemblies(tmp_path: Path, path: Path) -> None:
    runs = []
    for k in range(2):
        led = Ledger.open(home=tmp_path / f"h{k}")
        runs.append([(json.dumps(t.result.payload, sort_keys=True), t.result.record.epoch["reason"]) for t in replay(led, path, provider="anthropic", budget=8000, name="same", limit=24)])  # type: ignore[index]
    assert runs[0] == runs[1] and len(runs[0]) == 24


# ---------------------------------------------------------------- synthetic conversations

def _msg(key: str, role: Role, *parts: Any, at: int) -> ImportedMessage:
    return ImportedMessage(key=key, role=role, parts=list(parts), created_at=T0 + timedelta(seconds=at))


def _session(n: int, marker: str = "x", pad: int = 0) -> list[ImportedMessage]:
    """A user task, then ``n`` Bash exchanges whose outputs are unique words (and
    ``pad`` more lines each)."""
    out = [_msg("u0", Role.USER, TextPart(text=f"Run the checks one by one ({marker})."), at=0)]
    for i in range(n):
        out.append(_msg(f"a{i}", Role.ASSISTANT, TextPart(text=f"Step {i}."), ToolCallPart(call_id=f"call_{marker}_{i}", tool_name="Bash", arguments_json=json.dumps({"command": f"echo {marker}{i}"})), at=2 * i + 1))
        out.append(_msg(f"t{i}", Role.TOOL, ToolResultPart(call_id=f"call_{marker}_{i}", text=f"output-{marker}-{i}-word" + "".join(f"\nline {j} of step {i}" for j in range(pad))), at=2 * i + 2))
    return out


def _request(ledger: Ledger, conv_id: str, history: list[ImportedMessage], *, provider: str = "openai-chat", budget: int = 6000, policy: Any = None, now: datetime | None = None) -> Any:
    scope = ledger.scope()
    pos = record_chain(ledger, scope, conv_id, history, chain_keys(root_key(conv_id), history), tools=TOOLS)
    now = now or max(m.created_at for m in history if m.created_at is not None)
    return ledger.assemble(conv_id, branch_id=pos.branch_id, provider=provider, budget_tokens=budget, scope=scope, now=now, policy=policy, replay="exact")


def _conversation(ledger: Ledger, first: list[ImportedMessage], name: str) -> str:
    return conversation_for(ledger, ledger.scope(), name, ParsedRequest(system_text="", messages=first[:1], tools=TOOLS), source="proxy:test").id


def test_inside_an_epoch_each_request_is_the_previous_one_plus_the_new_records(ledger: Ledger) -> None:
    msgs = _session(6)
    conv = _conversation(ledger, msgs, "plain")
    results = [_request(ledger, conv, msgs[: 2 * k + 1]) for k in range(1, 7)]
    assert [r.record.epoch["reason"] for r in results] == ["first request"] + ["extends epoch"] * 5
    for a, b in itertools.pairwise(results):
        items_a = conversation_items(a.payload)
        assert conversation_items(b.payload)[: len(items_a)] == items_a and b.record.epoch["reused_messages"] == len(items_a)
        assert b.record.epoch["id"] == results[0].record.id and b.record.epoch["number"] == 1
    # the new exchange is raw, as the tail renders it
    assert "output-x-5-word" in json.dumps(results[-1].payload["messages"][-1])


def test_a_changed_policy_version_re_plans_with_that_reason_in_the_record_and_explain(ledger: Ledger, tmp_path: Path) -> None:
    msgs = _session(3)
    conv = _conversation(ledger, msgs, "policy")
    first = _request(ledger, conv, msgs[:3])
    f = tmp_path / "p.toml"
    f.write_text("[epoch]\nhigh_water = 0.95\n", encoding="utf-8")
    other = load_policy(f)
    second = _request(ledger, conv, msgs[:5], policy=other)
    reason = f"policy version changed ({first.record.policy_version} → {other.version})"
    assert first.record.policy_version != other.version
    assert second.record.epoch["reason"] == reason and second.record.epoch["first"] and second.record.epoch["number"] == 2
    assert second.record.epoch["target_tokens"] == other.epoch.mark(0.6, 6000, second.record.epoch["fixed_tokens"])
    expl = explain_assembly(ledger, ledger.scope(), second.record.id)
    assert expl["epoch"] == {"number": 2, "first": True, "reason": reason, "extends": None, "reused_messages": 0}
    assert f"epoch 2, its first request — why the prefix changed here (or did not): {reason}" in render_explanation(expl)
    third = _request(ledger, conv, msgs[:7], policy=other)
    assert third.record.epoch["reason"] == "extends epoch" and third.record.epoch["extends"] == second.record.id
    assert "extends " + second.record.id in render_explanation(explain_assembly(ledger, ledger.scope(), third.record.id))


def test_a_clock_that_moved_back_re_plans_with_that_reason_in_the_record_and_explain(ledger: Ledger) -> None:
    msgs = _session(3)
    conv = _conversation(ledger, msgs, "clock")
    first = _request(ledger, conv, msgs[:3], now=T0 + timedelta(hours=2))
    second = _request(ledger, conv, msgs[:5], now=T0 + timedelta(hours=1))
    reason = "clock moved back (2026-05-01T12:00:00Z → 2026-05-01T11:00:00Z)"
    assert second.record.epoch["reason"] == reason and second.record.epoch["first"] and second.record.epoch["number"] == 2
    assert second.record.epoch["extends"] is None and second.record.epoch["target_tokens"] < 6000
    assert f"epoch 2, its first request — why the prefix changed here (or did not): {reason}" in render_explanation(explain_assembly(ledger, ledger.scope(), second.record.id))
    # the same clock again, or a later one, extends the new epoch
    third = _request(ledger, conv, msgs[:7], now=T0 + timedelta(hours=1))
    assert third.record.epoch["reason"] == "extends epoch" and third.record.epoch["extends"] == second.record.id
    assert first.record.epoch["number"] == 1


def test_a_tail_over_high_water_re_plans_to_the_low_water_mark(ledger: Ledger) -> None:
    msgs = _session(40, pad=12)
    conv = _conversation(ledger, msgs, "grow")
    results = [_request(ledger, conv, msgs[: 2 * k + 1], budget=3000) for k in range(1, 41)]
    replans = [r for r in results[1:] if r.record.epoch["first"]]
    assert replans, [r.record.epoch["reason"] for r in results]
    for r in replans:
        ep = r.record.epoch
        assert ep["reason"].startswith("re-planned: tail over high water (") and ep["target_tokens"] == EpochSection().mark(0.6, 3000, ep["fixed_tokens"])
        assert r.record.assembled_tokens <= ep["target_tokens"]
    assert all(r.record.assembled_tokens <= 3000 for r in results)


def test_a_budget_that_grows_past_what_left_records_out_re_plans_and_small_changes_do_not(ledger: Ledger) -> None:
    msgs = _session(20, pad=12)
    conv = _conversation(ledger, msgs, "budget")
    small = _request(ledger, conv, msgs, budget=2000)
    assert small.record.omitted and small.record.epoch["reason"] == "first request"
    same = _request(ledger, conv, msgs, budget=2100)  # within the high-water margin: the epoch goes on
    assert same.record.epoch["reason"] == "extends epoch" and same.payload == small.payload
    big = _request(ledger, conv, msgs, budget=20000)
    assert big.record.epoch["reason"] == "re-planned: budget grew (2,100 → 20,000 tokens)" and big.record.epoch["first"]
    assert big.record.assembled_tokens > small.record.assembled_tokens
    assert "output-x-0-word" in json.dumps(big.payload["messages"])
    after = _request(ledger, conv, msgs, budget=20000)
    assert after.record.epoch["reason"] == "extends epoch"  # nothing was left out for room: no re-plan again


def test_a_budget_that_dips_inside_an_epoch_and_comes_back_does_not_re_plan(ledger: Ledger) -> None:
    """The proxy's budget dips while a continued turn's thinking is in the request and
    comes back at the next user turn: the epoch gets back the room it was planned with."""
    msgs = _session(20, pad=12)
    conv = _conversation(ledger, msgs, "dip")
    n = 3
    planned = _request(ledger, conv, msgs[:n], budget=2000)
    while not (planned.record.epoch["first"] and planned.record.epoch["reason"].startswith("re-planned: tail over high water")):
        n += 2
        planned = _request(ledger, conv, msgs[:n], budget=2000)
    assert planned.record.omitted and planned.record.epoch["planned_budget_tokens"] == 2000 and n + 4 <= len(msgs)
    dipped = _request(ledger, conv, msgs[: n + 2], budget=1600)
    assert dipped.record.epoch["reason"] == "extends epoch" and dipped.record.epoch["planned_budget_tokens"] == 2000
    back = _request(ledger, conv, msgs[: n + 4], budget=2000)
    assert back.record.epoch["reason"] == "extends epoch", back.record.epoch["reason"]
    assert json.dumps(back.payload["messages"]).startswith(json.dumps(dipped.payload["messages"])[:-1])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(k=st.integers(min_value=1, max_value=5), fork=st.booleans())
def test_a_retry_or_fork_at_an_earlier_head_never_contains_later_records(tmp_path_factory: pytest.TempPathFactory, k: int, fork: bool) -> None:
    ledger = Ledger.open(home=tmp_path_factory.mktemp("h"))
    msgs = _session(6)
    conv = _conversation(ledger, msgs, "fork")
    made = [_request(ledger, conv, msgs[: 2 * j + 1]).record.id for j in range(1, 7)]
    history = msgs[: 2 * k + 1]
    if fork:  # the newest result changed: a fork at that point
        history = [*history[:-1], _msg(f"t{k - 1}b", Role.TOOL, ToolResultPart(call_id=f"call_x_{k - 1}", text=f"forked-{k - 1}-word"), at=2 * k)]
    r = _request(ledger, conv, history)
    text = json.dumps(r.payload, ensure_ascii=False)
    later = [f"output-x-{i}-word" for i in range(k, 6)] + [f"call_x_{i}" for i in range(k, 6)]
    if fork:
        later.append(f"output-x-{k - 1}-word")
    assert not [w for w in later if w in text]
    # an identical retry extends the request made at that head; a fork the one before it,
    # if any (a fork of the first request's history has none on its lineage)
    base = k - 2 if fork else k - 1
    if base < 0:
        assert r.record.epoch["reason"] == "lineage diverged" and r.record.epoch["first"]
    else:
        assert r.record.epoch["reason"] == "extends epoch" and r.record.epoch["extends"] == made[base]


@pytest.mark.parametrize("provider", ["openai-chat", "anthropic"])
def test_a_record_that_became_stale_inside_an_epoch_is_announced_at_the_junction(ledger: Ledger, provider: str) -> None:
    read = ToolCallPart(call_id="toolu_read1", tool_name="Read", arguments_json=json.dumps({"file_path": "/repo/calc.py"}))
    edit = ToolCallPart(call_id="toolu_edit1", tool_name="Edit", arguments_json=json.dumps({"file_path": "/repo/calc.py", "old_string": "return a - b", "new_string": "return a + b"}))
    msgs = [
        _msg("u0", Role.USER, TextPart(text="Fix add in /repo/calc.py."), at=0),
        _msg("a0", Role.ASSISTANT, TextPart(text="Reading."), read, at=1),
        _msg("t0", Role.TOOL, ToolResultPart(call_id="toolu_read1", text="     1\tdef add(a, b):\n     2\t    return a - b\n"), at=2),
        _msg("a1", Role.ASSISTANT, TextPart(text="Fixing."), edit, at=3),
        _msg("t1", Role.TOOL, ToolResultPart(call_id="toolu_edit1", text="The file /repo/calc.py has been updated."), at=4),
        _msg("a2", Role.ASSISTANT, TextPart(text="Running the tests."), ToolCallPart(call_id="toolu_bash1", tool_name="Bash", arguments_json=json.dumps({"command": "pytest -q"})), at=5),
        _msg("t2", Role.TOOL, ToolResultPart(call_id="toolu_bash1", text="1 passed"), at=6),
    ]
    conv = _conversation(ledger, msgs, f"stale-{provider}")
    first = _request(ledger, conv, msgs[:3], provider=provider)
    second = _request(ledger, conv, msgs[:5], provider=provider)
    third = _request(ledger, conv, msgs[:7], provider=provider)
    before, after = first.payload["messages"], second.payload["messages"]
    assert second.record.epoch["reason"] == "extends epoch"
    text = "records shown earlier in this context that are no longer current:\n- toolu_read1: stale: what it shows changed since"
    if provider == "openai-chat":
        assert after[: len(before)] == before  # the old blocks unchanged
        note = after[len(before)]
        assert note["role"] == "user" and note["content"].endswith(text)
        assert after[len(before) + 1]["role"] == "assistant"  # the new records follow the note
    else:  # consecutive user turns are one message: the note is one more block of the junction's
        assert after[: len(before) - 1] == before[:-1]
        assert after[len(before) - 1]["content"][:-1] == before[-1]["content"]
        assert after[len(before) - 1]["content"][-1]["text"].endswith(text) and after[len(before)]["role"] == "assistant"
    assert "mem_" not in json.dumps(after) and "art_" not in json.dumps(after)
    # announced once: the next extension carries no second note
    assert third.payload["messages"][: len(after)] == after and third.record.epoch["announced"] == second.record.epoch["announced"] != []
    assert "no longer current" not in json.dumps(third.payload["messages"][len(after):])


@pytest.mark.parametrize("provider", ["openai-chat", "anthropic", "openai-responses"])
def test_an_extension_settles_the_handles_its_new_records_cite(ledger: Ledger, provider: str) -> None:
    """A new record citing a successor the request does not label says so as a re-plan
    does ("superseded by a newer result"); the previous request stays its prefix."""
    def run(i: int) -> ToolCallPart:
        return ToolCallPart(call_id=f"toolu_t{i}", tool_name="Bash", arguments_json=json.dumps({"command": "pytest -q"}))
    msgs = [
        _msg("u0", Role.USER, TextPart(text="Make the tests pass."), at=0),
        _msg("a0", Role.ASSISTANT, TextPart(text="Listing."), ToolCallPart(call_id="toolu_ls", tool_name="Bash", arguments_json=json.dumps({"command": "ls"})), at=1),
        _msg("t0", Role.TOOL, ToolResultPart(call_id="toolu_ls", text="calc.py"), at=2),
        _msg("a1", Role.ASSISTANT, TextPart(text="Testing."), run(1), at=3),
        _msg("t1", Role.TOOL, ToolResultPart(call_id="toolu_t1", text="FAILED test_calc.py::test_add - assert -1 == 3\n1 failed in 0.02s", is_error=True), at=4),
        _msg("a2", Role.ASSISTANT, TextPart(text="Testing again."), run(2), at=5),
        _msg("t2", Role.TOOL, ToolResultPart(call_id="toolu_t2", text="1 passed in 0.01s"), at=6),
    ]
    conv = _conversation(ledger, msgs, f"cited-{provider}")
    first = _request(ledger, conv, msgs[:3], provider=provider)
    second = _request(ledger, conv, msgs, provider=provider)
    assert second.record.epoch["reason"] == "extends epoch" and extends(first.payload, second.payload)
    sent = json.dumps(second.payload, ensure_ascii=False)
    line = "[superseded by a newer result] Bash failed: tests: pytest -q → failed: 1 failed in 0.02s — FAILED test_calc.py::test_add - assert -1 == 3"
    assert line in sent and "superseded by m" not in sent
    replanned = _request(ledger, _conversation(ledger, msgs, f"cited-plan-{provider}"), msgs, provider=provider)
    assert line in json.dumps(replanned.payload, ensure_ascii=False)


def test_persist_false_neither_reads_nor_writes_epoch_state(ledger: Ledger) -> None:
    msgs = _session(2)
    conv = _conversation(ledger, msgs, "nopersist")
    scope = ledger.scope()
    record_chain(ledger, scope, conv, msgs[:3], chain_keys(root_key(conv), msgs[:3]), tools=TOOLS)
    r = ledger.assemble(conv, provider="openai-chat", budget_tokens=6000, scope=scope, now=T0, persist=False)
    assert r.record.epoch is None
    assert _request(ledger, conv, msgs[:5]).record.epoch["reason"] == "first request"


def test_the_epoch_marks_are_validated() -> None:
    with pytest.raises(ValueError, match=r"low_water must be above 0 and below epoch\.high_water"):
        EpochSection(high_water=0.5, low_water=0.6)
    assert EpochSection().mark(0.6, 10_000, 4_000) == 4_000 + 3_600
    assert EpochSection().mark(0.6, 3_000, 4_000) == 3_000


def test_main_thread_helper_reads_the_active_path(real_data: Path) -> None:
    msgs, tools = main_thread(real_data / "claude-reliability-snapshots/python-to-rust-port.jsonl")
    assert len(msgs) == 79 and {t["name"] for t in tools} >= {"Bash"}


def test_a_constraint_stated_in_a_new_message_extends_and_a_new_project_rule_re_plans(ledger: Ledger) -> None:
    from contextledger.policy.rules import Rule

    msgs = _session(4)
    conv = _conversation(ledger, msgs, "constraints")
    first = _request(ledger, conv, msgs[:3])
    said = [*msgs[:5], _msg("u1", Role.USER, TextPart(text="Do not add new dependencies."), at=4)]
    second = _request(ledger, conv, said)
    assert second.record.epoch["reason"] == "extends epoch" and second.payload["messages"][0] == first.payload["messages"][0]
    assert "Do not add new dependencies." in json.dumps(second.payload["messages"][len(first.payload["messages"]):])
    [pinned] = second.record.epoch["constraints_in_tail"]
    assert pinned in {r.id for r in ledger.rules(conv)} and second.record.epoch["system"] == first.record.epoch["system"]
    ledger.add_rules(conv, [Rule(id="r-proj", text="Use pnpm, never npm.", source="AGENTS.md:1", source_kind="project_file", authority="project", strength="hard")])
    third = _request(ledger, conv, [*said, *msgs[5:7]])
    assert third.record.epoch["reason"] == "system blocks changed (system prompt, rules or pinned constraints)" and third.record.epoch["first"]
    system = "\n".join(third.record.epoch["system"])
    # the re-plan sends the constraint's own message raw, so it is sent once, there
    assert "Use pnpm, never npm." in system and "Do not add new dependencies." not in system
    assert third.record.epoch["constraints_in_tail"] == [pinned] and "Do not add new dependencies." in json.dumps(third.payload["messages"])


def test_a_constraint_is_restated_in_the_system_blocks_only_when_its_message_is_not_sent_raw(ledger: Ledger) -> None:
    s = _session(12, pad=3)
    said = [*s[:3], _msg("u1", Role.USER, TextPart(text="Never push to main."), at=3), *s[3:]]
    conv = _conversation(ledger, said, "restated")
    raw = _request(ledger, conv, said)
    # nothing omitted: the request is the replay; the constraint is read once, in the user's message
    assert raw.record.omitted == {} and raw.record.assembled_tokens == raw.record.replay_tokens
    assert json.dumps(raw.payload).count("Never push to main.") == 1 and raw.payload["messages"][0]["role"] == "user"
    [rule] = raw.record.epoch["constraints_in_tail"]
    later = T0 + timedelta(days=1)
    ledger.compact(conv, keep_recent_units=2, now=later)
    after = ledger.assemble(conv, provider="openai-chat", budget_tokens=6000, now=later)
    # compacted away: restated verbatim in the system blocks, no longer "in the tail"
    assert after.record.epoch["reason"] == "history compacted" and after.record.epoch["constraints_in_tail"] == []
    assert after.payload["messages"][0] == {"role": "system", "content": "Constraints stated by the user (verbatim, still in force):\n- Never push to main."}
    assert rule in {r.id for r in ledger.rules(conv)}
