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
* ``apply_patch '*** Begin Patch …'`` / ``apply_patch <<'EOF'`` (Codex through its shell)
  — a ``patch`` of the files its ``*** Update File:`` / ``Add File`` / ``Delete File`` /
  ``Move to`` headers name;
* ``rm FILE…`` / ``git rm FILE…`` — a ``delete`` of each file.

:func:`shell_effects` reports every write of a compound command (``rm -f x && cat > t.js
<<EOF`` … ``&& node t.js`` deletes ``x`` and writes ``t.js``) and whether the command
also *runs* something whose output is shown (a pipeline whose last stage is neither a
write nor a quiet step such as ``mkdir`` / ``export``, or ends in a ``tee`` fed by a
program: in ``pytest | tee out.log`` each command is its own action, ``pytest`` the run
and ``tee`` the write of ``out.log``): such a command is a run with effects, not a write.  Paths are resolved against the directory each pipeline runs in
(the call's ``workdir`` and ``cd`` steps, :mod:`~contextledger.memory.extractors.shell_words`).

Detection is a pure function of the command text (quotes honoured by :mod:`shlex`); a
command it cannot tokenise is not a write.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from contextledger.memory.dialects import begin_patch_paths, unified_diff_paths
from contextledger.memory.extractors.shell_words import (
    heredoc_owner,
    join_dir,
    pipelines,
    split_heredoc,
)
from contextledger.memory.extractors.textutil import normalise_path
from contextledger.memory.extractors.write_failures import unopened_paths

__all__ = ["ShellEffects", "ShellWrite", "describe_writes", "opened_writes", "shell_effects", "shell_write"]

_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_WRAP = frozenset({"sudo", "time", "nice", "env", "command"})
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", ";;", "|&", "(", ")"})
_REDIRECTS = frozenset({">", ">>", ">|"})
_SINKS = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty")
_QUIET = frozenset({"mkdir", "export", "set", "unset", "true", ":", "chmod", "chown", "umask", "shopt", "pushd", "popd", "sleep", "wait", "source", ".", "touch", "ln"})
"""Programs that print nothing worth keeping when they succeed."""
_PRODUCERS = frozenset({"echo", "printf", "cat"})
"""Programs whose output piped into ``tee`` is the content written, not a run's output."""


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
    if prog in ("apply_patch", "applypatch"):
        text = words[1] if len(words) > 1 else body
        return ShellWrite(kind="patch", paths=tuple(begin_patch_paths(text)) if text else (), content=text)
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


@dataclass(frozen=True, kw_only=True)
class ShellEffects:
    """What a shell command does to files, and whether it also shows output.

    Attributes:
        writes: every file write, in command order (paths resolved).
        runs: some pipeline's output is shown (its last stage is neither a write, nor
            redirected to a file, nor a quiet program).
    """

    writes: tuple[ShellWrite, ...]
    runs: bool


def _resolved(write: ShellWrite, cwd: str | None) -> ShellWrite:
    paths = tuple(join_dir(cwd, p) for p in write.paths)
    return write if paths == write.paths else dataclasses.replace(write, paths=paths)


def shell_effects(command: str, cwd: str | None = None) -> ShellEffects | None:
    """The file writes of ``command`` and whether it runs something visible (module
    docstring); ``None`` when it cannot be tokenised or is a function call written as
    markup (``<function=bash>…``).

    Args:
        command: the shell command line.
        cwd: the directory the command runs in (Codex's ``workdir``), when known.
    """
    if command.lstrip().startswith("<function="):
        return None  # a function call written as markup, not a shell command
    _, body = split_heredoc(command.strip())
    owner = heredoc_owner(command)
    found = pipelines(command, cwd)
    if found is None:
        return None
    writes: list[ShellWrite] = []
    runs = False
    for pipeline in found:
        stage_writes: list[ShellWrite | None] = []
        for stage in pipeline.stages:
            # the here-document is the input of its own stage only (not of a ``tee`` before it)
            own = body if owner is None or stage[: len(owner)] == owner else None
            kept, redirected = _redirect_write(list(stage), own)
            write = _segment_write(kept, own) or redirected
            stage_writes.append(write)
            if write is not None:
                writes.append(_resolved(write, pipeline.cwd))
        runs = runs or _pipeline_runs(pipeline.stages, stage_writes)
    return ShellEffects(writes=tuple(writes), runs=runs)


def _pipeline_runs(stages: tuple[tuple[str, ...], ...], stage_writes: list[ShellWrite | None]) -> bool:
    """Whether a pipeline shows the output of a program it runs: its last stage is no
    write and no quiet program, or the last stage is a ``tee`` (which passes its input
    on) fed by a stage that runs a program (``pytest 2>&1 | tee out.log``: the run is
    ``pytest``, ``tee`` writes ``out.log``) rather than text (``echo``, ``printf``,
    ``cat``)."""
    last = _program(list(stages[-1]))
    if stage_writes[-1] is None:
        return bool(last) and _name(last[0]) not in _QUIET
    if not last or _name(last[0]) != "tee" or ">" in stages[-1] or ">>" in stages[-1]:
        return False
    for stage, write in zip(stages[:-1], stage_writes[:-1], strict=True):
        words = _program(list(stage))
        if write is None and words and _name(words[0]) not in _QUIET and _name(words[0]) not in _PRODUCERS:
            return True
    return False


def _name(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def shell_write(command: str, cwd: str | None = None) -> ShellWrite | None:
    """The first file write ``command`` makes (:func:`shell_effects`), or ``None``."""
    effects = shell_effects(command, cwd)
    return effects.writes[0] if effects and effects.writes else None


_VERBS = {"delete": "deleted", "edit": "edited", "patch": "patched"}
MAX_DESCRIBED_PATHS = 5


def describe_writes(writes: tuple[ShellWrite, ...]) -> list[str]:
    """One phrase per write, in order: ``"deleted a.txt, b.txt"``, ``"wrote t.js"``,
    ``"appended to log.txt"``, ``"edited x.py"``, ``"patched a.py"`` (at most five paths a
    phrase, then ``"(+N more)"``; a patch with no file list is ``"patched (files not
    named)"``)."""
    out: list[str] = []
    for w in writes:
        verb = _VERBS.get(w.kind) or ("appended to" if w.append else "wrote")
        shown = ", ".join(w.paths[:MAX_DESCRIBED_PATHS]) or "(files not named)"
        more = f" (+{len(w.paths) - MAX_DESCRIBED_PATHS} more)" if len(w.paths) > MAX_DESCRIBED_PATHS else ""
        out.append(f"{verb} {shown}{more}")
    return out


def opened_writes(writes: tuple[ShellWrite, ...], result_text: str) -> tuple[tuple[ShellWrite, ...], list[str]]:
    """``(the writes that happened, the files not written)``: a file the command's output
    reports it could not open (``bash: out.txt: Permission denied``,
    :func:`~contextledger.memory.extractors.write_failures.unopened_paths`) is taken out of
    its write, and a write left with no file is dropped.  Paths are normalised
    (:func:`~contextledger.memory.extractors.textutil.normalise_path`)."""
    every = [normalise_path(p) for w in writes for p in w.paths]
    unopened = unopened_paths(result_text, list(dict.fromkeys(every)))
    if not unopened:
        return writes, []
    kept: list[ShellWrite] = []
    for w in writes:
        paths = tuple(p for p in w.paths if normalise_path(p) not in unopened)
        if paths:
            kept.append(w if paths == w.paths else dataclasses.replace(w, paths=paths))
    return tuple(kept), unopened
