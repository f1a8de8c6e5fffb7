"""The task statement and the current input are always in the payload (seed 000 §4.6,
seed 001 §9 temperature): the task statement is the first user message in the user's
own words — a client-injected preamble (``ingest/preambles.py``) never is — and the
current input the newest; however long the tool loop after them and however tight the
budget, both are sent, cut with the omission marker when they must be.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import real_params
from contextledger.assembly.task import states_task
from contextledger.ingest.preambles import strip_injected
from contextledger.ledger import Ledger
from contextledger.records.enums import MessageKind, Role
from contextledger.records.parts import TextPart

ENV = "<environment_context>\n  <cwd>/repo</cwd>\n  <shell>zsh</shell>\n</environment_context>"
AGENTS = "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\nAlways run the linter.\n</INSTRUCTIONS>"


def _body(payload: dict[str, object]) -> str:
    return json.dumps(payload, ensure_ascii=False)


def _user_texts(payload: dict[str, object]) -> list[str]:
    msgs = payload["messages"]
    assert isinstance(msgs, list)
    return [m["content"] for m in msgs if m["role"] == "user" and isinstance(m["content"], str)]


def test_codex_ide_headers_are_injected_and_the_request_is_the_users() -> None:
    ide = "\n# Files mentioned by the user:\n\n## notes.vtt: /Users/u/notes.vtt\n\n## My request for Codex:\nsummarise the action items\n"
    assert strip_injected(ide) == "summarise the action items"
    assert strip_injected("# Context from my IDE setup:\n\n## Active file: src/a.py\n\n## Open tabs:\n- src/a.py\n") == ""
    assert strip_injected("# Context from my IDE setup is below\nfix it") == "# Context from my IDE setup is below\nfix it"


def _codex_like(led: Ledger, loop: int) -> tuple[str, str, str]:
    """A conversation opening with injected preambles, then the request, then ``loop``
    tool exchanges: (conversation id, task text, current text)."""
    rec = led.recorder()
    conv = rec.start_conversation(title="t", system_prompt="You are a coding agent.")
    rec.record_message(conv.id, "user", AGENTS)
    rec.record_message(conv.id, "user", ENV)
    task = "Make the chess variant: a 10x10 board with two extra pawns per side."
    rec.record_message(conv.id, "user", task)
    rec.record_message(conv.id, "assistant", "On it.")
    rec.record_message(conv.id, "user", ENV)
    current = "Now add castling rules for the wider board."
    rec.record_message(conv.id, "user", current)
    for i in range(loop):
        rec.record_assistant(conv.id, tool_calls=[{"call_id": f"c{i}", "tool_name": "exec_command", "arguments": {"cmd": f"grep -n castle src/rules{i}.py"}}])
        rec.record_tool_result(conv.id, f"c{i}", f"src/rules{i}.py:{i}: def castle_{i}(board): pass")
    return conv.id, task, current


@pytest.mark.parametrize("budget", [1500, 4000, 16000])
def test_the_first_request_and_the_current_input_survive_a_long_tool_loop(ledger: Ledger, budget: int) -> None:
    conv, task, current = _codex_like(ledger, 120)  # far more messages than the candidate window
    r = ledger.assemble(conv, budget_tokens=budget, persist=False, trace=True)
    users = _user_texts(r.payload)
    assert task in users and current in users
    assert users.index(task) < users.index(current)
    assert r.record.assembled_tokens <= budget and not r.record.over_budget
    # an injected preamble is never protected as the task statement
    assert not any(u.startswith(("# AGENTS.md", "<environment_context>")) and "omitted" in u for u in users)


def test_an_older_task_statement_is_cut_to_fit_never_dropped(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="picker", system_prompt="You are a document assistant.")
    details = " ".join(f"folder-{i:03d}" for i in range(120))
    first = rec.record_message(conv.id, "user", "First tidy the archive folders: " + details + ". Then I will ask for a deck.")
    rec.record_message(conv.id, "user", "Find last quarter's board deck.")
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "call_1", "tool_name": "request_user_choice", "arguments": {"options": ["doc_A", "doc_B"]}}])
    rec.set_awaiting_approval(conv.id, "call_1")
    roomy = ledger.assemble(conv.id, budget_tokens=2000, persist=False, trace=True)
    assert any(u.startswith("First tidy the archive folders: folder-000") and "Then I will ask for a deck." in u for u in _user_texts(roomy.payload))
    tight_budget = roomy.record.assembled_tokens - 100
    tight = ledger.assemble(conv.id, budget_tokens=tight_budget, persist=False, trace=True)
    users = _user_texts(tight.payload)
    cut = [u for u in users if u.startswith("First tidy the archive folders: folder-000")]
    assert len(cut) == 1 and cut[0].endswith("Then I will ask for a deck.")
    assert re.search(rf"\[… [\d,]+ tokens omitted; full text in the ledger \(message {first.seq}\) …\]", cut[0])
    assert "Find last quarter's board deck." in users
    assert "call_1" in _body(tight.payload)  # the pending choice: recovery state stays
    assert tight.record.assembled_tokens <= tight_budget and not tight.record.over_budget
    trace = [(d["decision"], d["reason"], d.get("detail")) for d in tight.record.trace or [] if d["record_id"] == first.id]
    assert ("shape", "budget", "text cut to fit the budget (head and tail kept)") in trace and not [t for t in trace if t[0] == "omit"], trace


REAL = real_params("codemie-code/codex/*.jsonl", "codemie-code/claude-code/*.jsonl", "claude-code-viewer-dkimuson/*.jsonl", "marot-spotter/*.jsonl")


def _own_words(led: Ledger, conv: str) -> tuple[str, str] | None:
    """The first lines of the task statement and the current input as recorded (the
    first and the newest user chat message of the active lineage in the user's own
    words, else the first of all), ``None`` without a user message."""
    scope = led.scope()
    segments = led.store.lineage(scope, led.store.get_conversation(scope, conv).active_branch_id)
    every = led.store.messages(scope, conv, segments, roles=[Role.USER.value], kinds=[MessageKind.CHAT.value])
    users = [m for m in every if states_task(m)] or every  # wholly injected (a bare slash command): the first
    if not users:
        return None

    def head(text: str) -> str:
        line = next(x for x in text.strip().split("\n") if x.strip())
        return line.strip()[:40].strip()

    return tuple(head("\n".join(p.text for p in m.parts if isinstance(p, TextPart))) for m in (users[0], users[-1]))  # type: ignore[return-value]


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name if isinstance(p, Path) else str(p))
def test_real_transcripts_send_the_task_statement_and_the_current_input(tmp_path: Path, path: Path) -> None:
    led = Ledger.open(home=tmp_path / "home")
    try:
        conv = led.import_file(path).conversation_id
        heads = _own_words(led, conv)
        if heads is None:
            pytest.skip(f"{path.name}: no user message")
        for budget in (4000, 16000):
            r = led.assemble(conv, budget_tokens=budget, persist=False)
            body = "\n".join(_user_texts(r.payload))
            for h in heads:
                assert h in body, (path.name, budget, h)
            for preamble in ("# AGENTS.md instructions", "<environment_context>"):
                assert not any(u.startswith(preamble) and "tokens omitted" in u for u in _user_texts(r.payload)), (path.name, budget)
    finally:
        led.close()
