"""The real Codex CLI through the proxy: ``codex exec`` against ``contextledger serve``
against a scripted Responses upstream on loopback that drives Codex's own tools
(``exec_command`` and the ``apply_patch`` custom tool) on a scratch git repository.

Two sessions run one after the other in the same folder with the same prompt (the
repository is reset in between).  The assertions are about what the model would have
seen: every upstream request is a valid Responses body within the budget, holds the
user's constraint verbatim, never shows pre-edit file content after the edit, is
assembled (never forwarded untouched), and the two sessions stay two conversations.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from contextledger.ledger import Ledger
from contextledger.providers.counting import count_openai_responses_tokens
from contextledger.providers.registry import validate_payload
from contextledger.server.app import create_app
from contextledger.server.local import serve_in_thread
from contextledger.server.settings import ServerSettings
from live_codex_support import (
    FINAL_TEXT,
    FIXED,
    OUTPUT_KINDS,
    PATCH,
    CodexUpstream,
    Received,
    codex_binary,
    is_user_message,
    make_repo,
    run_codex,
    user_texts,
    write_codex_home,
)

BUDGET = 9000
CONSTRAINT = "Do not modify test_calc.py."
PROMPT = f"The tests in this repository fail. Find the bug and fix it. {CONSTRAINT}"
PRE_EDIT_LINE = re.compile(r"\d+\t    return a - b")
"""The buggy line as ``cat -n`` shows it (the patch's own ``-`` line has no number)."""


@dataclass(kw_only=True)
class Session:
    """One ``codex exec`` run: its exit code, JSON events, the file after it, and the
    upstream requests it caused."""

    returncode: int
    events: list[dict[str, Any]]
    calc_after: str
    requests: list[Received]


@dataclass(kw_only=True)
class Runs:
    sessions: list[Session]
    assemblies: int
    conversations: list[str]


def _events(stdout: str) -> list[dict[str, Any]]:
    out = []
    for line in stdout.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    binary = codex_binary()
    if binary is None:
        message = "Codex CLI not installed (scripts/install_clients.sh installs it into .clients/)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    root = tmp_path_factory.mktemp("codex")
    repo = root / "repo"
    upstream = CodexUpstream(repo, PROMPT)
    ledger = Ledger.open(home=root / "ledger")
    sessions: list[Session] = []
    try:
        with serve_in_thread(upstream.app) as up, serve_in_thread(create_app(ServerSettings(openai_upstream=f"{up}/v1"), ledger=ledger)) as proxy:
            codex_home = write_codex_home(root / "home", f"{proxy}/v1", {"x-contextledger-budget": str(BUDGET)})
            for _ in range(2):
                make_repo(repo)
                before = len(upstream.received)
                done = run_codex(binary, codex_home, repo, PROMPT, timeout=90)
                sessions.append(Session(returncode=done.returncode, events=_events(done.stdout), calc_after=(repo / "calc.py").read_text(encoding="utf-8"),
                                        requests=upstream.received[before:]))
        conversations = [c.conversation.id for c in ledger.store.list_conversations(ledger.scope())]
        # an assembled request records its answer with the assembly's id (a request
        # forwarded untouched records nothing)
        assemblies = len({m.metadata["assembly_id"] for c in conversations for m in ledger.store.messages(ledger.scope(), c) if "assembly_id" in m.metadata})
        yield Runs(sessions=sessions, assemblies=assemblies, conversations=conversations)
    finally:
        ledger.close()


def _requests(runs: Runs) -> list[Received]:
    return [r for s in runs.sessions for r in s.requests]


def _fields(body: dict[str, Any]) -> dict[str, Any]:
    return {k: body[k] for k in ("instructions", "input", "tools") if k in body}


def _item_text(item: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in item.items() if k != "input"}, ensure_ascii=False)


def test_each_session_fixes_the_bug_on_disk(runs: Runs) -> None:
    for session in runs.sessions:
        assert session.returncode == 0
        assert session.calc_after == FIXED
        messages = [e["item"]["text"] for e in session.events if e.get("type") == "item.completed" and e["item"].get("type") == "agent_message"]
        assert messages == [FINAL_TEXT]
        # read, failing run, patch, passing run, final text: five model requests
        assert len(session.requests) == 5


