"""Fact probes: does a serialized payload show a fact, and does it leak one?

A probe is a :class:`Fact` — a short verbatim text (an id, a file handle, an error line,
a constraint sentence) with optional alternative spellings (a call id as rewritten for a
provider).  Probes are checked against the *text a model would read* in the payload:
every string value of the wire shape (system text, message text, tool-call names and
arguments, tool-result content, call ids), whitespace collapsed to single spaces.  JSON
escaping of the payload never matters, because strings are extracted, not the JSON
document.

``must_see`` facts are what a model needs to continue correctly; ``must_not_see`` facts
are private, stale, superseded, restricted or raw-payload facts (issue "Prove it").  A
``must_not_see`` fact with ``outside_call_arguments=True`` is only a leak when it appears
somewhere other than a tool call's arguments (a pre-edit line quoted in an edit call's
``old_string`` is the edit itself, not stale content presented as current); one with
``presented_as_content_of=path`` is only a leak where the payload presents that file's
content (:func:`content_texts`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextledger.tokens import get_tokenizer

__all__ = ["Fact", "ProbeResult", "check_probes", "content_texts", "facts_tokens", "normalize", "payload_texts", "reads_path"]

_WS = re.compile(r"\s+")


def normalize(text: str) -> str:
    """``text`` with every whitespace run collapsed to one space, stripped."""
    return _WS.sub(" ", text).strip()


@dataclass(frozen=True)
class Fact:
    """One probe.

    Attributes:
        text: the verbatim text that must (not) appear.
        why: a short human reason shown in reports ("pending picker call id").
        alternatives: other spellings that count as the same fact (e.g. provider-safe
            call ids).
        outside_call_arguments: for ``must_not_see`` only — ignore occurrences inside
            tool-call arguments.
        presented_as_content_of: for ``must_not_see`` only — a file path: the fact
            counts only where the payload presents it as that file's content, i.e. in
            the result of a read of the path (:func:`reads_path`) or in user/system text
            (data blocks, observations of text-action agents); the model's own earlier
            words, tool-call arguments and other tools' output (a test run's traceback,
            an issue tracker quoting code) do not present the file.
    """

    text: str
    why: str = ""
    alternatives: tuple[str, ...] = field(default=())
    outside_call_arguments: bool = False
    presented_as_content_of: str | None = None

    def spellings(self) -> tuple[str, ...]:
        """``text`` and its alternatives, normalized, empty ones dropped."""
        out = [normalize(s) for s in (self.text, *self.alternatives)]
        return tuple(s for s in out if s)


@dataclass(frozen=True)
class ProbeResult:
    """Outcome of :func:`check_probes`.

    Attributes:
        recall: found ``must_see`` facts / all (1.0 when there are none).
        missing: the ``must_see`` facts not found (their ``text``).
        leaks: number of ``must_not_see`` facts found.
        leaked: their ``text``.
    """

    recall: float
    missing: tuple[str, ...]
    leaks: int
    leaked: tuple[str, ...]


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)


def payload_texts(payload: dict[str, Any]) -> tuple[str, str]:
    """``(all_text, text_outside_call_arguments)`` of a provider payload, normalized.

    Works for every wire shape (OpenAI Chat ``tool_calls[].function.arguments``,
    Anthropic ``tool_use.input``, OpenAI Responses ``function_call.arguments``), valid or
    not.
    """
    everything: list[str] = []
    outside: list[str] = []
    for key, value in payload.items():
        if key == "input" and isinstance(value, list):
            _responses_texts(value, everything, outside)
            continue
        if key != "messages":
            _strings(value, everything)
            _strings(value, outside)
            continue
        for message in value if isinstance(value, list) else []:
            if not isinstance(message, dict):
                continue
            for mkey, mval in message.items():
                if mkey == "tool_calls" and isinstance(mval, list):
                    for call in mval:
                        fn = call.get("function", {}) if isinstance(call, dict) else {}
                        args = fn.get("arguments") if isinstance(fn, dict) else None
                        for k, v in (call.items() if isinstance(call, dict) else []):
                            if k != "function":
                                _strings(v, outside)
                        if isinstance(fn, dict):
                            _strings(fn.get("name"), outside)
                        _strings(call, everything)
                        if isinstance(args, str):
                            everything.append(_decoded(args))
                elif mkey == "content" and isinstance(mval, list):
                    for block in mval:
                        _strings(block, everything)
                        if isinstance(block, dict) and block.get("type") == "tool_use":
                            inp = block.get("input")
                            everything.append(json.dumps(inp, ensure_ascii=False))
                            _strings({k: v for k, v in block.items() if k != "input"}, outside)
                        else:
                            _strings(block, outside)
                else:
                    _strings(mval, everything)
                    _strings(mval, outside)
    return normalize("\n".join(everything)), normalize("\n".join(outside))


def _responses_texts(items: list[Any], everything: list[str], outside: list[str]) -> None:
    """The texts of Responses ``input`` items; a ``function_call``'s arguments count only
    in ``everything`` (decoded, as for the other shapes)."""
    for item in items:
        if isinstance(item, dict) and item.get("type") == "function_call":
            _strings({k: v for k, v in item.items() if k != "arguments"}, outside)
            _strings(item, everything)
            args = item.get("arguments")
            if isinstance(args, str):
                everything.append(_decoded(args))
        else:
            _strings(item, everything)
            _strings(item, outside)


def _decoded(arguments: str) -> str:
    """Argument JSON with its string values decoded (so ``"a\\nb"`` matches ``a b``)."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    out: list[str] = []
    _strings(value, out)
    return "\n".join(out)


