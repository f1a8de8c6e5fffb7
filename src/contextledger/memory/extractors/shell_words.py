"""Splitting a shell command line into pipelines and stages, with the directory each runs in.

Shared by the shell-read and shell-write recognisers
(:mod:`~contextledger.memory.extractors.shell_reads`,
:mod:`~contextledger.memory.extractors.shell_writes`).  A command line is split into
*pipelines* on ``&&`` / ``||`` / ``;`` / ``&`` and line breaks, each pipeline into *stages*
on ``|`` / ``|&``; quotes are honoured (:mod:`shlex`).  ``cd DIR`` moves the working
directory of the stages after it: relative to the call's own working directory (Codex's
``workdir`` argument) when one is known.  A here-document's body is taken out of the line
(``cat > f <<'EOF'`` … ``EOF``) and the command text after its terminator is kept.

A command line that holds a Windows drive path (``C:\\``, ``d:\\``) is split without
POSIX backslash escapes (:func:`split_words`): ``cd C:\\x`` keeps ``C:\\x``, not
``C:x``; such a path is absolute (never joined to the working directory) and is spelt
with forward slashes (``C:/x``), as every path is.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass

__all__ = ["UNKNOWN_DIR", "Pipeline", "has_drive_path", "heredoc_owner", "join_dir", "pipelines", "split_heredoc", "split_words", "tokens"]

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_PIPELINE_SEPARATORS = frozenset({"&&", "||", ";", "&", ";;"})
_STAGE_SEPARATORS = frozenset({"|", "|&"})
_GROUPING = frozenset({"(", ")", "{", "}"})
_DRIVE_PATH = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z]:\\")
"""A Windows drive path's head (``C:\\``) standing at the start of a word."""
UNKNOWN_DIR = "\0unknown"
"""The directory after a ``cd`` that cannot be followed (``cd``, ``cd -``, ``cd $X``)."""


@dataclass(frozen=True, kw_only=True)
class Pipeline:
    """One pipeline of a command line.

    Attributes:
        stages: the words of each stage, in order (grouping words ``( ) { }`` removed).
        cwd: the directory it runs in: ``None`` when neither the call nor a ``cd`` said,
            :data:`UNKNOWN_DIR` after a ``cd`` that cannot be followed.
    """

    stages: tuple[tuple[str, ...], ...]
    cwd: str | None


def split_heredoc(command: str) -> tuple[str, str | None]:
    """``(command text without the first here-document's body, that body)``; the lines
    after the body's terminator stay in the command text."""
    first, _, rest = command.partition("\n")
    m = _HEREDOC.search(first)
    if m is None:
        return command, None
    body: list[str] = []
    lines = rest.split("\n")
    after: list[str] = []
    for i, line in enumerate(lines):
        if line.strip() == m.group(2):
            after = lines[i + 1 :]
            break
        body.append(line)
    head = first[: m.start()] + first[m.end() :]
    return "\n".join([head, *after]) if after else head, "\n".join(body)


def heredoc_owner(command: str) -> tuple[str, ...] | None:
    """The leading words of the stage that reads the first here-document (``pytest | tee
    out.log && cat > notes.txt <<EOF`` → ``("cat", ">", "notes.txt")``): the words before
    ``<<`` back to the last pipeline or stage separator; ``None`` when there is no
    here-document or that text cannot be tokenised."""
    first = command.strip().partition("\n")[0]
    m = _HEREDOC.search(first)
    words = tokens(first[: m.start()]) if m else None
    if words is None:
        return None
    cut = max((i for i, w in enumerate(words) if w in _PIPELINE_SEPARATORS or w in _STAGE_SEPARATORS), default=-1)
    return tuple(w for w in words[cut + 1 :] if w not in _GROUPING)


def has_drive_path(text: str) -> bool:
    """Whether ``text`` holds a Windows drive path (``C:\\Users``, ``"d:\\x y"``)."""
    return _DRIVE_PATH.search(text) is not None


