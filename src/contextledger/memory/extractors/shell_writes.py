"""Shell commands that write files: the fallback that sees an edit in a command line.

Recognised (each segment of ``&&`` / ``||`` / ``;`` / ``|`` chains, after ``cd``,
environment assignments and wrappers):

* ``sed -i[SUFFIX] EXPR FILE…`` / ``sed --in-place`` — an ``edit`` of each file; the
  change is the sed expression (``s/old/new/g``);
* ``cat > F <<EOF`` … ``EOF`` (also ``cat <<EOF > F``, ``>>`` to append) — a ``write``
  whose content is the here-document;
* ``tee [-a] F…`` — a ``write`` of each file (content: a here-document when given);
* ``echo TEXT > F`` / ``printf TEXT >> F`` — a ``write`` whose content is the text;
* any other ``CMD > F`` / ``CMD >> F`` redirection (not to ``/dev/null`` or a file
  descriptor) — a ``write`` of ``F`` with unknown content;
* ``git apply`` / ``patch`` — a ``patch``; with a here-document body its files come from
  the diff's ``+++`` headers;
* ``rm FILE…`` / ``git rm FILE…`` — a ``delete`` of each file.

Detection is a pure function of the command text (quotes honoured by :mod:`shlex`); a
command it cannot tokenise is not a write.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from contextledger.memory.dialects import unified_diff_paths

__all__ = ["ShellWrite", "shell_write"]

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_WRAP = frozenset({"sudo", "time", "nice", "env", "command"})
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", ";;", "|&", "(", ")"})
_REDIRECTS = frozenset({">", ">>", ">|"})
_SINKS = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty")


@dataclass(frozen=True, kw_only=True)
class ShellWrite:
    """What a file-writing command does.

    Attributes:
        kind: ``edit`` (sed -i), ``write`` (redirections, tee), ``patch`` or ``delete``.
        paths: the files written, in command order.
        content: the new text when the command carries it (here-document, echo text).
        expression: the sed expression of an in-place edit.
        append: the write appends (``>>``, ``tee -a``).
    """

    kind: str
    paths: tuple[str, ...]
    content: str | None = None
    expression: str | None = None
    append: bool = False


def _split_heredoc(command: str) -> tuple[str, str | None]:
    """``(command line without the here-document body, body)``."""
    first, _, rest = command.partition("\n")
    m = _HEREDOC.search(first)
    if m is None:
        return command, None
    body: list[str] = []
    for line in rest.split("\n"):
        if line.strip() == m.group(2):
            break
        body.append(line)
    return first[: m.start()] + first[m.end() :], "\n".join(body)


def _tokens(line: str) -> list[str] | None:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:
        return None


def _segments(tokens: list[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for t in tokens:
        if t in _SEPARATORS:
            out.append([])
        else:
            out[-1].append(t)
    return [s for s in out if s]


def _program(words: list[str]) -> list[str]:
    while words and (_ENV.match(words[0]) or words[0] in _WRAP):
        words = words[1:]
    return words


def _sed(words: list[str]) -> ShellWrite | None:
    if not any(w == "--in-place" or w.startswith("--in-place=") or re.fullmatch(r"-[a-zA-Z]*i\S*", w) for w in words[1:]):
        return None
    expression: str | None = None
    operands: list[str] = []
    i = 1
    while i < len(words):
        w = words[i]
        if w in ("-e", "--expression") and i + 1 < len(words):
            expression = words[i + 1]
            i += 2
            continue
        if w.startswith("-"):
            i += 1
            continue
        operands.append(w)
        i += 1
    if expression is None and operands:
        expression = operands.pop(0)
    return ShellWrite(kind="edit", paths=tuple(operands), expression=expression) if operands else None


def _operands(words: list[str]) -> tuple[str, ...]:
    return tuple(w for w in words[1:] if not w.startswith("-"))


def _segment_write(words: list[str], body: str | None) -> ShellWrite | None:
    """The write of one pipeline segment (redirections already removed)."""
    words = _program(words)
    if not words:
        return None
    prog = words[0].rsplit("/", 1)[-1]
    if prog == "sed":
        return _sed(words)
    if prog == "tee":
        paths = _operands(words)
        return ShellWrite(kind="write", paths=paths, content=body, append="-a" in words) if paths else None
    if prog in ("rm", "unlink") or (prog == "git" and words[1:2] == ["rm"]):
        paths = _operands(words[1:] if prog == "git" else words)
        return ShellWrite(kind="delete", paths=paths) if paths else None
    if (prog == "git" and words[1:2] == ["apply"]) or prog == "patch":
        paths = tuple(unified_diff_paths(body)) if body else ()
        return ShellWrite(kind="patch", paths=paths, content=body)
    return None


def _redirect_write(words: list[str], body: str | None) -> tuple[list[str], ShellWrite | None]:
    """``(segment without its output redirections, the write they make)``."""
    kept: list[str] = []
    targets: list[str] = []
    append = False
    i = 0
    while i < len(words):
        w = words[i]
        if w in _REDIRECTS and i + 1 < len(words):
            target = words[i + 1]
            fd = kept[-1] if kept and kept[-1].isdigit() else None
            if fd is not None and fd != "1":
                i += 2
                continue
            if fd == "1":
                kept.pop()
            if target in _REDIRECTS or target in _SEPARATORS or target.startswith("<"):
                return kept, None  # ``> <`` is no shell redirection (markup such as ``<function=…>``)
            if not target.startswith("&") and not target.startswith(_SINKS):
                targets.append(target)
                append = append or w == ">>"
            i += 2
            continue
        kept.append(w)
        i += 1
    if not targets:
        return kept, None
    prog = _program(kept)[:1]
    content: str | None = None
    if prog and prog[0] == "cat" and len(_program(kept)) == 1:
        content = body
    elif prog and prog[0] in ("echo", "printf"):
        content = " ".join(w for w in _program(kept)[1:] if not (prog[0] == "echo" and w in ("-n", "-e")))
    return kept, ShellWrite(kind="write", paths=tuple(targets), content=content, append=append)


def shell_write(command: str) -> ShellWrite | None:
    """The file write ``command`` makes (rules in the module docstring), or ``None``.

    When several segments write, the first write found wins; its paths are those of
    that segment."""
    if command.lstrip().startswith("<function="):
        return None  # a function call written as markup (``<function=bash>…``), not a shell command
    line, body = _split_heredoc(command.strip())
    tokens = _tokens(line)
    if tokens is None:
        return None
    for segment in _segments(tokens):
        kept, redirected = _redirect_write(segment, body)
        found = _segment_write(kept, body) or redirected
        if found is not None:
            return found
    return None
