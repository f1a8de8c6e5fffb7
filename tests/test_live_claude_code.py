"""The real Claude Code CLI through a real ``contextledger serve`` against a scripted
Anthropic upstream on loopback.

The upstream plays the model: it decides each step from the request it receives (the
newest tool call and its result) and drives Claude Code's own tools (Read, Bash, Edit)
on a scratch git repository, so the CLI really reads, runs and edits files.  Every body
the upstream receives is kept: the assertions are about what the model would have seen —
the file is fixed on disk, every request is provider-valid, within the budget sent in
``x-contextledger-budget`` (``ANTHROPIC_CUSTOM_HEADERS``), holds the user's constraint
verbatim, shows no pre-edit file content as current, and none was forwarded untouched
(the ledger recorded an assembly for each, the service log names no passthrough).  A long
session (42 tool calls, large files, long command output) sends at least 85 % fewer
tokens than the same script run directly against the upstream.

The CLI comes from ``$CONTEXTLEDGER_CLIENTS_DIR`` (``scripts/install_clients.sh``); without
it the tests skip, or fail under ``CI=true``.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from contextledger.server.local import serve_in_thread
from contextledger.server.scripted import Plan, ReceivedRequest, ScriptedUpstream
from contextledger.tokens import count_tokens
from live_clients import claude_env, find_cli, git_repo, run_cli, serve_proxy

CONSTRAINT = "Do not add any new files to the repository."
BUDGET = 24000
RUN_TIMEOUT = 300.0

CALC = "def add(a, b):\n    \"\"\"The sum of a and b.\"\"\"\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TESTS = (
    "import unittest\n\nfrom calc import add, mul\n\n\nclass CalcTest(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
    "    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n\n\n"
    "if __name__ == \"__main__\":\n    unittest.main()\n"
)
BUGGY_LINE = "return a - b"
PYTHON = sys.executable


# -- the scripted model -------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One tool call of the script: Claude Code tool name and input."""

    tool: str
    input: dict[str, Any]


def _blocks(message: Any) -> list[dict[str, Any]]:
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in content or [] if isinstance(b, dict))


def newest_call(body: dict[str, Any]) -> tuple[dict[str, Any], str | None] | None:
    """The newest ``tool_use`` of the request and the text of its result (``None`` when
    the request carries no result for it)."""
    results: dict[str, str] = {}
    for message in body.get("messages") or []:
        for block in _blocks(message):
            if block.get("type") == "tool_result":
                results[str(block.get("tool_use_id"))] = _result_text(block)
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "assistant":
            continue
        uses = [b for b in _blocks(message) if b.get("type") == "tool_use"]
        if uses:
            return uses[-1], results.get(str(uses[-1].get("id")))
    return None


@dataclass
class AgentScript:
    """A coding agent's model: the main loop (requests that declare the Bash tool) runs
    ``steps`` in order, the step after the one whose call is the request's newest; side
    calls (no tools) get a short text.  ``final`` makes the closing text from the last
    result."""

    steps: list[Step]
    final: Callable[[str], str]
    main_requests: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, kind: str, body: dict[str, Any]) -> Plan:
        tools = {str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)}
        if "Bash" not in tools:
            return Plan(text="Fixing a test")
        self.main_requests.append(body)
        found = newest_call(body)
        index = 0
        if found is not None:
            use, result = found
            given = use.get("input") if isinstance(use.get("input"), dict) else {}
            done = [i for i, s in enumerate(self.steps) if s.tool == use.get("name") and all(given.get(k) == v for k, v in s.input.items())]
            if not done:
                return Plan(text=f"Stopping: unexpected newest call {use.get('name')}.")
            index = done[-1] + 1
            if index == len(self.steps):
                return Plan(text=self.final(result or ""))
        step = self.steps[index]
        return Plan(text=f"Step {index + 1}.", tool_calls=[(step.tool, dict(step.input))])


def short_task(repo: Path) -> AgentScript:
    """Read the module, run its failing tests, fix the bug, run them again."""
    calc = str(repo / "calc.py")
    return AgentScript(
        steps=[
            Step("Read", {"file_path": calc}),
            Step("Bash", {"command": f"{PYTHON} test_calc.py", "description": "Run the tests"}),
            Step("Edit", {"file_path": calc, "old_string": BUGGY_LINE, "new_string": "return a + b"}),
            Step("Bash", {"command": f"{PYTHON} -m unittest -v test_calc", "description": "Run the tests again"}),
        ],
        final=lambda out: "Fixed: add() now returns the sum; all tests pass." if "OK" in out else "The tests still fail.",
    )


