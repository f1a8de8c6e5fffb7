"""Support of the live Codex CLI test: a scripted Responses upstream that drives Codex's
own tools on a scratch repository, and a runner for ``codex exec`` with its own
``CODEX_HOME``.

The upstream decides each step from the request alone: the newest tool output and the
call it answers (a ``cat -n`` read, a test run, an ``apply_patch``) pick the next call, so
the agent really reads the file, runs the failing tests, patches the bug and re-runs them.
Each answer is a reasoning item (opaque ``encrypted_content``, as with ``store: false``)
and the step's call or text.  It answers in the streamed Responses format Codex reads (``response.created``,
``response.output_item.added`` / ``.done``, ``response.completed``) and keeps every request
it received (headers, body) for the assertions.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from contextledger.ingest.preambles import is_injected

__all__ = [
    "BUGGY",
    "FINAL_TEXT",
    "FIXED",
    "PATCH",
    "TEST_FILE",
    "CodexUpstream",
    "Received",
    "codex_binary",
    "make_repo",
    "run_codex",
    "write_codex_home",
]

BUGGY = "def add(a, b):\n    return a - b\n\n\ndef double(x):\n    return add(x, x)\n"
FIXED = BUGGY.replace("return a - b", "return a + b")
TEST_FILE = (
    "from calc import add, double\n\n"
    "assert add(2, 3) == 5, 'add(2, 3) should be 5'\n"
    "assert double(4) == 8, 'double(4) should be 8'\n"
    "print('tests: OK')\n"
)
PATCH = "*** Begin Patch\n*** Update File: calc.py\n@@ def add(a, b):\n-    return a - b\n+    return a + b\n*** End Patch\n"
FINAL_TEXT = "Fixed add() in calc.py (it subtracted). All tests pass."
READ_COMMAND = "cat -n calc.py"
TEST_COMMAND = "python3 test_calc.py"
CALL_KINDS = ("function_call", "custom_tool_call")
OUTPUT_KINDS = ("function_call_output", "custom_tool_call_output")


@dataclass(frozen=True, kw_only=True)
class Received:
    """One request the upstream received (lower-case header names, JSON body) and the
    output items it answered with."""

    headers: dict[str, str]
    body: dict[str, Any]
    output: list[dict[str, Any]]


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _output_text(item: dict[str, Any]) -> str:
    output = item.get("output")
    if isinstance(output, str):
        return output
    return _text({"content": output})


def is_user_message(item: Any) -> bool:
    """A ``user`` message item (typed or bare)."""
    return isinstance(item, dict) and item.get("role") == "user" and item.get("type", "message") == "message"


def user_texts(body: dict[str, Any]) -> list[str]:
    """The texts of the body's user messages that hold the user's own words."""
    return [t for t in (_text(i) for i in body.get("input", []) if is_user_message(i)) if not is_injected(t)]


class CodexUpstream:
    """The scripted upstream (see module docstring).

    Args:
        workdir: the scratch repository the agent works in (``workdir`` of its commands).
        prompt: the user's prompt (a request whose newest user message holds it, with no
            tool output after it, starts the task).
    """

    def __init__(self, workdir: Path, prompt: str) -> None:
        self.workdir = workdir
        self.prompt = prompt
        self.received: list[Received] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.app = Starlette(routes=[Route("/v1/responses", self._responses, methods=["POST"])])

    def _next(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}{next(self._ids):06d}"

    # -- the script ------------------------------------------------------------------
    def _shell_call(self, body: dict[str, Any], command: str) -> dict[str, Any]:
        names = {t.get("name"): t for t in body.get("tools", []) if isinstance(t, dict) and t.get("type") == "function"}
        if "exec_command" in names:
            name, arguments = "exec_command", {"cmd": command, "workdir": str(self.workdir)}
        elif "shell_command" in names:
            name, arguments = "shell_command", {"command": command, "workdir": str(self.workdir)}
        else:
            name, arguments = "shell", {"command": ["bash", "-lc", command], "workdir": str(self.workdir)}
        return {"type": "function_call", "id": self._next("fc_"), "call_id": self._next("call_"), "name": name,
                "arguments": json.dumps(arguments), "status": "completed"}

    def _patch_call(self) -> dict[str, Any]:
        return {"type": "custom_tool_call", "id": self._next("ctc_"), "call_id": self._next("call_"), "name": "apply_patch", "input": PATCH, "status": "completed"}

    def _message(self, text: str) -> dict[str, Any]:
        return {"type": "message", "id": self._next("msg_"), "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}

    def decide(self, body: dict[str, Any]) -> dict[str, Any]:
        """The next output item for ``body``, from its newest tool output (any item after
        it is ignored): none after the user's prompt — read the file; after the read or the
        patch — run the tests; after a failing run — the patch; after a passing run — the
        final text."""
        items = [i for i in body.get("input", []) if isinstance(i, dict)]
        prompt_at = max((k for k, i in enumerate(items) if is_user_message(i) and self.prompt in _text(i)), default=-1)
        output_at = max((k for k, i in enumerate(items) if i.get("type") in OUTPUT_KINDS), default=-1)
        if output_at < prompt_at:
            return self._shell_call(body, READ_COMMAND)
        last = items[output_at]
        call = next((i for i in items if i.get("type") in CALL_KINDS and i.get("call_id") == last.get("call_id")), {})
        if call.get("type") == "custom_tool_call":
            return self._shell_call(body, TEST_COMMAND)
        command = str(json.loads(call.get("arguments") or "{}").get("cmd") or call.get("arguments") or "")
        if READ_COMMAND in command:
            return self._shell_call(body, TEST_COMMAND)
        if "tests: OK" in _output_text(last):
            return self._message(FINAL_TEXT)
        return self._patch_call()

    # -- the wire --------------------------------------------------------------------
    async def _responses(self, request: Request) -> Response:
        body = json.loads(await request.body())
        item = self.decide(body)
        rid = self._next("rs_")
        reasoning = {"type": "reasoning", "id": rid, "summary": [{"type": "summary_text", "text": f"Next: {item['type']}."}], "encrypted_content": f"gAAAAB-{rid}-opaque=="}
        response = {"id": self._next("resp_"), "object": "response", "created_at": 0, "status": "completed", "model": str(body.get("model", "")),
                    "output": [reasoning, item], "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "error": None, "incomplete_details": None,
                    "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                              "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}}
        with self._lock:
            self.received.append(Received(headers={k.lower(): v for k, v in request.headers.items()}, body=body, output=response["output"]))
        return StreamingResponse(_events(response), media_type="text/event-stream", headers={"cache-control": "no-cache"})


def _sse(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def _events(response: dict[str, Any]) -> Iterator[bytes]:
    seq = itertools.count()
    yield _sse({"type": "response.created", "sequence_number": next(seq), "response": {**response, "status": "in_progress", "output": []}})
    for i, item in enumerate(response["output"]):
        yield _sse({"type": "response.output_item.added", "sequence_number": next(seq), "output_index": i, "item": item})
        yield _sse({"type": "response.output_item.done", "sequence_number": next(seq), "output_index": i, "item": item})
    yield _sse({"type": "response.completed", "sequence_number": next(seq), "response": response})


# -- the client ---------------------------------------------------------------------------
def codex_binary() -> Path | None:
    """The installed Codex CLI (``$CONTEXTLEDGER_CLIENTS_DIR``, default ``<repo>/.clients``),
    or ``None``."""
    clients = Path(os.environ.get("CONTEXTLEDGER_CLIENTS_DIR") or Path(__file__).resolve().parents[1] / ".clients")
    path = clients / "node_modules" / ".bin" / "codex"
    return path if path.exists() else None


def write_codex_home(home: Path, base_url: str, headers: dict[str, str]) -> Path:
    """A ``CODEX_HOME`` whose ``config.toml`` points Codex at ``base_url`` (``…/v1``) with
    ``headers`` on every request; returns its path."""
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    extra = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in headers.items())
    (codex_home / "config.toml").write_text(
        'model = "gpt-5.5"\nmodel_provider = "scripted"\napproval_policy = "never"\nsandbox_mode = "danger-full-access"\n\n'
        "[model_providers.scripted]\n"
        f'name = "scripted"\nbase_url = "{base_url}"\nenv_key = "SCRIPTED_API_KEY"\nwire_api = "responses"\n'
        f"request_max_retries = 0\nstream_max_retries = 0\nhttp_headers = {{ {extra} }}\n\n"
        "[features]\nplugins = false\n\n[analytics]\nenabled = false\n",
        encoding="utf-8",
    )
    return codex_home


def make_repo(path: Path) -> None:
    """A scratch git repository with the buggy ``calc.py`` and its test (``path`` is
    emptied first)."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    (path / "calc.py").write_text(BUGGY, encoding="utf-8")
    (path / TEST_FILE_NAME).write_text(TEST_FILE, encoding="utf-8")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "calc"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True, capture_output=True, timeout=30)


TEST_FILE_NAME = "test_calc.py"


def run_codex(binary: Path, codex_home: Path, workdir: Path, prompt: str, *, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    """``codex exec --skip-git-repo-check --json PROMPT`` in ``workdir`` (stdin closed;
    ``HOME`` is ``codex_home``'s parent)."""
    env = {**os.environ, "CODEX_HOME": str(codex_home), "HOME": str(codex_home.parent), "SCRIPTED_API_KEY": "sk-scripted", "NO_COLOR": "1"}
    return subprocess.run([str(binary), "exec", "--skip-git-repo-check", "--json", prompt], cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout, check=False)
