"""Sessions of the cost benchmark as sequences of main-thread model calls.

A :class:`ModelCall` is one request a client made: the Anthropic Messages history it sent
(everything before the answer) and the answer the model gave.  Two sources:

* :func:`claude_code_calls` — a real Claude Code transcript (``.jsonl``): user and
  assistant lines of the main thread (``isSidechain`` lines, progress, snapshots,
  summaries and ``system`` lines are not sent to the model); the lines of one assistant
  message (one ``message.id``) are merged into one answer; a compact summary
  (``isCompactSummary``) starts a new history, as the client does after ``/compact``.
  Each assistant message that follows a user turn is one call.
* :func:`scripted_session` — a long coding session built deterministically from a seed
  (reads, edits, test runs, an early user constraint), in the same shape.

:func:`fixed_prefix` is Claude Code's real fixed prefix (system blocks and tool
definitions, sizes and breakpoints as a recorded request carried them, the text replaced
by filler of the same o200k size); :func:`client_body` is the body a client sends for a
call: that prefix, the history, and a breakpoint on the last block (Claude Code's own
placement).
"""

from __future__ import annotations

import copy
import functools
import json
import random
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from contextledger.errors import InputError
from contextledger.tokens import get_tokenizer

__all__ = ["ModelCall", "claude_code_calls", "client_body", "fixed_prefix", "real_sessions", "scripted_session"]

EPHEMERAL = {"type": "ephemeral"}


@dataclass(frozen=True)
class ModelCall:
    """One main-thread model call: ``history`` (Messages API messages, the last one a
    user turn), ``answer`` (the assistant message), ``model`` and the ``usage`` the
    provider reported, when the transcript kept it."""

    history: tuple[dict[str, Any], ...]
    answer: dict[str, Any]
    model: str
    usage: dict[str, Any] | None = None


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _events(path: Path) -> list[dict[str, Any]]:
    """The main-thread user / assistant lines of a transcript, one assistant message per
    ``message.id``."""
    out: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                raise InputError(f"{path}:{number}: not a JSON line") from None
            kind = entry.get("type") if isinstance(entry, dict) else None
            message = entry.get("message") if kind in ("user", "assistant") else None
            if not isinstance(message, dict) or entry.get("isSidechain"):
                continue
            blocks = _blocks(message.get("content"))
            if kind == "assistant":
                if message.get("model") == "<synthetic>":
                    continue
                last = out[-1] if out else None
                if last is not None and last["role"] == "assistant" and last["id"] == message.get("id"):
                    last["content"].extend(blocks)
                    last["usage"] = message.get("usage") or last["usage"]
                    continue
                out.append({"role": "assistant", "id": message.get("id"), "content": blocks, "model": str(message.get("model") or ""), "usage": message.get("usage")})
            elif blocks:
                out.append({"role": "user", "content": blocks, "reset": bool(entry.get("isCompactSummary"))})
    return out


def claude_code_calls(path: str | Path) -> list[ModelCall]:
    """The main-thread model calls of a Claude Code transcript, in order (rules in the
    module docstring).

    Raises:
        InputError: a line that is not JSON (``file:line``).
        OSError: the file cannot be read.
    """
    history: list[dict[str, Any]] = []
    calls: list[ModelCall] = []
    for event in _events(Path(path)):
        if event["role"] == "user":
            if event["reset"]:
                history = []
            if history and history[-1]["role"] == "user":
                history[-1]["content"].extend(copy.deepcopy(event["content"]))
            else:
                history.append({"role": "user", "content": copy.deepcopy(event["content"])})
            continue
        answer = {"role": "assistant", "content": copy.deepcopy(event["content"])}
        if not answer["content"]:
            continue
        if history and history[-1]["role"] == "user":
            calls.append(ModelCall(tuple(copy.deepcopy(history)), answer, event["model"], event["usage"]))
            history.append(copy.deepcopy(answer))
        elif history:  # a continued assistant message: one answer, the call's too
            history[-1]["content"].extend(copy.deepcopy(answer["content"]))
            if calls:
                calls[-1].answer["content"].extend(copy.deepcopy(answer["content"]))
    return calls


@functools.cache
def _prefix_shape() -> dict[str, Any]:
    text = resources.files("contextledger.bench").joinpath("data/claude_code_prefix.json").read_text(encoding="utf-8")
    shape: dict[str, Any] = json.loads(text)
    return shape


def _filler_tool(name: str, tokens: int) -> dict[str, Any]:
    """A tool definition named ``name`` whose compact JSON is ``tokens`` o200k tokens."""
    n = get_tokenizer().count
    tool: dict[str, Any] = {"name": name, "description": "", "input_schema": {"type": "object", "properties": {}}}
    base = n(json.dumps(tool, ensure_ascii=False, separators=(",", ":")))
    k = max(0, tokens - base)
    for _ in range(4):  # calibrate the boundary tokens of the description
        tool["description"] = " w" * k
        size = n(json.dumps(tool, ensure_ascii=False, separators=(",", ":")))
        if size == tokens or k == 0:
            break
        k = max(0, k + tokens - size)
    return tool


