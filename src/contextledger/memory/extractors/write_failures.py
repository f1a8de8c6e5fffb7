"""The failure texts of file write, edit and read tools (seed 000 §4.5: only an applied
write changes a file; only a successful result is a read).

Claude Code's ``<tool_use_error>``, ``Error: …`` / ``ERROR: …`` / ``Failed to edit …`` /
``apply_patch verification failed: …`` leads on the result's first non-empty line, and
the rejection phrases of :data:`REJECTED` (``No replacement was performed``, ``String to
replace not found`` …) near its start.  :mod:`contextledger.memory.write_status` decides
a call's status with them; the write extractor marks the write not applied.  A read's
failure (:func:`read_failed`) is its program's own error line (``cat: x: No such file or
directory``) or a read tool's ``Error: …`` / ``File x not found`` — never a read of the file.
A shell command whose output reports that a file it writes could not be opened (``bash:
out.txt: Permission denied``, ``/bin/sh: 1: cannot create x: Read-only file system``,
``tee: x: Is a directory``) did not write that file (:func:`unopened_paths`).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from contextledger.memory.extractors.textutil import unwrap

__all__ = ["FAILURE_LEAD", "HEAD_CHARS", "REFUSED", "REJECTED", "call_refused", "read_failed", "unopened_paths", "write_failed"]

REJECTED: tuple[str, ...] = (
    "Your proposed edit has introduced new syntax error",
    "No replacement was performed",
    "String to replace not found",
    "did not appear verbatim",
    "Found 0 matches",
    "<tool_use_error>",
)
"""Phrases of an edit tool's rejection, wherever they are in the result's first
:data:`HEAD_CHARS` characters."""

HEAD_CHARS = 2000
FAILURE_LEAD = re.compile(
    r"(?:error|errno|fatal|failed|failure|exception)\b"
    r"|(?:cannot|can't|could not|couldn't|unable to|failed to)\s"
    r"|(?:permission denied|no such file|file not found|file does not exist|path does not exist)\b"
    r"|invalid\b|no changes (?:were )?made\b|no match(?:es)? found\b"
    r"|(?<![\w.-])[\w.-]+(?: verification)? failed\b",
    re.I,
)
"""How a failure text starts (the first non-empty line)."""


REFUSED = re.compile(
    r"The user doesn't want to (?:proceed with this tool use|take this action)"
    r"|The tool use was rejected"
    r"|Permission to use \S+(?: with [^\n]*?)? (?:has been|was) denied"
    r"|requested permissions? to (?:use|write to) [^\n]*?, but you haven't granted it",
)
"""How an agent runtime reports a call it never ran: the user refused it (Claude Code's
"The user doesn't want to proceed with this tool use. The tool use was rejected …") or
its permission settings denied it."""


def call_refused(text: str) -> bool:
    """Whether the result ``text`` says the call was refused before it ran (:data:`REFUSED`,
    in its first :data:`HEAD_CHARS` characters once the runtime's banners are removed): a
    refused shell command wrote nothing, whereas one that ran and exited nonzero may have
    written its redirections and ``tee`` files.  Linear in the text's size."""
    return REFUSED.search(unwrap(text).text.lstrip()[:HEAD_CHARS]) is not None


def write_failed(text: str) -> bool:
    """Whether the result ``text`` of a write / edit call is the tool's own failure text
    (module docstring): its first :data:`HEAD_CHARS` characters once the runtime's
    banners are removed.  Linear in the text's size."""
    head = unwrap(text).text.lstrip()[:HEAD_CHARS]
    if any(marker in head for marker in REJECTED):
        return True
    first = head.split("\n", 1)[0].strip().lstrip("[(").strip()
    return bool(first) and FAILURE_LEAD.match(first) is not None


_READ_LEAD = re.compile(
    r"(?:error|failed|failure)\s*[:!]|<tool_use_error>|errno\b"
    r"|(?:file not found|no such file|path does not exist|file does not exist|cannot (?:open|read|access)"
    r"|could not (?:open|read|find)|unable to (?:open|read)|permission denied|is a directory)\b"
    r"|file [^\n]+? (?:not found|does not exist)\s*$",
    re.I,
)
"""How a read tool's failure text starts (``Error: file not found``, SWE-agent ``open``'s
``File a.py not found``): a colon after the word, so a file whose first line is "Error
handling" is still read."""
_PROGRAM_ERROR = re.compile(r"(?<![\w.+-])[\w.+-]+: (?:[^\n]*?: )?(?:No such file or directory|cannot open|can't open|can't read|Is a directory|Permission denied|cannot access)")
"""A shell reader's own error line (``cat: x: No such file or directory``, ``sed: can't
read x: …``, ``head: cannot open 'x' for reading: …``)."""


def read_failed(text: str, *, shell: bool) -> bool:
    """Whether the result ``text`` of a file read is a failure, not the file: its first
    non-empty line (runtime banners removed) is the reader program's error line
    (``shell``) or a read tool's failure text.  Linear in the text's size."""
    head = unwrap(text).text.lstrip()[:HEAD_CHARS]
    first = head.split("\n", 1)[0].strip()
    if not first:
        return False
    return (_PROGRAM_ERROR.match(first) if shell else _READ_LEAD.match(first.lstrip("[("))) is not None


_OPEN_REASONS = r"Permission denied|No such file or directory|Read-only file system|Is a directory|Not a directory"
_UNOPENED = re.compile(
    r"^(?:[\w./+-]+: )?(?:line \d+: |\d+: )?(?:cannot create |can't create |cannot open |can't open |can't read )?"
    rf"(?P<path>[^\n:]+?): (?:{_OPEN_REASONS})[ \t]*$"
    rf"|^(?:[\w./+-]+: )?(?:{_OPEN_REASONS.lower()}): (?P<zpath>[^\n]+?)[ \t]*$",
    re.M,
)
"""A shell's or a writer's report that it could not open a file: ``bash: out.txt:
Permission denied``, ``bash: line 1: x/y.txt: No such file or directory``, ``/bin/sh: 1:
cannot create x: Read-only file system``, ``tee: x: Is a directory``, zsh's ``zsh:
permission denied: out.txt``."""
UNOPENED_SCAN_CHARS = 20_000
"""How much of a result :func:`unopened_paths` reads (the shell opens its redirections
before the command runs, so its report comes first)."""


def unopened_paths(text: str, paths: Sequence[str]) -> list[str]:
    """The files of ``paths`` (a shell command's write targets, resolved) that the result
    ``text`` reports could not be opened (:data:`_UNOPENED`, in its first
    :data:`UNOPENED_SCAN_CHARS` characters): the error names a file as the command typed
    it, so a relative name matches a resolved path ending with ``/`` plus it.  Those files
    were not written.  Linear in the text's size."""
    named: set[str] = set()
    for m in _UNOPENED.finditer(unwrap(text).text[:UNOPENED_SCAN_CHARS]):
        name = (m.group("path") or m.group("zpath") or "").strip().strip("'\"`")
        if name:
            named.add(posixpath.normpath(name))
    if not named:
        return []
    return [p for p in paths if any(p == n or (not n.startswith("/") and p.endswith("/" + n)) for n in named)]
