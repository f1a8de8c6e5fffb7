"""The last resort of the budget stage: when the mandatory pieces alone exceed the budget.

In order (seed 001 §2 authority chain: the current user instruction and task state
outrank raw old conversation; seed 000 §4.6: recovery state is kept as long as it can
be): older protected failures become evidence lines (the newest stays raw); raw
mandatory results become their memory views; the newest failure becomes an evidence line
(its error line kept); the working-set list gives way; an older task statement gives way
to the current input; the longest texts are cut with an explicit marker; the system
text is cut.  Each step is recorded as a budget decision.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextledger.assembly.pieces import Piece
from contextledger.handles import artifact_handle
from contextledger.providers.base import WireMessage
from contextledger.records.enums import OmissionReason, Shape
from contextledger.records.parts import Part, TextPart, ToolResultPart

if TYPE_CHECKING:
    from contextledger.assembly.drop_order import DropState
    from contextledger.assembly.evaluate import Evaluator
    from contextledger.tokens import Tokenizer

__all__ = ["cut_text", "drop_task_statement", "shrink_mandatory", "truncate_system"]


def shrink_mandatory(st: DropState, chosen: list[Piece], ev: Evaluator, over: int, *, cut: bool = True) -> bool:
    """Shrink mandatory content: first turn a raw result into its memory view; then,
    when ``cut``, cut the longest text (by about ``over`` tokens) with an explicit
    marker.  Returns whether anything shrank."""
    shaper = st.shaper
    for p in sorted((p for p in chosen if p.raw_artifacts and p.unit is not None and p.unit.key not in st.reshaped), key=lambda p: -p.cost):
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
    biggest = max(chosen, key=lambda p: p.cost, default=None)
    if biggest is None or biggest.cost < 64:
        return False
    target = max(32, biggest.cost - over - 16)
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
                parts.append(part.model_copy(update={"text": cut_text(tok, part.text, share, where.get(m.ref or ""))}))
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


def cut_text(tok: Tokenizer, text: str, max_tokens: int, ref: str | None) -> str:
    """``text`` within about ``max_tokens`` tokens: its first two thirds and last third,
    with a marker naming how many tokens were left out and where the full text is
    (``ref``: ``"artifact a12"``, ``"message 12"``, ``"system prompt"``)."""
    ids = tok.encode(text)
    if len(ids) <= max_tokens:
        return text
    head = tok.decode(ids[: max_tokens * 2 // 3])
    tail = tok.decode(ids[-(max_tokens // 3) :]) if max_tokens >= 3 else ""
    where = f" ({ref})" if ref else ""
    return f"{head}\n[… {len(ids) - max_tokens:,} tokens omitted; full text in the ledger{where} …]\n{tail}"


def truncate_system(tok: Tokenizer, sysb: tuple[str, ...], over: int, ev: Evaluator) -> tuple[str, ...]:
    """The system blocks with the longest one cut by about ``over`` tokens (recorded)."""
    if not sysb:
        return sysb
    i = max(range(len(sysb)), key=lambda j: len(sysb[j]))
    n = tok.count(sysb[i])
    cut = cut_text(tok, sysb[i], max(16, n - over - 16), "system prompt")
    ev.note_bulk("system", OmissionReason.BUDGET, 1, "system prompt cut to fit the budget")
    return (*sysb[:i], cut, *sysb[i + 1 :])


def drop_task_statement(chosen: list[Piece], ev: Evaluator) -> bool:
    """An older task statement (the first user message, when a later user message is
    the current input) gives way to the current input, the recovery state and the
    runtime state.  Returns whether a piece was dropped (recorded as a budget
    omission)."""
    for p in chosen:
        if p.task_statement and p.unit is not None:
            chosen.remove(p)
            ev.omit_unit(p.unit, OmissionReason.BUDGET, "mandatory content alone exceeds the budget: the older task statement gives way to the current input and recovery state")
            return True
    return False
