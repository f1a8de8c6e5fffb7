"""Payloads never contradict the transcript: every handle a note cites is labelled in the
payload (or the note says it is not shown), and no cut splits a marker ``[…]``
(:mod:`contextledger.assembly.citations`).  Checked on exact strings, on generated graphs
and on real transcripts, in the three payload formats at 2k / 4k / 8k tokens."""

from __future__ import annotations

import re
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import real_params
from contextledger.assembly.citations import cite_shown, cite_text, clear_cut, cut_clear
from contextledger.assembly.last_resort import cut_text
from contextledger.ledger import Ledger
from contextledger.providers.base import WireMessage
from contextledger.records.parts import TextPart
from contextledger.tokens import get_tokenizer

PROVIDERS = ("openai-chat", "anthropic", "openai-responses")
BUDGETS = (2000, 4000, 8000)
T0 = datetime(2026, 5, 1, 10, 0, tzinfo=UTC)

# written here, not imported: the check must be able to disagree with the module
_LABEL = re.compile(r"\[(?:stale )?memory (m[1-9][0-9]*) ·|\[artifact (a[1-9][0-9]*),")
_CITE = re.compile(r"(?:\[superseded by |file changed later \(|another memory \()(m[1-9][0-9]*)\b(?P<ns>, not shown; rehydrate (m[1-9][0-9]*)\))?")
_BY_CALL = re.compile(r"(?:\[superseded by a newer result|file changed later|another memory) \(call ([^)\s]+)\)")
_CONFLICTS = re.compile(r"\[conflicts with ([^\]\n]*)\]")
_NOTE_LINE = re.compile(r"^- ([ma][1-9][0-9]*): (?:superseded|stale)", re.M)
_OPENER = re.compile(r"\[(?:… |memory m|stale memory m|artifact a|superseded by|conflicts with)")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def violations(payload: dict[str, Any]) -> list[str]:
    """Every handle cited but not labelled (and not said to be not shown), and every
    marker opened but not closed on its line, in ``payload``'s texts."""
    texts = _strings(payload)
    labels = {m.group(1) or m.group(2) for t in texts for m in _LABEL.finditer(t)}
    out: list[str] = []
    for t in texts:
        for m in _BY_CALL.finditer(t):
            if m.group(1) not in texts:  # a call id is a string of its own in every format
                out.append(f"cites call {m.group(1)} not sent: {m.group(0)!r}")
        for m in _CITE.finditer(t):
            h = m.group(1)
            if h not in labels and not (m["ns"] and m.group(3) == h):
                out.append(f"cites {h} unlabelled: {t[max(0, m.start() - 30):m.end() + 30]!r}")
        for m in _CONFLICTS.finditer(t):
            for h in re.findall(r"(?<![(\w])m[1-9][0-9]*\b(?!, not shown)", m.group(1)):
                if h not in labels:
                    out.append(f"conflict cites {h} unlabelled: {m.group(0)!r}")
        for m in _NOTE_LINE.finditer(t):
            if m.group(1) not in labels:
                out.append(f"note cites {m.group(1)} unlabelled")
        for m in _OPENER.finditer(t):
            end = len(t) if (nl := t.find("\n", m.start())) < 0 else nl
            line = t[m.start():end]
            if "]" not in line or "[" in line[1:line.index("]")]:
                out.append(f"marker not whole: {line[:80]!r}")
    return out


# -- the rule on exact strings ------------------------------------------------------------

def test_a_note_names_an_unlabelled_record_as_not_shown() -> None:
    assert cite_text("[superseded by m86: see the newer result] FAILED x", frozenset()) == "[superseded by a newer result (m86, not shown; rehydrate m86)] FAILED x"
    assert cite_text("[superseded by m86]\nraw", frozenset()) == "[superseded by a newer result (m86, not shown; rehydrate m86)]\nraw"
    assert cite_text("limits: 40 lines; file changed later (m45)", frozenset()) == "limits: 40 lines; file changed later (m45, not shown; rehydrate m45)"
    assert cite_text("x [conflicts with m3, m5]", frozenset({"m3"})) == "x [conflicts with m3, another memory (m5, not shown; rehydrate m5)]"
    shown = "[superseded by m86: see the newer result] [conflicts with m3] file changed later (m45)"
    assert cite_text(shown, frozenset({"m86", "m3", "m45"})) == shown


def test_only_notes_change_and_labels_anywhere_in_the_request_count() -> None:
    note = WireMessage(role="tool", parts=(TextPart(text="[superseded by m9: see the newer result]"),))
    raw = WireMessage(role="user", parts=(TextPart(text="superseded by m9 in my notes"),))
    labelled = WireMessage(role="tool", parts=(TextPart(text="[memory m9 · session · observed 2026-05-01T10:00Z]\nok"),))
    out = cite_shown([note, raw])
    assert [p.text for m in out for p in m.parts if isinstance(p, TextPart)] == ["[superseded by a newer result (m9, not shown; rehydrate m9)]", "superseded by m9 in my notes"]
    assert out[1] is raw
    assert cite_shown([note, labelled]) == [note, labelled]
    assert cite_shown([note], before={"m9"})[0] is note  # labelled by a prefix sent earlier


