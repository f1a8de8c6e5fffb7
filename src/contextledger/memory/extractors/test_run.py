"""Test-run results: counts, failing tests with message and location, a next step.

The payload follows the seed 001 §4.4 test-failure shape::

    command: pnpm test auth
    status: failed
    error: TypeError user.id should be string
    file: src/auth/session.ts
    test: redirects after login
    artifact: …            (added by derive_memory)
    next_step: inspect mock user construction

plus ``framework``, ``counts`` (``passed`` / ``failed`` / ``skipped`` / ``errors`` and any
other count the runner printed), ``duration_s``, ``exit_code``, ``failures`` (≤ 20 of
``{"test", "kind", "message", "location"}``) and ``failures_total``.

Recognised runners: pytest (summary line, short test summary, FAILURES/ERRORS sections,
verbose ``PASSED``/``FAILED`` lines), unittest / Django (``Ran N tests``), jest, vitest,
``go test`` and ``cargo test``.  A run is recognised from its command
(:data:`~contextledger.memory.extractors.actions.TEST_COMMAND`) or from its output.
Seed 001 §6 problem 3: a test log is tied to its command (``subject_key
"test:<command>"``); the file versions it ran against are added by
:func:`contextledger.memory.links.annotate_test_file_versions`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from contextledger.memory.extractors.actions import TEST_COMMAND, resolve_action
from contextledger.memory.extractors.base import Extraction, ToolInput
from contextledger.memory.extractors.command import command_status
from contextledger.memory.extractors.textutil import (
    body_ranges,
    cap,
    fmt_int,
    split_lines,
    unwrap,
)
from contextledger.records.enums import ConfidenceBasis, ContextKind, FreshnessClass, Shape

__all__ = ["Failure", "TestReport", "TestRunExtractor", "parse_test_output"]

MAX_FAILURES = 20

_PYTEST_START = re.compile(r"^=+ test session starts =+$", re.M)
_PYTEST_SUMMARY = re.compile(
    r"^=*\s*((?:\d+ (?:failed|passed|skipped|deselected|xfailed|xpassed|errors?|warnings?|rerun)(?:, )?)+|no tests ran)"
    r"(?: in ([\d.]+)s)?(?: \([^)]*\))?\s*=*$"
)
_COUNT = re.compile(
    r"(?<!\d)(\d+) (failed|passed|skipped|deselected|xfailed|xpassed|errors?|warnings?|rerun)"
)
_SHORT = re.compile(r"^(FAILED|ERROR) (\S+)(?: - (.*))?$")
_VERBOSE = re.compile(r"^(\S+::\S+?) (FAILED|ERROR)\b")
_SECTION_BAR = re.compile(r"^=+ (FAILURES|ERRORS) =+$")
_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")
_LOCATION = re.compile(r"^(\S+?):(\d+): (?:in \S.*|[A-Za-z_][\w.]*)$")
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in ([\d.]+)s$")
_UNITTEST_RESULT = re.compile(r"^(OK|FAILED)(?: \(([^)]*)\))?$")
_UNITTEST_BLOCK = re.compile(r"^(FAIL|ERROR): (\S+) \(([^)]+)\)")
_PY_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)')
_JEST_TESTS = re.compile(r"^Tests:\s+(.*?)(?:, (\d+) total)?$")
_JEST_FAIL = re.compile(r"^\s*● (.+)$")
_JS_LOC = re.compile(r"\(?(?<![\w./@-])((?:[\w./@-]+/)?[\w.@-]+\.[cm]?[jt]sx?):(\d+):\d+\)?")
_VITEST_TESTS = re.compile(r"^\s*Tests\s+(.*?)\s*\((\d+)\)$")
_VITEST_FAIL = re.compile(r"^\s*(?:FAIL|×|✗)\s+(.+?)(?:\s+\d+ms)?$")
_GO_CASE = re.compile(r"^\s*--- (FAIL|PASS|SKIP): (\S+) \(([\d.]+)s\)")
_GO_PKG = re.compile(r"^(ok|FAIL)\s+(\S+)\s+([\d.]+)s")
_GO_MSG = re.compile(r"^\s+(\S+\.go):(\d+): (.*)$")
_CARGO_RESULT = re.compile(r"^test result: (ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored")
_CARGO_BLOCK = re.compile(r"^---- (\S+) stdout ----$")
_CARGO_PANIC = re.compile(r"panicked at (?:'(.*)', )?(\S+?):(\d+):\d+:?$")


@dataclass(kw_only=True)
class Failure:
    """One failing (or erroring) test: id, ``failed``/``error``, message, ``path:line``."""

    test: str
    kind: str = "failed"
    message: str | None = None
    location: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON form (keys ``test``, ``kind``, ``message``, ``location``)."""
        return {
            "test": self.test,
            "kind": self.kind,
            "message": self.message,
            "location": self.location,
        }


