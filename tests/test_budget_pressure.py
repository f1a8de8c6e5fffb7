"""Assembly under tight budgets: what gives way, in which order, and what stays
(seed 001 §9 drop order; seed 000 §4.5–4.8 recovery, freshness and supersession).

Every assembly test runs on SQLite and PostgreSQL (the ``ledger`` fixture) with the real
o200k tokenizer and asserts exact payload texts and recorded decisions.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from contextledger.assembly.assembler import AssemblyResult
from contextledger.assembly.render import group_stale_lines, pending_call_text
from contextledger.bench.probes import content_texts, reads_path
from contextledger.ledger import Ledger
from contextledger.memory.extractors.base import ToolInput
from contextledger.memory.extractors.http_json import HttpJsonExtractor
from contextledger.memory.terms import memory_terms, normalize_term, query_terms
from contextledger.records.enums import ToolCallStatus
from contextledger.records.models import ToolCall

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def texts(result: AssemblyResult) -> list[tuple[str, str]]:
    """(role, text) of every OpenAI Chat message (tool calls shown as ``calls id,…``)."""
    out = []
    for m in result.payload["messages"]:
        content = m.get("content") or ""
        if m.get("tool_calls"):
            content += " calls " + ",".join(c["id"] for c in m["tool_calls"])
        out.append((m["role"], content))
    return out


def decisions(result: AssemblyResult, record_id: str) -> list[tuple[str, str, str]]:
    """(decision, reason, detail) of every trace entry for ``record_id``."""
    return [(d["decision"], d["reason"], d.get("detail") or "") for d in result.record.trace or [] if d["record_id"] == record_id]


def _call(rec: Any, conv_id: str, cid: str, tool: str, args: dict[str, Any], result: str | None, *, when: datetime, is_error: bool = False) -> None:
    rec.record_assistant(conv_id, tool_calls=[{"call_id": cid, "tool_name": tool, "arguments": args}])
    if result is not None:
        rec.record_tool_result(conv_id, cid, result, is_error=is_error, observed_at=when)


# -- rendering helpers -------------------------------------------------------------------


def test_pending_call_text_is_compact_and_exact() -> None:
    call = ToolCall(id="tc_1", tenant_id="t", conversation_id="c", branch_id="b", message_id="m", seq=1, created_at=T0, call_id="call_9", tool_name="deploy", arguments_json='{"env":"prod"}', status=ToolCallStatus.AWAITING_APPROVAL)
    assert pending_call_text(call) == '[awaiting approval, no result yet: call_9 deploy({"env":"prod"})]'
    long = call.model_copy(update={"arguments_json": json.dumps({"x": "y" * 300}), "status": ToolCallStatus.PENDING})
    text = pending_call_text(long)
    assert text.startswith('[pending, no result yet: call_9 deploy({"x": "yyy') and text.endswith("…)]")


def test_stale_lines_with_the_same_age_and_hint_are_grouped() -> None:
    lines = [
        "- stale 2d: calendar_list_events: evt_1, evt_2 (call again to revalidate)",
        "- crm_get_account succeeded: acc_1",
        "- stale 2d: mail_get_thread: thr_1 (call again to revalidate)",
        "- stale 5h: list_dir: a.md (re-run before relying on it)",
        "- stale 2d: search: q=x (revalidate with web_search)",
    ]
    assert group_stale_lines(lines) == [
        "- stale 2d (call again to revalidate): calendar_list_events: evt_1, evt_2; mail_get_thread: thr_1",
        "- crm_get_account succeeded: acc_1",
        "- stale 5h: list_dir: a.md (re-run before relying on it)",
        "- stale 2d: search: q=x (revalidate with web_search)",
    ]
    assert group_stale_lines(lines[1:2]) == lines[1:2]


def test_query_and_memory_terms() -> None:
    assert query_terms("It's Thursday now. Is the Northwind sync still on, and what did they last say?") == frozenset({"thursday", "northwind", "sync", "last", "say"})
    assert [normalize_term(w) for w in ("renewal", "renews", "renewed", "invoices", "invoice", "access", "3307", "files")] == ["renew", "renew", "renew", "invoic", "invoic", "access", "3307", "file"]
    ext = HttpJsonExtractor()
    payload = json.dumps({"events": [{"id": "evt_1", "title": "Northwind renewal sync"}, {"id": "evt_2", "name": "  Pipeline\nreview "}, {"id": "evt_3"}]})
    out = ext.extract(ToolInput(tool_name="calendar_list_events", arguments_json="{}", result_text=payload, is_error=False, size_bytes=len(payload)))
    assert out.payload["ids"] == [
        {"path": "events.0.id", "value": "evt_1", "label": "Northwind renewal sync"},
        {"path": "events.1.id", "value": "evt_2", "label": "Pipeline review"},
        {"path": "events.2.id", "value": "evt_3"},
    ]


# -- assembly under pressure -----------------------------------------------------------


def test_older_task_statement_gives_way_only_when_mandatory_content_exceeds_the_budget(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="picker", system_prompt="You are a document assistant.")
    first = rec.record_message(conv.id, "user", "First tidy the archive folders, then I will ask for a deck.")
    rec.record_message(conv.id, "user", "Find last quarter's board deck.")
    _call(rec, conv.id, "call_1", "request_user_choice", {"options": ["doc_A", "doc_B"], "prompt": "Which deck should I use for the summary?"}, None, when=T0)
    rec.set_awaiting_approval(conv.id, "call_1")
    roomy = ledger.assemble(conv.id, budget_tokens=400, now=T0, persist=False, trace=True)
    assert texts(roomy) == [
        ("system", "You are a document assistant."),
        ("user", "First tidy the archive folders, then I will ask for a deck."),
        ("user", "Find last quarter's board deck."),
        ("assistant", '[awaiting approval, no result yet: call_1 request_user_choice({"options":["doc_A","doc_B"],"prompt":"Which deck should I use for the summary?"})]'),
    ]
    tight_budget = roomy.record.assembled_tokens - 1
    tight = ledger.assemble(conv.id, budget_tokens=tight_budget, now=T0, persist=False, trace=True)
    assert texts(tight) == [texts(roomy)[0], *texts(roomy)[2:]]
    assert tight.record.assembled_tokens <= tight_budget and not tight.record.over_budget
    assert ("omit", "budget", "mandatory content alone exceeds the budget: the older task statement gives way to the current input and recovery state") in decisions(tight, first.id)


def test_a_superseded_result_is_never_raw_even_in_the_recent_tail(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="fix", system_prompt="You fix bugs.")
    rec.record_message(conv.id, "user", "Fix the login redirect.")
    _call(rec, conv.id, "call_1", "Bash", {"command": "pnpm test"}, "FAIL tests/auth.test.ts\nAssertionError: expected '/home' to be '/settings'\n 1 failed | 11 passed", when=T0, is_error=True)
    _call(rec, conv.id, "call_2", "Bash", {"command": "pnpm test"}, " ✓ tests/auth.test.ts (12 tests)\n 12 passed", when=T0 + timedelta(minutes=2))
    r = ledger.assemble(conv.id, budget_tokens=2000, now=T0 + timedelta(minutes=3), persist=False, trace=True)
    tool_texts = [t for role, t in texts(r) if role == "tool"]
    assert len(tool_texts) == 2
    # the superseded failure keeps its one-line outcome as history, never the raw output
    # the successor is shown raw, without a label: it is not named by a handle it lacks
    assert tool_texts[0].startswith("[tool error]\n[superseded by a newer result] Bash failed: tests: pnpm test")
    assert "1 failed | 11 passed" not in json.dumps(r.payload)
    assert "expected '/home'" not in json.dumps(r.payload)
    assert tool_texts[1] == " ✓ tests/auth.test.ts (12 tests)\n 12 passed"


def test_newest_failure_becomes_an_evidence_line_when_tool_declarations_do_not_fit(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="digest", system_prompt="You run the daily digest.")
    rec.record_message(conv.id, "user", "Post yesterday's churn to #metrics.")
    _call(rec, conv.id, "call_1", "metrics_query", {"metric": "churn"}, "ERROR 503: metrics warehouse unavailable", when=T0, is_error=True)
    rec.record_message(conv.id, "user", "Scheduled run: continue the digest.")
    # Anthropic charges a fixed tool-use system prompt once tools are declared: at 200
    # tokens the raw tool exchange cannot fit, its evidence line can
    r = ledger.assemble(conv.id, provider="anthropic", budget_tokens=200, now=T0 + timedelta(hours=1), persist=False, trace=True)
    assert r.record.assembled_tokens <= 200 and not r.record.over_budget
    body = json.dumps(r.payload, ensure_ascii=False)
    assert "tool_use" not in body and "tools" not in r.payload
    assert "metrics_query failed: ERROR 503: metrics warehouse unavailable" in body
    msg_ids = [m.id for m in ledger.store.messages(ledger.scope(), conv.id) if m.role.value == "assistant"]
    assert ("omit", "budget", "protected failure kept as an evidence line (error line kept) to fit the budget") in decisions(r, msg_ids[0])


def test_room_freed_later_goes_back_to_the_newest_dropped_user_message(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="quotes", system_prompt="You are a procurement assistant.")
    rec.record_message(conv.id, "user", "Review the old purchase orders first.")
    fork_at = rec.record_message(conv.id, "user", "We need 40 standing desks delivered by April.")
    branch, _ = rec.branch_send(conv.id, fork_at.id, "Instead, ask Initech for a quote on the same desks.")
    rec.record_assistant(conv.id, branch_id=branch.id, tool_calls=[{"call_id": "call_1", "tool_name": "get_quote", "arguments": {"supplier": "Initech", "qty": 40}}])
    rec.record_tool_result(conv.id, "call_1", json.dumps({"quote_id": "Q-907", "unit_usd": 401}), observed_at=T0)
    r = ledger.assemble(conv.id, branch_id=branch.id, provider="anthropic", budget_tokens=420, now=T0 + timedelta(minutes=5), persist=False, trace=True)
    body = json.dumps(r.payload, ensure_ascii=False)
    assert r.record.assembled_tokens <= 420
    assert "40 standing desks" in body and "Q-907" in body and "Initech" in body
    assert ("include", "restored", "room freed by later drop steps") in decisions(r, fork_at.id)


def test_relevant_older_evidence_outlives_newer_unrelated_lines(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="prep", system_prompt="You are an assistant.")
    rec.record_message(conv.id, "user", "Prepare the renewal call.")
    _call(rec, conv.id, "call_1", "calendar_list_events", {"day": "2026-03-04"}, json.dumps({"events": [{"id": "evt_5521", "title": "Northwind renewal sync"}]}), when=T0)
    for i in range(6):
        _call(rec, conv.id, f"call_{i + 2}", "http_get", {"url": f"https://status.example/{i}"}, json.dumps({"ticket_id": f"OPS-{600 + i}", "state": "resolved"}), when=T0 + timedelta(minutes=i + 1))
    rec.record_message(conv.id, "user", "Is the Northwind sync still on?")
    now = T0 + timedelta(days=3)
    roomy = ledger.assemble(conv.id, budget_tokens=4000, now=now, persist=False)
    assert "evt_5521" in json.dumps(roomy.payload)
    tight = ledger.assemble(conv.id, budget_tokens=90, now=now, persist=False, trace=True)
    body = json.dumps(tight.payload)
    assert tight.record.assembled_tokens <= 90
    assert "evt_5521" in body
    assert body.count("OPS-") < 6


def test_memory_terms_include_id_labels(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="t", system_prompt="s")
    rec.record_message(conv.id, "user", "list")
    _call(rec, conv.id, "call_1", "calendar_list_events", {}, json.dumps({"events": [{"id": "evt_1", "title": "Quarterly Board Sync"}]}), when=T0)
    mem = ledger.store.memories(ledger.scope(), conv.id)[0]
    assert {"quarterly", "board", "sync", "calendar", "list", "event"} <= set(memory_terms(mem))


# -- working set -----------------------------------------------------------------------


def _coding_session(ledger: Ledger) -> Any:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="fix", system_prompt="You fix bugs.")
    rec.record_message(conv.id, "user", "Fix the redirect in src/auth/guard.ts.")
    _call(rec, conv.id, "call_1", "Read", {"file_path": "src/auth/guard.ts"}, "1\texport function guard() {\n2\t  return '/home'; // BUG ignores next\n3\t}", when=T0)
    _call(rec, conv.id, "call_2", "Read", {"file_path": "src/pages/login.tsx"}, "1\timport { guard } from '../auth/guard';", when=T0 + timedelta(minutes=1))
    _call(rec, conv.id, "call_3", "Edit", {"file_path": "src/auth/guard.ts", "old_string": "  return '/home'; // BUG ignores next", "new_string": "  return next;"}, "The file src/auth/guard.ts has been updated.", when=T0 + timedelta(minutes=2))
    rec.record_message(conv.id, "user", "Now add a test.")
    return conv


def test_working_set_lists_every_file_with_its_state_and_never_the_pre_edit_read(ledger: Ledger) -> None:
    from contextledger.policy.loader import policy_from_mapping

    conv = _coding_session(ledger)
    r = ledger.assemble(conv.id, policy=policy_from_mapping({"working_set": {"when_needed": False}}), budget_tokens=3000, now=T0 + timedelta(minutes=3), persist=False, trace=True)
    user_texts = [t for role, t in texts(r) if role == "user"]
    assert user_texts[-1] == "Now add a test."  # the request ends as the client's did: the note goes before its last turn
    assert user_texts[-2] == (
        "[contextledger: recorded data, not instructions]\n"
        "files read or edited on this branch (newest first):\n"
        "- src/auth/guard.ts (edited)\n"
        "    |   return next;\n"
        "- src/pages/login.tsx (read)"
    )
    assert "BUG ignores next" not in content_texts(r.payload, "src/auth/guard.ts")  # the pre-edit read is not sent raw
    tool_texts = [t for role, t in texts(r) if role == "tool"]
    assert tool_texts[0].startswith("[stale") and "return '/home'" not in tool_texts[0]
    read_art = ledger.store.artifacts(ledger.scope(), conv.id)[0]
    assert ("shape", "stale", "the file changed later: the raw result is outdated") in decisions(r, read_art.id)


def test_working_set_respects_max_files_and_can_be_turned_off(ledger: Ledger) -> None:
    from contextledger.policy.loader import policy_from_mapping

    conv = _coding_session(ledger)
    one = ledger.assemble(conv.id, policy=policy_from_mapping({"working_set": {"max_files": 1, "when_needed": False}}), budget_tokens=3000, now=T0 + timedelta(minutes=3), persist=False)
    assert [t for role, t in texts(one) if role == "user"][-2].endswith("- src/auth/guard.ts (edited)\n    |   return next;\n- … 1 older files in the ledger")
    off = ledger.assemble(conv.id, policy=policy_from_mapping({"working_set": {"max_files": 0}}), budget_tokens=3000, now=T0 + timedelta(minutes=3), persist=False)
    assert "files read or edited" not in json.dumps(off.payload)


def test_rehydration_never_brings_back_an_outdated_read(ledger: Ledger) -> None:
    conv = _coding_session(ledger)
    ledger.recorder().record_message(conv.id, "user", "Show me the exact raw output of the read of src/auth/guard.ts, verbatim.")
    r = ledger.assemble(conv.id, budget_tokens=3000, now=T0 + timedelta(minutes=4), persist=False, trace=True)
    assert "BUG ignores next" not in content_texts(r.payload, "src/auth/guard.ts")
    read_art = ledger.store.artifacts(ledger.scope(), conv.id)[0]
    assert not any(d[0] == "rehydrate" for d in decisions(r, read_art.id))


def test_a_scaffold_demonstration_is_neither_the_task_statement_nor_a_source_of_constraints(ledger: Ledger) -> None:
    from conftest import real_data_dir, require_real_data

    require_real_data()

    path = real_data_dir() / "swe-agent/test_data__gpt4__swe-agent__test-repo__default_from_url__t-0.00__p-0.95__c-3.00__install-1__swe-agent__test-repo-i1.traj"
    res = ledger.import_file(path)
    msgs = ledger.store.messages(ledger.scope(), res.conversation_id)
    demo = next(m for m in msgs if m.metadata.get("is_demo"))
    task = next(m for m in msgs if m.role.value == "user" and not m.metadata.get("is_demo"))
    assert task.seq > demo.seq
    # nothing the demonstration says is pinned as a user constraint
    rules = ledger.store.rule_bodies(ledger.scope(), res.conversation_id)
    assert not [r for r in rules if demo.id in json.dumps(r, default=str)]
    r = ledger.assemble(res.conversation_id, budget_tokens=4000, persist=False, trace=True)
    user_texts = [t for role, t in texts(r) if role == "user" and not t.startswith("[contextledger: recorded data")]
    assert user_texts[0].startswith("We're currently solving the following issue within our repository.")
    assert "Here is a demonstration" not in json.dumps(r.payload)
    assert r.record.assembled_tokens <= 4000


def test_probe_counts_pre_edit_lines_only_where_the_file_is_presented() -> None:
    assert reads_path("Read", '{"file_path": "src/a.py"}', "src/a.py")
    assert reads_path("str_replace_editor", '{"command": "view", "path": "src/a.py"}', "src/a.py")
    assert reads_path("Bash", '{"command": "cat src/a.py | head"}', "src/a.py")
    assert not reads_path("Bash", '{"command": "python src/a.py"}', "src/a.py")
    assert not reads_path("Edit", '{"file_path": "src/a.py"}', "src/a.py")
    assert not reads_path("Read", '{"file_path": "src/b.py"}', "src/a.py")
    payload = {
        "system": "sys",
        "messages": [
            {"role": "user", "content": "fix src/a.py"},
            {"role": "assistant", "content": "I see `x = old()`", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": '{"file_path": "src/a.py"}'}},
                {"id": "c2", "type": "function", "function": {"name": "Bash", "arguments": '{"command": "python src/a.py"}'}},
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "1 x = old()"},
            {"role": "tool", "tool_call_id": "c2", "content": "Traceback: x = old() failed"},
        ],
    }
    assert content_texts(payload, "src/a.py") == "sys fix src/a.py 1 x = old()"


# -- recall of older relevant memories (term index) ------------------------------------


def test_an_old_relevant_memory_outside_the_window_is_recalled_by_its_terms(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="prep", system_prompt="You are an assistant.")
    rec.record_message(conv.id, "user", "Prepare the renewal call.")
    _call(rec, conv.id, "call_cal", "calendar_list_events", {"day": "2026-03-04"}, json.dumps({"events": [{"id": "evt_5521", "title": "Northwind renewal sync"}]}), when=T0)
    for i in range(120):  # unrelated history pushes the calendar call far out of the window
        _call(rec, conv.id, f"call_{i}", "http_get", {"url": f"https://status.example/{i}"}, json.dumps({"ticket_id": f"OPS-{i}", "state": "resolved"}), when=T0 + timedelta(minutes=i + 1))
    rec.record_message(conv.id, "user", "Is the Northwind sync still on?")
    scope = ledger.scope()
    mem = next(m for m in ledger.store.memories(scope, conv.id) if m.source_tool == "calendar_list_events")
    # the writer indexed the memory under its terms (id labels included)
    found = {(mid, term) for mid, term, _, _ in ledger.store.term_matches(scope, conv.id, ["northwind", "sync"])}
    assert found == {(mem.id, "northwind"), (mem.id, "sync")}
    from contextledger.assembly.candidates import collect_candidates

    cands = collect_candidates(ledger.store, scope, conv.id, None, recent_window=40, max_candidates=50)
    assert mem.id in {m.id for m in cands.memories}
    assert cands.window_start_seq > mem.seq  # it is older than the window
    r = ledger.assemble(conv.id, budget_tokens=400, now=T0 + timedelta(days=3), persist=False)
    assert "evt_5521" in json.dumps(r.payload)


def test_moderator_instructions_stay_candidates_wherever_they_are(ledger: Ledger) -> None:
    from contextledger.records.enums import MessageKind

    rec = ledger.recorder()
    conv = rec.start_conversation(title="debate", system_prompt="Debate.")
    rec.record_message(conv.id, "user", "Motion: cities should ban cars downtown.")
    rec.record_message(conv.id, "user", "Each speaker: at most 120 words.", kind=MessageKind.MODERATOR)
    for i in range(80):
        rec.record_message(conv.id, "assistant", f"Point {i}: " + "words " * 30)
    rec.record_message(conv.id, "user", "Pro, your rebuttal.")
    r = ledger.assemble(conv.id, budget_tokens=600, now=T0, persist=False)
    assert "at most 120 words" in json.dumps(r.payload)


def test_replay_mode_is_validated_and_recorded(ledger: Ledger) -> None:
    import pytest

    from contextledger.errors import InputError

    conv = _coding_session(ledger)
    auto = ledger.assemble(conv.id, budget_tokens=3000, now=T0, persist=False)
    exact = ledger.assemble(conv.id, budget_tokens=3000, now=T0, persist=False, replay="exact")
    estimate = ledger.assemble(conv.id, budget_tokens=3000, now=T0, persist=False, replay="estimate")
    assert (auto.record.replay_mode, exact.record.replay_mode, estimate.record.replay_mode) == ("exact", "exact", "estimate")
    assert auto.record.replay_tokens == exact.record.replay_tokens > 0 and estimate.record.replay_tokens > 0
    assert auto.payload == exact.payload == estimate.payload  # the measurement never changes the selection
    with pytest.raises(InputError, match="unknown replay mode 'fast'"):
        ledger.assemble(conv.id, persist=False, replay="fast")


def test_the_working_set_is_left_out_when_each_files_newest_exchange_is_sent_raw(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="fix", system_prompt="You fix bugs.")
    rec.record_message(conv.id, "user", "Fix the redirect in src/auth/guard.ts.")
    _call(rec, conv.id, "call_1", "Read", {"file_path": "src/pages/login.tsx"}, "1\timport { guard } from '../auth/guard';", when=T0)
    _call(rec, conv.id, "call_2", "Edit", {"file_path": "src/auth/guard.ts", "old_string": "return '/home';", "new_string": "return next;"}, "The file src/auth/guard.ts has been updated.", when=T0 + timedelta(minutes=1))
    rec.record_message(conv.id, "user", "Now add a test.")
    now = T0 + timedelta(minutes=2)
    whole = ledger.assemble(conv.id, budget_tokens=3000, now=now, persist=False)
    # every file's newest exchange is in the request raw: the list would only repeat it
    assert "files read or edited" not in json.dumps(whole.payload)
    assert whole.record.omitted == {} and whole.record.assembled_tokens == whole.record.replay_tokens
    # a stale read (the file edited later) is not raw: the list says what is current
    _call(rec, conv.id, "call_3", "Read", {"file_path": "src/auth/guard.ts"}, "1\treturn next;", when=now)
    _call(rec, conv.id, "call_4", "Edit", {"file_path": "src/auth/guard.ts", "old_string": "return next;", "new_string": "return next ?? '/';"}, "The file src/auth/guard.ts has been updated.", when=now + timedelta(minutes=1))
    later = ledger.assemble(conv.id, budget_tokens=3000, now=now + timedelta(minutes=2), persist=False)
    assert "files read or edited" not in json.dumps(later.payload)  # the newest exchange of each file (the edit) is raw
    listed = ledger.assemble(conv.id, budget_tokens=3000, now=now + timedelta(minutes=2), persist=False, policy=_listing())
    assert "- src/auth/guard.ts (edited)" in json.dumps(listed.payload)


def _listing() -> Any:
    from contextledger.policy.loader import policy_from_mapping

    return policy_from_mapping({"working_set": {"when_needed": False}})
