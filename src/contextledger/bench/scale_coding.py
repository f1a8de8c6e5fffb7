"""The ``coding`` history of the scale run: a coding agent reading, searching, editing
and testing a repository of a few hundred files.

The pipeline history of :mod:`contextledger.bench.scale` has one tool (``run_step``)
and no file memories, so the working-set read and the file freshness rules are never
exercised at scale.  This history is modelled on the coding transcripts in the real data
(Claude Code, SWE-agent, OpenHands): most calls read files (``Read`` with a path and
``"   12→text"`` numbered content), edit them (``Edit`` with ``old_string`` /
``new_string``), search (``Grep`` / ``Glob``) or run the tests through ``Bash``
(``python -m pytest …``), which sometimes fail with an assertion line and pass again
after an edit.  Everything is recorded through the public
:class:`~contextledger.ingest.recorder.Recorder`, so the memories are derived exactly
as for a live agent: reads, edits and searches inside one file get the subject
``file:<path>``, a later edit marks earlier reads of the path stale, and a rerun of the
same test command supersedes the earlier run.

Structure (all arithmetic, no randomness; ``t = i // 25`` is the user turn of call
``i``, ``j = i % 25`` its slot):

* a user turn every 25 calls; the first one states the task and the constraint "Do not
  change the public API of src/pkg."; every 1,000 calls (at ``i % 1000 == 500``) the
  user turn repeats one of three constraints;
* files ``src/pkg/module_000.py`` … ``module_299.py`` with ``tests/test_module_*.py``
  beside them and three hot files (``src/pkg/core.py``, ``api.py``, ``config.py``);
  turn ``t`` works on ``A = t % 300``, ``B = A + 2``, ``D = A + 4`` (so each module is
  revisited in five consecutive turns) and a far file ``E = (37 t + 11) % 300``;
* the 25 slots (:data:`SLOTS`): search, read, read the test, run it (fails unless
  ``t % 3 == 2``), ranged read, edit, rerun (passes), … — 40 % reads, 20 % edits,
  16 % searches, 16 % test runs, 8 % other shell commands;
* three participants as in the pipeline history: the ``agent`` (Claude Code tool
  names, ``branch`` visibility), the ``reviewer`` (a second model using OpenHands
  names — ``read_file``, ``str_replace_editor`` ``str_replace`` — whose work is
  ``participant_private``) and a child subagent ``worker`` whose searches stay
  audit-only;
* a sibling branch forked every 1,000 artifacts at the latest user turn, holding 5
  artifacts of an abandoned attempt (edit a hot file read earlier on the parent
  branch, read it, a failing test, read, search);
* the last call (``i = n - 1``) is a test run that fails with
  :func:`final_error_line`, followed by the user asking what still fails.

The full read of ``src/pkg/core.py`` (every third turn) is larger than the 4,096-byte
inline threshold, so it goes to the blob store as a large real read would.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from contextledger.ingest.recorder import Recorder
from contextledger.ledger import Ledger
from contextledger.records.enums import RuntimeKind, Visibility
from contextledger.records.models import Participant

__all__ = [
    "FILE_COUNT",
    "OPENING_CONSTRAINT",
    "SLOTS",
    "build_coding_history",
    "final_error_line",
    "module_path",
]

FILE_COUNT = 300
"""Modules in the synthetic repository (``src/pkg/module_000.py`` …)."""

OPENING_CONSTRAINT = "Do not change the public API of src/pkg."
"""The constraint stated in the first user turn."""

_LATER_CONSTRAINTS = (
    "Do not add new dependencies.",
    "Never edit files under src/pkg/vendor.",
    OPENING_CONSTRAINT,
)
_HOT = ("src/pkg/core.py", "src/pkg/api.py", "src/pkg/config.py")
_T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

SLOTS = (
    "grep_dir", "read_a", "read_test_a", "test_a", "read_a_range", "edit_a", "retest_a",
    "read_b", "grep_in_b", "peer_read_b", "read_hot", "edit_b", "git_diff", "reread_b",
    "child_grep", "test_all", "read_d", "edit_d", "retest_all", "revisit_a", "glob",
    "peer_edit_test_a", "read_e", "git_status", "edit_e",
)
"""What each of the 25 calls of a user turn does (slot ``i % 25``)."""


def module_path(k: int) -> str:
    """``src/pkg/module_007.py`` for ``k = 7`` (``k`` taken modulo :data:`FILE_COUNT`)."""
    return f"src/pkg/module_{k % FILE_COUNT:03d}.py"


def _test_path(k: int) -> str:
    return f"tests/test_module_{k % FILE_COUNT:03d}.py"


def final_error_line(n: int) -> str:
    """The assertion line of the failing test run that closes a history of ``n`` calls."""
    t = (n - 1) // 25
    a = t % FILE_COUNT
    return f"AssertionError: handle_{a:03d}_3(Batch(size=4)) returned {40 + t}, expected {41 + t}"


def _module_lines(k: int, version: int) -> list[str]:
    k %= FILE_COUNT
    lines = [f'"""Module {k:03d} of pkg: batch handlers."""', "from __future__ import annotations", "", "from pkg.core import Batch, register", ""]
    for f in range(6):
        lines += [
            f"def handle_{k:03d}_{f}(batch: Batch) -> int:",
            f'    """Handle batch kind {f} of module {k:03d}."""',
            f"    total = batch.size * {f + 1} + {k % 17}",
            f"    return total - {version if f == 3 else 0}",
            "",
        ]
    lines.append(f"register({k}, [{', '.join(f'handle_{k:03d}_{f}' for f in range(6))}])")
    return lines


def _test_lines(k: int, version: int) -> list[str]:
    k %= FILE_COUNT
    lines = [f'"""Tests of pkg.module_{k:03d}."""', "from pkg.core import Batch", f"from pkg.module_{k:03d} import {', '.join(f'handle_{k:03d}_{f}' for f in range(6))}", ""]
    for f in range(6):
        lines += [f"def test_handle_{k:03d}_{f}() -> None:", f"    assert handle_{k:03d}_{f}(Batch(size=4)) == {4 * (f + 1) + k % 17 + version}", ""]
    return lines


def _hot_lines(path: str) -> list[str]:
    name = path.rsplit("/", 1)[-1][:-3]
    # core.py is large (its full read goes to the blob store); api.py and config.py small
    count = 150 if name == "core" else 25
    lines = [f'"""pkg.{name}: shared {name} helpers."""', "from __future__ import annotations", ""]
    for f in range(count // 3):
        lines += [f"def {name}_helper_{f:03d}(value: int) -> int:", f"    return value * {f + 1} + {len(name)}", ""]
    return lines


def _numbered(lines: list[str], first: int = 1) -> str:
    """Claude Code ``Read`` rendering: ``"     1→text"``."""
    return "\n".join(f"{first + x:6d}→{line}" for x, line in enumerate(lines))


def _tabbed(path: str, lines: list[str]) -> str:
    """OpenHands rendering: a ``cat -n`` banner then ``"     1\\ttext"``."""
    return f"Here's the result of running `cat -n` on {path}:\n" + "\n".join(f"{x + 1:6d}\t{line}" for x, line in enumerate(lines))


def _progress(count: int, fail_at: int | None = None) -> list[str]:
    """pytest ``-q`` progress lines: 72 outcome characters a line, then ``[ NN%]``."""
    marks = "".join("F" if x == fail_at else "." for x in range(count))
    lines = []
    for start in range(0, count, 72):
        chunk = marks[start : start + 72]
        lines.append(f"{chunk:<72} [{min(start + 72, count) * 100 // count:3d}%]")
    return lines


def _pytest_pass(count: int) -> str:
    return "\n".join([*_progress(count), f"{count} passed in {count / 400 + 0.1:.2f}s"])


def _pytest_fail(test_file: str, test: str, error: str, passed: int, fail_at: int) -> str:
    short = error.split(": ", 1)[-1]
    return "\n".join([
        *_progress(passed + 1, fail_at=fail_at),
        "=" * 35 + " FAILURES " + "=" * 35,
        f"{'_' * 20} {test} {'_' * 20}",
        "",
        f"    def {test}() -> None:",
        f">       assert {test[5:]}(Batch(size=4)) == {short.rsplit(' ', 1)[-1]}",
        f"E       {error}",
        "",
        f"{test_file}:14: AssertionError",
        "=" * 27 + " short test summary info " + "=" * 28,
        f"FAILED {test_file}::{test} - {error}",
        f"1 failed, {passed} passed in {passed / 400 + 0.2:.2f}s",
    ])


@dataclass(kw_only=True)
class _Repo:
    """Edit counts per path: a file's content (and hash) changes with every edit."""

    versions: dict[str, int]

    def version(self, path: str) -> int:
        return self.versions.get(path, 0)

    def bump(self, path: str) -> tuple[int, int]:
        old = self.version(path)
        self.versions[path] = old + 1
        return old, old + 1