@dataclass(kw_only=True)
class TestReport:
    """What a test runner printed, parsed."""

    framework: str
    counts: dict[str, int] = field(default_factory=dict)
    duration_s: float | None = None
    failures: list[Failure] = field(default_factory=list)
    summary_found: bool = False
    evidence_line: int | None = None


def _add_counts(counts: dict[str, int], text: str) -> None:
    for number, word in _COUNT.findall(text):
        key = {"error": "errors", "warning": "warnings"}.get(word, word)
        counts[key] = counts.get(key, 0) + int(number)


def _match_name(title: str, test_id: str) -> bool:
    if title.startswith("ERROR collecting "):
        path = title[len("ERROR collecting ") :]
        return path.endswith(test_id) or test_id.endswith(path)
    for prefix in ("ERROR at setup of ", "ERROR at teardown of "):
        if title.startswith(prefix):
            title = title[len(prefix) :]
    parts = test_id.split("::")
    return ".".join(parts[1:]) == title or parts[-1] == title


def _parse_pytest(lines: list[str]) -> TestReport:
    report = TestReport(framework="pytest")
    sections: list[tuple[str, list[str]]] = []
    in_sections = False
    current: tuple[str, list[str]] | None = None
    short: list[Failure] = []
    verbose: list[Failure] = []
    for i, line in enumerate(lines):
        if _SECTION_BAR.match(line):
            in_sections = True
            current = None
            continue
        if line.startswith("===") or line.startswith("!!!"):
            summary = _PYTEST_SUMMARY.match(line)
            if summary:
                counts: dict[str, int] = {}
                _add_counts(counts, summary.group(1))
                report.counts = counts
                report.duration_s = float(summary.group(2)) if summary.group(2) else None
                report.summary_found = True
                report.evidence_line = i + 1
            in_sections = in_sections and not line.startswith("=")
            current = None
            continue
        if in_sections:
            sec = _SECTION.match(line)
            if sec:
                current = (sec.group(1), [])
                sections.append(current)
                continue
            if current is not None:
                current[1].append(line)
                continue
        m = _SHORT.match(line)
        if m:
            short.append(
                Failure(
                    test=m.group(2),
                    kind="failed" if m.group(1) == "FAILED" else "error",
                    message=cap(m.group(3)) if m.group(3) else None,
                )
            )
            continue
        v = _VERBOSE.match(line)
        if v:
            verbose.append(
                Failure(test=v.group(1), kind="failed" if v.group(2) == "FAILED" else "error")
            )
            continue
        if not report.summary_found:
            plain = _PYTEST_SUMMARY.match(line)
            if plain and plain.group(2):
                counts = {}
                _add_counts(counts, plain.group(1))
                report.counts = counts
                report.duration_s = float(plain.group(2))
                report.summary_found = True
                report.evidence_line = i + 1
    failures = short or verbose
    if not failures:
        failures = [
            Failure(
                test=title[len("ERROR collecting ") :]
                if title.startswith("ERROR collecting ")
                else title,
                kind="error" if title.startswith("ERROR") else "failed",
            )
            for title, _ in sections
        ]
    for failure in failures:
        for title, body in sections:
            if not _match_name(title, failure.test):
                continue
            e_lines = [b[1:].strip() for b in body if b.startswith("E ")]
            if e_lines:
                failure.message = cap(e_lines[0])
            locations = [m for m in (_LOCATION.match(b) for b in body) if m]
            if locations:
                failure.location = f"{locations[-1].group(1)}:{locations[-1].group(2)}"
            break
    report.failures = failures
    if not report.summary_found and failures:
        report.counts = {
            "failed": sum(1 for f in failures if f.kind == "failed"),
            "errors": sum(1 for f in failures if f.kind == "error"),
        }
    return report


