"""Shell command results: command, exit code, duration, error type, key error and stack.

Seed 001 §4.4 "Extract" shape: "コマンド、終了コード、エラー種別、主要スタックだけ".  The
payload never holds the whole log: three head lines, five tail lines and (on error) the
last traceback's final frames plus its exception line.  On failure the head and tail are
taken after stack frames are folded into ``[N stack frames omitted]`` lines
(:func:`~contextledger.memory.extractors.errorscan.fold_stack_frames`; seed 000 §4.5–4.6:
the error line is recovery state, stack noise is not).

Payload keys: ``command``, ``program``, ``exit_code`` (int | None), ``duration_ms``
(int | None), ``status`` (``succeeded`` / ``failed`` / ``running`` / ``unknown``),
``error_type``, ``error_line``, ``stack`` (list of lines), ``output_lines``,
``output_bytes``, ``head``, ``tail``, ``stack_frames_folded`` (frames folded on failure).
"""

from __future__ import annotations

from typing import Any

from contextledger.memory.extractors.actions import Action, resolve_action
from contextledger.memory.extractors.base import Extraction, ToolInput
from contextledger.memory.extractors.errorscan import find_error, fold_stack_frames
from contextledger.memory.extractors.textutil import (
    Body,
    body_ranges,
    byte_len,
    cap,
    count_of,
    fmt_int,
    generic_exit_code,
    head_tail,
    is_shell_noise,
    nonempty,
    split_lines,
    unwrap,
)
from contextledger.records.enums import ConfidenceBasis, ContextKind, FreshnessClass, Shape

__all__ = ["CommandExtractor", "command_status"]

HEAD_LINES = 3
TAIL_LINES = 5
COMMAND_CAP_CHARS = 160
PAYLOAD_COMMAND_CHARS = 1000
"""Longest command (characters) kept in the payload; the artifact keeps it whole."""


def command_status(item: ToolInput, body: Body, error_found: bool) -> tuple[str, int | None, bool]:
    """(status, exit code, status_was_guessed) for a shell result.

    ``failed`` when the runtime flagged an error or the exit code is non-zero;
    ``succeeded`` on exit code 0; ``running`` when the runtime says the process still runs;
    otherwise ``failed`` (guessed) when an error was found in the output, else ``unknown``.
    """
    code = body.exit_code
    if code is None:
        code = generic_exit_code(body.text[-400:]) if body.start is not None else None
    if item.is_error or (code is not None and code != 0):
        return "failed", code, False
    if code == 0:
        return "succeeded", code, False
    if body.running:
        return "running", None, False
    if error_found:
        return "failed", None, True
    return "unknown", None, False


def shell_extraction(item: ToolInput, action: Action) -> Extraction:
    """The command extract of a shell result (also the fallback of search and test runs)."""
    body = unwrap(item.result_text)
    lines = split_lines(body.text)
    err = find_error(lines)
    status, code, guessed = command_status(item, body, err is not None and err.from_traceback)
    if status == "unknown" and err is not None and err.error_type == "command not found":
        status, guessed = "failed", True
    failed = status == "failed"
    shown = nonempty(lines)
    informative = [ln for ln in shown if not is_shell_noise(ln)]  # a shell start-up warning is no summary
    folded = 0
    if failed:
        shown, folded = fold_stack_frames(shown)
    head, tail, _ = head_tail(shown, HEAD_LINES, TAIL_LINES)
    command = action.command or ""
    payload: dict[str, Any] = {
        "command": cap(command, PAYLOAD_COMMAND_CHARS),
        "program": action.sub,
        "exit_code": code,
        "duration_ms": body.duration_ms,
        "status": status,
        "error_type": err.error_type if failed and err else None,
        "error_line": err.error_line if failed and err else None,
        "stack": list(err.stack) if failed and err else [],
        "output_lines": len(lines),
        "output_bytes": byte_len(body.text),
        "head": [cap(x) for x in head],
        "tail": [cap(x) for x in tail],
        "stack_frames_folded": folded,
    }
    first = f"$ {cap(command.strip().splitlines()[0] if command.strip() else '(no command)', COMMAND_CAP_CHARS)}"
    if code is not None:
        first += f" → exit {code}"
    elif status == "running":
        first += " → still running"
    if payload["error_type"]:
        first += f" ({payload['error_type']})"
    first += f" · {count_of(len(lines), 'line')}" if any(ln.strip() for ln in lines) else " · (no output)"
    if body.duration_ms is not None:
        first += f" · {body.duration_ms / 1000:.1f} s"
    summary_lines = [first]
    if failed and err:
        summary_lines.append(err.error_line)
    elif informative:
        summary_lines.append(cap(informative[-1].strip()))
    line_range, byte_range = body_ranges(item.result_text, body)
    omitted = len(shown) - len(head) - len(tail)
    limits: list[str] = []
    if omitted > 0:
        lines_kind = "non-empty lines after folding" if folded else "non-empty output lines"
        limits.append(f"{fmt_int(omitted)} of {fmt_int(len(shown))} {lines_kind} omitted")
    if folded:
        limits.append(f"{fmt_int(folded)} stack frame{'' if folded == 1 else 's'} folded")
    return Extraction(
        kind="command",
        summary="\n".join(summary_lines),
        payload=payload,
        shape=Shape.EXTRACT,
        context_kind=ContextKind.RECOVERY if failed else ContextKind.OPERATIONAL,
        freshness_class=FreshnessClass.SESSION,
        subject_key=None,
        revalidation_tool=None,
        revalidation_args={},
        confidence=0.8 if guessed else 1.0,
        confidence_basis=ConfidenceBasis.HEURISTIC
        if guessed
        else ConfidenceBasis.DETERMINISTIC_PARSE,
        limits="; ".join(limits) or None,
        error_type=payload["error_type"],
        line_range=line_range,
        byte_range=byte_range,
    )


class CommandExtractor:
    """Extractor for shell tools (``Bash``, ``execute_bash``, ``bash``, ``exec_command`` …)."""

    name = "command"

    def matches(self, item: ToolInput) -> bool:
        """True for shell calls (see :data:`~contextledger.memory.extractors.actions.SHELL_TOOLS`)."""
        action = resolve_action(item)
        return action.verb == "shell" or (
            action.verb in ("read", "search") and action.command is not None
        )

    def extract(self, item: ToolInput) -> Extraction:
        """The command extract of ``item``."""
        return shell_extraction(item, resolve_action(item))
