"""Typed records for every entity of the runtime graph (DESIGN.md "Vocabulary").

Field names follow seed 000 §4.1-4.5 and §4.9 (snake_case) and seed 001 §9
(``ContextItem`` / ``ContextPlan``).  Records are frozen pydantic models; every persisted
record carries ``tenant_id`` and a ``format_version``.  Times are timezone-aware UTC
datetimes; sizes are in bytes (``*_bytes``), token counts in tokens (``*_tokens``),
durations in milliseconds (``*_ms``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from contextledger.records.enums import (
    AuthorityLevel,
    ConfidenceBasis,
    ContextKind,
    FreshnessClass,
    MessageKind,
    PolicyFamily,
    PrivacyClass,
    PromotionPolicy,
    ProvenanceRank,
    ResolutionState,
    Role,
    RuntimeIsolationPolicy,
    RuntimeKind,
    Shape,
    Temperature,
    ToolCallStatus,
    Visibility,
)
from contextledger.records.parts import Part

__all__ = [
    "FORMAT_VERSION",
    "Branch",
    "ContextAssembly",
    "ContextItem",
    "ContextPlan",
    "ContinuationCheckpoint",
    "Conversation",
    "Message",
    "ModelRun",
    "Participant",
    "PolicyDecision",
    "ProvenanceRef",
    "Record",
    "SkillState",
    "Tenant",
    "ToolArtifact",
    "ToolCall",
    "ToolMemory",
]

FORMAT_VERSION = 1
"""Format version written on every persisted record."""


class Record(BaseModel):
    """Base of persisted records: frozen, keyword-only, extra fields forbidden."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)

    format_version: int = FORMAT_VERSION


class Tenant(Record):
    """Isolation root (organisation or user).  Every record carries its ``tenant_id``."""

    id: str
    name: str
    created_at: datetime


class Conversation(Record):
    """A user-owned chat container.

    Attributes:
        root_branch_id: the branch created with the conversation.
        active_branch_id: the branch assembly uses when none is given.
        source: where it came from (``"recorder"``, ``"import:claude-code"`` …).
        content_key: idempotency key (sha256 of the imported file) or ``None``.
    """

    id: str
    tenant_id: str
    user_id: str | None = None
    title: str = ""
    root_branch_id: str
    active_branch_id: str
    source: str = "recorder"
    source_path: str | None = None
    content_key: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime


class Branch(Record):
    """An ordered path through the conversation graph (seed 000 §4.10).

    A branch inherits its parent's history up to and including ``fork_seq`` (the
    conversation-wide sequence number of the fork message) without copying it.
    """

    id: str
    tenant_id: str
    conversation_id: str
    parent_branch_id: str | None = None
    fork_message_id: str | None = None
    fork_seq: int | None = None
    name: str = ""
    runtime_kind: RuntimeKind = RuntimeKind.CHAT
    created_at: datetime


class Participant(Record):
    """A model/persona configuration active in a run (seed 000 §4.1).

    Attributes:
        role_label: speaker label kept in debates (``"Pro"``, ``"Moderator"``).
        parent_participant_id: the parent for a child subagent.
        tool_names: the tools this participant may call (only these schemas are sent).
    """

    id: str
    tenant_id: str
    conversation_id: str
    name: str
    provider: str | None = None
    model: str | None = None
    role_label: str | None = None
    runtime_kind: RuntimeKind = RuntimeKind.CHAT
    parent_participant_id: str | None = None
    isolation_policy: RuntimeIsolationPolicy = RuntimeIsolationPolicy.PARTICIPANT
    tool_names: tuple[str, ...] = ()
    created_at: datetime


class Message(Record):
    """A node of the user-visible transcript.

    Attributes:
        seq: conversation-wide, strictly increasing position (the logical clock used by
            lineage queries and every stable sort).
        parent_message_id: previous node on its path (``None`` for the first).
        parts: typed content.
        visibility: who may see it; finalised assistant output is ``branch`` by default.
        authority: the authority level its content carries (seed 001 §4.2).
        source_ref: ``file:line`` or record index it was imported from.
        token_count: cached o200k token count of its content parts (no overhead).
    """

    id: str
    tenant_id: str
    conversation_id: str
    branch_id: str
    seq: int
    parent_message_id: str | None = None
    role: Role
    kind: MessageKind = MessageKind.CHAT
    parts: tuple[Part, ...] = ()
    participant_id: str | None = None
    model_run_id: str | None = None
    visibility: Visibility = Visibility.BRANCH
    privacy_class: PrivacyClass = PrivacyClass.INTERNAL
    authority: AuthorityLevel = AuthorityLevel.OLD_CONVERSATION
    runtime_kind: RuntimeKind = RuntimeKind.CHAT
    speaker_label: str | None = None
    source_ref: str | None = None
    content_key: str | None = None
    token_count: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime


class ModelRun(Record):
    """One provider-facing generation attempt for one participant/message/job."""

    id: str
    tenant_id: str
    conversation_id: str
    branch_id: str
    participant_id: str | None = None
    provider: str | None = None
    model: str | None = None
    runtime_kind: RuntimeKind = RuntimeKind.CHAT
    assembly_id: str | None = None
    status: str = "completed"
    parent_model_run_id: str | None = None
    job_id: str | None = None
    started_at: datetime
    finished_at: datetime | None = None
    usage: dict[str, Any] = Field(default_factory=dict)


class ToolCall(Record):
    """A function call requested by a model (args, call id) and its lifecycle status.

    Attributes:
        call_id: provider call id, unique within the conversation.
        message_id: the assistant message that requested it.
        call_index: position of the call within that message (0-based).
        status: pending / awaiting_approval / succeeded / failed / abandoned / unknown.
        result_message_id: the message carrying its result, once one exists.
    """

    id: str
    tenant_id: str
    conversation_id: str
    branch_id: str
    message_id: str
    seq: int
    call_index: int = 0
    call_id: str
    tool_name: str
    arguments_json: str = "{}"
    status: ToolCallStatus = ToolCallStatus.PENDING
    participant_id: str | None = None
    model_run_id: str | None = None
    result_message_id: str | None = None
    retry_of_call_id: str | None = None
    created_at: datetime
    resolved_at: datetime | None = None


class ToolArtifact(Record):
    """The durable raw record of one tool call and its result (seed 000 §4.2).

    The raw result is kept *before* any message-level truncation.  Payloads larger than
    the store's inline threshold (default 4096 bytes, seed 001 §6 problem 2) live in the
    content-addressed blob store under ``blob_key``; ``sha256`` and ``size_bytes`` always
    describe the exact raw bytes.

    Attributes:
        result_tokens: cached o200k token count of the raw result text.
        content_type: ``"text/plain"``, ``"application/json"`` or a binary media type.
    """

    id: str
    tenant_id: str
    conversation_id: str
    branch_id: str
    tool_call_id: str | None = None
    call_id: str
    tool_name: str
    arguments_json: str = "{}"
    status: ToolCallStatus
    is_error: bool = False
    error_type: str | None = None
    content_type: str = "text/plain"
    inline_text: str | None = None
    blob_key: str | None = None
    sha256: str
    size_bytes: int
    result_tokens: int = 0
    message_id: str | None = None
    seq: int
    owner_participant_id: str | None = None
    owner_model_run_id: str | None = None
    visibility_scope: Visibility = Visibility.BRANCH
    shared_with_participants: tuple[str, ...] = ()
    runtime_kind: RuntimeKind = RuntimeKind.CHAT
    runtime_isolation_policy: RuntimeIsolationPolicy = RuntimeIsolationPolicy.PARTICIPANT
    privacy_class: PrivacyClass = PrivacyClass.INTERNAL
    skill_profile: str | None = None
    provider_metadata: dict[str, Any] = Field(default_factory=dict)
    retention_class: str = "standard"
    deleted_at: datetime | None = None
    observed_at: datetime
    created_at: datetime