def _parse_unittest(lines: list[str]) -> TestReport:
    report = TestReport(framework="unittest")
    ran = 0
    blocks: list[tuple[Failure, list[str]]] = []
    current: list[str] | None = None
    for i, line in enumerate(lines):
        b = _UNITTEST_BLOCK.match(line)
        if b:
            name, where = b.group(2), b.group(3)
            test = where if where.endswith("." + name) else f"{where}.{name}"
            current = []
            blocks.append(
                (Failure(test=test, kind="failed" if b.group(1) == "FAIL" else "error"), current)
            )
            continue
        r = _UNITTEST_RAN.match(line)
        if r:
            ran = int(r.group(1))
            report.duration_s = float(r.group(2))
            current = None
            continue
        res = _UNITTEST_RESULT.match(line)
        if res and ran:
            counts = {"failed": 0, "errors": 0, "skipped": 0}
            for part in (res.group(2) or "").split(","):
                if "=" in part:
                    key, _, value = part.strip().partition("=")
                    key = {"failures": "failed", "errors": "errors", "skipped": "skipped"}.get(
                        key, key
                    )
                    counts[key] = counts.get(key, 0) + int(value)
            counts["passed"] = max(0, ran - sum(v for k, v in counts.items() if k != "passed"))
            report.counts = {"passed": counts.pop("passed"), **counts}
            report.summary_found = True
            report.evidence_line = i + 1
            continue
        if current is not None and not line.startswith("===") and not line.startswith("---"):
            current.append(line)
    for failure, body in blocks:
        text = [b for b in body if b.strip()]
        if text:
            failure.message = cap(text[-1].strip())
        frames = [m for m in (_PY_FRAME.match(b) for b in body) if m]
        if frames:
            failure.location = f"{frames[-1].group(1)}:{frames[-1].group(2)}"
        report.failures.append(failure)
    return report


def _parse_jest(lines: list[str]) -> TestReport:
    report = TestReport(framework="jest")
    for i, line in enumerate(lines):
        t = _JEST_TESTS.match(line)
        if t:
            _add_counts(report.counts, t.group(1))
            report.summary_found = True
            report.evidence_line = i + 1
            continue
        f = _JEST_FAIL.match(line)
        if f and f.group(1) != "Test suite failed to run":
            failure = Failure(test=f.group(1).strip())
            for nxt in lines[i + 1 : i + 40]:
                if _JEST_FAIL.match(nxt):
                    break
                if failure.message is None and nxt.strip():
                    failure.message = cap(nxt.strip())
                loc = _JS_LOC.search(nxt)
                if loc and "node_modules" not in loc.group(1) and failure.location is None:
                    failure.location = f"{loc.group(1)}:{loc.group(2)}"
            report.failures.append(failure)
    return report


def _parse_vitest(lines: list[str]) -> TestReport:
    report = TestReport(framework="vitest")
    for i, line in enumerate(lines):
        t = _VITEST_TESTS.match(line)
        if t:
            _add_counts(report.counts, t.group(1).replace("|", ","))
            report.summary_found = True
            report.evidence_line = i + 1
            continue
        f = _VITEST_FAIL.match(line)
        if f and ">" in f.group(1):
            report.failures.append(_vitest_failure(f.group(1).strip(), lines[i + 1 : i + 40]))
    return report


def _vitest_failure(test: str, after: list[str]) -> Failure:
    """A vitest failure: its message is the first line under its ``FAIL`` header (the
    ``AssertionError: …`` line), its location the first ``❯ file:line:col`` of the
    project; the next failure or a ``⎯⎯⎯`` rule ends it."""
    failure = Failure(test=test)
    for nxt in after:
        nf = _VITEST_FAIL.match(nxt)
        if (nf and ">" in nf.group(1)) or nxt.strip().startswith("⎯"):
            break
        if failure.message is None and nxt.strip():
            failure.message = cap(nxt.strip())
        loc = _JS_LOC.search(nxt)
        if loc and "node_modules" not in loc.group(1) and failure.location is None:
            failure.location = f"{loc.group(1)}:{loc.group(2)}"
    return failure