@dataclass(frozen=True, kw_only=True)
class _Call:
    tool: str
    args: dict[str, Any]
    result: str
    is_error: bool = False
    who: str = "agent"  # agent | reviewer | worker


def _read(path: str, repo: _Repo, *, tool: str = "Read", offset: int | None = None, limit: int | None = None, who: str = "agent") -> _Call:
    if path in _HOT:
        lines = _hot_lines(path)
    elif path.startswith("tests/"):
        lines = _test_lines(int(path[-6:-3]), repo.version(path))
    else:
        lines = _module_lines(int(path[-6:-3]), repo.version(path))
    if tool == "read_file":
        return _Call(tool=tool, args={"path": path}, result=_tabbed(path, lines), who=who)
    if offset is not None and limit is not None:
        return _Call(tool=tool, args={"file_path": path, "offset": offset, "limit": limit}, result=_numbered(lines[offset - 1 : offset - 1 + limit], offset), who=who)
    return _Call(tool=tool, args={"file_path": path}, result=_numbered(lines), who=who)


def _edit(path: str, repo: _Repo, *, who: str = "agent") -> _Call:
    old, new = repo.bump(path)
    if path.startswith("tests/"):
        k = int(path[-6:-3])
        f = 3
        before = f"    assert handle_{k:03d}_{f}(Batch(size=4)) == {4 * (f + 1) + k % 17 + old}"
        after = before[: before.rindex("==")] + f"== {4 * (f + 1) + k % 17 + new}"
    else:
        before, after = f"    return total - {old}", f"    return total - {new}"
    if who == "reviewer":
        args: dict[str, Any] = {"command": "str_replace", "path": path, "old_str": before, "new_str": after}
        result = f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet of {path}:\n    19\t{after}\nReview the changes and make sure they are as expected."
        return _Call(tool="str_replace_editor", args=args, result=result, who=who)
    result = f"The file {path} has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n    19→{after}"
    return _Call(tool="Edit", args={"file_path": path, "old_string": before, "new_string": after}, result=result, who=who)


