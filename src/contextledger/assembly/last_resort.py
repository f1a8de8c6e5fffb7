"""The last resort of the budget stage: when the mandatory pieces alone exceed the budget.

In order (seed 001 §2 authority chain: the current user instruction and task state
outrank raw old conversation; seed 000 §4.6: recovery state is kept as long as it can
be): older protected failures become evidence lines (the newest stays raw); raw
mandatory results become their memory views; the newest failure becomes an evidence line
(its error line kept); the working-set list gives way; an older task statement is cut (to a floor); the longest texts are cut with an explicit marker; the system
text is cut; only when it is too short to cut does an older task statement give way
to the current input.  Each step is recorded as a budget decision.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from contextledger.assembly.pieces import Piece
from contextledger.handles import artifact_handle
from contextledger.memory.extractors.textutil import count_of
from contextledger.providers.base import WireMessage
from contextledger.records.enums import OmissionReason, Shape
from contextledger.records.parts import Part, TextPart, ToolResultPart
from contextledger.textcut import safe_point
from contextledger.tokens import pretoken_boundary, split_point

if TYPE_CHECKING:
    from contextledger.assembly.drop_order import DropState
    from contextledger.assembly.evaluate import Evaluator
    from contextledger.tokens import Tokenizer

__all__ = ["cut_lines", "cut_task_statement", "cut_text", "drop_task_statement", "shrink_mandatory", "truncate_system"]


def shrink_mandatory(st: DropState, chosen: list[Piece], ev: Evaluator, over: int, *, cut: bool = True, floor: int = 32) -> bool:
    """Shrink mandatory content: first turn a raw result into its memory view (not the
    newest result: the next step depends on its text); then, when ``cut``, cut the
    longest text (by about ``over`` tokens, to no less than ``floor`` tokens) with an
    explicit marker — the newest result by lines, head and tail with its error lines
    (:func:`cut_lines`).  Returns whether anything shrank."""
    shaper = st.shaper
    for p in sorted((p for p in chosen if p.raw_artifacts and not p.newest_result and p.unit is not None and p.unit.key not in st.reshaped), key=lambda p: -p.cost):
        assert p.unit is not None
        st.reshaped.add(p.unit.key)
        scratch = ev.quiet()
        shaped = shaper.render_unit(p.unit, scratch, raw=False, bucket=p.bucket, mandatory=p.mandatory, order=p.order)
        if shaped.cost >= p.cost:
            continue
        chosen[chosen.index(p)] = shaped if ev.absorb(scratch) else shaper.render_unit(p.unit, ev, raw=False, bucket=p.bucket, mandatory=p.mandatory, order=p.order)
        return True
    if not cut:
        return False
    biggest = max((p for p in chosen if p.cost > floor + 32), key=lambda p: p.cost, default=None)
    if biggest is None or biggest.cost < 64:
        return False
    target = max(floor, biggest.cost - over - 16)
    tok = shaper.tok
    new_msgs: list[WireMessage] = []
    where = _positions(biggest)
    for m in biggest.messages:
        parts: list[Part] = []
        share = max(16, target // max(1, len(biggest.messages)))
        for part in m.parts:
            if isinstance(part, TextPart) and tok.count(part.text) > 48:
                parts.append(TextPart(text=cut_text(tok, part.text, share, where.get(m.ref or ""))))
            elif isinstance(part, ToolResultPart) and part.text is not None and tok.count(part.text) > 48:
                cutter = cut_lines if biggest.newest_result else cut_text
                parts.append(part.model_copy(update={"text": cutter(tok, part.text, share, where.get(m.ref or ""))}))
            else:
                parts.append(part)
        new_msgs.append(WireMessage(role=m.role, parts=tuple(parts), name=m.name, ref=m.ref))
    new_cost = shaper.cost(new_msgs)
    if new_cost >= biggest.cost:
        return False
    biggest.messages = new_msgs
    biggest.cost = new_cost
    if biggest.unit is not None:
        ev.shape_record(biggest.unit.key, "message", Shape.EXTRACT, OmissionReason.BUDGET, "text cut to fit the budget (head and tail kept)")
    return True


def _positions(piece: Piece) -> dict[str, str]:
    """How a cut marker names the records of ``piece``'s messages (by ``WireMessage.ref``):
    an artifact by its handle (``artifact a12``), a message by its position
    (``message 12``) — never by a random id (:mod:`contextledger.handles`)."""
    if piece.unit is None:
        return {}
    out = {m.id: f"message {m.seq}" for m in piece.unit.messages}
    out.update({a.id: f"artifact {artifact_handle(a)}" for a in piece.unit.artifacts.values()})
    return out


_LABEL_LINES = re.compile(r"(?:\[[^\n]*\]\n)+")
"""The leading run of label lines of a text (each a whole ``[…]`` line)."""


def cut_text(tok: Tokenizer, text: str, max_tokens: int, ref: str | None) -> str:
    """``text`` within about ``max_tokens`` tokens: its first two thirds and last third
    (ending and starting at a line break when one is near, so labels stay whole), with a
    marker naming how many tokens were left out and where the full text is
    (``ref``: ``"artifact a12"``, ``"message 12"``, ``"system prompt"``).

    The omitted count is that of the left-out text itself: the whole text's count less
    the kept head's and tail's, exact when the cuts fall on pre-token boundaries (a line
    break or a space after a word: :func:`~contextledger.tokens.pretoken_boundary`),
    else written ``≈N (±k)`` with ``k`` the most it can be off.  The text's leading label
    lines (``[…]`` lines: the data banner, a handoff summary's header, a record's label)
    are kept whole even when the head would end inside them: the rest is cut instead.  Neither cut falls inside
    a marker, handle, digest, URL or combining sequence (:func:`_snap`).  Only windows of
    the head and tail are tokenised; the whole text is counted once (cached)."""
    total = tok.count(text)
    if total <= max_tokens:
        return text
    lead = _LABEL_LINES.match(text)
    if lead is not None and lead.end() < len(text) and tok.prefix_chars(text, max_tokens * 2 // 3) < lead.end():
        # the leading label lines (a banner, a handoff summary's header, a record's label)
        # are never cut: the body is cut to what is left, with its own marker
        label = text[: lead.end()]
        return label + cut_text(tok, text[lead.end():], max(16, max_tokens - tok.count(label)), ref)
    head_chars = tok.prefix_chars(text, max_tokens * 2 // 3)
    p, p_exact = split_point(text, head_chars // 2, head_chars)
    tail_at = tok.suffix_start(text, max_tokens // 3) if max_tokens >= 3 else len(text)
    tail_at = max(tail_at, p)
    q, q_exact = split_point(text, tail_at, tail_at + (len(text) - tail_at) // 2, last=False)
    (p, p_exact), (q, q_exact) = _snap(text, p, p_exact), _snap(text, q, q_exact, forward=True)
    q = max(p, q)
    head, tail = text[:p], text[q:]
    omitted = total - tok.count(head) - tok.count(tail)
    slack = tok.count_slack(text) + (not p_exact) + (not q_exact)
    amount = count_of(omitted, "token") if not slack else f"≈{omitted:,} (±{slack:,}) tokens"
    where = f" ({ref})" if ref else ""
    shown = head[:-1] if head.endswith("\n") else head
    return f"{shown}\n[… {amount} omitted; full text in the ledger{where} …]\n{tail}"


def _snap(text: str, pos: int, exact: bool, *, forward: bool = False) -> tuple[int, bool]:
    """``(pos, exact)`` moved out of the unit it falls inside
    (:func:`~contextledger.textcut.safe_point`: the head's end before the unit, the
    tail's start after it), with whether the new point is a pre-token boundary."""
    safe = safe_point(text, pos, forward=forward)
    return (pos, exact) if safe == pos else (safe, pretoken_boundary(text, safe))


_ERROR_LINE = re.compile(r"error|fail|exception|traceback|panic|fatal|denied|not found|assert", re.I)


def cut_lines(tok: Tokenizer, text: str, max_tokens: int, ref: str | None) -> str:
    """A tool result within about ``max_tokens`` tokens, cut by whole lines: its first
    lines (the header), its error lines (``error``, ``FAILED``, ``Traceback`` …) and its
    last lines, in their original order, with one whole marker per gap naming the lines
    and tokens left out and where the full text is (``ref``: ``"artifact a12"``).  A text
    of few long lines falls back to :func:`cut_text`.  Linear in the text's size."""
    lines = text.split("\n")
    total = tok.count(text)
    if total <= max_tokens:
        return text
    if len(lines) < 6:
        return cut_text(tok, text, max_tokens, ref)
    cost = [tok.count(line) + 1 for line in lines]
    keep: set[int] = set()
    room = max_tokens - 24  # the markers

    def take(indexes: range | list[int], share: int) -> None:
        nonlocal room
        spent = 0
        for i in indexes:
            if i in keep:
                continue
            if spent + cost[i] > share or cost[i] > room:
                break
            keep.add(i)
            spent += cost[i]
            room -= cost[i]

    take(range(len(lines)), max_tokens // 3)
    take(range(len(lines) - 1, -1, -1), max_tokens // 3)
    take([i for i, line in enumerate(lines) if _ERROR_LINE.search(line)], max(0, room))
    if not keep:
        return cut_text(tok, text, max_tokens, ref)
    where = f" ({ref})" if ref else ""
    out: list[str] = []
    gap_lines = gap_tokens = 0
    for i, line in enumerate(lines):
        if i in keep:
            if gap_lines:
                out.append(f"[… {count_of(gap_lines, 'line')} ({count_of(gap_tokens, 'token')}) omitted; full text in the ledger{where} …]")
                gap_lines = gap_tokens = 0
            out.append(line)
        else:
            gap_lines += 1
            gap_tokens += cost[i]
    if gap_lines:
        out.append(f"[… {count_of(gap_lines, 'line')} ({count_of(gap_tokens, 'token')}) omitted; full text in the ledger{where} …]")
    return "\n".join(out)


def truncate_system(tok: Tokenizer, sysb: tuple[str, ...], over: int, ev: Evaluator, chosen: list[Piece] | None = None) -> tuple[str, ...]:
    """The system blocks with the longest one cut by about ``over`` tokens (recorded).
    When it is too short to cut and ``chosen`` is given, the older task statement gives
    way instead — the only step left before the budget is exceeded
    (:func:`drop_task_statement`)."""
    if not sysb:
        if chosen is not None:
            drop_task_statement(chosen, ev)
        return sysb
    i = max(range(len(sysb)), key=lambda j: len(sysb[j]))
    n = tok.count(sysb[i])
    cut = cut_text(tok, sysb[i], max(16, n - over - 16), "system prompt")
    if cut == sysb[i] or tok.count(cut) >= n:
        if chosen is not None:
            drop_task_statement(chosen, ev)
        return sysb
    ev.note_bulk("system", OmissionReason.BUDGET, 1, "system prompt cut to fit the budget")
    return (*sysb[:i], cut, *sysb[i + 1 :])


def drop_task_statement(chosen: list[Piece], ev: Evaluator) -> bool:
    """An older task statement (the first user message, when a later user message is
    the current input) gives way to the current input, the recovery state and the
    runtime state — only when nothing else is left to cut (the system prompt is too
    short to cut).  Returns whether a piece was dropped (recorded as a budget
    omission)."""
    for p in chosen:
        if p.task_statement and p.unit is not None:
            chosen.remove(p)
            ev.omit_unit(p.unit, OmissionReason.BUDGET, "mandatory content alone exceeds the budget: the older task statement gives way to the current input and recovery state")
            return True
    return False


TASK_FLOOR = 64
"""Tokens of an older task statement kept however tight the budget (its head and tail,
with the omission marker naming the message)."""


def cut_task_statement(st: DropState, chosen: list[Piece], ev: Evaluator, over: int) -> bool:
    """An older task statement (the first user message, when a later user message is
    the current input) is cut by about ``over`` tokens, to no less than
    :data:`TASK_FLOOR`, with the omission marker — never dropped: the model must know
    the task (seed 000 §4.6).  Returns whether it shrank (recorded as a budget
    reshaping)."""
    p = next((x for x in chosen if x.task_statement and x.unit is not None), None)
    if p is None or p.cost <= TASK_FLOOR + 16:
        return False
    tok, target = st.shaper.tok, max(TASK_FLOOR, p.cost - over - 16)
    where = _positions(p)
    share = max(16, target // max(1, len(p.messages)))
    new_msgs = [
        WireMessage(role=m.role, name=m.name, ref=m.ref, parts=tuple(
            TextPart(text=cut_text(tok, part.text, share, where.get(m.ref or ""))) if isinstance(part, TextPart) else part for part in m.parts))
        for m in p.messages
    ]
    new_cost = st.shaper.cost(new_msgs)
    if new_cost >= p.cost:
        return False
    p.messages, p.cost = new_msgs, new_cost
    assert p.unit is not None
    ev.shape_record(p.unit.key, "message", Shape.EXTRACT, OmissionReason.BUDGET, "mandatory content alone exceeds the budget: the older task statement is cut to fit (head and tail kept)")
    return True
