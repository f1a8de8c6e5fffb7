"""Compaction as a handoff that loses nothing (DESIGN.md "Compaction"; seed 001 §4.6,
§6 problem 5, §10).

A recorded coding session is compacted twice; every mandatory section and every hard
constraint must survive both compactions verbatim, the raw tail must stay outside the
covered range, and every covered artifact must still rehydrate to its exact bytes.  Real
Claude Code and SWE-agent transcripts are compacted too.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import real_data_dir, require_real_data
from contextledger.assembly.units import build_units
from contextledger.cli import common as cli_common
from contextledger.cli.compact_cmd import app as compact_app
from contextledger.compaction import (
    HANDOFF_SECTIONS,
    NONE_RECORDED,
    Compaction,
    HandoffError,
    build_handoff,
    compact,
    document_of,
    latest_compaction,
    render_handoff,
    validate_handoff,
)
from contextledger.compaction.sections.facts import MAX_FACTS
from contextledger.compaction.sections.files import MAX_FILES, MAX_WRITES_CITED
from contextledger.errors import InputError
from contextledger.ledger import Ledger
from contextledger.policy.rules import parse_rule_text
from contextledger.records.enums import (
    AuthorityLevel,
    MessageKind,
    Role,
    Visibility,
)
from contextledger.records.parts import TextPart

REAL = real_data_dir()
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

GOAL = (
    "Fix the login redirect bug in src/auth/session.py so that users land on /home. "
    "Never modify files under migrations/. Do not push to the main branch."
)
LATER = "Also, do not change the public signature of login()."
THIRD = "Never delete the audit_log table."
CONSTRAINTS_1 = [
    "Never modify files under migrations/.",
    "Do not push to the main branch.",
    "Also, do not change the public signature of login().",
]
PROJECT_RULE = "- NEVER commit secrets or .env files."

SESSION_PY = "".join(f"{i:>6}\t{line}\n" for i, line in enumerate(
    [
        "from flask import redirect",
        "",
        "def login(user):",
        "    if user.ok:",
        "        return redirect('/')",
        "    return redirect('/login')",
    ],
    start=1,
))
FAILING = (
    "============================= test session starts ==============================\n"
    "collected 2 items\n\n"
    "tests/test_auth.py F.                                                    [100%]\n\n"
    "=================================== FAILURES ===================================\n"
    "____________________________ test_login_redirect _____________________________\n"
    "tests/test_auth.py:12: in test_login_redirect\n"
    "    assert resp.location == '/home'\n"
    "E   AssertionError: assert '/' == '/home'\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_auth.py::test_login_redirect - AssertionError: assert '/' == '/home'\n"
    "========================= 1 failed, 1 passed in 0.12s ==========================\n"
)
PASSING = (
    "============================= test session starts ==============================\n"
    "collected 2 items\n\n"
    "tests/test_auth.py ..                                                    [100%]\n\n"
    "============================== 2 passed in 0.10s ===============================\n"
)
BIG_LOG = "".join(f"build step {i}: compiling module_{i}.py ok\n" for i in range(400))


@dataclass
class Session:
    """Ids of the records of the scripted session."""

    conv_id: str
    read_art: str
    read_mem: str
    edit_mem: str
    rm_mem: str
    big_art: str
    raw_big: bytes
    goal_msg: str


def _call(rec: Any, conv: str, text: str, call_id: str, tool: str, args: dict[str, Any], result: str | bytes, *, is_error: bool = False) -> tuple[Any, Any]:
    rec.record_assistant(conv, text=text, tool_calls=[{"call_id": call_id, "tool_name": tool, "arguments": args}])
    _, art, mem = rec.record_tool_result(conv, call_id, result, is_error=is_error)
    return art, mem


def record_session(ledger: Ledger) -> Session:
    """A coding session: read, failing test, edit, failed command, passing test, reply."""
    rec = ledger.recorder()
    conv = rec.start_conversation(title="login redirect", system_prompt="You are a careful coding agent.")
    goal = rec.record_message(conv.id, "user", GOAL)
    read_art, read_mem = _call(rec, conv.id, "Let me read the session module.", "c1", "Read", {"file_path": "src/auth/session.py"}, SESSION_PY)
    _call(rec, conv.id, "Running the tests first.", "c2", "Bash", {"command": "python -m pytest tests/test_auth.py"}, FAILING, is_error=True)
    _, edit_mem = _call(
        rec, conv.id, "The redirect target is wrong. I will point it at /home.", "c3", "Edit",
        {"file_path": "src/auth/session.py", "old_string": "redirect('/')", "new_string": "redirect('/home')"},
        "The file src/auth/session.py has been updated.",
    )
    _, rm_mem = _call(rec, conv.id, "Cleaning the build folder.", "c4", "Bash", {"command": "rm -rf build/cache"}, "rm: cannot remove 'build/cache': Permission denied\nexit code 1", is_error=True)
    big_art, _ = _call(rec, conv.id, "Rebuilding.", "c5", "Bash", {"command": "make build"}, BIG_LOG)
    rec.record_message(conv.id, "user", LATER)
    _call(rec, conv.id, "Re-running the tests.", "c6", "Bash", {"command": "python -m pytest tests/test_auth.py"}, PASSING)
    rec.record_assistant(conv.id, text="The fix is in place and the tests pass. Next I will update the changelog.")
    rec.record_message(conv.id, "user", "Thanks. Please go ahead.")
    rec.record_assistant(conv.id, text="Updating CHANGELOG.md now.")
    return Session(
        conv_id=conv.id, read_art=read_art.id, read_mem=read_mem.id, edit_mem=edit_mem.id, rm_mem=rm_mem.id,
        big_art=big_art.id, raw_big=BIG_LOG.encode(), goal_msg=goal.id,
    )


def texts(section: Any) -> list[str]:
    assert isinstance(section, list), section
    return [e["text"] for e in section]


# -- the template ---------------------------------------------------------------------------


def _valid_doc() -> dict[str, Any]:
    return {
        "user_goal": {"text": "ship it", "message_id": "msg_1", "truncated": False, "later_requests": []},
        "hard_constraints": [{"text": "Never push to main.", "rule_id": "rule_1", "source": "msg_1", "origin": "pinned", "strength": "hard"}],
        "current_state": {"stopped_at": "seq 3: assistant replied: done", "unresolved_calls": NONE_RECORDED, "checkpoint": NONE_RECORDED, "skill_state": NONE_RECORDED},
        "verified_facts": [{"fact": "ls → 3 entries", "tool": "ls", "memory_id": "mem_1", "seq": 2, "source_refs": ["mem_1", "art_1"]}],
        "files_read": [{"path": "a.py", "staleness": "current", "read": "read a.py", "memory_id": "mem_2", "artifact_id": "art_2", "seq": 2}],
        "files_modified": NONE_RECORDED,
        "failed_attempts": NONE_RECORDED,
        "latest_verification": NONE_RECORDED,
        "next_step": {"text": "Run the tests.", "message_id": "msg_3"},
        "source_range": {"from_seq": 1, "to_seq": 3},
    }


def test_template_accepts_a_complete_document_and_renders_every_section_in_order() -> None:
    doc = _valid_doc()
    validate_handoff(doc)
    text = render_handoff(doc)
    titles = ["User goal:", "Hard constraints:", "Current state:", "Verified facts:", "Files read:", "Files modified:", "Failed attempts:", "Latest verification:", "Next step:"]
    positions = [text.index(t) for t in titles]
    assert positions == sorted(positions)
    assert text.startswith("[contextledger handoff summary of seq 1-3;")
    assert "- Never push to main. (source: msg_1)" in text
    assert "Files modified:\nnone recorded" in text
    assert "- a.py — current; read a.py [mem_2, art_2]" in text


@pytest.mark.parametrize("section", HANDOFF_SECTIONS)
def test_a_document_missing_a_mandatory_section_is_rejected_by_name(section: str) -> None:
    doc = _valid_doc()
    del doc[section]
    with pytest.raises(HandoffError) as err:
        validate_handoff(doc)
    assert err.value.section == section
    assert f"'{section}'" in str(err.value) and "missing" in str(err.value)


@pytest.mark.parametrize("section", HANDOFF_SECTIONS)
@pytest.mark.parametrize("empty", [[], "", None, {}])
def test_an_empty_section_must_say_none_recorded(section: str, empty: Any) -> None:
    doc = _valid_doc()
    doc[section] = empty
    with pytest.raises(HandoffError) as err:
        validate_handoff(doc)
    assert err.value.section == section
    assert "none recorded" in str(err.value)


@pytest.mark.parametrize(
    ("mutate", "section"),
    [
        (lambda d: d.update(files_read=[{"path": "a.py", "staleness": "maybe"}]), "files_read"),
        (lambda d: d.update(hard_constraints=[{"rule_id": "r"}]), "hard_constraints"),
        (lambda d: d.update(verified_facts=[{"fact": "x", "source_refs": []}]), "verified_facts"),
        (lambda d: d.update(next_step="later"), "next_step"),
        (lambda d: d.pop("source_range"), "source_range"),
        (lambda d: d.update(source_range={"from_seq": 5, "to_seq": 2}), "source_range"),
        (lambda d: d.update(story="once upon a time"), "story"),
        (lambda d: d.update(prose=3), "prose"),
    ],
)
def test_malformed_sections_are_rejected(mutate: Any, section: str) -> None:
    doc = _valid_doc()
    mutate(doc)
    with pytest.raises(HandoffError) as err:
        validate_handoff(doc)
    assert err.value.section == section


# -- compaction of a recorded session --------------------------------------------------------


def test_compaction_writes_one_handoff_message_with_every_section(ledger: Ledger) -> None:
    s = record_session(ledger)
    scope = ledger.scope()
    before = len(ledger.store.messages(scope, s.conv_id))
    c = compact(ledger, scope, s.conv_id, keep_recent_units=2, now=NOW)
    msgs = ledger.store.messages(scope, s.conv_id)
    assert len(msgs) == before + 1
    m = msgs[-1]
    assert m.id == c.id
    assert (m.role, m.kind, m.authority, m.visibility) == (Role.USER, MessageKind.COMPACTION, AuthorityLevel.SUMMARY, Visibility.BRANCH)
    assert set(m.metadata) == {"handoff_format", "covers", "sections", "source_refs", "previous_compaction_id", "built_at"}
    assert m.metadata["previous_compaction_id"] is None
    assert set(m.metadata["sections"]) == set(HANDOFF_SECTIONS)  # JSONB does not keep key order
    assert m.metadata["covers"]["from_seq"] == c.from_seq == 1
    assert m.metadata["covers"]["to_seq"] == c.to_seq
    assert m.token_count > 0 and isinstance(m.parts[0], TextPart)
    doc = c.document
    validate_handoff(doc)
    assert document_of(m) == doc
    assert Compaction.from_message(m).document == doc

    assert doc["user_goal"]["text"] == GOAL
    assert doc["user_goal"]["message_id"] == s.goal_msg
    assert [r["text"] for r in doc["user_goal"]["later_requests"]] == [LATER]
    assert texts(doc["hard_constraints"]) == CONSTRAINTS_1
    assert {e["origin"] for e in doc["hard_constraints"]} == {"pinned"}

    read = doc["files_read"]
    assert [(f["path"], f["staleness"]) for f in read] == [("src/auth/session.py", f"stale: changed by {s.edit_mem}")]
    assert read[0]["memory_id"] == s.read_mem and read[0]["artifact_id"] == s.read_art
    mod = doc["files_modified"]
    assert [(f["path"], f["writes"], f["reason"]) for f in mod] == [("src/auth/session.py", 1, "I will point it at /home.")]
    assert mod[0]["memory_ids"] == [s.edit_mem]
    assert mod[0]["change"] == "edit +1 -1"

    failed = doc["failed_attempts"]
    assert [(f["tool"], f["attempt"], f["status"]) for f in failed] == [
        ("Bash", "python -m pytest tests/test_auth.py", "failed"),
        ("Bash", "rm -rf build/cache", "failed"),
    ]
    assert "Permission denied" in failed[1]["error"] and failed[1]["memory_id"] == s.rm_mem
    ver = doc["latest_verification"]
    assert ver["command"] == "python -m pytest tests/test_auth.py"
    assert ver["result"] == "passed (2 passed)"
    assert ver["evidence"] == "passed: 2 passed"
    go_ahead = ledger.store.messages(scope, s.conv_id)[-3]
    assert go_ahead.parts[0].text == "Thanks. Please go ahead."  # type: ignore[union-attr]
    plan_msg = ledger.store.messages(scope, s.conv_id)[-4]
    # the newest user request leads (it lies in the raw tail); the plan it answers stays
    assert doc["next_step"] == {
        "text": "Thanks. Please go ahead.",
        "message_id": go_ahead.id,
        "plan": {"text": "Next I will update the changelog.", "message_id": plan_msg.id},
    }
    assert doc["current_state"]["stopped_at"].startswith("seq ")
    assert doc["current_state"]["stopped_at"].endswith(
        "assistant replied: The fix is in place and the tests pass. Next I will update the changelog."
    )
    assert doc["current_state"]["unresolved_calls"] == NONE_RECORDED
    facts = doc["verified_facts"]
    assert [f["tool"] for f in facts] == ["Bash", "Bash"]  # make build, passing pytest
    assert all(f["source_refs"][0] == f["memory_id"] and f["source_refs"][1].startswith("art_") for f in facts)
    assert s.big_art in facts[0]["source_refs"]
    # every cited id is listed once in source_refs
    assert s.read_mem in c.source_refs and s.edit_mem in c.source_refs and s.goal_msg in c.source_refs
    assert len(set(c.source_refs)) == len(c.source_refs)
    part = m.parts[0]
    assert isinstance(part, TextPart)
    text = part.text
    for c_text in CONSTRAINTS_1:
        assert c_text in text


def test_the_raw_tail_stays_outside_the_covered_range(ledger: Ledger) -> None:
    s = record_session(ledger)
    scope = ledger.scope()
    c = compact(ledger, scope, s.conv_id, keep_recent_units=3, now=NOW)
    msgs = [m for m in ledger.store.messages(scope, s.conv_id) if m.kind != MessageKind.COMPACTION]
    calls = ledger.store.tool_calls(scope, s.conv_id)
    by_msg: dict[str, list[Any]] = {}
    for call in calls:
        by_msg.setdefault(call.message_id, []).append(call)
    units = [u for u in build_units(msgs, by_msg, {}, []) if u.kind in ("user", "assistant", "exchange")]
    tail = units[-3:]
    assert [u.kind for u in tail] == ["assistant", "user", "assistant"]
    assert all(u.seq > c.to_seq for u in tail)
    assert all(u.seq <= c.to_seq for u in units[:-3])
    assert (c.covered_units, c.kept_units) == (len(units) - 3, 3)


def test_covered_artifacts_stay_rehydratable_byte_for_byte(ledger: Ledger) -> None:
    s = record_session(ledger)
    c = compact(ledger, ledger.scope(), s.conv_id, keep_recent_units=2, now=NOW)
    art = ledger.store.get_artifact(ledger.scope(), s.big_art)
    assert art.seq <= c.to_seq and art.blob_key is not None  # covered, stored as a blob
    assert ledger.rehydrate(s.big_art) == s.raw_big
    assert ledger.rehydrate(s.read_art) == SESSION_PY.encode()
    assert s.big_art in c.source_refs


def test_every_section_and_every_hard_constraint_survive_two_compactions(ledger: Ledger) -> None:
    s = record_session(ledger)
    scope = ledger.scope()
    project = parse_rule_text(PROJECT_RULE, source_path="AGENTS.md")
    assert [r.text for r in project] == ["NEVER commit secrets or .env files."]
    first = compact(ledger, scope, s.conv_id, keep_recent_units=3, now=NOW, extra_rules=project)
    expected = [*CONSTRAINTS_1, "NEVER commit secrets or .env files."]
    assert texts(first.document["hard_constraints"]) == expected

    rec = ledger.recorder()
    rec.record_message(s.conv_id, "user", THIRD)
    _call(rec, s.conv_id, "Checking the changelog.", "c7", "Read", {"file_path": "CHANGELOG.md"}, "     1\t# Changelog\n")
    rec.record_assistant(s.conv_id, text="Changelog read. Next I will add an entry for the redirect fix.")
    rec.record_message(s.conv_id, "user", "ok")
    rec.record_assistant(s.conv_id, text="Adding the entry.")

    # the project rule is not passed again: it survives only through the first compaction
    second = compact(ledger, scope, s.conv_id, keep_recent_units=2, now=NOW + timedelta(minutes=5))
    assert second.previous_compaction_id == first.id
    assert second.from_seq == first.from_seq and second.to_seq > first.to_seq
    doc = second.document
    validate_handoff(doc)
    for name in HANDOFF_SECTIONS:
        assert name in doc and doc[name] not in ("", [], {}, None)
    got = texts(doc["hard_constraints"])
    assert got == [*CONSTRAINTS_1, THIRD, "NEVER commit secrets or .env files."]
    origins = {e["text"]: e["origin"] for e in doc["hard_constraints"]}
    assert origins["NEVER commit secrets or .env files."] == "carried"
    assert origins[THIRD] == "pinned"
    # sections from the first compaction are still there
    assert doc["user_goal"]["text"] == GOAL
    assert [f["path"] for f in doc["files_read"]] == ["src/auth/session.py", "CHANGELOG.md"]
    assert doc["files_read"][0]["staleness"] == f"stale: changed by {s.edit_mem}"
    assert [f["path"] for f in doc["files_modified"]] == ["src/auth/session.py"]
    assert [f["memory_id"] for f in doc["failed_attempts"]][-1] == s.rm_mem
    assert doc["latest_verification"]["result"] == "passed (2 passed)"
    assert doc["next_step"]["text"] == "ok"
    assert doc["next_step"]["plan"]["text"] == "Next I will add an entry for the redirect fix."
    latest = latest_compaction(ledger.store, scope, s.conv_id, ledger.store.lineage(scope, ledger.store.get_conversation(scope, s.conv_id).active_branch_id))
    assert latest is not None and latest.id == second.id
    part = second.message.parts[0]
    assert isinstance(part, TextPart)
    text = part.text
    for c_text in got:
        assert f"- {c_text} (source:" in text


def test_constraints_survive_even_when_their_pins_are_missing(sqlite_ledger: Ledger) -> None:
    """A user constraint that was never pinned (e.g. recorded before pinning existed) is
    re-extracted from the covered message and then carried by the next compaction."""
    ledger = sqlite_ledger
    s = record_session(ledger)
    scope = ledger.scope()
    with ledger.store.reader() as conn:
        conn.exec_driver_sql("DELETE FROM rules")
    first = compact(ledger, scope, s.conv_id, keep_recent_units=3, now=NOW)
    assert texts(first.document["hard_constraints"]) == CONSTRAINTS_1
    assert {e["origin"] for e in first.document["hard_constraints"]} == {"stated"}
    rec = ledger.recorder()
    for i in range(3):
        rec.record_message(s.conv_id, "user", f"step {i}")
        rec.record_assistant(s.conv_id, text=f"done {i}")
    second = compact(ledger, scope, s.conv_id, keep_recent_units=1, now=NOW)
    assert texts(second.document["hard_constraints"]) == CONSTRAINTS_1


def test_compaction_is_deterministic_for_the_same_graph_and_now(ledger: Ledger) -> None:
    s = record_session(ledger)
    scope = ledger.scope()
    a = build_handoff(ledger.store, scope, s.conv_id, keep_recent_units=3, now=NOW)
    b = build_handoff(ledger.store, scope, s.conv_id, keep_recent_units=3, now=NOW)
    assert a.document == b.document
    assert json.dumps(a.document, sort_keys=True) == json.dumps(b.document, sort_keys=True)
    assert a.source_refs == b.source_refs
    c = compact(ledger, scope, s.conv_id, keep_recent_units=3, now=NOW)
    assert c.document == a.document
    assert {k: c.message.metadata["sections"][k] for k in HANDOFF_SECTIONS} == {k: a.document[k] for k in HANDOFF_SECTIONS}


def test_a_passing_test_run_is_a_verified_fact_whatever_its_age(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation()
    rec.record_message(conv.id, "user", "Fix add in calc.py and make the tests pass.")
    _call(rec, conv.id, "Editing.", "e1", "Edit", {"file_path": "calc.py", "old_string": "a - b", "new_string": "a + b"}, "The file calc.py has been updated.")
    _, mem = _call(rec, conv.id, "Testing.", "t1", "Bash", {"command": "python -m pytest -q"}, ".............   [100%]\n13 passed in 0.42s")
    rec.record_assistant(conv.id, text="Done.")
    for later in (timedelta(hours=1), timedelta(days=30)):
        doc = build_handoff(ledger.store, ledger.scope(), conv.id, keep_recent_units=0, now=mem.observed_at + later).document
        assert doc["latest_verification"]["result"] == "passed (13 passed)"
        assert [f["fact"] for f in doc["verified_facts"]] == ["Bash succeeded: tests: python -m pytest -q → passed: 13 passed in 0.42s"]


def test_a_later_now_marks_covered_reads_expired(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation()
    rec.record_message(conv.id, "user", "Look at the config.")
    _, mem = _call(rec, conv.id, "Reading it.", "r1", "Read", {"file_path": "conf.toml"}, "     1\tdebug = true\n")
    rec.record_assistant(conv.id, text="Read it.")
    fresh = build_handoff(ledger.store, ledger.scope(), conv.id, keep_recent_units=0, now=mem.observed_at + timedelta(hours=1))
    late = build_handoff(ledger.store, ledger.scope(), conv.id, keep_recent_units=0, now=mem.observed_at + timedelta(hours=13))
    assert fresh.document["files_read"][0]["staleness"] == "current"
    assert late.document["files_read"][0]["staleness"].startswith("stale: observed ")
    assert "expired" in late.document["files_read"][0]["staleness"]
    # an expired observation is not presented as a verified fact
    assert fresh.document["verified_facts"] == NONE_RECORDED  # only a file read: listed under files_read


def test_summariser_only_adds_prose(ledger: Ledger) -> None:
    s = record_session(ledger)
    scope = ledger.scope()
    plan = build_handoff(ledger.store, scope, s.conv_id, keep_recent_units=3, now=NOW)
    seen: list[Mapping[str, Any]] = []

    class Notes:
        def summarize_handoff(self, document: Mapping[str, Any]) -> str:
            seen.append(document)
            return "  The redirect now targets /home; only the changelog is left.  "

    c = compact(ledger, scope, s.conv_id, keep_recent_units=3, now=NOW, summarizer=Notes())
    assert c.document["prose"] == "The redirect now targets /home; only the changelog is left."
    assert {k: v for k, v in c.document.items() if k != "prose"} == plan.document
    assert seen[0] == plan.document
    assert c.message.metadata["prose"] == c.document["prose"]
    assert c.message.parts[0].text.endswith(  # type: ignore[union-attr]
        "Notes (model-written, unverified):\nThe redirect now targets /home; only the changelog is left."
    )


def test_a_summariser_that_rewrites_sections_is_refused(ledger: Ledger) -> None:
    s = record_session(ledger)

    class Rewriter:
        def summarize_handoff(self, document: Mapping[str, Any]) -> str:
            document["hard_constraints"].clear()
            return "constraints were not important"

    scope = ledger.scope()
    before = len(ledger.store.messages(scope, s.conv_id))
    with pytest.raises(HandoffError) as err:
        compact(ledger, scope, s.conv_id, keep_recent_units=3, now=NOW, summarizer=Rewriter())
    assert err.value.section == "prose"
    assert len(ledger.store.messages(scope, s.conv_id)) == before


def test_nothing_to_compact_is_an_input_error(ledger: Ledger) -> None:
    s = record_session(ledger)
    scope = ledger.scope()
    with pytest.raises(InputError, match="nothing to compact: the lineage has 11 conversational units"):
        compact(ledger, scope, s.conv_id, keep_recent_units=11, now=NOW)
    compact(ledger, scope, s.conv_id, keep_recent_units=3, now=NOW)
    with pytest.raises(InputError, match="nothing new to compact"):
        compact(ledger, scope, s.conv_id, keep_recent_units=3, now=NOW)
    with pytest.raises(InputError, match="keep_recent_units must be >= 0"):
        compact(ledger, scope, s.conv_id, keep_recent_units=-1, now=NOW)
    with pytest.raises(InputError, match="timezone-aware"):
        compact(ledger, scope, s.conv_id, keep_recent_units=1, now=datetime(2026, 1, 1))


def test_compaction_stays_on_its_branch(ledger: Ledger) -> None:
    s = record_session(ledger)
    scope = ledger.scope()
    conv = ledger.store.get_conversation(scope, s.conv_id)
    main = conv.active_branch_id
    msgs = ledger.store.messages(scope, s.conv_id)
    rec = ledger.recorder()
    side = rec.fork(s.conv_id, msgs[-1].id, name="side", activate=False)
    c = compact(ledger, scope, s.conv_id, branch_id=main, keep_recent_units=3, now=NOW)
    assert c.message.branch_id == main
    assert latest_compaction(ledger.store, scope, s.conv_id, ledger.store.lineage(scope, side.id)) is None
    later = rec.fork(s.conv_id, c.id, name="after", activate=False)
    found = latest_compaction(ledger.store, scope, s.conv_id, ledger.store.lineage(scope, later.id))
    assert found is not None and found.id == c.id


def test_participant_private_results_never_enter_the_handoff(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation()
    p = rec.add_participant(conv.id, "worker")
    rec.record_message(conv.id, "user", "Check both hosts.")
    rec.record_assistant(conv.id, text="Checking.", participant_id=p.id, tool_calls=[{"call_id": "h1", "tool_name": "Bash", "arguments": {"command": "hostname"}}])
    _, _, private = rec.record_tool_result(conv.id, "h1", "secret-host-01\n", visibility=Visibility.PARTICIPANT_PRIVATE)
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "h2", "tool_name": "Bash", "arguments": {"command": "uname -a"}}])
    _, _, shared = rec.record_tool_result(conv.id, "h2", "Linux box 6.1\n")
    rec.record_assistant(conv.id, text="Done.")
    plan = build_handoff(ledger.store, ledger.scope(), conv.id, keep_recent_units=0, now=shared.observed_at)
    refs = set(plan.source_refs)
    assert shared.id in refs and private.id not in refs
    assert "secret-host-01" not in render_handoff(plan.document)


def test_unresolved_calls_are_named_in_the_current_state(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation()
    rec.record_message(conv.id, "user", "Deploy after approval.")
    rec.record_assistant(conv.id, text="Requesting the deploy.", tool_calls=[{"call_id": "d1", "tool_name": "deploy", "arguments": {"env": "prod"}}])
    rec.set_awaiting_approval(conv.id, "d1")
    plan = build_handoff(ledger.store, ledger.scope(), conv.id, keep_recent_units=0, now=NOW)
    state = plan.document["current_state"]
    assert state["unresolved_calls"] == [{"call_id": "d1", "tool": "deploy", "status": "awaiting_approval", "arguments": '{"env":"prod"}'}]
    assert state["stopped_at"] == 'seq 2: assistant called deploy({"env":"prod"}) → awaiting_approval after saying: Requesting the deploy.'
    assert plan.document["files_read"] == NONE_RECORDED
    assert plan.document["latest_verification"] == NONE_RECORDED
    assert plan.document["hard_constraints"] == NONE_RECORDED


def test_cli_compact_prints_json(tmp_path: Path) -> None:
    saved = (cli_common.state.db, cli_common.state.home, cli_common.state.tenant, cli_common.state._ledger)
    cli_common.state.db, cli_common.state.home, cli_common.state.tenant, cli_common.state._ledger = None, str(tmp_path / "home"), "default", None
    try:
        ledger = cli_common.state.ledger(create=True)  # the test records first (as `import` would)
        s = record_session(ledger)
        result = CliRunner().invoke(compact_app, [s.conv_id, "--keep", "3", "--now", "2026-03-01T12:00:00Z", "--json"])
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)  # stderr: a warning, --now is before the recorded messages
        assert out["covers"]["from_seq"] == 1
        assert out["kept_units"] == 3
        assert [c["text"] for c in out["sections"]["hard_constraints"]] == CONSTRAINTS_1
        again = CliRunner().invoke(compact_app, [s.conv_id, "--keep", "3", "--json"])
        assert again.exit_code == 2 and again.stdout == ""
        assert json.loads(again.stderr)["message"].startswith("nothing new to compact")
    finally:
        if cli_common.state._ledger is not None:
            cli_common.state._ledger.close()
        cli_common.state.db, cli_common.state.home, cli_common.state.tenant, cli_common.state._ledger = saved


# -- real transcripts ------------------------------------------------------------------------


def _now_after(ledger: Ledger, conv_id: str) -> datetime:
    mems = ledger.store.memories(ledger.scope(), conv_id)
    return max(m.observed_at for m in mems) + timedelta(minutes=1)


def test_real_claude_code_session_compacts_twice(sqlite_ledger: Ledger) -> None:
    require_real_data()
    ledger = sqlite_ledger
    res = ledger.import_file(REAL / "claude-reliability-snapshots" / "coverage-test-fix.jsonl")
    scope = ledger.scope()
    now = _now_after(ledger, res.conversation_id)
    plan_a = build_handoff(ledger.store, scope, res.conversation_id, keep_recent_units=4, now=now)
    plan_b = build_handoff(ledger.store, scope, res.conversation_id, keep_recent_units=4, now=now)
    assert plan_a.document == plan_b.document
    doc = plan_a.document
    assert doc["user_goal"]["text"] == (
        "Add a function called multiply_numbers(a: int, b: int) -> int that multiplies two numbers together. Add a test for it."
    )
    assert isinstance(doc["files_read"], list) and doc["files_read"]
    assert any(f["path"].endswith("src/math_utils.py") and f["staleness"].startswith("stale: changed by mem_") for f in doc["files_read"])
    assert isinstance(doc["files_modified"], list)
    assert {Path(f["path"]).name for f in doc["files_modified"]} >= {"math_utils.py", "test_math_utils.py"}
    ver = doc["latest_verification"]
    assert "pytest" in ver["command"] and ver["result"].startswith("passed")
    first = compact(ledger, scope, res.conversation_id, keep_recent_units=4, now=now)
    assert first.document == doc
    covered_art = next(a for a in ledger.store.artifacts(scope, res.conversation_id) if a.seq <= first.to_seq)
    assert ledger.rehydrate(covered_art.id) == ledger.store.read_artifact_bytes(scope, covered_art)
    second = compact(ledger, scope, res.conversation_id, keep_recent_units=1, now=now)
    assert second.previous_compaction_id == first.id and second.to_seq > first.to_seq
    for name in HANDOFF_SECTIONS:
        assert second.document[name] not in ("", [], {}, None)
    assert second.document["user_goal"] == {**first.document["user_goal"], "later_requests": second.document["user_goal"]["later_requests"]}


SWE = "replay__marshmallow-code__marshmallow-1867__default__t-0.20__p-0.95__c-2.00__install-1___install_from_source__marshmallow-code__marshmallow-1867.traj"


def test_real_swe_agent_trajectory_keeps_its_rules_and_failures(sqlite_ledger: Ledger) -> None:
    require_real_data()
    ledger = sqlite_ledger
    res = ledger.import_file(REAL / "swe-agent" / SWE)
    scope = ledger.scope()
    now = _now_after(ledger, res.conversation_id)
    pinned = [r["text"] for r in ledger.store.rule_bodies(scope, res.conversation_id) if r.get("pinned")]
    # the scaffold's own rules (prose of its user turn), each once, as written
    assert sorted(pinned) == sorted([
        "Remember, YOU CAN ONLY ENTER ONE COMMAND AT A TIME.",
        "You should always wait for feedback after every command.",
        "Note however that you cannot use any interactive session commands (e.g. python, vim) in this environment, but you can write scripts and run them.",
        "When editing a file, make sure to insert appropriate indentation before each line!",
        "Always start by trying to replicate the bug that the issues discusses.",
        "If you open a file and need to get to an area around a specific line that is not in the first 100 lines, say line 583, don't just use the scroll_down command multiple times.",
        "Always make sure to look at the currently open file and the current working directory (which appears right after the currently open file).",
        "Always check the code after you issue an edit to make sure that it reflects what you wanted to accomplish.",
    ])
    first = compact(ledger, scope, res.conversation_id, keep_recent_units=6, now=now)
    assert sorted(texts(first.document["hard_constraints"])) == sorted(pinned)
    second = compact(ledger, scope, res.conversation_id, keep_recent_units=2, now=now)
    doc = second.document
    assert sorted(texts(doc["hard_constraints"])) == sorted(pinned)
    assert doc["user_goal"]["text"].startswith("We're currently solving the following issue within our repository.")
    read = {Path(f["path"]).name: f["staleness"] for f in doc["files_read"]}
    assert read["setup.py"] == "current"
    assert read["fields.py"].startswith("stale: changed by mem_")
    assert {Path(f["path"]).name for f in doc["files_modified"]} == {"reproduce.py", "fields.py"}
    assert [f["error"] for f in doc["failed_attempts"]] == ["- E999 IndentationError: unexpected indent"]
    assert doc["next_step"]["plan"]["text"].endswith("so we can just run `reproduce.py` directly.")
    rebuilt = build_handoff(ledger.store, scope, res.conversation_id, keep_recent_units=1, now=now)
    again = build_handoff(ledger.store, scope, res.conversation_id, keep_recent_units=1, now=now)
    assert rebuilt.document == again.document


def test_real_long_claude_code_session_caps_lists_but_never_constraints(sqlite_ledger: Ledger) -> None:
    require_real_data()
    ledger = sqlite_ledger
    res = ledger.import_file(REAL / "marot-spotter" / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl")
    scope = ledger.scope()
    now = _now_after(ledger, res.conversation_id)
    c = compact(ledger, scope, res.conversation_id, now=now)
    doc = c.document
    validate_handoff(doc)
    assert c.kept_units == 6
    assert isinstance(doc["files_read"], list) and 0 < len(doc["files_read"]) <= MAX_FILES
    assert isinstance(doc["verified_facts"], list) and len(doc["verified_facts"]) == MAX_FACTS
    assert doc["omitted"]["verified_facts"] > 0
    text = render_handoff(doc)
    assert f"(+{doc['omitted']['verified_facts']} older entries kept in the ledger)" in text
    assert all(len(f["memory_ids"]) <= MAX_WRITES_CITED for f in doc["files_modified"])
    assert any(f["writes"] > MAX_WRITES_CITED for f in doc["files_modified"])
    ver = doc["latest_verification"]
    # no test run was recognised in this Elixir session: the newest verification-like command
    # wins over the later (failed) ``git push``
    assert ver["command"] == 'mix compile && mix dialyzer --format short 2>&1 | grep -E "^lib/"'
    assert doc["failed_attempts"][-1]["attempt"] == "git push 2>&1"
    pinned = [r["text"] for r in ledger.store.rule_bodies(scope, res.conversation_id) if r.get("pinned")]
    got = texts(doc["hard_constraints"]) if isinstance(doc["hard_constraints"], list) else []
    assert set(pinned) <= set(got)
    assert c.message.token_count < 20000
    copy.deepcopy(doc)  # JSON-like and copyable


def test_a_long_user_goal_is_capped_and_points_at_its_message(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation()
    goal = "Port the parser. " + "x" * 5000
    first = rec.record_message(conv.id, "user", goal)
    rec.record_assistant(conv.id, text="Starting with the lexer.")
    plan = build_handoff(ledger.store, ledger.scope(), conv.id, keep_recent_units=0, now=NOW)
    g = plan.document["user_goal"]
    assert (len(g["text"]), g["text"][-1], g["truncated"], g["message_id"]) == (4000, "…", True, first.id)
    assert goal.startswith(g["text"][:-1])
    assert plan.document["next_step"] == {
        "text": goal[:599] + "…",
        "message_id": first.id,
        "plan": {"text": "Starting with the lexer.", "message_id": plan.snapshot.messages[-1].id},
    }
