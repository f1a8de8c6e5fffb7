"""The working set: every file read or edited on the lineage, with its state, as task
state (policy ``[working_set]``).

Seed 001 §6 problem 5 (a handoff lists files read with their staleness and files
modified) and §4.3 (task state is hot).  One line per file, newest first, ``- <path>
(<state>)`` (:func:`file_state`: created, edited, deleted, edit rejected, written,
command failed, read, searched, read, changed since; a write lists every file it wrote); an edited or created file is followed by its newest changed lines
(:func:`change_lines`, policy ``[edits] working_set_lines``), so what the file says now
survives once the raw exchange is dropped.  Within ``max_files`` and ``max_share ×
budget`` tokens: the files are chosen first (paths and states), then changed lines are
added, newest file first, while they fit (a file whose lines do not fit is listed
without them); files beyond are
counted in a last line; a relative path one absolute path ends with is listed once, under
the absolute one (:func:`fold_relative_paths`).  Paths and lines come from tool calls, so the block is ledger data
(opened by the data banner).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextledger.assembly.pieces import NOTE_SEQ, Piece, message_cost
from contextledger.assembly.render import DATA_BANNER
from contextledger.providers.base import WireMessage
from contextledger.records.enums import OmissionReason, ResolutionState, RuntimeKind, Shape
from contextledger.records.models import ToolMemory
from contextledger.records.parts import TextPart

if TYPE_CHECKING:
    from contextledger.assembly.candidates import CandidateSet
    from contextledger.assembly.evaluate import Evaluator
    from contextledger.policy.model import Policy
    from contextledger.store.base import Scope
    from contextledger.store.sql import SqlStore
    from contextledger.tokens import Tokenizer

__all__ = ["WORKING_SET_SCAN", "change_lines", "drop_working_set", "file_state", "fold_relative_paths", "read_file_memories", "working_set_piece"]

WORKING_SET_SCAN = 600
"""The working set lists the files among the newest this-many memories of each lineage
segment (bounded work per assembly)."""


def read_file_memories(store: SqlStore, scope: Scope, cands: CandidateSet, ev: Evaluator, policy: Policy) -> list[ToolMemory]:
    """The file memories the working set may list: for each file, its newest memory the
    viewer may see (and newer ones hidden by their indexed columns), among the newest
    :data:`WORKING_SET_SCAN` memories of each lineage segment; ``[]`` when the policy
    shows no working set."""
    ws = policy.working_set
    if not (ws.max_files and ws.max_share):
        return []
    return store.recent_subject_memories(scope, cands.conversation.id, cands.segments, "file:", scan=WORKING_SET_SCAN, limit=4 * ws.max_files, settled=ev.entry_visible)


def working_set_piece(files: list[ToolMemory], ev: Evaluator, policy: Policy, tok: Tokenizer, budget: int) -> Piece | None:
    """The working-set block as a mandatory task-state piece (rules in the module
    docstring), or ``None`` when there is nothing to list.  ``files`` are file memories
    (``subject_key`` ``file:<path>``); memories the viewer may not see are skipped."""
    cfg = policy.working_set
    latest: dict[str, tuple[str, ToolMemory]] = {}
    for m in sorted(files, key=lambda m: (m.seq, m.id), reverse=True):
        if not m.subject_key or not m.subject_key.startswith("file:") or not ev.memory_visible(m):
            continue
        for path in _listed_paths(m):
            if path not in latest:
                latest[path] = (file_state(m, m.id in ev.lineage.stale, path), m)
    latest = fold_relative_paths(latest)
    if not latest:
        return None
    # newest observation first, then path: parallel results that completed in another
    # order (same observation time) list the same way (seed 000 §5.6 determinism)
    ordered = sorted(latest.items(), key=lambda kv: (-kv[1][1].observed_at.timestamp(), kv[0]))
    head = DATA_BANNER + "\nfiles read or edited on this branch (newest first):"
    cap = int(cfg.max_share * budget)
    used = tok.count(head) + 4
    chosen: list[tuple[str, str, ToolMemory]] = []
    for path, (state, mem) in ordered:
        line = f"- {path} ({state})"
        cost = tok.count(line) + 1
        if len(chosen) >= cfg.max_files or used + cost > cap:
            break
        chosen.append((line, state, mem))
        used += cost
    # then, newest first, the changed lines of edited files while they fit: every file
    # listed above stays listed whatever its neighbours' changes cost
    lines: list[str] = []
    refs: list[str] = []
    for line, state, mem in chosen:
        shown = change_lines(mem, state, policy.edits.working_set_lines)
        extra = tok.count("\n".join(shown)) + 1 if shown else 0
        if shown and used + extra <= cap:
            line = "\n".join([line, *shown])
            used += extra
        lines.append(line)
        refs.append(mem.id)
    if not lines:
        return None
    if len(latest) > len(lines):
        lines.append(f"- … {len(latest) - len(lines)} older files in the ledger")
    msg = WireMessage(role="user", parts=(TextPart(text=head + "\n" + "\n".join(lines)),), ref=refs[0])
    piece = Piece(unit=None, messages=[msg], cost=message_cost(tok, [msg]), bucket="current_input_task_state", shape=Shape.STRUCTURED, mandatory=True, order=(NOTE_SEQ, 1), extra_refs=tuple(refs))
    piece.working_set = True
    if len(latest) == len(lines):
        piece.file_artifacts = tuple(tuple(mem.source_artifact_ids) for _, _, mem in chosen)
    return piece


def _listed_paths(m: ToolMemory) -> list[str]:
    """The files a memory puts in the working set: its subject's, then, for a write, every
    other file it wrote (``payload["paths"]``: ``pytest | tee out.log && cat > notes.txt
    <<EOF`` lists both)."""
    paths = [m.subject_key[5:]] if m.subject_key else []
    extra = m.payload.get("paths")
    if str(m.payload.get("kind") or m.payload.get("extractor") or "") == "file_write" and isinstance(extra, list):
        paths.extend(p for p in extra if isinstance(p, str))
        paths.extend(_not_written(m))
    return [p for p in dict.fromkeys(paths) if p]


def fold_relative_paths(latest: dict[str, tuple[str, ToolMemory]]) -> dict[str, tuple[str, ToolMemory]]:
    """One entry per file when agents name it both ways: a relative path (``src/a.py``,
    from a shell command) that exactly one absolute path ends with (``/repo/src/a.py``,
    from a read) is folded into it, the newer memory (by seq) giving the state — so a read
    before an edit spelled the other way is not listed as the file's current state."""
    absolute = [p for p in latest if p.startswith("/")]
    out = dict(latest)
    for rel in [p for p in latest if not p.startswith("/")]:
        matches = [a for a in absolute if a.endswith("/" + rel)]
        if len(matches) != 1:
            continue
        target = matches[0]
        keep = max((out[target], out.pop(rel)), key=lambda e: (e[1].seq, e[1].id))
        out[target] = keep
    return out