def test_every_upstream_request_is_valid_within_budget_and_keeps_the_constraint(runs: Runs) -> None:
    requests = _requests(runs)
    assert len(requests) == 10
    for r in requests:
        fields = _fields(r.body)
        assert validate_payload("openai-responses", fields) == []
        assert count_openai_responses_tokens(fields) <= BUDGET
        assert PROMPT in user_texts(r.body)
        assert [t["name"] for t in r.body["tools"] if t["type"] == "custom"] == ["apply_patch"]


def test_no_request_is_forwarded_untouched(runs: Runs) -> None:
    # every upstream request was assembled (one recorded assembly each) ...
    assert runs.assemblies == len(_requests(runs))
    for r in _requests(runs):
        items = r.body["input"]
        head = next(k for k, i in enumerate(items) if i.get("role") != "developer")
        prompt = next(k for k, i in enumerate(items) if is_user_message(i) and PROMPT in json.dumps(i))
        # ... and its history is the assembly's: the client's user items carry ids (``msg_…``),
        # the assembled ones never do (the continued turn after the prompt is the client's own)
        assert [k for k, i in enumerate(items[head:prompt + 1]) if "id" in i] == []


def test_custom_tool_calls_keep_their_shape(runs: Runs) -> None:
    for session in runs.sessions:
        after_patch = session.requests[3:]
        for r in after_patch:
            items = r.body["input"]
            [call] = [i for i in items if i.get("type") == "custom_tool_call"]
            assert call["name"] == "apply_patch" and call["input"] == PATCH
            [output] = [i for i in items if i.get("call_id") == call["call_id"] and i is not call]
            assert output["type"] == "custom_tool_call_output" and "Success. Updated the following files" in output["output"]
            assert not [i for i in items if i.get("type") == "function_call" and i.get("name") == "apply_patch"]


def test_pre_edit_content_is_never_shown_after_the_edit(runs: Runs) -> None:
    for r in _requests(runs):
        items = r.body["input"]
        patch_at = next((k for k, i in enumerate(items) if i.get("type") == "custom_tool_call"), None)
        shown = [k for k, i in enumerate(items) if PRE_EDIT_LINE.search(_item_text(i))]
        if patch_at is not None:
            assert [k for k in shown if k > patch_at] == []


def test_two_sessions_in_one_folder_stay_two_conversations(runs: Runs) -> None:
    second = runs.sessions[1]
    assert len(runs.conversations) == 2
    ids = [{r.headers.get("session-id") for r in s.requests} for s in runs.sessions]
    assert all(len(i) == 1 for i in ids) and ids[0] != ids[1]
    # the second session starts from its own prompt: nothing of the first one is sent
    opening = second.requests[0].body["input"]
    assert [i.get("type") for i in opening if not i.get("role")] == []
    for r in second.requests:
        assert FINAL_TEXT not in json.dumps(r.body["input"], ensure_ascii=False)
        assert sum(1 for i in r.body["input"] if is_user_message(i) and PROMPT in json.dumps(i)) == 1


def test_the_turns_encrypted_reasoning_goes_upstream_byte_exact(runs: Runs) -> None:
    # one ``codex exec`` is one turn: every request carries the reasoning items of all
    # earlier answers of its session exactly as the upstream issued them
    for session in runs.sessions:
        issued: list[tuple[str, str]] = []
        for r in session.requests:
            assert [(i["id"], i["encrypted_content"]) for i in r.body["input"] if i.get("type") == "reasoning"] == issued
            issued += [(i["id"], i["encrypted_content"]) for i in r.output if i["type"] == "reasoning"]


def test_no_user_item_is_added_after_the_newest_tool_output(runs: Runs) -> None:
    for r in _requests(runs):
        items = r.body["input"]
        last_output = max((k for k, i in enumerate(items) if i.get("type") in OUTPUT_KINDS), default=-1)
        if last_output >= 0:
            assert items[last_output + 1:] == []


def test_support_repo_is_a_git_checkout(tmp_path: Path) -> None:
    make_repo(tmp_path / "r")
    assert (tmp_path / "r" / ".git").is_dir() and (tmp_path / "r" / "calc.py").read_text(encoding="utf-8") != FIXED
