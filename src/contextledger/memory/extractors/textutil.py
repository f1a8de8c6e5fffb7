"""Text helpers shared by the extractors: unwrapping runtime banners, line access, caps.

Every function here is pure and linear in the size of its input.  Lines are split on
``"\\n"`` only (a trailing ``"\\r"`` is dropped), so line numbers match what an editor
shows for the raw result; line numbers are 1-based.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass

from contextledger.limits import loads_json
from contextledger.textcut import cut_index

__all__ = [
    "LINE_CAP_CHARS",
    "Body",
    "body_ranges",
    "byte_len",
    "cap",
    "count_of",
    "fmt_int",
    "generic_exit_code",
    "head_tail",
    "is_shell_noise",
    "line_of_offset",
    "looks_like_file",
    "nonempty",
    "normalise_path",
    "sha256_text",
    "split_lines",
    "unwrap",
]

LINE_CAP_CHARS = 200
"""Longest single line (characters) an extractor copies into a summary or payload."""

_RETURNCODE = re.compile(r"<returncode>(-?\d+)</returncode>")
_OPENHANDS_EXIT = re.compile(r"\[Command finished with exit code (-?\d+)\]\s*$")
_CLAUDE_EXIT = re.compile(r"\AExit code (-?\d+)\n?")
_CODEX_EXIT = re.compile(r"^Process exited with code (-?\d+)$", re.M)
_CODEX_WALL = re.compile(r"^Wall time: ([\d.]+) seconds$", re.M)
_CODEX_RUNNING = re.compile(r"^Process running with session ID (\d+)$", re.M)
_GENERIC_EXIT = re.compile(
    r"(?:exit code|exit status|returncode|return code)[:= ]+(-?\d+)", re.IGNORECASE
)
_SWE_TRAILER = re.compile(
    r"(?<!\n)\n*\(Open file: [^\n]*\)\n\(Current directory: [^\n]*\)\n?(?:bash-\$\s*)?\Z"
)
_OPENHANDS_PROMPT = re.compile(
    r"(?:\[Python Interpreter: [^\]\n]*\]\n?)?(?:(?<![^\n])[^\n]*@[^\n]*[#$] ?\n)?\[Command finished with exit code -?\d+\]\s*\Z"
)
_REMINDER = re.compile(r"(?<!\n)\n*<system-reminder>.*?</system-reminder>\s*\Z", re.S)


@dataclass(frozen=True, kw_only=True)
class Body:
    """The payload part of a raw result once runtime banners are removed.

    Attributes:
        text: the body text.
        start: character offset of ``text`` within the raw result when ``text`` is a
            slice of it, else ``None`` (the body was decoded from a JSON wrapper).
        exit_code: exit code stated by a banner, if any.
        duration_ms: wall time stated by a banner, in milliseconds, if any.
        running: the banner says the process is still running.
    """

    text: str
    start: int | None
    exit_code: int | None = None
    duration_ms: int | None = None
    running: bool = False


def unwrap(raw: str) -> Body:
    """Strip the runtime's banners from a raw result and read exit code / wall time.

    Recognised: ``OBSERVATION:`` prefixes (OpenHands, SWE-smith), ``<returncode>`` /
    ``<output>`` (mini-swe-agent), ``Exit code N`` first lines (Claude Code),
    ``[Command finished with exit code N]`` trailers (OpenHands), the Codex
    ``Chunk ID … Output:`` header, the Codex ``{"output": …, "metadata": {exit_code,
    duration_seconds}}`` JSON wrapper, the SWE-agent ``(Open file: …)`` trailer and a
    trailing ``<system-reminder>`` block.
    """
    stripped = raw.lstrip()
    if stripped.startswith("{") and '"output"' in raw[:200]:
        try:
            obj = loads_json(raw)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("output"), str):
            meta = obj.get("metadata")
            code = meta.get("exit_code") if isinstance(meta, dict) else None
            secs = meta.get("duration_seconds") if isinstance(meta, dict) else None
            return Body(
                text=obj["output"],
                start=None,
                exit_code=code if isinstance(code, int) else None,
                duration_ms=round(secs * 1000) if isinstance(secs, int | float) else None,
            )
    start, end = 0, len(raw)
    exit_code: int | None = None
    duration_ms: int | None = None
    running = False
    head = raw[:400]
    if head.startswith("OBSERVATION:\n"):
        start = len("OBSERVATION:\n")
    rc = _RETURNCODE.match(raw, start)
    if rc:
        exit_code = int(rc.group(1))
        open_tag = raw.find("<output>", rc.end())
        if open_tag != -1 and open_tag - rc.end() <= 2:
            start = open_tag + len("<output>")
            if raw.startswith("\n", start):
                start += 1
            close = raw.rfind("</output>")
            if close >= start:
                end = close
                if end > start and raw[end - 1] == "\n":
                    end -= 1
    if head.startswith("Chunk ID: "):
        marker = raw.find("\nOutput:\n", 0, 600)
        banner = raw[: marker if marker != -1 else 0]
        code = _CODEX_EXIT.search(banner)
        wall = _CODEX_WALL.search(banner)
        if code:
            exit_code = int(code.group(1))
        if wall:
            duration_ms = round(float(wall.group(1)) * 1000)
        running = bool(_CODEX_RUNNING.search(banner))
        if marker != -1:
            start = marker + len("\nOutput:\n")
    claude = _CLAUDE_EXIT.match(raw, start)
    if claude:
        exit_code = int(claude.group(1))
        start = claude.end()
    tail = raw[max(start, end - 400) : end]
    oh = _OPENHANDS_EXIT.search(tail)
    if oh:
        exit_code = int(oh.group(1))
        prompt = _OPENHANDS_PROMPT.search(tail)
        cut = prompt.start() if prompt else oh.start()
        end = max(start, end - len(tail) + cut)
    swe = _SWE_TRAILER.search(raw[max(start, end - 400) : end])
    if swe:
        end = max(start, end - (len(raw[max(start, end - 400) : end]) - swe.start()))
    reminder = raw.rfind("<system-reminder>", start, end)
    if reminder != -1:
        m = _REMINDER.search(raw, max(start, reminder - 4), end)
        if m and m.end() == end:
            end = m.start()
    return Body(
        text=raw[start:end],
        start=start,
        exit_code=exit_code,
        duration_ms=duration_ms,
        running=running,
    )


def generic_exit_code(text: str) -> int | None:
    """An exit code stated in free text (``"exit code 2"``, ``"returncode=1"``), if any.

    Only the last 400 characters are examined (runtimes print it at the end).
    """
    matches = list(_GENERIC_EXIT.finditer(text[-400:]))
    return int(matches[-1].group(1)) if matches else None


def split_lines(text: str) -> list[str]:
    """Lines of ``text`` split on ``"\\n"`` with a trailing ``"\\r"`` removed from each."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