def _parse_go(lines: list[str]) -> TestReport:
    report = TestReport(framework="go")
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for i, line in enumerate(lines):
        case = _GO_CASE.match(line)
        if case:
            key = {"FAIL": "failed", "PASS": "passed", "SKIP": "skipped"}[case.group(1)]
            counts[key] += 1
            if key == "failed":
                failure = Failure(test=case.group(2))
                for prev in reversed(lines[max(0, i - 20) : i]):
                    msg = _GO_MSG.match(prev)
                    if msg:
                        failure.location = f"{msg.group(1)}:{msg.group(2)}"
                        failure.message = cap(msg.group(3))
                        break
                report.failures.append(failure)
            continue
        pkg = _GO_PKG.match(line)
        if pkg:
            report.summary_found = True
            report.evidence_line = i + 1
            report.duration_s = round((report.duration_s or 0.0) + float(pkg.group(3)), 3)
            if pkg.group(1) == "FAIL" and not report.failures:
                report.failures.append(Failure(test=pkg.group(2)))
    report.counts = counts
    return report


def _parse_cargo(lines: list[str]) -> TestReport:
    report = TestReport(framework="cargo")
    counts = {"passed": 0, "failed": 0, "ignored": 0}
    for i, line in enumerate(lines):
        res = _CARGO_RESULT.match(line)
        if res:
            counts["passed"] += int(res.group(2))
            counts["failed"] += int(res.group(3))
            counts["ignored"] += int(res.group(4))
            report.summary_found = True
            report.evidence_line = i + 1
            continue
        block = _CARGO_BLOCK.match(line)
        if block:
            failure = Failure(test=block.group(1))
            for j, nxt in enumerate(lines[i + 1 : i + 30]):
                panic = _CARGO_PANIC.search(nxt)
                if panic:
                    failure.location = f"{panic.group(2)}:{panic.group(3)}"
                    following = lines[i + 2 + j] if i + 2 + j < len(lines) else ""
                    failure.message = cap(panic.group(1) or following.strip()) or None
                    break
            report.failures.append(failure)
    report.counts = counts
    return report


def _framework(text_head: str, text_tail: str) -> str | None:
    both = text_head + "\n" + text_tail
    if (
        _PYTEST_START.search(both)
        or re.search(r"^=+ .*\d+ (?:passed|failed|errors?).* in [\d.]+s", both, re.M)
        or re.search(r"^(?:FAILED|ERROR) \S+::\S+", both, re.M)
    ):
        return "pytest"
    if re.search(r"^Ran \d+ tests? in [\d.]+s$", both, re.M):
        return "unittest"
    if re.search(r"^test result: (?:ok|FAILED)\.", both, re.M):
        return "cargo"
    if re.search(r"^Tests:\s+.*\d+ total$", both, re.M):
        return "jest"
    if (re.search(r"^\s*Tests\s+.*\(\d+\)$", both, re.M) and "vitest" in both.lower()) or re.search(
        r"^\s*Test Files\s+", both, re.M
    ):
        return "vitest"
    if re.search(r"^(?:--- (?:FAIL|PASS): |ok\s+\S+\s+[\d.]+s|FAIL\s+\S+\s+[\d.]+s)", both, re.M):
        return "go"
    return None


_PARSERS = {
    "pytest": _parse_pytest,
    "unittest": _parse_unittest,
    "jest": _parse_jest,
    "vitest": _parse_vitest,
    "go": _parse_go,
    "cargo": _parse_cargo,
}


def parse_test_output(text: str, command: str = "") -> TestReport | None:
    """Parse a test runner's output; ``None`` when no runner is recognised.

    The runner is recognised from the output (first 8 KB and last 16 KB); when the output
    shows none, from the command line (pytest is assumed for ``python -m pytest``, jest
    for ``npm test`` …).
    """
    framework = _framework(text[:8192], text[-16384:])
    if framework is None:
        guess = TEST_COMMAND.search(command)
        if guess is None:
            return None
        word = guess.group(0)
        framework = next(
            (
                name
                for key, name in (
                    ("pytest", "pytest"),
                    ("py.test", "pytest"),
                    ("unittest", "unittest"),
                    ("manage.py", "unittest"),
                    ("runtests", "unittest"),
                    ("go test", "go"),
                    ("cargo", "cargo"),
                    ("vitest", "vitest"),
                )
                if key in word
            ),
            "jest" if any(k in word for k in ("jest", "npm", "pnpm", "yarn", "bun")) else "pytest",
        )
    return _PARSERS[framework](split_lines(text))


def _status(report: TestReport, exit_code: int | None) -> str:
    failed = report.counts.get("failed", 0)
    errors = report.counts.get("errors", 0)
    if failed or any(f.kind == "failed" for f in report.failures):
        return "failed"
    if errors or report.failures:
        return "error"
    if not report.summary_found:
        return "unknown"
    if sum(v for k, v in report.counts.items() if k not in ("deselected", "warnings")) == 0:
        return "no_tests"
    if exit_code not in (None, 0):
        return "failed"
    return "passed"


