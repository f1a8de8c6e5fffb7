"""Interactive Claude Code (the real CLI on a pseudo-terminal) through the proxy: its
session-title request to the small model is recognised as a side call — forwarded, its
answer becomes the terminal title, and no conversation is made of it.

Skipped (one line) when the CLI is not installed (``scripts/install_clients.sh``);
failed under ``CI=true``."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import struct
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextledger.ledger import Ledger
from contextledger.server.app import create_app
from contextledger.server.scripted import Plan, ScriptedUpstream
from contextledger.server.settings import ServerSettings
from service_support import serve

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="pseudo-terminal test (Linux)")
KEY = "sk-ant-api03-" + "k" * 40
WAIT_S = 120.0


def _cli() -> Path:
    base = Path(os.environ.get("CONTEXTLEDGER_CLIENTS_DIR") or Path(__file__).resolve().parents[1] / ".clients")
    path = base / "node_modules" / ".bin" / "claude"
    if not path.exists():
        message = f"claude CLI not installed at {path} (run scripts/install_clients.sh)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def _answer(kind: str, body: dict[str, Any]) -> Plan:
    return Plan(text="Hello there.") if body.get("tools") else Plan(text=json.dumps({"title": "Greeting the user"}))


def _config(home: Path, repo: Path) -> None:
    """A configuration that skips the first-run dialogs (onboarding, folder trust, key)."""
    cfg = {"hasCompletedOnboarding": True, "theme": "dark", "customApiKeyResponses": {"approved": [KEY[-20:]], "rejected": []},
           "projects": {str(repo): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}}}
    (home / ".claude").mkdir()
    for path in (home / ".claude" / ".claude.json", home / ".claude.json"):
        path.write_text(json.dumps(cfg), encoding="utf-8")


def _run_until(argv: list[str], cwd: Path, env: dict[str, str], done: Any) -> bytes:
    """Run ``argv`` on a pseudo-terminal (40×120) until ``done()`` or :data:`WAIT_S`."""
    import fcntl
    import termios

    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child process
        os.chdir(cwd)
        os.execve(argv[0], argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    screen = b""
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline and not done():
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    screen += os.read(fd, 65536)
                except OSError:
                    break
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
    return screen


def test_title_request_is_a_side_call(tmp_path: Path) -> None:
    cli = _cli()
    repo = tmp_path / "repo"
    repo.mkdir()
    _config(tmp_path, repo)
    upstream = ScriptedUpstream(_answer, validate=False)
    ledger = Ledger.open(home=tmp_path / "ledger")
    try:
        with serve(upstream.app) as up, serve(create_app(ServerSettings(anthropic_upstream=up), ledger=ledger)) as proxy:
            env = {"PATH": os.environ.get("PATH", ""), "ANTHROPIC_BASE_URL": proxy, "ANTHROPIC_API_KEY": KEY, "IS_SANDBOX": "1",
                   "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1", "HOME": str(tmp_path),
                   "CLAUDE_CONFIG_DIR": str(tmp_path / ".claude"), "TERM": "xterm-256color"}

            screen = _run_until([str(cli), "Say hello to me please"], repo, env, lambda: len(upstream.received) >= 2)
            counts = httpx.get(proxy + "/healthz").json()["proxy"]
        side = [r for r in upstream.received if r.path == "/v1/messages" and not r.body.get("tools")]
        assert side, f"no tool-less request seen; screen: {screen[-400:]!r}"
        title = side[0]
        assert len(title.body["messages"]) == 1 and "Say hello to me please" in json.dumps(title.body["messages"][0])
        assert title.body["model"].startswith("claude-haiku") and title.headers["x-claude-code-session-id"]
        assert counts["side_call"] == len(side)
        # the main turn is recorded (or forwarded unassembled) — never the title request
        assert all("<session>" not in c.conversation.title for c in ledger.store.list_conversations(ledger.scope()))
        assert all(c.conversation.title in ("", "Say hello to me please") for c in ledger.store.list_conversations(ledger.scope()))
    finally:
        ledger.close()
