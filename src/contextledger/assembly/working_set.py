"""The working set: every file read or edited on the lineage, with its state, as task
state (policy ``[working_set]``).

Seed 001 §6 problem 5 (a handoff lists files read with their staleness and files
modified) and §4.3 (task state is hot).  One line per file, newest first, ``- <path>
(edited | read | searched | read, changed since)``, within ``max_files`` and
``max_share × budget`` tokens; files beyond are counted in a last line.  Paths come from
tool calls, so the block is ledger data (opened by the data banner).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from contextledger.assembly.pieces import Piece, message_cost
from contextledger.assembly.render import DATA_BANNER
from contextledger.providers.base import WireMessage
from contextledger.records.enums import OmissionReason, ResolutionState, Shape
from contextledger.records.models import ToolMemory
from contextledger.records.parts import TextPart

if TYPE_CHECKING:
    from contextledger.assembly.candidates import CandidateSet
    from contextledger.assembly.evaluate import Evaluator
    from contextledger.policy.model import Policy
    from contextledger.store.base import Scope
    from contextledger.store.sql import SqlStore
    from contextledger.tokens import Tokenizer

__all__ = ["WORKING_SET_SCAN", "drop_working_set", "read_file_memories", "working_set_piece"]

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
    latest: dict[str, tuple[str, str, datetime]] = {}
    for m in sorted(files, key=lambda m: (m.seq, m.id), reverse=True):
        if not m.subject_key or not m.subject_key.startswith("file:") or not ev.memory_visible(m):
            continue
        path = m.subject_key[5:]
        if not path or path in latest:
            continue
        kind = str(m.payload.get("kind") or m.payload.get("extractor") or "")
        verb = "searched" if kind == "file_search" else "read"
        if kind in ("file_write", "generated_file"):
            state = "edited"
        elif m.resolution_state is ResolutionState.STALE or m.id in ev.lineage.stale:
            state = f"{verb}, changed since"
        else:
            state = verb
        latest[path] = (state, m.id, m.observed_at)
    if not latest:
        return None
    # newest observation first, then path: parallel results that completed in another
    # order (same observation time) list the same way (seed 000 §5.6 determinism)
    ordered = sorted(latest.items(), key=lambda kv: (-kv[1][2].timestamp(), kv[0]))
    head = DATA_BANNER + "\nfiles read or edited on this branch (newest first):"
    cap = int(cfg.max_share * budget)
    used = tok.count(head) + 4
    lines: list[str] = []
    refs: list[str] = []
    for path, (state, mem_id, _) in ordered:
        line = f"- {path} ({state})"
        cost = tok.count(line) + 1
        if len(lines) >= cfg.max_files or used + cost > cap:
            break
        lines.append(line)
        refs.append(mem_id)
        used += cost
    if not lines:
        return None
    if len(latest) > len(lines):
        lines.append(f"- … {len(latest) - len(lines)} older files in the ledger")
    msg = WireMessage(role="user", parts=(TextPart(text=head + "\n" + "\n".join(lines)),), ref=refs[0])
    piece = Piece(unit=None, messages=[msg], cost=message_cost(tok, [msg]), bucket="current_input_task_state", shape=Shape.STRUCTURED, mandatory=True, order=(10**12, 1), extra_refs=tuple(refs))
    piece.working_set = True
    return piece


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