class ProvenanceRef(BaseModel):
    """A pointer into raw evidence: artifact id plus an optional byte or line range."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    artifact_id: str
    byte_start: int | None = None
    byte_end: int | None = None
    line_start: int | None = None
    line_end: int | None = None


class ToolMemory(Record):
    """A compact, model-facing record derived from one or more artifacts (seed 000 §4.3).

    Attributes:
        summary: one to three lines shown to models.
        payload: the structured extract (tool-kind specific; see ``memory.extractors``).
        shape: how ``summary``/``payload`` represent the evidence.
        stale_after: when the observation stops being current (``None`` = never).
        verified_at: last *verification* (a revalidating call), never last access.
        conflicts_with / supersedes / superseded_by: directed links (seed 000 §4.8);
            ``supersedes`` means "this current memory replaces those older ones".
        subject_key: what the memory is about (``"file:/src/a.py"``, ``"test:pytest tests"``);
            used for file staleness and supersession.
        token_count: cached token count of the rendered memory.
    """

    id: str
    tenant_id: str
    conversation_id: str
    branch_id: str
    seq: int
    source_artifact_ids: tuple[str, ...]
    source_tool: str
    call_id: str | None = None
    status: ToolCallStatus = ToolCallStatus.SUCCEEDED
    summary: str
    payload: dict[str, Any] = Field(default_factory=dict)
    shape: Shape = Shape.EXTRACT
    context_kind: ContextKind = ContextKind.OPERATIONAL
    temperature: Temperature = Temperature.WARM
    confidence: float = 1.0
    confidence_basis: ConfidenceBasis = ConfidenceBasis.DETERMINISTIC_PARSE
    limits: str | None = None
    privacy_class: PrivacyClass = PrivacyClass.INTERNAL
    freshness_class: FreshnessClass = FreshnessClass.SESSION
    observed_at: datetime
    stale_after: datetime | None = None
    verified_at: datetime | None = None
    revalidation_tool: str | None = None
    revalidation_args: dict[str, Any] = Field(default_factory=dict)
    provenance_refs: tuple[ProvenanceRef, ...] = ()
    provenance_rank: ProvenanceRank = ProvenanceRank.TOOL_OBSERVED
    resolution_state: ResolutionState = ResolutionState.CURRENT
    repair_attempts: int = 0
    conflicts_with: tuple[str, ...] = ()
    supersedes: tuple[str, ...] = ()
    superseded_by: str | None = None
    promotion_policy: PromotionPolicy = PromotionPolicy.AUTO
    subject_key: str | None = None
    owner_participant_id: str | None = None
    owner_model_run_id: str | None = None
    visibility_scope: Visibility = Visibility.BRANCH
    shared_with_participants: tuple[str, ...] = ()
    runtime_kind: RuntimeKind = RuntimeKind.CHAT
    token_count: int = 0
    created_at: datetime


class SkillState(Record):
    """Loaded skills, active profile and directly usable tools visible to a run."""

    id: str
    tenant_id: str
    conversation_id: str
    branch_id: str
    seq: int
    participant_id: str | None = None
    model_run_id: str | None = None
    loaded_skills: tuple[str, ...] = ()
    active_profile: str | None = None
    usable_tools: tuple[str, ...] = ()
    integration_state: dict[str, Any] = Field(default_factory=dict)
    visibility_scope: Visibility = Visibility.BRANCH
    created_at: datetime


class ContinuationCheckpoint(Record):
    """Runtime state needed to resume across an action boundary (seed 000 §4.13).

    Attributes:
        pending_call_ids: tool calls whose results are still awaited.
        subagent_batch_id / subagent_run_ids: the child batch being waited for.
        parent_message_id / parent_job_id / parent_tool_call_id: what to resume.
        retry_contract: attempts made/allowed, backoff, idempotency key.
        promoted_report_ids: promoted child reports visible to the resume.
    """

    id: str
    tenant_id: str
    conversation_id: str
    branch_id: str
    seq: int
    participant_id: str | None = None
    runtime_kind: RuntimeKind = RuntimeKind.CHAT
    pending_call_ids: tuple[str, ...] = ()
    subagent_batch_id: str | None = None
    subagent_run_ids: tuple[str, ...] = ()
    parent_message_id: str | None = None
    parent_job_id: str | None = None
    parent_tool_call_id: str | None = None
    retry_contract: dict[str, Any] = Field(default_factory=dict)
    promoted_report_ids: tuple[str, ...] = ()
    state: dict[str, Any] = Field(default_factory=dict)
    visibility_scope: Visibility = Visibility.PARTICIPANT_PRIVATE
    owner_participant_id: str | None = None
    created_at: datetime


class PolicyDecision(Record):
    """A decision that constrained an assembly or changed visibility (seed 000 §4.5).

    ``record_id`` is the subject (memory, artifact, message …); ``reason`` comes from the
    closed :class:`~contextledger.records.enums.OmissionReason` enumeration or is a short
    code for non-omission decisions (``"promoted"``, ``"rehydrated"``).
    """

    id: str
    tenant_id: str
    conversation_id: str
    assembly_id: str | None = None
    family: PolicyFamily
    decision: str
    record_id: str | None = None
    reason: str
    detail: dict[str, Any] = Field(default_factory=dict)
    actor: str | None = None
    created_at: datetime


class ContextAssembly(Record):
    """First-class record of one assembled request (seed 000 §4.4).

    Token fields count the provider payload with the o200k tokenizer including per-message
    and tool-schema overhead.  ``omitted`` maps each omission reason to a count; branch
    exclusions are in ``omitted["out_of_lineage"]`` and reported apart from budget.
    ``replay_mode`` says how ``replay_tokens`` was measured: ``"exact"`` (the naive
    request serialized and counted) or ``"estimate"`` (sum of stored per-record counts).
    ``record_decisions`` is the compact per-record outcome list
    (:func:`contextledger.assembly.decisions.compact_decisions`) and ``lineage_max_seq``
    the newest lineage ``seq`` the request could see, when the assembler recorded them.
    ``retrieval`` is what the retrieval router did for the request (the routes used,
    the unavailable ones and why, per recalled memory its routes, ranks and fused
    score; :class:`contextledger.assembly.retrieval.Recalled`), ``None`` when nothing
    was asked.  ``upstream_usage`` is what the provider reported for the request the
    proxy sent (:data:`contextledger.server.proxy.usage.UpstreamUsage`: input, cache
    read, cache write and output tokens, and its raw object), ``None`` until an answer
    reported one.  ``proxy`` is set when the proxy did not send this assembly:
    ``{"mode": "shadow", "client_request_tokens", "assembled_request_tokens",
    "client_body_sha256"}`` (:mod:`contextledger.server.proxy.shadow`).
    ``epoch`` is the request's place in its epoch of append-stable assembly
    (:mod:`contextledger.assembly.epoch`: id, number, whether it is the epoch's first
    assembly, the reason, the lineage head it covers), ``None`` for an assembly made
    without epoch state (``persist=False``, or ``[epoch] enabled = false``).
    ``cost`` is the request's estimated cost after prompt caching beside a
    plain replay's (:mod:`contextledger.assembly.cost_record`), ``None`` on records made
    before it existed.
    """

    id: str
    tenant_id: str
    conversation_id: str
    branch_id: str
    participant_id: str | None = None
    runtime_kind: RuntimeKind = RuntimeKind.CHAT
    provider: str
    model: str | None = None
    budget_tokens: int
    now: datetime
    policy_version: str
    assembler_version: str
    legacy_message_count: int
    assembled_message_count: int
    replay_tokens: int
    replay_mode: str = "exact"
    assembled_tokens: int
    token_delta: int
    raw_artifact_count: int
    selected_memory_count: int
    rehydrated_count: int
    selected_refs: tuple[str, ...] = ()
    omitted: dict[str, int] = Field(default_factory=dict)
    branch_excluded: int = 0
    buckets: dict[str, dict[str, int]] = Field(default_factory=dict)
    decisions_summary: dict[str, int] = Field(default_factory=dict)
    stable_prefix_hash: str | None = None
    prefix_change: dict[str, Any] | None = None
    rule_conflicts: list[dict[str, Any]] = Field(default_factory=list)
    over_budget: bool = False
    timings_ms: dict[str, float] = Field(default_factory=dict)
    trace: list[dict[str, Any]] | None = None
    record_decisions: list[list[Any]] | None = None
    lineage_max_seq: int | None = None
    payload_sha256: str | None = None
    retrieval: dict[str, Any] | None = None
    cost: dict[str, Any] | None = None
    upstream_usage: dict[str, Any] | None = None
    proxy: dict[str, Any] | None = None
    epoch: dict[str, Any] | None = None
    created_at: datetime


class ContextItem(BaseModel):
    """A tagged candidate for one request (seed 001 §9 ``ContextItem``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    kind: str
    source: str
    visibility: str
    authority: AuthorityLevel
    temperature: Temperature
    shape: Shape
    boundary: str
    token_estimate: int
    freshness_ts: datetime | None = None
    conflict_key: str | None = None
    confidence: float | None = None
    ttl_seconds: float | None = None
    content: str | None = None
    ref: str | None = None


class ContextPlan(BaseModel):
    """The per-request plan (seed 001 §9 ``ContextPlan``): selected, compressed, dropped,
    conflicts and budget usage in tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    selected: tuple[ContextItem, ...] = ()
    compressed: tuple[dict[str, str], ...] = ()
    dropped: tuple[dict[str, str], ...] = ()
    conflicts: tuple[dict[str, Any], ...] = ()
    budget_total: int = 0
    budget_used: int = 0
    buckets: dict[str, int] = Field(default_factory=dict)