def _not_written(m: ToolMemory) -> list[str]:
    value = m.payload.get("not_written")
    return [p for p in value if isinstance(p, str)] if isinstance(value, list) else []


def file_state(m: ToolMemory, stale_on_lineage: bool, path: str | None = None) -> str:
    """The state the working set gives file ``path`` from its newest memory ``m``: ``created``,
    ``edited``, ``deleted``, ``not written`` (a shell command's output says it could not
    open the file: ``payload["not_written"]``), ``edit rejected`` (refused: nothing written), ``written,
    command failed`` (a shell command that wrote the file and then failed), ``searched``,
    ``read`` or ``read, changed since`` (a read made stale by a later change is never shown as current)."""
    kind = str(m.payload.get("kind") or m.payload.get("extractor") or "")
    if kind == "generated_file":
        return "created"
    if kind == "file_write":
        if path is not None and path in _not_written(m):
            return "not written"
        if m.payload.get("applied") is False:
            return "edit rejected"
        if m.payload.get("command_failed"):
            return "written, command failed"
        return "deleted" if m.payload.get("operation") == "delete" else "edited"
    verb = "searched" if kind == "file_search" else "read"
    if m.resolution_state is ResolutionState.STALE or stale_on_lineage:
        return f"{verb}, changed since"
    return verb


def change_lines(m: ToolMemory, state: str, limit: int) -> list[str]:
    """The newest changed lines of an ``edited`` / ``created`` file, each as
    ``"    | <line>"`` (at most ``limit``, then ``"    | … N more lines in the ledger"``);
    ``[]`` for any other state, when the memory carries no new text, or when the change
    was made by a child subagent: a child's promoted write is a handle for its parent (seed
    000 §4.14: the report and handles, never the child's raw workspace) — its state shows,
    its text stays in the ledger."""
    text = m.payload.get("new_text")
    if state not in ("edited", "created") or not isinstance(text, str) or not text or limit <= 0:
        return []
    if m.runtime_kind is RuntimeKind.SUBAGENT_CHILD:
        return []
    new = text.split("\n")
    more = len(new) - limit + int(m.payload.get("new_text_omitted") or 0)
    out = [f"    | {ln}" for ln in new[:limit]]
    if more > 0:
        out.append(f"    | … {more} more changed lines in the ledger")
    return out


def drop_working_set(chosen: list[Piece], ev: Evaluator) -> bool:
    """Last resort: the working-set list gives way (recorded on its first memory).
    Returns whether it was in ``chosen``."""
    for p in chosen:
        if p.working_set:
            chosen.remove(p)
            if p.extra_refs:
                ev.omit_record(p.extra_refs[0], "memory", OmissionReason.BUDGET, "mandatory content alone exceeds the budget: the working-set list gives way")
            return True
    return False
