"""Which files a memory is about and writes, and when two spellings name one file.

Agents name one file several ways: Claude Code's tools take absolute paths
(``/repo/auth.py``), Codex's ``apply_patch`` relative ones (``auth.py``), a shell command
whatever its author typed (resolved against its ``workdir`` and ``cd`` steps where they
are known).  :func:`same_file` is the rule the links use; :func:`path_alias_keys` lists
the subject keys it relates that can be looked up by index.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from contextledger.records.enums import ToolCallStatus
from contextledger.records.models import ToolMemory

__all__ = ["changes_files", "files_written", "memory_paths", "path_alias_keys", "same_file", "written_paths"]

_CHANGED_MEANWHILE = re.compile(r"modified since|(?:has been|was) (?:modified|changed) (?:since|externally|on disk)|changed on disk|externally modified", re.I)
"""A failed write's report that the file changed under it ("File has been modified since
read")."""

_WRITE_KINDS = frozenset({"file_write", "generated_file"})


def memory_paths(memory: ToolMemory) -> list[str]:
    """The files ``memory`` is about: its ``file:`` subject, then ``payload["paths"]``."""
    paths: list[str] = []
    if memory.subject_key and memory.subject_key.startswith("file:"):
        paths.append(memory.subject_key[len("file:") :])
    extra = memory.payload.get("paths")
    if isinstance(extra, list):
        paths.extend(p for p in extra if isinstance(p, str) and p)
    return list(dict.fromkeys(paths))


def files_written(memory: ToolMemory) -> list[str]:
    """``payload["files_written"]`` of a shell run that also wrote files."""
    value = memory.payload.get("files_written")
    return [p for p in value if isinstance(p, str) and p] if isinstance(value, list) else []


def changes_files(memory: ToolMemory) -> bool:
    """Whether the writes of ``memory`` changed its files: a failed or rejected write
    (status ``failed``, ``applied`` False) changes nothing — unless its result reports
    that the file changed meanwhile, which makes the earlier reads out of date all the
    same.  A shell run keeps its writes whatever its exit status (the status is the
    command's, a later step of it may be what failed)."""
    if memory.payload.get("command") or files_written(memory):
        return True
    if memory.status is ToolCallStatus.FAILED or memory.payload.get("applied") is False:
        return _CHANGED_MEANWHILE.search(memory.summary) is not None
    return True


def written_paths(memory: ToolMemory) -> list[str]:
    """The files ``memory`` writes: every path of a ``file_write`` / ``generated_file``
    memory, the ``files_written`` of a shell run that writes files (``rm -f x && cat >
    t.js <<EOF … && node t.js``); empty for anything else and for a write that changed
    nothing (:func:`changes_files`)."""
    if not changes_files(memory):
        return []
    kind = str(memory.payload.get("kind") or memory.payload.get("extractor") or "")
    if kind in _WRITE_KINDS:
        return memory_paths(memory)
    return files_written(memory)


def same_file(a: str, b: str) -> bool:
    """Whether two spellings name one file: equal, or one is relative (``src/a.py``, as
    an ``apply_patch`` or a shell command names it) and the other ends with ``/`` plus it
    (``/repo/src/a.py``).  Both are expected normalised (``./x`` and ``d/../x`` folded)."""
    if a == b:
        return True
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return bool(short) and not short.startswith(("/", "~")) and long.endswith("/" + short)


def path_alias_keys(paths: Iterable[str]) -> list[str]:
    """The subject keys (``file:…``) of every spelling :func:`same_file` relates to one of
    ``paths`` that can be listed: the path itself and each of its trailing parts
    (``/repo/src/a.py`` → ``file:/repo/src/a.py``, ``file:repo/src/a.py``,
    ``file:src/a.py``, ``file:a.py``).  Absolute spellings of a relative path cannot be
    listed; they are found by scanning the lineage's newest file memories."""
    keys: list[str] = []
    for path in paths:
        parts = [x for x in path.split("/") if x]
        keys.append(f"file:{path}")
        keys.extend(f"file:{'/'.join(parts[i:])}" for i in range(len(parts)))
    return list(dict.fromkeys(keys))