def long_task(repo: Path, modules: int) -> AgentScript:
    """Survey ``modules`` large modules (read each, run its long report), then the short
    task's fix: ``2 * modules + 4`` tool calls."""
    survey: list[Step] = []
    for i in range(modules):
        survey += [Step("Read", {"file_path": str(repo / "pkg" / f"mod_{i:02d}.py")}),
                   Step("Bash", {"command": f"{PYTHON} report.py {i}", "description": f"Report on module {i}"})]
    short = short_task(repo)
    return AgentScript(steps=[*survey, *short.steps], final=short.final)


def _module(i: int, lines: int = 420) -> str:
    out = [f'"""Module {i}: generated helpers for the survey."""', ""]
    for j in range(lines // 4):
        out += [f"def helper_{i}_{j}(value, scale={j % 7 + 1}):", f'    """Scale value by {j} and offset {i * j % 97}."""',
                f"    return value * scale + {i * 1000 + j}  # helper {i}.{j}", ""]
    return "\n".join(out) + "\n"


REPORT = (
    "import sys\n\nn = int(sys.argv[1])\n"
    "for j in range(360):\n"
    "    print(f'check {n:02d}.{j:03d}: module mod_{n:02d} helper_{n}_{j % 105} returned {n * 7919 + j * 104729} (ok)')\n"
)


# -- running Claude Code ------------------------------------------------------------------
@dataclass
class Session:
    """One Claude Code run: what the upstream received, the CLI's JSON output, the
    service log and the number of assemblies the ledger recorded (``None`` direct)."""

    received: list[ReceivedRequest]
    script: AgentScript
    output: Any
    log: str
    assemblies: int | None


def _assemblies(home: Path) -> int:
    with sqlite3.connect(home / "ledger.db") as db:
        return int(db.execute("select count(*) from assemblies").fetchone()[0])


def run_claude(tmp: Path, repo: Path, script: AgentScript, *, through_proxy: bool, prompt: str) -> Session:
    """Run ``claude -p PROMPT`` in ``repo`` against a scripted upstream, through a real
    ``contextledger serve`` or directly."""
    cli = find_cli("claude")
    args = [str(cli), "-p", prompt, "--dangerously-skip-permissions", "--output-format", "json", "--max-turns", "80"]
    upstream = ScriptedUpstream(script)
    log, assemblies = "", None
    with serve_in_thread(upstream.app) as up:
        if through_proxy:
            with serve_proxy(tmp / "ledger", anthropic_upstream=up) as proxy:
                done = run_cli(args, cwd=repo, env=claude_env(tmp, proxy.url, {"x-contextledger-budget": str(BUDGET)}), timeout=RUN_TIMEOUT)
            log, assemblies = proxy.log_text(), _assemblies(proxy.home)
        else:
            done = run_cli(args, cwd=repo, env=claude_env(tmp, up), timeout=RUN_TIMEOUT)
    assert done.returncode == 0, f"claude exited {done.returncode}: {done.stdout[-2000:]} {done.stderr[-2000:]}"
    return Session(received=list(upstream.received), script=script, output=done.json(), log=log, assemblies=assemblies)


def _count_markers(value: Any) -> int:
    if isinstance(value, dict):
        return int("cache_control" in value) + sum(_count_markers(v) for k, v in value.items() if k != "cache_control")
    if isinstance(value, list):
        return sum(_count_markers(v) for v in value)
    return 0


def _texts(body: dict[str, Any]) -> list[str]:
    """Every text the model reads in ``body`` (system blocks, text blocks, tool results)."""
    system = body.get("system")
    out = [system] if isinstance(system, str) else [str(b.get("text", "")) for b in system or [] if isinstance(b, dict)]
    for m in body.get("messages") or []:
        content = m.get("content")
        if isinstance(content, str):
            out.append(content)
            continue
        for b in _blocks(m):
            out.append(_result_text(b) if b.get("type") == "tool_result" else str(b.get("text", "")))
    return out


PRE_EDIT_LINE = re.compile(r"^\s*3[\t→]\s*return a - b", re.MULTILINE)


def _shows_pre_edit_as_current(body: dict[str, Any]) -> bool:
    """A Read result of calc.py before the fix, unmarked, in a request made after it."""
    edited = any(b.get("type") == "tool_use" and b.get("name") == "Edit" for m in body.get("messages") or [] for b in _blocks(m))
    if not edited:
        return False
    # marked in place, or (inside an epoch, where sent blocks never change) announced by a
    # later note that cites the result's tool_use id
    notes = "\n".join(t for t in _texts(body) if "no longer current:" in t)
    results = [(b.get("tool_use_id"), _result_text(b)) for m in body.get("messages") or [] for b in _blocks(m) if b.get("type") == "tool_result"]
    return any(PRE_EDIT_LINE.search(t) and not t.startswith("[stale") and f"- {i}: stale" not in notes for i, t in results)


def _main_tokens(session: Session) -> int:
    return sum(count_tokens(json.dumps(b, ensure_ascii=False)) for b in session.script.main_requests)


def check_session(repo: Path, session: Session) -> None:
    """The assertions every run through the proxy must pass (see module docstring)."""
    assert (repo / "calc.py").read_text() == CALC.replace(BUGGY_LINE, "return a + b")
    assert isinstance(session.output, dict) and session.output["result"] == "Fixed: add() now returns the sum; all tests pass."
    assert len(session.script.main_requests) == len(session.script.steps) + 1
    requests = [r for r in session.received if r.path == "/v1/messages"]
    for r in requests:
        body = r.body
        assert r.problems == [], r.problems
        assert not any(m.get("role") == "system" for m in body["messages"])  # folded into the system prefix
        assert _count_markers(body) <= 4
        assert count_tokens(json.dumps({k: body[k] for k in ("system", "messages", "tools") if k in body}, ensure_ascii=False, separators=(",", ":"))) <= BUDGET
        assert any(CONSTRAINT in t for t in _texts(body))
        assert not _shows_pre_edit_as_current(body)
    # zero requests forwarded untouched: every one was assembled (a request that does not
    # fit beside what the client sends as given is assembled twice), none passed through
    assert session.assemblies is not None and len(requests) <= session.assemblies <= 2 * len(requests)
    for needle in ("forwarded untouched", "not assembled", "not recorded", "Traceback"):
        assert needle not in session.log, session.log[-3000:]


PROMPT = f"The tests in test_calc.py fail. Find the bug in calc.py and fix it. {CONSTRAINT}"
LONG_PROMPT = f"Survey every module of pkg/ with report.py, then fix the failing test in test_calc.py. {CONSTRAINT}"
MODULES = 19


@pytest.fixture(scope="module")
def short_session(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Session]:
    tmp = tmp_path_factory.mktemp("claude-short")
    repo = git_repo(tmp / "repo", {"calc.py": CALC, "test_calc.py": TESTS})
    return repo, run_claude(tmp, repo, short_task(repo), through_proxy=True, prompt=PROMPT)


def _long_repo(root: Path) -> Path:
    files = {"calc.py": CALC, "test_calc.py": TESTS, "report.py": REPORT, **{f"pkg/mod_{i:02d}.py": _module(i) for i in range(MODULES)}}
    return git_repo(root, files)


def test_short_task_through_the_proxy(short_session: tuple[Path, Session]) -> None:
    repo, session = short_session
    check_session(repo, session)
    first, last = session.script.main_requests[0], session.script.main_requests[-1]
    # the client's own breakpoints: two in its system prompt, one on its newest message
    # (moved onto the assembled newest message), plus the end of the stable prefix
    assert _count_markers(first["system"]) == 3 and _count_markers(first["messages"]) == 1
    assert "cache_control" in last["messages"][-1]["content"][-1] and _count_markers(last) == 4
    assert [b["text"] for b in first["system"][:3]] == [b["text"] for b in last["system"][:3]]
    assert first["system"][3]["text"].startswith("Available agent types")  # the client's system entry, folded


def test_long_session_sends_far_fewer_tokens(tmp_path_factory: pytest.TempPathFactory) -> None:
    tmp = tmp_path_factory.mktemp("claude-long")
    repo = _long_repo(tmp / "repo")
    proxied = run_claude(tmp, repo, long_task(repo, MODULES), through_proxy=True, prompt=LONG_PROMPT)
    check_session(repo, proxied)
    assert len(proxied.script.steps) >= 40
    direct_tmp = tmp_path_factory.mktemp("claude-long-direct")
    direct_repo = _long_repo(direct_tmp / "repo")
    direct = run_claude(direct_tmp, direct_repo, long_task(direct_repo, MODULES), through_proxy=False, prompt=LONG_PROMPT)
    assert (direct_repo / "calc.py").read_text() == (repo / "calc.py").read_text()
    assert len(direct.script.main_requests) == len(proxied.script.main_requests)
    sent, replayed = _main_tokens(proxied), _main_tokens(direct)
    assert sent <= 0.15 * replayed, (sent, replayed)