@functools.cache
def _prefix() -> tuple[str, tuple[dict[str, Any], ...], tuple[dict[str, Any], ...]]:
    shape = _prefix_shape()
    system = []
    for block in shape["system"]:
        item: dict[str, Any] = {"type": "text", "text": " w" * int(block["tokens"])}
        if block.get("cache_control"):
            item["cache_control"] = dict(block["cache_control"])
        system.append(item)
    tools = tuple(_filler_tool(str(t["name"]), int(t["tokens"])) for t in shape["tools"])
    return str(shape["client"]), tuple(system), tools


def fixed_prefix() -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """``(label, system blocks, tools)`` of Claude Code's fixed prefix (copies)."""
    label, system, tools = _prefix()
    return label, copy.deepcopy(list(system)), copy.deepcopy(list(tools))


def client_body(call: ModelCall, *, declared: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The Messages body a client sends for ``call``: the fixed prefix, the history with
    a 5-minute breakpoint on the last block, ``stream`` off.  ``declared`` adds tool
    definitions for tools the session uses that the fixed prefix lacks."""
    _, system, tools = fixed_prefix()
    messages = copy.deepcopy(list(call.history))
    last = messages[-1]["content"]
    last[-1] = {**last[-1], "cache_control": dict(EPHEMERAL)}
    return {"model": call.model, "max_tokens": 32000, "system": system, "tools": tools + list(declared or []), "messages": messages, "stream": False}


_FILES = ("src/app/models.py", "src/app/views.py", "src/app/forms.py", "src/app/utils.py", "tests/test_views.py", "src/app/api.py")


def _code(rng: random.Random, path: str, lines: int) -> str:
    names = ("user", "order", "item", "total", "price", "account", "session", "record")
    out = []
    for i in range(1, lines + 1):
        a, b = rng.choice(names), rng.choice(names)
        out.append(f"{i:>5}\tdef {a}_{b}_{i}(self, {b}):  # {path}\n{i:>5}\t    return self.{a}.get({b!r}, {rng.randint(0, 999)})")
    return "\n".join(out)


def scripted_session(turns: int, *, seed: int = 7, model: str = "claude-sonnet-4-5") -> list[ModelCall]:
    """A deterministic coding session of ``turns`` model calls: the first user turn sets
    the task and a constraint ("Never edit setup.cfg"); each call reads a file (a numbered
    listing of 40–120 functions), edits it or runs the tests (a failure every fifth run);
    every 25 calls the user adds a request.  Same ``turns`` and ``seed`` ⇒ same session."""
    rng = random.Random(seed)
    history: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "Refactor the app package for clarity. Never edit setup.cfg. Run the tests after each change."}]}]
    calls: list[ModelCall] = []
    for t in range(turns):
        path = _FILES[t % len(_FILES)]
        step = t % 3
        use_id = f"toolu_{seed:02d}{t:05d}"
        if step == 0:
            tool, args = "Read", {"file_path": path}
            result = _code(rng, path, rng.randint(40, 120))
            error = False
        elif step == 1:
            tool, args = "Edit", {"file_path": path, "old_string": f"return self.user.get('order', {t})", "new_string": f"return self.user.get('order', {t + 1})"}
            result, error = f"The file {path} has been updated.", False
        else:
            tool, args = "Bash", {"command": "pytest -q", "description": "Run the tests"}
            error = t % 5 == 2
            result = (f"FAILED tests/test_views.py::test_case_{t} - AssertionError: expected {t} got {t + 1}\n1 failed, {40 + t} passed" if error else f"{41 + t} passed in {1 + t % 7}.2s")
        answer = {"role": "assistant", "content": [{"type": "text", "text": f"Step {t + 1}: {tool} {path}."}, {"type": "tool_use", "id": use_id, "name": tool, "input": args}]}
        calls.append(ModelCall(tuple(copy.deepcopy(history)), answer, model, None))
        history.append(answer)
        content: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": use_id, "content": result, **({"is_error": True} if error else {})}]
        if t % 25 == 24:
            content.append({"type": "text", "text": f"Also keep the public names of {path} unchanged."})
        history.append({"role": "user", "content": content})
    return calls


def real_sessions(root: Path, *, match: str | None = None, limit: int | None = None, min_calls: int = 20) -> list[tuple[str, list[ModelCall]]]:
    """The main-thread Claude Code sessions of ``root/manifest.json`` (format
    ``claude-code``, not a subagent's file) with at least ``min_calls`` calls, in manifest
    order: ``(path as in the manifest, calls)``; optionally only paths containing
    ``match``, only the first ``limit``.

    Raises:
        FileNotFoundError: no manifest.
        InputError: a transcript line that is not JSON; a manifest of the wrong shape.
    """
    from contextledger.bench.manifest import read_manifest

    entries = read_manifest(root)
    out: list[tuple[str, list[ModelCall]]] = []
    for entry in entries:
        rel = str(entry.get("path", ""))
        if entry.get("format") != "claude-code" or "/subagents/" in rel or "/agents/" in rel or (match and match not in rel):
            continue
        calls = claude_code_calls(root / rel)
        if len(calls) >= min_calls:
            out.append((rel, calls))
        if limit is not None and len(out) >= limit:
            break
    return out