def _grep(pattern: str, path: str, hits: list[tuple[str, int, str]], *, mode: str = "content", who: str = "agent") -> _Call:
    if mode == "files_with_matches":
        paths = list(dict.fromkeys(h[0] for h in hits))
        text = f"Found {len(paths)} files\n" + "\n".join(paths)
    else:
        text = "\n".join(f"{p}:{line}:{t}" for p, line, t in hits)
    return _Call(tool="Grep", args={"pattern": pattern, "path": path, "output_mode": mode}, result=text, who=who)


def _test(command: str, k: int, t: int, *, suite: bool, fail: bool, error: str | None = None) -> _Call:
    """A pytest run of one module's tests (6) or of the suite (``suite``, stopped at the
    first failure by ``-x``); a failure is in ``test_handle_<k>_3``."""
    args = {"command": command, "description": "Run the tests"}
    if not fail:
        return _Call(tool="Bash", args=args, result=_pytest_pass(6 * FILE_COUNT if suite else 6))
    err = error or f"AssertionError: handle_{k % FILE_COUNT:03d}_3(Batch(size=4)) returned {40 + t}, expected {41 + t}"
    # ``-x`` stops the suite at the failure; one module's run goes on after it
    passed, fail_at = (6 * (k % FILE_COUNT) + 3, 6 * (k % FILE_COUNT) + 3) if suite else (5, 3)
    return _Call(tool="Bash", args=args, result=_pytest_fail(_test_path(k), f"test_handle_{k % FILE_COUNT:03d}_3", err, passed, fail_at), is_error=True)


