"""Support of the live-client tests: find an installed agent CLI, make a scratch git
repository, serve the proxy as a real ``contextledger serve`` process, run a CLI with a
bounded timeout.

The CLIs are installed by ``scripts/install_clients.sh`` into ``.clients/`` of the
repository (or ``$CONTEXTLEDGER_CLIENTS_DIR``).  A missing CLI skips the test with one
line, except under ``CI=true`` where it fails it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["CliRun", "ServedProxy", "claude_env", "clients_dir", "find_cli", "git_repo", "run_cli", "serve_proxy"]

REPO_ROOT = Path(__file__).resolve().parents[1]


def clients_dir() -> Path:
    """``$CONTEXTLEDGER_CLIENTS_DIR``, else ``<repo>/.clients``."""
    given = os.environ.get("CONTEXTLEDGER_CLIENTS_DIR")
    return Path(given) if given else REPO_ROOT / ".clients"


def find_cli(name: str) -> Path:
    """The installed CLI ``name`` (``claude``, ``codex``) under :func:`clients_dir`;
    skips the test when it is missing (fails it under ``CI=true``)."""
    path = clients_dir() / "node_modules" / ".bin" / name
    if path.exists():
        return path
    message = f"{name} CLI not installed at {path} (run scripts/install_clients.sh)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def git_repo(root: Path, files: Mapping[str, str]) -> Path:
    """A git repository at ``root`` holding ``files`` (relative path → text), committed."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "start"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, timeout=60)
    return root


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class ServedProxy:
    """A running ``contextledger serve``: its base URL, data directory and log file."""

    url: str
    home: Path
    log: Path

    def log_text(self) -> str:
        """What the service wrote to stdout and stderr so far."""
        return self.log.read_text(encoding="utf-8", errors="replace")


@contextmanager
def serve_proxy(home: Path, *, anthropic_upstream: str | None = None, openai_upstream: str | None = None, proxy_mode: str | None = None,
                ready_timeout: float = 60.0) -> Iterator[ServedProxy]:
    """Run ``contextledger --home HOME serve`` on a free loopback port until the block
    ends (then terminate it, bounded); the upstream and mode options as given.  Waits for
    ``/healthz``; fails the test with the service log when it does not come up."""
    port = _free_port()
    home.mkdir(parents=True, exist_ok=True)
    log = home / "serve.log"
    args = [sys.executable, "-c", "from contextledger.cli.main import main; main()", "--home", str(home), "serve", "--port", str(port)]
    if anthropic_upstream:
        args += ["--anthropic-upstream", anthropic_upstream]
    if openai_upstream:
        args += ["--openai-upstream", openai_upstream]
    if proxy_mode:
        args += ["--proxy-mode", proxy_mode]
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            deadline = time.monotonic() + ready_timeout
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/healthz", timeout=5) as r:
                        if r.status == 200:
                            break
                except (urllib.error.URLError, OSError):
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"contextledger serve did not come up: {log.read_text(errors='replace')[-2000:]}")
                time.sleep(0.2)
            yield ServedProxy(url=url, home=home, log=log)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@dataclass(frozen=True)
class CliRun:
    """One finished CLI run: exit status, stdout, stderr, and stdout as JSON when it is."""

    returncode: int
    stdout: str
    stderr: str

    def json(self) -> object:
        """stdout parsed as JSON (the last JSON line when there are several).

        Raises:
            ValueError: stdout holds no JSON.
        """
        for line in reversed(self.stdout.strip().splitlines()):
            try:
                return json.loads(line)
            except ValueError:
                continue
        return json.loads(self.stdout)


def run_cli(args: list[str], *, cwd: Path, env: Mapping[str, str], timeout: float) -> CliRun:
    """Run ``args`` in ``cwd`` with exactly ``env``; fails the test (with the output so
    far) when it takes longer than ``timeout`` seconds."""
    try:
        done = subprocess.run(args, cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        pytest.fail(f"{Path(args[0]).name} did not finish in {timeout:.0f}s; stdout: {out[-1500:]} stderr: {err[-1500:]}")
    return CliRun(returncode=done.returncode, stdout=done.stdout, stderr=done.stderr)


def claude_env(tmp: Path, base_url: str, headers: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment Claude Code runs with against ``base_url``: configuration under
    ``tmp`` (no user configuration is read), no telemetry, updates or side traffic;
    ``headers`` go on every request (``ANTHROPIC_CUSTOM_HEADERS``)."""
    home = tmp / "home"
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude"), "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-live-test", "IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1", "LANG": "C.UTF-8",
    }
    if headers:
        env["ANTHROPIC_CUSTOM_HEADERS"] = "\n".join(f"{k}: {v}" for k, v in headers.items())
    return env