def _counts_text(report: TestReport) -> str:
    parts = [f"{v} {k}" for k, v in report.counts.items() if v]
    text = ", ".join(parts) if parts else "no counts"
    if report.duration_s is not None:
        text += f" in {report.duration_s:g}s"
    return text


def _next_step(status: str, first: Failure | None) -> str | None:
    if first is not None:
        if first.kind == "error" and first.location is None:
            return f"fix the error in {first.test}"
        if first.location:
            same = first.location.split(":", 1)[0] == first.test
            return f"inspect {first.location}" + ("" if same else f" ({first.test})")
        return f"re-run {first.test} and inspect its assertion"
    if status == "unknown":
        return "re-run without truncating the output to see the summary"
    return None


class TestRunExtractor:
    """Extractor for test-suite runs through a shell tool."""

    name = "test_run"
    __test__ = False  # not a pytest test class

    def matches(self, item: ToolInput) -> bool:
        """True for shell calls whose command runs tests or whose output is a test report."""
        action = resolve_action(item)
        if action.verb != "shell":
            return False
        if action.command and TEST_COMMAND.search(action.command):
            return True
        text = item.result_text
        return _framework(text[:8192], text[-16384:]) is not None

    def extract(self, item: ToolInput) -> Extraction:
        """The test-run extract of ``item`` (seed 001 §4.4 shape)."""
        action = resolve_action(item)
        command = cap(" ".join((action.command or "").split()), 1000)
        body = unwrap(item.result_text)
        report = parse_test_output(body.text, command) or TestReport(framework="unknown")
        _, exit_code, _ = command_status(item, body, False)
        status = _status(report, exit_code)
        first = report.failures[0] if report.failures else None
        payload: dict[str, Any] = {
            "command": command,
            "status": status,
            "error": first.message if first else None,
            "file": first.location if first else None,
            "test": first.test if first else None,
            "next_step": _next_step(status, first),
            "framework": report.framework,
            "counts": dict(report.counts),
            "duration_s": report.duration_s,
            "exit_code": exit_code,
            "failures": [f.to_json() for f in report.failures[:MAX_FAILURES]],
            "failures_total": len(report.failures),
        }
        lines = [f"tests: {cap(command, 160)} → {status}: {_counts_text(report)}" + (f" (Exit code {exit_code})" if exit_code not in (None, 0) else "")]
        if first is not None:
            where = f" ({first.location})" if first.location else ""
            label = "FAILED" if first.kind == "failed" else "ERROR"
            # the runner's own short-summary form (``FAILED <test> - <message>``), so the line
            # a model or a person greps for in the raw output is found in the memory too
            said = f" - {first.message}" if first.message else ""
            lines.append(f"{label} {cap(first.test, 120)}{said}{where}")
        if payload["next_step"]:
            more = (
                f" (+{len(report.failures) - 1} more failing)" if len(report.failures) > 1 else ""
            )
            lines.append(f"next: {payload['next_step']}{more}")
        line_range, byte_range = body_ranges(item.result_text, body)
        parsed = report.summary_found
        limits = None
        if len(report.failures) > MAX_FAILURES:
            limits = f"first {MAX_FAILURES} of {fmt_int(len(report.failures))} failing tests"
        elif not parsed:
            limits = "no summary line in the output; counts from per-test lines"
        failing = status in ("failed", "error")
        return Extraction(
            kind="test_run",
            summary="\n".join(lines),
            payload=payload,
            shape=Shape.STRUCTURED,
            context_kind=ContextKind.RECOVERY if item.is_error else ContextKind.OPERATIONAL,
            freshness_class=FreshnessClass.SESSION,
            subject_key=f"test:{command}" if command else None,
            revalidation_tool=item.tool_name,
            revalidation_args=dict(item.arguments)
            if item.arguments is not None
            else ({"action": item.action_text} if item.action_text is not None else {}),
            confidence=1.0 if parsed else 0.6,
            confidence_basis=ConfidenceBasis.DETERMINISTIC_PARSE
            if parsed
            else ConfidenceBasis.HEURISTIC,
            limits=limits,
            error_type=(
                first.message.split(":", 1)[0]
                if first and first.message and ":" in first.message
                else None
            )
            if failing
            else None,
            line_range=line_range,
            byte_range=byte_range,
        )
