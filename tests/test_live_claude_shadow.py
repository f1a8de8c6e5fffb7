"""The real Claude Code CLI through a real ``contextledger serve --proxy-mode shadow``
against a scripted Anthropic upstream on loopback (the short task of
:mod:`test_live_claude_code`: read, run the tests, edit, run them again).

Shadow mode must be invisible to the agent and complete in the ledger: the upstream
receives the CLI's own bodies — each body's sha256 is the one the proxy recorded for the
client's request, the CLI's ``system`` entries are still inside ``messages`` (assemble mode
folds them), and every main-loop request replays the previous one's history — while the
ledger holds the conversation, one shadow assembly per main-loop request with both token
counts and the upstream's usage, and the service counts no passthrough.

The CLI comes from ``$CONTEXTLEDGER_CLIENTS_DIR`` (``scripts/install_clients.sh``); without
it the test skips, or fails under ``CI=true``.
"""

from __future__ import annotations

import hashlib
import itertools
import urllib.request
from pathlib import Path
from typing import Any

from contextledger.inspector.views import assemblies_of
from contextledger.ledger import Ledger
from contextledger.providers.registry import count_payload_tokens
from contextledger.server.local import serve_in_thread
from contextledger.server.scripted import ScriptedUpstream
from live_clients import claude_env, find_cli, git_repo, run_cli, serve_proxy
from test_live_claude_code import CALC, PROMPT, RUN_TIMEOUT, TESTS, short_task

BUDGET = 24000


def _unmarked(value: Any) -> Any:
    """``value`` without ``cache_control`` markers (the CLI moves its newest one each turn)."""
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def _metrics(url: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        lines = r.read().decode().splitlines()
    return {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in lines if line and not line.startswith("#")}


def test_short_task_in_shadow_mode(tmp_path: Path) -> None:
    cli = find_cli("claude")
    repo = git_repo(tmp_path / "repo", {"calc.py": CALC, "test_calc.py": TESTS})
    script = short_task(repo)
    upstream = ScriptedUpstream(script)
    args = [str(cli), "-p", PROMPT, "--dangerously-skip-permissions", "--output-format", "json", "--max-turns", "80"]
    with serve_in_thread(upstream.app) as up, serve_proxy(tmp_path / "ledger", anthropic_upstream=up, proxy_mode="shadow") as proxy:
        done = run_cli(args, cwd=repo, env=claude_env(tmp_path, proxy.url, {"x-contextledger-budget": str(BUDGET)}), timeout=RUN_TIMEOUT)
        metrics = _metrics(proxy.url)
    assert done.returncode == 0, f"claude exited {done.returncode}: {done.stdout[-2000:]} {done.stderr[-2000:]}"
    output = done.json()
    assert isinstance(output, dict) and output["result"] == "Fixed: add() now returns the sum; all tests pass."
    assert (repo / "calc.py").read_text() == CALC.replace("return a - b", "return a + b")
    main = [r for r in upstream.received if r.path == "/v1/messages" and any(t.get("name") == "Bash" for t in r.body.get("tools") or [])]
    assert len(main) == len(script.steps) + 1 == len(script.main_requests)
    # the CLI's own bodies: its system entries inside messages, each history the previous one's plus the newest turn
    assert any(m.get("role") == "system" for m in main[0].body["messages"])
    for before, after in itertools.pairwise(main):
        assert _unmarked(after.body["messages"][:len(before.body["messages"])]) == _unmarked(before.body["messages"])
        assert _unmarked(after.body["system"]) == _unmarked(before.body["system"]) and after.body["tools"] == before.body["tools"]
    log = proxy.log_text()
    for needle in ("forwarded untouched", "not assembled", "not recorded", "Traceback"):
        assert needle not in log, log[-3000:]
    assert metrics['contextledger_proxy_requests_total{kind="passthrough",dialect="all"}'] == 0
    assert metrics['contextledger_proxy_shadow_requests_total{dialect="anthropic"}'] == len(main)
    ledger = Ledger.open(home=proxy.home)
    try:
        scope = ledger.scope()
        [conv] = [c.conversation for c in ledger.store.list_conversations(scope)]
        roles = [m.role.value for m in ledger.store.messages(scope, conv.id)]
        assert roles.count("assistant") == len(main) and roles.count("tool") == len(script.steps)
        assert sorted(c.tool_name for c in ledger.store.tool_calls(scope, conv.id)) == sorted(s.tool for s in script.steps)
        records = assemblies_of(ledger.store, scope, conv.id)
        # one shadow assembly per main-loop request (two when the first did not fit beside what the client sends)
        assert len(main) <= len(records) <= 2 * len(main)
        marked = {r.proxy["client_body_sha256"]: r for r in records if r.proxy is not None}
        assert all(r.proxy is None or r.proxy["mode"] == "shadow" for r in records)
        for req in main:  # what the upstream received hashes to what the proxy received from the CLI
            record = marked["sha256:" + hashlib.sha256(req.raw).hexdigest()]
            assert record.proxy is not None and record.proxy["client_request_tokens"] == count_payload_tokens("anthropic", req.body)
            assert record.proxy["assembled_request_tokens"] > 0
            assert record.upstream_usage == {"input_tokens": 10, "cached_read_tokens": 0, "cache_write_tokens": 0, "output_tokens": 5,
                                             "raw": {"input_tokens": 10, "output_tokens": 5}}
    finally:
        ledger.close()

