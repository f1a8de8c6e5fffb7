"""The newest tool result and the task statement under budget pressure (seed 001 §3: the
current request's evidence is hot; §9: older context is dropped first).

In a tool loop the next step depends on the result the model just asked for: it is kept
raw while it fits, else its lines (header, error lines, tail) fill the budget left after
the must-keeps, with a marker naming its handle — older memories yield first.  A task
statement larger than the budget is cut to fit with the same kind of marker, never
dropped whole.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

from contextledger import Ledger
from contextledger.assembly.last_resort import cut_lines, cut_text
from contextledger.tokens import get_tokenizer

NOW = datetime(2026, 3, 4, 12, 0, tzinfo=UTC)
SYSTEM = "You are a build agent. " + " ".join(f"Rule {i}: report item {i} of the build exactly." for i in range(60))


def _log(run: int, lines: int) -> str:
    body = [f"[{j:03d}] compiling module_{j}.c for run {run} ... ok" for j in range(lines)]
    body[lines // 2] = f"[{lines // 2:03d}] error: undefined reference to `frobnicate_{run}'"
    return f"BUILD LOG run {run} (target x86_64)\n" + "\n".join(body) + f"\nBUILD FAILED run {run}: 1 error"


def _loop(ledger: Ledger, runs: int, lines: int) -> str:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="build", system_prompt=SYSTEM)
    rec.record_message(conv.id, "user", "Make the build pass. Do not edit the vendored sources.")
    for i in range(runs):
        rec.record_assistant(conv.id, text=f"Build {i}.", tool_calls=[{"call_id": f"c{i}", "tool_name": "Bash", "arguments": {"command": f"make -j2 run{i}"}}])
        rec.record_tool_result(conv.id, f"c{i}", _log(i, lines), observed_at=NOW)
    return conv.id


@pytest.mark.parametrize("runs", [12, 24])  # 24: the older memories alone fill the budget
@pytest.mark.parametrize("provider", ["openai-chat", "anthropic", "openai-responses"])
def test_the_newest_result_keeps_its_header_error_and_last_lines_in_the_budget_left(tmp_path, provider: str, runs: int) -> None:
    ledger = Ledger.open(home=tmp_path)
    conv = _loop(ledger, runs=runs, lines=181)
    r = ledger.assemble(conv, provider=provider, budget_tokens=3000, now=NOW)
    body = json.dumps(r.payload, ensure_ascii=False)
    last = runs - 1
    assert r.record.assembled_tokens <= 3000
    assert f"BUILD LOG run {last} (target x86_64)" in body  # its first line
    assert f"BUILD FAILED run {last}: 1 error" in body  # its last line
    assert f"undefined reference to `frobnicate_{last}'" in body  # its error line
    assert "Do not edit the vendored sources." in body
    # the cut is announced whole, with the handle of the artifact to rehydrate
    marker = re.search(r"\[… ([\d,]+) lines \(([\d,]+) tokens\) omitted; full text in the ledger \(artifact (a\d+)\) …\]", body)
    assert marker is not None
    assert ledger.explain(r.record.id) is not None
    # older logs yield first: no older raw log header is sent
    assert f"BUILD LOG run {last - 1} (target x86_64)\\n[000]" not in body


def test_a_task_statement_larger_than_the_budget_is_cut_not_dropped(tmp_path) -> None:
    ledger = Ledger.open(home=tmp_path)
    rec = ledger.recorder()
    conv = rec.start_conversation(title="triage", system_prompt="You are a triage agent.")
    pasted = "\n".join(f"2026-03-04T11:{i % 60:02d}:00Z worker-{i % 7} heartbeat ok seq={i}" for i in range(4000))
    rec.record_message(conv.id, "user", "Find why the worker stalls; do not restart production.\n" + pasted + "\nEND OF LOG")
    rec.record_message(conv.id, "assistant", "Looking.")
    rec.record_message(conv.id, "user", "any findings?")
    r = ledger.assemble(conv.id, provider="anthropic", budget_tokens=8000, now=NOW)
    body = json.dumps(r.payload, ensure_ascii=False)
    assert r.record.assembled_tokens <= 8000
    assert "Find why the worker stalls; do not restart production." in body
    assert "END OF LOG" in body
    assert re.search(r"tokens omitted; full text in the ledger \(message \d+\)", body)
    assert "any findings?" in body and "(continuing)" not in body


def test_cut_lines_keeps_whole_lines_header_errors_and_tail() -> None:
    tok = get_tokenizer()
    text = _log(3, 400)
    out = cut_lines(tok, text, 400, "artifact a7")
    lines = out.split("\n")
    assert lines[0] == "BUILD LOG run 3 (target x86_64)"
    assert lines[-1] == "BUILD FAILED run 3: 1 error"
    assert "[200] error: undefined reference to `frobnicate_3'" in lines
    kept = [line for line in lines if not line.startswith("[… ")]
    assert all(line in text.split("\n") for line in kept)  # whole lines only, in order
    gaps = [line for line in lines if line.startswith("[… ")]
    assert gaps and all(re.fullmatch(r"\[… [\d,]+ lines \([\d,]+ tokens\) omitted; full text in the ledger \(artifact a7\) …\]", g) for g in gaps)
    assert tok.count(out) <= 400 + 8
    assert cut_lines(tok, "short", 400, None) == "short"


def test_cut_text_ends_and_starts_at_line_breaks() -> None:
    tok = get_tokenizer()
    text = "\n".join(f"entry {i}: the quick brown fox jumps over the lazy dog" for i in range(200))
    out = cut_text(tok, text, 300, "message 1")
    head, tail = out.split("\n[… ")[0], out.split("…]\n")[-1]
    assert head.split("\n")[-1] in text.split("\n")
    assert tail.split("\n")[0] in text.split("\n")
