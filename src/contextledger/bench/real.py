"""The real-transcript run: every supported file of ``../shared/data/real/``, nobody's labels.

Each file is imported into a ledger (the source-defective ones included — an import
failure is reported as an ``error`` row, never skipped) and assembled at each budget
(4,000 and 16,000 tokens by default) by contextledger and every peer.  The probes are
derived mechanically from the recorded graph, identically for every strategy
(:func:`derive_probes`):

* **unresolved calls** — every tool call still pending / awaiting approval: its call id
  must be visible (any provider-safe spelling counts);
* **latest failure** — the newest failed tool result, unless a later run of the same test
  or command superseded it (it passed since): its error line (the last line that
  mentions an error, exception, traceback, "fatal", "denied", "not found" or a non-zero
  exit; else the last line mentioning a failure; else the last non-empty line; first 100
  characters) must be visible;
* **user constraints** — every sentence of the user's own prose in a user-authored chat
  message (a scaffold's demonstration, SWE-agent ``is_demo``, is not user-authored; nor
  is pasted, quoted or client-injected text:
  :func:`~contextledger.policy.constraint_text.prose_sentences`) that opens with
  "do not", "don't" or "never" (after an optional "please"/"and"/"but"/"also") or
  contains "must" (first 120 characters) must be visible — "I don't remember my id" is
  not a constraint, "Don't touch the API" is; lines that look like code or numbered
  file output (``1463: msg = …``, a trailing ``{``/``;``) are not user constraints;
* **files** — every file path read or edited (arguments ``file_path``/``path``/
  ``filename``/``notebook_path``) must be visible; and for every edit
  (``old_string``/``old_str`` → ``new_string``/``new_str``) of a file that was read
  before, each removed line (≥ 20 characters, stripped) that no later edit brings back
  must NOT be presented as that file's content — in the result of a read of the path or
  in user/system text (:func:`~contextledger.bench.probes.content_texts`); the model's
  own earlier words, the edit call's arguments and other tools' output (a traceback, an
  issue tracker quoting code) do not present the file as current;
* validity — scored by the harness.

The native provider is Anthropic for Claude Code files and OpenAI Chat for the others;
every file also runs as an OpenAI Responses payload (``providers``).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from contextledger.bench.harness import DEFAULT_PROVIDERS, CaseInput, Row, case_providers, run_case
from contextledger.bench.probes import Fact, normalize
from contextledger.bench.strategies import Strategy
from contextledger.ingest.preambles import strip_injected
from contextledger.ledger import Ledger
from contextledger.policy.prose import prose_sentences
from contextledger.providers.anthropic import ANTHROPIC_ID_MAX_LENGTH
from contextledger.providers.openai_chat import OPENAI_CALL_ID_MAX_LENGTH, safe_identifier
from contextledger.records.enums import MessageKind, ResolutionState, Role, ToolCallStatus
from contextledger.records.parts import TextPart
from contextledger.store.base import Scope

__all__ = ["DEFAULT_BUDGETS", "RealFile", "derive_probes", "real_files", "run_real"]

DEFAULT_BUDGETS = (4000, 16000)
"""Budgets of the real-transcript run (tokens)."""

_SUPPORTED = ("openai-chat", "claude-code", "swe-agent", "codex-rollout", "aider-history")
_ERROR_LINE = re.compile(r"(?i)(error|exception|traceback|fatal|denied|not found|exit code [1-9]|exited with [1-9])")
_FAIL_LINE = re.compile(r"(?i)\bfail")
_CONSTRAINT = re.compile(r"(?i)^(?:please\s+|and\s+|but\s+|also\s+)?(?:do not|don't|never)\b|\bmust\b")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CODE_LINE = re.compile(r"^\s*\d+[:|]|[{};]\s*$|^\s*(def|class|return|import|from|if|elif|raise|msg)\b")
_PATH_KEYS = ("file_path", "path", "filename", "notebook_path")
_OLD_KEYS = ("old_string", "old_str")
_NEW_KEYS = ("new_string", "new_str")


@dataclass(frozen=True)
class RealFile:
    """One supported file of the manifest: ``path`` (absolute), ``rel`` (as in the
    manifest), ``format`` and ``bytes``."""

    path: Path
    rel: str
    format: str
    bytes: int


def real_files(root: Path, *, limit: int | None = None, max_bytes: int | None = None, match: str | None = None) -> list[RealFile]:
    """The supported files listed in ``root/manifest.json`` (formats ``openai-chat``,
    ``claude-code``, ``swe-agent``, ``codex-rollout``, ``aider-history``), in manifest order; optionally the first ``limit``,
    only those of at most ``max_bytes``, only those whose path contains ``match``.

    Raises:
        FileNotFoundError: no manifest.
    """
    from contextledger.bench.manifest import read_manifest

    entries = read_manifest(root)
    out = [RealFile(root / e["path"], e["path"], e["format"], int(e["bytes"])) for e in entries if e["format"] in _SUPPORTED]
    if max_bytes is not None:
        out = [f for f in out if f.bytes <= max_bytes]
    if match:
        out = [f for f in out if match in f.rel]
    return out[:limit] if limit is not None else out


def _call_spellings(call_id: str) -> tuple[str, ...]:
    return tuple({safe_identifier(call_id, OPENAI_CALL_ID_MAX_LENGTH), safe_identifier(call_id, ANTHROPIC_ID_MAX_LENGTH)} - {call_id})


def _error_line(text: str) -> str | None:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return None
    hits = [ln for ln in lines if _ERROR_LINE.search(ln)] or [ln for ln in lines if _FAIL_LINE.search(ln)]
    return (hits[-1] if hits else lines[-1])[:100]


def _args(arguments_json: str) -> dict[str, object]:
    try:
        value = json.loads(arguments_json)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def derive_probes(ledger: Ledger, conversation_id: str, scope: Scope | None = None) -> tuple[tuple[Fact, ...], tuple[Fact, ...]]:
    """``(must_see, must_not_see)`` for an imported conversation's active branch (rules in
    the module docstring)."""
    sc = scope or ledger.scope()
    store = ledger.store
    conv = store.get_conversation(sc, conversation_id)
    segments = store.lineage(sc, conv.active_branch_id)
    calls = store.tool_calls(sc, conversation_id, segments)
    arts = sorted(store.artifacts(sc, conversation_id, segments), key=lambda a: (a.seq, a.id))
    must_see: list[Fact] = []
    must_not: list[Fact] = []
    seen: set[str] = set()

    def add(target: list[Fact], fact: Fact) -> None:
        key = normalize(fact.text)
        if key and key not in seen:
            seen.add(key)
            target.append(fact)

    for c in calls:
        if c.status in (ToolCallStatus.PENDING, ToolCallStatus.AWAITING_APPROVAL):
            add(must_see, Fact(c.call_id, "unresolved tool call", alternatives=_call_spellings(c.call_id)))
    failed = [a for a in arts if a.is_error or a.status is ToolCallStatus.FAILED]
    # a failure the same test or command passed after (its memory superseded) is history
    superseded = {aid for m in store.memories(sc, conversation_id, segments) if m.resolution_state is ResolutionState.SUPERSEDED for aid in m.source_artifact_ids}
    if failed and failed[-1].id not in superseded:
        last = failed[-1]
        raw = last.inline_text if last.inline_text is not None else store.read_artifact_bytes(sc, last).decode("utf-8", errors="replace")
        line = _error_line(raw)
        if line:
            add(must_see, Fact(line, f"latest failing call's error line ({last.call_id})"))
    for m in store.messages(sc, conversation_id, segments, roles=[Role.USER.value]):
        if m.kind is not MessageKind.CHAT or m.metadata.get("is_demo"):
            continue
        for p in m.parts:
            if not isinstance(p, TextPart):
                continue
            # the user's own prose: not pasted or quoted text, not what the client injects
            own = strip_injected(p.text)
            for span in prose_sentences(own):
                s = own[span.start:span.end]
                if len(s) >= 12 and _CONSTRAINT.search(s) and not _CODE_LINE.search(s):
                    add(must_see, Fact(s[:120], "explicit user constraint"))
    read_text: dict[str, list[str]] = {}
    edits: list[tuple[int, str, str, str]] = []
    by_call = {a.call_id: a for a in arts}
    for c in sorted(calls, key=lambda c: (c.seq, c.call_index)):
        args = _args(c.arguments_json)
        path = next((str(args[k]) for k in _PATH_KEYS if isinstance(args.get(k), str) and args.get(k)), None)
        if path is None:
            continue
        add(must_see, Fact(path, "file read or edited"))
        old = next((str(args[k]) for k in _OLD_KEYS if isinstance(args.get(k), str)), None)
        new = next((str(args[k]) for k in _NEW_KEYS if isinstance(args.get(k), str)), None)
        if old is not None and new is not None:
            edits.append((c.seq, path, old, new))
        else:
            a = by_call.get(c.call_id)
            if a is not None and not a.is_error:
                text = a.inline_text if a.inline_text is not None else store.read_artifact_bytes(sc, a).decode("utf-8", errors="replace")
                read_text.setdefault(path, []).append(text)
    for k, (_, path, old, new) in enumerate(edits):
        reads = "\n".join(read_text.get(path, []))
        later_new = "\n".join(e[3] for e in edits[k + 1:] if e[1] == path)
        for line in old.splitlines():
            s = line.strip()
            if len(s) >= 20 and s not in new and s in reads and s not in later_new:
                add(must_not, Fact(s, f"pre-edit line of {path} presented as current", outside_call_arguments=True, presented_as_content_of=path))
    return tuple(must_see), tuple(must_not)


def _provider(fmt: str) -> str:
    return "anthropic" if fmt == "claude-code" else "openai-chat"


def run_real(
    files: Sequence[RealFile],
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    strategies: Sequence[Strategy] | None = None,
    workdir: str | None = None,
    providers: Sequence[str] = DEFAULT_PROVIDERS,
) -> list[Row]:
    """Import each file into one fresh SQLite ledger and run every strategy at every
    budget, once per provider of
    :func:`~contextledger.bench.harness.case_providers` (default: the file's own, then
    OpenAI Responses); a file that fails to import or assemble gives one ``error`` row
    per budget and provider (strategy ``contextledger``).

    Raises:
        InputError: an unknown provider.
    """
    case_providers("openai-chat", providers)  # an unknown name fails before any work
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        ledger = Ledger.open(home=Path(tmp) / "real")
        try:
            for f in files:
                wanted = case_providers(_provider(f.format), providers)
                try:
                    res = ledger.import_file(f.path)
                    must_see, must_not = derive_probes(ledger, res.conversation_id)
                except Exception as exc:  # reported, never skipped
                    for provider in wanted:
                        rows.extend(_error_rows(f.rel, provider, budgets, exc))
                    continue
                for provider in wanted:
                    for budget in budgets:
                        inp = CaseInput(
                            case=f.rel, ledger=ledger, conversation_id=res.conversation_id, branch_id=None, participant_id=None,
                            provider=provider, budget_tokens=budget, now=None, must_see=must_see, must_not_see=must_not,
                        )
                        try:
                            rows.extend(run_case(inp, strategies))
                        except Exception as exc:
                            rows.extend(_error_rows(f.rel, provider, (budget,), exc))
        finally:
            ledger.close()
    return rows


def _error_rows(case: str, provider: str, budgets: Sequence[int], exc: Exception) -> list[Row]:
    return [
        Row(
            strategy="contextledger", case=case, provider=provider, tokens=0, replay_tokens=0, reduction=0.0, must_see_tokens=0,
            must_see_recall=0.0, must_not_see_leaks=0, valid=False, assembly_ms=0.0, budget_tokens=b, error=f"{type(exc).__name__}: {exc}",
        )
        for b in budgets
    ]
