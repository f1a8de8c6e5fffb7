"""The safe fallback for unknown tools: head and tail lines with byte counts.

Never the whole payload once it exceeds :data:`HEAD_CHARS` + :data:`TAIL_CHARS`: the
middle is replaced by ``"… 123,456 bytes omitted …"``.  Warnings of shell start-up files
(:func:`~contextledger.memory.extractors.textutil.is_shell_noise`) never open the
summary.  On error the first error line and
its type are kept (seed 000 §4.1: failed tool state stays visible), and stack frames are
folded into one ``[N stack frames omitted]`` line before head and tail are taken
(:func:`~contextledger.memory.extractors.errorscan.fold_stack_frames`; seed 000 §4.5–4.6:
stack noise is not recovery state).

Payload keys: ``head`` (≤ :data:`HEAD_LINES` lines, ≤ :data:`HEAD_CHARS` characters),
``tail`` (≤ :data:`TAIL_LINES` lines, ≤ :data:`TAIL_CHARS` characters), ``omitted_bytes``
(between head and tail, after folding), ``line_count`` and ``output_bytes`` (of the whole
output), ``error_line``, ``stack_frames_folded`` (frames folded on error; 0 otherwise).
"""

from __future__ import annotations

from typing import Any

from contextledger.memory.extractors.base import Extraction, ToolInput
from contextledger.memory.extractors.errorscan import find_error, fold_stack_frames
from contextledger.memory.extractors.textutil import (
    body_ranges,
    byte_len,
    cap,
    count_of,
    is_shell_noise,
    split_lines,
    unwrap,
)
from contextledger.records.enums import ConfidenceBasis, ContextKind, FreshnessClass, Shape

__all__ = [
    "HEAD_CHARS",
    "HEAD_LINES",
    "TAIL_CHARS",
    "TAIL_LINES",
    "GenericExtractor",
    "head_tail_text",
]

HEAD_LINES = 8
TAIL_LINES = 4
HEAD_CHARS = 800
TAIL_CHARS = 400


def head_tail_text(text: str) -> tuple[str, str, int]:
    """(head, tail, omitted bytes) of ``text`` under the module's line and character caps.

    The head and tail never overlap; ``omitted`` is the UTF-8 size of what lies between.
    """
    head_end = 0
    for _ in range(HEAD_LINES):
        nl = text.find("\n", head_end)
        if nl == -1:
            head_end = len(text)
            break
        head_end = nl + 1
    head_end = min(head_end, HEAD_CHARS, len(text))
    start = len(text.rstrip("\n"))
    found_all = True
    for _ in range(TAIL_LINES):
        nl = text.rfind("\n", head_end, start)
        if nl == -1:
            found_all = False
            break
        start = nl
    tail_start = start + 1 if found_all else head_end
    tail_start = max(tail_start, len(text) - TAIL_CHARS, head_end)
    head = text[:head_end]
    tail = text[tail_start:]
    omitted = byte_len(text[head_end:tail_start])
    return head, tail, omitted


class GenericExtractor:
    """Fallback extractor: matches everything; the registry always tries it last."""

    name = "generic"

    def matches(self, item: ToolInput) -> bool:
        """Always True."""
        return True

    def extract(self, item: ToolInput) -> Extraction:
        """Head / tail extract of ``item``."""
        body = unwrap(item.result_text)
        text = body.text
        lines = split_lines(text)
        err = find_error(lines) if item.is_error else None
        folded = 0
        if item.is_error:
            kept, folded = fold_stack_frames(lines)
            if folded:
                text = "\n".join(kept)
        head, tail, omitted = head_tail_text(text)
        error_line = (
            err.error_line
            if err
            else (
                cap(next((ln.strip() for ln in lines if ln.strip()), "no output"))
                if item.is_error
                else None
            )
        )
        payload: dict[str, Any] = {
            "head": head,
            "tail": tail,
            "omitted_bytes": omitted,
            "line_count": len(lines),
            "output_bytes": byte_len(text),
            "error_line": error_line,
            "stack_frames_folded": folded,
        }
        shown = [ln.strip() for ln in split_lines(head) if ln.strip()]
        shown = [ln for ln in shown if not is_shell_noise(ln)] or shown  # a shell start-up warning is no summary
        summary_lines = [cap(shown[0]) if shown else "(empty result)"]
        if omitted:
            summary_lines.append(f"… {count_of(omitted, 'byte')} omitted …")
        tail_lines = [ln.strip() for ln in split_lines(tail) if ln.strip()]
        if tail_lines:
            summary_lines.append(cap(tail_lines[-1]))
        elif len(shown) > 1:
            summary_lines.append(cap(shown[-1]))
        if error_line and error_line not in summary_lines:
            # keep output order: first line, error line, last line
            if len(summary_lines) >= 3:
                summary_lines = [error_line, *summary_lines[1:3]]
            else:
                summary_lines = [summary_lines[0], error_line, *summary_lines[1:]]
        prov_lines, prov_bytes = body_ranges(item.result_text, body)
        return Extraction(
            kind="generic",
            summary="\n".join(summary_lines),
            payload=payload,
            shape=Shape.EXTRACT,
            context_kind=ContextKind.RECOVERY if item.is_error else ContextKind.OPERATIONAL,
            freshness_class=FreshnessClass.SESSION,
            subject_key=None,
            revalidation_tool=None,
            revalidation_args={},
            confidence=1.0,
            confidence_basis=ConfidenceBasis.DETERMINISTIC_PARSE,
            limits=f"{count_of(omitted, 'byte')} between head and tail omitted" if omitted else None,
            error_type=(err.error_type if err else "error") if item.is_error else None,
            line_range=prov_lines,
            byte_range=prov_bytes,
        )