_SHELL_NOISE = re.compile(
    r"^(?:\S*/)?(?:shellenv\.sh|\.?bashrc|bash\.bashrc|\.bash_profile|\.bash_login|\.?profile"
    r"|\.zshrc|\.zshenv|\.zprofile|\.zlogin|profile\.d/[^:\s]+)(?::\d+)?: (?:line \d+: )?"
)
"""A message of a shell start-up file (its path, then ``line N:``)."""


def is_shell_noise(line: str) -> bool:
    """A warning printed by a shell start-up file, not by the command
    (``/opt/homebrew/…/shellenv.sh: line 18: /bin/ps: Operation not permitted``,
    ``/home/u/.bashrc: line 3: nvm: command not found``, ``/etc/profile.d/x.sh: …``): never
    a result's summary.  A script the command runs (``./run.sh: line 4: …``) is not
    start-up noise."""
    return bool(_SHELL_NOISE.match(line.strip()))


def nonempty(lines: list[str]) -> list[str]:
    """The lines that are not blank."""
    return [line for line in lines if line.strip()]


def cap(text: str, limit: int = LINE_CAP_CHARS) -> str:
    """``text`` (carriage returns dropped) with at most ``limit`` characters; a cut is
    marked with ``"…"`` and falls at a safe point (:func:`~contextledger.textcut.cut_index`:
    never inside a marker, handle, digest, URL or combining sequence — a unit that opens
    the text and is longer than ``limit`` is kept whole)."""
    text = text.replace("\r", "")
    return text if len(text) <= limit else text[: cut_index(text, max(0, limit - 1))] + "…"


def fmt_int(value: int) -> str:
    """``12345`` as ``"12,345"``."""
    return f"{value:,}"


def count_of(value: int, noun: str, plural: str | None = None) -> str:
    """``value`` and ``noun`` in the right number: ``"1 line"``, ``"0 lines"``,
    ``"12,345 lines"`` (``plural`` for a noun that does not take an ``s``)."""
    return f"{value:,} {noun if value == 1 else plural or noun + 's'}"


def sha256_text(text: str) -> str:
    """``"sha256:<hex>"`` of the UTF-8 bytes of ``text`` (hashes carry their algorithm)."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def head_tail(lines: list[str], head: int, tail: int) -> tuple[list[str], list[str], int]:
    """First ``head`` and last ``tail`` lines and how many lines lie between them."""
    if len(lines) <= head + tail:
        return list(lines), [], 0
    return lines[:head], lines[len(lines) - tail :], len(lines) - head - tail


def looks_like_file(path: str) -> bool:
    """Whether ``path`` names a file rather than a directory: no trailing slash, no glob
    characters, and a basename with a dot (``guard.ts``, ``.gitignore``, ``Makefile.am``);
    ``src``, ``lib/`` and ``**/*.py`` do not."""
    p = path.strip().strip("\"'")
    if not p or p.endswith(("/", "\\")) or any(ch in p for ch in "*?[]{}"):
        return False
    base = p.replace("\\", "/").rsplit("/", 1)[-1]
    return "." in base and base not in (".", "..")


def normalise_path(path: str) -> str:
    """A path in one canonical spelling: forward slashes, no ``file://``, ``.``/``..``
    folded, no trailing slash (``"a/./b/../c.py"`` → ``"a/c.py"``)."""
    path = path.strip().strip("\"'")
    if path.startswith("file://"):
        path = path[len("file://") :]
    path = path.replace("\\", "/")
    if not path:
        return path
    return posixpath.normpath(path)


def line_of_offset(text: str, offset: int) -> int:
    """1-based line number of character ``offset`` in ``text``."""
    return text.count("\n", 0, offset) + 1


def byte_len(text: str) -> int:
    """UTF-8 length of ``text`` in bytes."""
    return len(text.encode("utf-8", "surrogatepass"))


def body_ranges(raw: str, body: Body) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
    """Provenance of ``body`` within ``raw``: (1-based inclusive line range, 0-based
    half-open UTF-8 byte range); ``(None, None)`` when the body is not a slice of ``raw``
    or is empty."""
    if body.start is None or not body.text:
        return None, None
    first = line_of_offset(raw, body.start)
    last = first + body.text.rstrip("\n").count("\n")
    byte_start = byte_len(raw[: body.start])
    return (first, last), (byte_start, byte_start + byte_len(body.text))
