"""The ``latest_verification`` section: the newest test run, else the newest verification
command, else the newest command with an exit code."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from contextledger.compaction.handoff import NONE_RECORDED
from contextledger.compaction.sections.common import (
    MAX_LINE_CHARS,
    by_seq,
    first_artifact,
    memory_kind,
)
from contextledger.compaction.sections.failures import error_line
from contextledger.compaction.text import cap_text, one_line
from contextledger.records.models import ToolMemory

__all__ = ["VERIFY_COMMAND", "latest_verification"]

VERIFY_COMMAND = re.compile(
    r"(?:^|&&|\|\||;|\|)\s*(?:\S+\s+){0,2}?(?:test|check|lint|build|compile|typecheck|mypy|ruff|"
    r"flake8|pylint|eslint|tsc|credo|clippy|vet|verify|make)(?=\s|$)",
    re.IGNORECASE,
)
"""A verification command when no test run was recognised: one of these words as the
first, second or third word of a command segment on the command's first line
(``mix test``, ``cargo build``, ``npm run lint``, ``mypy src``)."""


def _counts_text(counts: Any) -> str:
    if not isinstance(counts, Mapping) or not counts:
        return "no counts parsed"
    return ", ".join(f"{v} {k}" for k, v in counts.items())


_FROM_CALL = "call status; no exit code or summary in the output"
"""How a verification result read from the call's recorded status is marked."""


def _recorded_outcome(mem: ToolMemory, parsed: str) -> tuple[str, str | None]:
    """``(status, basis)``: the status parsed from the output (basis ``None``), or — when
    the output told nothing (``unknown``) — what the record itself says: the exit code's
    outcome, else the call's recorded status (basis :data:`_FROM_CALL`)."""
    if parsed not in ("", "unknown"):
        return parsed, None
    code = mem.payload.get("exit_code")
    if isinstance(code, int):
        return ("succeeded" if code == 0 else "failed"), None
    return mem.status.value, _FROM_CALL


def _test_verification(m: ToolMemory) -> dict[str, Any]:
    p = m.payload
    status, basis = _recorded_outcome(m, str(p.get("status") or ""))
    counts = _counts_text(p.get("counts"))
    if status in ("failed", "error") and not p.get("test"):
        evidence = error_line(m)
    elif status in ("failed", "error"):
        where = f" ({p.get('file')})" if p.get("file") else ""
        evidence = f"{p.get('test')}: {p.get('error') or 'no message'}{where}"
    else:
        evidence = f"{status}: {counts}"
    return {
        "command": one_line(str(p.get("command") or m.source_tool), 200),
        "result": f"{status} ({basis or counts})",
        "evidence": cap_text(evidence, MAX_LINE_CHARS),
        "memory_id": m.id,
        "artifact_id": first_artifact(m),
        "seq": m.seq,
    }


def _command_verification(m: ToolMemory) -> dict[str, Any]:
    p = m.payload
    code = p.get("exit_code")
    status, basis = _recorded_outcome(m, str(p.get("status") or ""))
    tail = [str(x) for x in p.get("tail") or []]
    failed = status == "failed" or (isinstance(code, int) and code != 0)
    evidence = (
        error_line(m) if failed else (cap_text(tail[-1], MAX_LINE_CHARS) if tail else "no output")
    )
    return {
        "command": one_line(str(p.get("command") or m.source_tool), 200),
        "result": f"exit {code} ({status})"
        if isinstance(code, int)
        else (f"{status} ({basis})" if basis else status),
        "evidence": evidence,
        "memory_id": m.id,
        "artifact_id": first_artifact(m),
        "seq": m.seq,
    }


def latest_verification(covered: Sequence[ToolMemory]) -> dict[str, Any] | str:
    """The newest covered test run (command, status with counts, first failure or the
    passing counts as proof); else the newest command matching :data:`VERIFY_COMMAND`;
    else the newest command with an exit code; else :data:`NONE_RECORDED`.

    ``result`` is the recorded outcome: the status parsed from the output; when the
    output gave none (``unknown``), the exit code's (``succeeded`` / ``failed``), else the
    call's recorded status marked ``(call status; no exit code or summary in the
    output)`` — never ``unknown`` for a call whose outcome was recorded."""
    ordered = by_seq(covered)
    tests = [m for m in ordered if memory_kind(m) == "test_run"]
    if tests:
        return _test_verification(tests[-1])
    commands = [m for m in ordered if memory_kind(m) == "command"]
    checks = [
        m
        for m in commands
        if VERIFY_COMMAND.search(str(m.payload.get("command") or "").split("\n", 1)[0])
    ]
    coded = [m for m in commands if isinstance(m.payload.get("exit_code"), int)]
    if checks or coded:
        return _command_verification((checks or coded)[-1])
    return NONE_RECORDED