def test_a_cut_falls_before_or_after_a_marker_never_inside() -> None:
    text = "read ok … [artifact a84, 929 bytes] tail"
    at = text.index("929")
    assert clear_cut(text, at) == text.index("[artifact")
    assert clear_cut(text, at, keep_after=True) == text.index("] tail") + 1
    assert clear_cut(text, 4) == 4
    assert cut_clear(text, at) == "read ok …"
    tok = get_tokenizer()
    line = " ".join(f"w{i}" for i in range(60)) + " [artifact a84, 929 bytes] " + " ".join(f"v{i}" for i in range(60))
    for n in range(20, 80, 3):
        cut = cut_text(tok, line, n, "artifact a84")
        assert violations({"t": cut}) == [], (n, cut)


# -- generated graphs ----------------------------------------------------------------------

_BODY = "\n".join(f"{n}\tdef f{n}(): return {n}" for n in range(1, 120))
_STEP = st.tuples(st.sampled_from(["read", "edit", "test"]), st.integers(0, 2), st.booleans())


def _record(led: Ledger, steps: list[tuple[str, int, bool]]) -> str:
    rec = led.recorder()
    conv = rec.start_conversation(title="citations", system_prompt="You fix bugs.")
    rec.record_message(conv.id, "user", "Fix the failing test in src/.")
    for i, (kind, f, flag) in enumerate(steps):
        path = f"src/f{f}.py"
        if kind == "read":
            call, out, err = {"tool_name": "Read", "arguments": {"file_path": path}}, _BODY if flag else _BODY[:300], False
        elif kind == "edit":
            call, out, err = {"tool_name": "Edit", "arguments": {"file_path": path, "old_string": "f1", "new_string": f"g{i}"}}, f"The file {path} has been updated.", False
        else:
            lines = "\n".join(f"tests/test_f{f}.py::test_{n} PASSED" for n in range(40))
            call, out, err = {"tool_name": "Bash", "arguments": {"command": f"pytest tests/test_f{f}.py"}}, (f"{lines}\nFAILED tests/test_f{f}.py::test_x - AssertionError: {i}\n1 failed" if flag else f"{lines}\n40 passed"), flag
        rec.record_assistant(conv.id, text=f"step {i}", tool_calls=[{"call_id": f"c{i}", **call}])
        rec.record_tool_result(conv.id, f"c{i}", out, is_error=err, observed_at=T0 + timedelta(seconds=i))
    rec.record_message(conv.id, "user", "What next?")
    return conv.id


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_STEP, min_size=3, max_size=14))
def test_generated_payloads_cite_only_labelled_records(steps: list[tuple[str, int, bool]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        led = Ledger.open(home=Path(tmp))
        try:
            conv = _record(led, steps)
            for provider in PROVIDERS:
                for budget in BUDGETS:
                    res = led.assemble(conv, provider=provider, budget_tokens=budget, now=T0 + timedelta(hours=2), persist=False, replay="estimate")
                    assert violations(res.payload) == [], (provider, budget)
        finally:
            led.close()


def test_a_superseded_failure_names_its_raw_retry_by_call_id(ledger: Ledger) -> None:
    """The retry of a failed test run, sent raw, carries no label: the failure's note
    names it by the call id the payload sends it under, not by the handle m8."""
    conv = _record(ledger, [("test", 0, True), ("read", 1, False), ("test", 0, False)])
    raw = ledger.assemble(conv, budget_tokens=8000, now=T0 + timedelta(minutes=1), persist=False, replay="estimate")
    text = str(raw.payload)
    assert "[superseded by a newer result (call c2)] Bash failed: " in text and "m8" not in text
    assert violations(raw.payload) == []


def test_a_raw_result_is_cited_by_call_and_anything_else_unlabelled_as_not_shown() -> None:
    text = "[superseded by m8: see the newer result] [conflicts with m3, m5] file changed later (m9)"
    assert cite_text(text, frozenset({"m3"}), {"m8": "c2", "a8": "c2"}) == (
        "[superseded by a newer result (call c2)] [conflicts with m3, another memory (m5, not shown; rehydrate m5)] file changed later (m9, not shown; rehydrate m9)"
    )


# -- real transcripts ----------------------------------------------------------------------

_REAL = real_params(
    "swe-agent/ctf__misc__networking_1.traj",
    "adp-nebius-swe-agent/tomerfiliba__plumbum-366_17.json",
    "adp-nebius-swe-agent/tempoCollaboration__OQuPy-74_55.json",
    "tau-bench-airline-gpt4o/task002_trial2_idx102.json",
    "claude-reliability-snapshots/coverage-test-fix.jsonl",
    "claude-code-viewer-dkimuson/1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
    "marot-spotter/tool_heavy.jsonl",
)


@pytest.mark.parametrize("path", _REAL, ids=lambda p: p.name if isinstance(p, Path) else str(p))
def test_real_payloads_cite_only_labelled_records(path: Path, tmp_path: Path) -> None:
    led = Ledger.open(home=tmp_path)
    try:
        conv = led.import_file(path).conversation_id
        for provider in PROVIDERS:
            for budget in BUDGETS:
                res = led.assemble(conv, provider=provider, budget_tokens=budget, persist=False, replay="estimate")
                assert violations(res.payload) == [], (provider, budget)
    finally:
        led.close()