def _lexer(line: str, punctuation: bool) -> shlex.shlex:
    """A POSIX word lexer for ``line``; a line holding a Windows drive path gets no escape
    character, so its backslashes stay path separators."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>" if punctuation else False)
    lexer.whitespace_split = True
    lexer.commenters = "#" if punctuation else ""
    if has_drive_path(line):
        lexer.escape = ""
    return lexer


def split_words(line: str) -> list[str]:
    """:func:`shlex.split` of ``line`` (no comments), except that a line holding a Windows
    drive path keeps its backslashes (``cat C:\\a\\b.py`` → ``["cat", "C:\\a\\b.py"]``).

    Raises:
        ValueError: the quotes of ``line`` do not close.
    """
    return list(_lexer(line, punctuation=False))


def tokens(line: str) -> list[str] | None:
    """The words and operators of ``line`` (``None`` when its quotes do not close); a line
    holding a Windows drive path is split without backslash escapes."""
    lexer = _lexer(line, punctuation=True)
    try:
        return list(lexer)
    except ValueError:
        return None


def _line_tokens(text: str) -> list[str] | None:
    """Tokens with each line break outside quotes turned into ``;``: lines are tokenised
    one by one; when a line does not close its quotes the whole text is one token run."""
    out: list[str] = []
    for line in text.split("\n"):
        words = tokens(line)
        if words is None:
            return tokens(text)
        if out and words:
            out.append(";")
        out.extend(words)
    return out


def join_dir(base: str | None, path: str) -> str:
    """``path`` resolved against directory ``base`` (``None`` or :data:`UNKNOWN_DIR`: left
    as it is; an absolute, ``~`` or drive path is never joined), ``.`` and ``..`` folded.
    A drive path (``C:\\x\\a.py``) and a path relative to a drive directory are spelt
    with forward slashes, as :func:`~contextledger.memory.extractors.textutil.normalise_path`
    spells every path (``C:/x/a.py``)."""
    if has_drive_path(path):
        return posixpath.normpath(path.replace("\\", "/"))
    if base is None or base == UNKNOWN_DIR or path.startswith(("/", "~")):
        return posixpath.normpath(path) if path else path
    if has_drive_path(base) or base[1:3] == ":/":
        return posixpath.normpath(posixpath.join(base.replace("\\", "/"), path.replace("\\", "/")))
    return posixpath.normpath(posixpath.join(base, path))


def _cd_target(base: str | None, words: list[str]) -> str:
    args = [w for w in words[1:] if w not in ("-P", "-L", "--")]
    if len(args) != 1 or args[0] == "-" or "$" in args[0] or "`" in args[0]:
        return UNKNOWN_DIR
    return join_dir(base, args[0])


def pipelines(command: str, cwd: str | None = None) -> list[Pipeline] | None:
    """The pipelines of ``command`` (here-document body removed, see
    :func:`split_heredoc`), each with its directory; ``cd`` pipelines themselves are
    left out.  ``None`` when the command cannot be tokenised."""
    line, _ = split_heredoc(command.strip())
    words = _line_tokens(line)
    if words is None:
        return None
    found: list[Pipeline] = []
    stages: list[tuple[str, ...]] = []
    stage: list[str] = []
    here = cwd

    def close_pipeline() -> None:
        nonlocal here, stages, stage
        if stage:
            stages.append(tuple(stage))
        stage = []
        if len(stages) == 1 and stages[0][:1] == ("cd",):
            here = _cd_target(here, list(stages[0]))
        elif stages:
            found.append(Pipeline(stages=tuple(stages), cwd=here))
        stages = []

    for w in words:
        if w in _PIPELINE_SEPARATORS:
            close_pipeline()
        elif w in _STAGE_SEPARATORS:
            if stage:
                stages.append(tuple(stage))
            stage = []
        elif w not in _GROUPING:
            stage.append(w)
    close_pipeline()
    return found