def _slot_call(i: int, n: int, repo: _Repo) -> _Call:
    t, j = divmod(i, 25)
    a, b, d = t % FILE_COUNT, (t + 2) % FILE_COUNT, (t + 4) % FILE_COUNT
    e = (37 * t + 11) % FILE_COUNT
    hot = _HOT[t % 3]
    one = f"python -m pytest {_test_path(a)} -q"
    suite = "python -m pytest tests -q -x"
    if i == n - 1:
        return _test(one, a, t, suite=False, fail=True, error=final_error_line(n))
    slot = SLOTS[j]
    if slot == "grep_dir":
        hits = [(module_path(a + x), 6 + 5 * f, f"def handle_{(a + x) % FILE_COUNT:03d}_{f}(batch: Batch) -> int:") for x in (0, 2, 4) for f in range(2)]
        return _grep(f"def handle_{a:03d}_", "src/pkg", hits)
    if slot == "read_a" or slot == "revisit_a":
        return _read(module_path(a), repo)
    if slot == "read_test_a":
        return _read(_test_path(a), repo)
    if slot in ("test_a", "retest_a"):
        return _test(one, a, t, suite=False, fail=slot == "test_a" and t % 3 != 2)
    if slot == "read_a_range":
        return _read(module_path(a), repo, offset=16, limit=10)
    if slot == "edit_a":
        return _edit(module_path(a), repo)
    if slot in ("read_b", "reread_b"):
        return _read(module_path(b), repo)
    if slot == "grep_in_b":
        return _grep("register(", module_path(b), [(module_path(b), 36, f"register({b}, [...])")])
    if slot == "peer_read_b":
        return _read(module_path(b), repo, tool="read_file", who="reviewer")
    if slot == "read_hot":
        return _read(hot, repo)
    if slot == "edit_b":
        return _edit(module_path(b), repo)
    if slot == "git_diff":
        return _Call(tool="Bash", args={"command": "git diff --stat"}, result=f" {module_path(a)} | 2 +-\n {module_path(b)} | 2 +-\n 2 files changed, 2 insertions(+), 2 deletions(-)")
    if slot == "child_grep":
        hits = [(module_path(a + x), 1, "# TODO: batch sizes") for x in range(0, 12, 3)]
        return _grep("TODO", "src/pkg", hits, mode="files_with_matches", who="worker")
    if slot in ("test_all", "retest_all"):
        return _test(suite, d, t, suite=True, fail=slot == "test_all" and t % 4 == 1)
    if slot == "read_d":
        return _read(module_path(d), repo)
    if slot == "edit_d":
        return _edit(module_path(d), repo)
    if slot == "glob":
        return _Call(tool="Glob", args={"pattern": f"src/pkg/module_{a // 10:02d}*.py"}, result="\n".join(module_path(a // 10 * 10 + x) for x in range(10)))
    if slot == "peer_edit_test_a":
        return _edit(_test_path(a), repo, who="reviewer")
    if slot == "read_e":
        return _read(module_path(e), repo)
    if slot == "git_status":
        return _Call(tool="Bash", args={"command": "git status --short"}, result="\n".join(f" M {module_path(x)}" for x in (a, b, d)))
    assert slot == "edit_e"
    return _edit(module_path(e), repo)


def _side_calls(i: int, repo: _Repo) -> list[_Call]:
    """The abandoned attempt on a sibling branch (its edits do not touch ``repo``)."""
    t = i // 25
    a = t % FILE_COUNT
    hot = _HOT[t % 3]
    scratch = _Repo(versions=dict(repo.versions))
    return [
        _hot_edit(hot),
        _read(hot, scratch),
        _test("python -m pytest tests -q -x", a, t, suite=True, fail=True, error=f"AssertionError: {hot} helper changed, {t} != {t + 1}"),
        _read(module_path(a), scratch),
        _grep("helper_001", hot, [(hot, 7, "def " + hot.rsplit("/", 1)[-1][:-3] + "_helper_001(value: int) -> int:")]),
    ]


def _hot_edit(path: str) -> _Call:
    name = path.rsplit("/", 1)[-1][:-3]
    before, after = f"    return value * 1 + {len(name)}", f"    return value * 1 + {len(name) + 1}"
    return _Call(tool="Edit", args={"file_path": path, "old_string": before, "new_string": after}, result=f"The file {path} has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n     5→{after}")


def _record(rec: Recorder, conv_id: str, cid: str, call: _Call, who: Participant, *, branch_id: str, observed_at: datetime, visibility: Visibility | None, text: str = "") -> None:
    rec.record_assistant(conv_id, text=text, tool_calls=[{"call_id": cid, "tool_name": call.tool, "arguments": call.args}], branch_id=branch_id, participant_id=who.id, visibility=visibility)
    rec.record_tool_result(conv_id, cid, call.result, is_error=call.is_error, observed_at=observed_at, visibility=visibility)


def build_coding_history(ledger: Ledger, n: int) -> tuple[str, float]:
    """Record the coding history with ``n`` tool artifacts on the main branch (structure
    in the module docstring) plus 5 per sibling branch.

    Returns:
        ``(conversation_id, recording seconds)``.

    Raises:
        InputError: ``n < 1``.
    """
    from contextledger.errors import InputError

    if n < 1:
        raise InputError(f"the coding history needs at least one tool artifact, got {n}")
    rec = ledger.recorder()
    conv = rec.start_conversation(title=f"scale coding {n}", system_prompt="You are a coding agent working in the user's repository.", runtime_kind=RuntimeKind.MULTI_MODEL)
    people = {
        "agent": rec.add_participant(conv.id, "agent", runtime_kind=RuntimeKind.MULTI_MODEL),
        "reviewer": rec.add_participant(conv.id, "reviewer", runtime_kind=RuntimeKind.MULTI_MODEL),
    }
    people["worker"] = rec.add_participant(conv.id, "worker", runtime_kind=RuntimeKind.SUBAGENT_CHILD, parent_participant_id=people["agent"].id)
    root = conv.root_branch_id
    repo = _Repo(versions={})
    t0 = time.perf_counter()
    last_user = rec.record_message(conv.id, "user", f"The handler tests in tests/ fail; find the causes and fix them. {OPENING_CONSTRAINT}", branch_id=root)
    for i in range(n):
        t, j = divmod(i, 25)
        if i and j == 0:
            text = f"Good. Continue with {module_path(t)}."
            if i % 1000 == 500:
                text += " " + _LATER_CONSTRAINTS[(i // 1000) % len(_LATER_CONSTRAINTS)]
            last_user = rec.record_message(conv.id, "user", text, branch_id=root)
        if i and i % 1000 == 0:
            side = rec.fork(conv.id, last_user.id, name=f"alt {i}", activate=False)
            for k, call in enumerate(_side_calls(i, repo)):
                _record(rec, conv.id, f"side_{i}_{k}", call, people["agent"], branch_id=side.id, observed_at=_T0 + timedelta(seconds=i, milliseconds=k), visibility=Visibility.BRANCH)
        call = _slot_call(i, n, repo)
        who = people[call.who]
        # the reviewer's work is its own (participant-private); the child's results keep
        # the recorder's default (audit-only until promoted)
        vis = Visibility.PARTICIPANT_PRIVATE if call.who == "reviewer" else (None if call.who == "worker" else Visibility.BRANCH)
        text = f"Checking {module_path(t)}." if j == 0 else ""
        _record(rec, conv.id, f"c{i:06d}", call, who, branch_id=root, observed_at=_T0 + timedelta(seconds=i), visibility=vis, text=text)
    rec.record_message(conv.id, "user", "Which tests still fail, and why?", branch_id=root)
    return conv.id, time.perf_counter() - t0
