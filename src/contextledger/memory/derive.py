"""Deriving a ToolMemory from a ToolArtifact, and the text a model sees for it.

Seed 000 §4.3: a ToolMemory is a compact, model-facing record derived from artifacts that
keeps enough provenance to answer later where it came from, whether it is still current,
and whether the exact raw evidence can (and should) be rehydrated.  :func:`derive_memory`
builds it from a deterministic :class:`~contextledger.memory.extractors.Extraction`;
:func:`render_memory_text` and :func:`render_stale_marker` are the two texts the
assembler shows a model for a memory (current / stale).

Derivation is deterministic: the same artifact, raw text, registry and ``id`` give an
equal memory (``created_at`` is the artifact's ``created_at``, not the wall clock).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from functools import cache

from contextledger.handles import artifact_handle, memory_handle
from contextledger.ids import new_id
from contextledger.memory.continuation import Command, as_command, mark_command
from contextledger.memory.extractors import ExtractorRegistry, ToolInput, default_registry
from contextledger.memory.extractors.textutil import byte_len, fmt_int
from contextledger.memory.freshness import (
    age_text,
    age_text_at,
    epoch_us,
    format_seconds,
    memory_times_us,
    stale_after_for,
)
from contextledger.records.enums import (
    ContextKind,
    FreshnessClass,
    PromotionPolicy,
    RuntimeKind,
    Shape,
    Temperature,
    Visibility,
)
from contextledger.records.models import ProvenanceRef, ToolArtifact, ToolMemory
from contextledger.tokens import Tokenizer, get_tokenizer

__all__ = ["artifact_ref_text", "derive_memory", "render_memory_text", "render_stale_marker", "stale_marker_body", "stale_marker_header", "stale_marker_header_at"]

MAX_RENDERED_DIFF_LINES = 40


def artifact_ref_text(handle: str, size_bytes: int) -> str:
    """``"[artifact a12, 12,345 bytes]"``: how a memory points at its raw evidence
    (``handle``: the artifact's :func:`~contextledger.handles.artifact_handle`, never its
    random id — see :mod:`contextledger.handles`)."""
    return f"[artifact {handle}, {fmt_int(size_bytes)} bytes]"


def _promotion(artifact: ToolArtifact) -> PromotionPolicy:
    if artifact.visibility_scope == Visibility.AUDIT_ONLY:
        return PromotionPolicy.AUDIT_ONLY
    if artifact.runtime_kind == RuntimeKind.SUBAGENT_CHILD:
        return PromotionPolicy.NOT_PROMOTED
    return PromotionPolicy.AUTO


@cache
def _shared_registry() -> ExtractorRegistry:
    """The default registry, built once per process (extractors keep no state between
    results; building it per result cost ~0.7 ms)."""
    return default_registry()


def derive_memory(
    artifact: ToolArtifact,
    raw_text: str,
    *,
    registry: ExtractorRegistry | None = None,
    action_text: str | None = None,
    id: str | None = None,
    tokenizer: Tokenizer | None = None,
    freshness_overrides: Mapping[FreshnessClass, timedelta | None] | None = None,
    tool_freshness_overrides: Mapping[str, timedelta | None] | None = None,
    continues: Command | None = None,
) -> ToolMemory:
    """Build the ToolMemory of ``artifact`` from its raw result text.

    Args:
        artifact: the stored raw record.  Ownership, visibility, runtime kind, branch,
            sequence number and privacy class are copied from it (privacy is never
            promoted); an audit-only artifact gives an ``audit_only`` memory and a
            child-subagent artifact a ``not_promoted`` one (seed 000 §4.14, §8 R11).
        raw_text: the artifact's exact raw result (inline text or the blob's content).
        registry: extractors to use (default: :func:`default_registry`).
        action_text: the typed command for text-action agents.
        id: memory id (default: a new ``mem_`` id).
        tokenizer: counts ``token_count`` (default: o200k).
        freshness_overrides / tool_freshness_overrides: see
            :func:`contextledger.memory.freshness.stale_after_for`.
        continues: the command whose output this result continues: derived as its
            result (:func:`contextledger.memory.continuation.as_command`).

    Returns:
        The memory.  ``summary`` is ``"<tool> <status>: <extract line 1>"`` plus up to two
        more extract lines, ending with :func:`artifact_ref_text` when the raw result is
        larger than the summary; ``payload`` is the extract plus ``extractor``,
        ``artifact`` (the artifact id), ``size_bytes`` and ``sha256`` of the raw result.
    """
    reg = registry or _shared_registry()
    command, session = as_command(artifact.tool_name, artifact.arguments_json, artifact.call_id, raw_text, continues)
    item = ToolInput(tool_name=command.tool, arguments_json=command.arguments_json, result_text=raw_text, is_error=artifact.is_error,
                     size_bytes=artifact.size_bytes, content_type=artifact.content_type, action_text=action_text)
    ext = reg.extract(item)
    lines = ext.summary.split("\n")[:3]
    lines[0] = f"{command.tool} {'running' if session is not None and not artifact.is_error else artifact.status.value}: {lines[0]}"
    summary = "\n".join(lines)
    if artifact.size_bytes > byte_len(summary):
        lines[-1] = f"{lines[-1]} {artifact_ref_text(artifact_handle(artifact), artifact.size_bytes)}"
        summary = "\n".join(lines)
    payload = dict(ext.payload)
    if ext.kind == "test_run":
        ordered: dict[str, object] = {k: payload.pop(k) for k in ("command", "status", "error", "file", "test") if k in payload}
        payload = {**ordered, "artifact": artifact.id, **payload}
    else:
        payload["artifact"] = artifact.id
    payload["extractor"] = ext.kind
    subject = mark_command(payload, ext.subject_key, command, artifact.call_id, session)
    payload["size_bytes"] = artifact.size_bytes
    payload["sha256"] = artifact.sha256
    ref = ProvenanceRef(
        artifact_id=artifact.id,
        byte_start=ext.byte_range[0] if ext.byte_range else None,
        byte_end=ext.byte_range[1] if ext.byte_range else None,
        line_start=ext.line_range[0] if ext.line_range else None,
        line_end=ext.line_range[1] if ext.line_range else None,
    )
    stale_after = stale_after_for(
        ext.freshness_class,
        artifact.observed_at,
        overrides=freshness_overrides,
        tool_name=artifact.tool_name,
        tool_overrides=tool_freshness_overrides,
    )
    memory = ToolMemory(
        id=id or new_id("mem"),
        tenant_id=artifact.tenant_id,
        conversation_id=artifact.conversation_id,
        branch_id=artifact.branch_id,
        seq=artifact.seq,
        source_artifact_ids=(artifact.id,),
        source_tool=artifact.tool_name,
        call_id=artifact.call_id,
        status=artifact.status,
        summary=summary,
        payload=payload,
        shape=ext.shape,
        context_kind=ext.context_kind,
        temperature=Temperature.HOT
        if ext.context_kind == ContextKind.RECOVERY
        else Temperature.WARM,
        confidence=ext.confidence,
        confidence_basis=ext.confidence_basis,
        limits=ext.limits,
        privacy_class=artifact.privacy_class,
        freshness_class=ext.freshness_class,
        observed_at=artifact.observed_at,
        stale_after=stale_after,
        revalidation_tool=ext.revalidation_tool,
        revalidation_args=dict(ext.revalidation_args),
        provenance_refs=(ref,),
        promotion_policy=_promotion(artifact),
        subject_key=subject,
        owner_participant_id=artifact.owner_participant_id,
        owner_model_run_id=artifact.owner_model_run_id,
        visibility_scope=artifact.visibility_scope,
        shared_with_participants=artifact.shared_with_participants,
        runtime_kind=artifact.runtime_kind,
        token_count=0,
        created_at=artifact.created_at,
    )
    count = (tokenizer or get_tokenizer()).count(render_memory_text(memory))
    return memory.model_copy(update={"token_count": count})


def render_memory_text(memory: ToolMemory) -> str:
    """The exact text a model sees for a current memory: one compact block.  The memory
    is named by its handle (``m12``, :func:`~contextledger.handles.memory_handle`).

    Layout::

        [memory <handle> · <freshness> · observed <YYYY-MM-DDTHH:MMZ>[ · confidence 0.7 <basis>]]
        <summary lines>
        limits: <limits>                      (when set)
        <diff>                                (shape diff, payload diff ≤ 40 lines)
        new text:                             (no diff: a write's or creation's new text)
        <new_text>
        [x] done item / [>] in progress / [ ] pending / [-] item (other status)
                                              (a plan: one line per item, in order)
    """
    header = f"[memory {memory_handle(memory)} · {memory.freshness_class.value} · observed {_iso_minute(memory.observed_at)}"
    if memory.confidence < 1.0:
        header += f" · confidence {memory.confidence:.2f} {memory.confidence_basis.value}"
    parts = [header + "]", memory.summary]
    if memory.limits:
        parts.append(f"limits: {memory.limits}")
    diff = memory.payload.get("diff")
    new_text = memory.payload.get("new_text")
    todos = memory.payload.get("todos")
    if memory.payload.get("extractor") == "plan":
        parts.extend(_plan_lines(todos, memory.payload.get("text")))
    elif memory.shape == Shape.DIFF and isinstance(diff, str) and diff:
        diff_lines = diff.split("\n")
        if len(diff_lines) <= MAX_RENDERED_DIFF_LINES:
            parts.append(diff)
    elif isinstance(new_text, str) and new_text:
        parts.append("new text:\n" + new_text)
    return "\n".join(parts)


_PLAN_MARKS = {"completed": "[x]", "done": "[x]", "in_progress": "[>]", "pending": "[ ]"}


def _plan_lines(todos: object, text: object) -> list[str]:
    """The plan of a plan memory: ``[x] / [>] / [ ] / [-] <item>`` per item, or the plan
    text of a proposal."""
    if isinstance(todos, list):
        return [
            f"{_PLAN_MARKS[str(t.get('status'))]} {t['text']}" if str(t.get("status")) in _PLAN_MARKS else f"[-] {t['text']} ({t.get('status')})"
            for t in todos
            if isinstance(t, dict) and isinstance(t.get("text"), str)
        ]
    return [text] if isinstance(text, str) and text else []


def render_stale_marker(memory: ToolMemory, now: datetime) -> str:
    """The text a model sees instead of a stale memory: age plus a revalidation hint.

    Example::

        [stale memory m12 · Read · observed 13 h 5 min ago · stale since 1 h 5 min]
        Read succeeded: read /src/a.py lines 1-40 … [artifact a12, 5,120 bytes]
        revalidate: Read {"file_path": "/src/a.py"}

    Raises:
        InputError: ``now`` is naive.
    """
    return stale_marker_header(memory, now) + "\n" + stale_marker_body(memory)


def stale_marker_header(memory: ToolMemory, now: datetime) -> str:
    """The first line of :func:`render_stale_marker` (the only part that depends on
    ``now``): ``[stale memory <handle> · <tool> · observed … ago[ · stale since …]]``.

    Raises:
        InputError: ``now`` is naive.
    """
    age_text(memory, now)  # checks ``now``
    return stale_marker_header_at(memory, memory_times_us(memory), epoch_us(now))


def stale_marker_header_at(memory: ToolMemory, times_us: tuple[int, int | None, int | None], now_us: int) -> str:
    """:func:`stale_marker_header` from :func:`~contextledger.memory.freshness.memory_times_us`
    and ``now`` in :func:`~contextledger.memory.freshness.epoch_us` microseconds."""
    observed_us, verified_us, deadline_us = times_us
    header = f"[stale memory {memory_handle(memory)} · {memory.source_tool} · {age_text_at(observed_us, verified_us, now_us)}"
    if deadline_us is not None and now_us >= deadline_us:
        header += f" · stale since {format_seconds((now_us - deadline_us) // 1_000_000)}"
    return header + "]"


def stale_marker_body(memory: ToolMemory) -> str:
    """The lines of :func:`render_stale_marker` after its header: the first summary line
    and the revalidation hint (independent of ``now``)."""
    lines = [memory.summary.split("\n", 1)[0]]
    if memory.revalidation_tool:
        args = json.dumps(memory.revalidation_args, sort_keys=True, ensure_ascii=False)
        lines.append(f"revalidate: {memory.revalidation_tool} {args}")
    else:
        lines.append("revalidate: re-run the observation before relying on it")
    return "\n".join(lines)


def _iso_minute(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ")