_READ_TOOLS = frozenset({"read", "view", "open", "cat", "read_file", "view_file", "open_file", "notebookread", "readfile"})
_EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool"})
_SHELL_TOOLS = frozenset({"bash", "execute_bash", "shell", "run_shell_command", "terminal", "exec_command", "run_command"})
_SHELL_READERS = frozenset({"cat", "head", "tail", "less", "more", "sed", "nl", "grep", "rg", "awk", "bat"})


def reads_path(tool_name: str, arguments: str, path: str) -> bool:
    """Whether a call reads file ``path``: its arguments name the path and it is a read
    tool (``Read``, ``view``, ``open`` …), an editor ``view`` command, or a shell command
    opening with a reader (``cat``, ``head``, ``tail``, ``sed``, ``grep`` …)."""
    if path not in arguments:
        return False
    name = tool_name.lower()
    if name in _READ_TOOLS:
        return True
    if name in _EDITOR_TOOLS:
        return '"view"' in arguments.replace(" ", "")
    if name in _SHELL_TOOLS:
        words = _decoded(arguments).split()
        return bool(words) and words[0].rsplit("/", 1)[-1] in _SHELL_READERS
    return False


def content_texts(payload: dict[str, Any], path: str) -> str:
    """The normalized text of ``payload`` that presents file ``path``'s content: results
    of calls that read it (:func:`reads_path`) and every system/user text that is not a
    tool result; assistant text, tool-call arguments and other tools' results excluded.
    Works for every wire shape."""
    out: list[str] = []
    calls: dict[str, tuple[str, str]] = {}
    for key, value in payload.items():
        if key in ("system", "instructions"):
            _strings(value, out)
    items = payload.get("input")
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "function_call":
            calls[str(item.get("call_id"))] = (str(item.get("name") or ""), str(item.get("arguments") or ""))
        elif kind == "function_call_output":
            name, args = calls.get(str(item.get("call_id")), ("", ""))
            if reads_path(name, args, path):
                _strings(item.get("output"), out)
        elif kind == "message" and item.get("role") in ("user", "system", "developer"):
            _strings(item.get("content"), out)
    for message in payload.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        for call in message.get("tool_calls") or []:
            fn = call.get("function", {}) if isinstance(call, dict) else {}
            if isinstance(fn, dict):
                calls[str(call.get("id"))] = (str(fn.get("name") or ""), str(fn.get("arguments") or ""))
        content = message.get("content")
        if role == "tool":
            name, args = calls.get(str(message.get("tool_call_id")), ("", ""))
            if reads_path(name, args, path):
                _strings(content, out)
            continue
        blocks = content if isinstance(content, list) else [content]
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                calls[str(block.get("id"))] = (str(block.get("name") or ""), json.dumps(block.get("input"), ensure_ascii=False))
            elif isinstance(block, dict) and block.get("type") == "tool_result":
                name, args = calls.get(str(block.get("tool_use_id")), ("", ""))
                if reads_path(name, args, path):
                    _strings(block.get("content"), out)
            elif role in ("user", "system"):
                _strings(block, out)
    return normalize("\n".join(out))


def check_probes(payload: dict[str, Any], must_see: Sequence[Fact], must_not_see: Sequence[Fact]) -> ProbeResult:
    """Check ``must_see`` and ``must_not_see`` facts against ``payload`` (see module doc)."""
    everything, outside = payload_texts(payload)
    per_path: dict[str, str] = {}

    def haystack(f: Fact) -> str:
        if f.presented_as_content_of is not None:
            if f.presented_as_content_of not in per_path:
                per_path[f.presented_as_content_of] = content_texts(payload, f.presented_as_content_of)
            return per_path[f.presented_as_content_of]
        return outside if f.outside_call_arguments else everything

    missing = tuple(f.text for f in must_see if not any(s in everything for s in f.spellings()))
    leaked = tuple(f.text for f in must_not_see if any(s in haystack(f) for s in f.spellings()))
    recall = 1.0 if not must_see else round((len(must_see) - len(missing)) / len(must_see), 4)
    return ProbeResult(recall=recall, missing=missing, leaks=len(leaked), leaked=leaked)


def facts_tokens(facts: Iterable[Fact]) -> int:
    """o200k tokens of the facts' own texts (the floor no strategy can go below)."""
    tok = get_tokenizer()
    return sum(tok.count(f.text) for f in facts)
