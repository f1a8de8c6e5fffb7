"""The closed enumerations of the contextledger vocabulary (DESIGN.md "Vocabulary").

Every enumeration is a ``StrEnum`` so it serialises as its value in JSON and SQL.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "AuthorityLevel",
    "ConfidenceBasis",
    "ContextKind",
    "DecisionKind",
    "FreshnessClass",
    "MessageKind",
    "OmissionReason",
    "PolicyFamily",
    "PrivacyClass",
    "PromotionPolicy",
    "ProvenanceRank",
    "Provider",
    "ResolutionState",
    "Role",
    "RuntimeIsolationPolicy",
    "RuntimeKind",
    "Shape",
    "Temperature",
    "ToolCallStatus",
    "Visibility",
]


class Visibility(StrEnum):
    """Who may see a record (seed 000 §4.5 visibility policy, §4.9)."""

    PARTICIPANT_PRIVATE = "participant_private"
    BRANCH = "branch"
    CONVERSATION = "conversation"
    AUDIT_ONLY = "audit_only"


class RuntimeKind(StrEnum):
    """The generation mode a record or assembly belongs to (seed 000 §4.13)."""

    CHAT = "chat"
    MULTI_MODEL = "multi_model"
    DEBATE = "debate"
    SUBAGENT_CHILD = "subagent_child"
    SUBAGENT_PARENT_RESUME = "subagent_parent_resume"
    SCHEDULED_JOB = "scheduled_job"
    BRANCH_SEND = "branch_send"


class RuntimeIsolationPolicy(StrEnum):
    """How a participant's run state is isolated from siblings (seed 000 §4.9)."""

    PARTICIPANT = "participant"
    SHARED = "shared"
    CHILD_AUDIT_ONLY = "child_audit_only"


class FreshnessClass(StrEnum):
    """How quickly an observation goes stale (seed 000 §4.7)."""

    VOLATILE = "volatile"
    SESSION = "session"
    TIME_BOUNDED = "time_bounded"
    DURABLE = "durable"
    PERMANENT = "permanent"


class ContextKind(StrEnum):
    """What kind of context a record carries; decides how it is reduced (seed 000 §4.6)."""

    CONVERSATIONAL = "conversational"
    OPERATIONAL = "operational"
    KNOWLEDGE = "knowledge"
    PROVENANCE = "provenance"
    POLICY = "policy"
    RECOVERY = "recovery"
    PLANNING = "planning"


class Shape(StrEnum):
    """The representation chosen for a record in a request (seed 001 §4.4)."""

    RAW = "raw"
    EXTRACT = "extract"
    SUMMARY = "summary"
    STRUCTURED = "structured"
    REFERENCE = "reference"
    DIFF = "diff"
    STALE_MARKER = "stale_marker"


class Temperature(StrEnum):
    """Hot/warm/cold/frozen/long-term layering (seed 001 §4.3)."""

    HOT = "hot"
    WARM = "warm"
    COLD = "cold"
    FROZEN = "frozen"
    LONG_TERM = "long_term"


class AuthorityLevel(StrEnum):
    """The authority chain of seed 001 §4.2, highest first (order is the rank)."""

    SYSTEM = "system"
    ORGANIZATION = "organization"
    PROJECT = "project"
    USER = "user"
    TASK_STATE = "task_state"
    RETRIEVAL = "retrieval"
    LONG_TERM_MEMORY = "long_term_memory"
    SUMMARY = "summary"
    OLD_CONVERSATION = "old_conversation"


class ProvenanceRank(StrEnum):
    """Who asserted a fact; a lower rank never overwrites a higher one (issue: memory)."""

    USER_STATED = "user_stated"
    TOOL_OBSERVED = "tool_observed"
    MODEL_DERIVED = "model_derived"


class PrivacyClass(StrEnum):
    """Sensitivity of a payload; routing policy maps classes to allowed providers (seed 000 §8 R3)."""

    PUBLIC = "public"
    INTERNAL = "internal"
    USER_DATA = "user_data"
    GOOGLE_USER_DATA = "google_user_data"
    OAUTH_DERIVED = "oauth_derived"
    SECRET_LIKE = "secret_like"


class Role(StrEnum):
    """Transcript roles, provider neutral."""

    SYSTEM = "system"
    DEVELOPER = "developer"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class MessageKind(StrEnum):
    """What a Message node is, beyond its role."""

    CHAT = "chat"
    SUMMARY = "summary"
    COMPACTION = "compaction"
    META = "meta"
    PROGRESS = "progress"
    OBSERVATION = "observation"
    MODERATOR = "moderator"
    CHILD_REPORT = "child_report"


class ToolCallStatus(StrEnum):
    """Lifecycle of one tool call (seed 000 §4.1: executed, failed, waiting, pending).

    ``UNKNOWN`` is a resolved call whose outcome its transcript does not record (an Aider
    shell command whose output the history omits, the last action of a trajectory that
    ends with it): no further result will come, and it is neither a success nor a failure.
    """

    PENDING = "pending"
    AWAITING_APPROVAL = "awaiting_approval"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ABANDONED = "abandoned"
    UNKNOWN = "unknown"

    @property
    def unresolved(self) -> bool:
        """True while a result may still arrive (pending or awaiting approval)."""
        return self in (ToolCallStatus.PENDING, ToolCallStatus.AWAITING_APPROVAL)


class ResolutionState(StrEnum):
    """Latest resolution state of a memory (seed 000 §4.3)."""

    CURRENT = "current"
    UNRESOLVED = "unresolved"
    STALE = "stale"
    SUPERSEDED = "superseded"
    CONFLICTED = "conflicted"
    UNVERIFIABLE = "unverifiable"
    REPAIRED = "repaired"


class ConfidenceBasis(StrEnum):
    """Why a memory's confidence is what it is."""

    DETERMINISTIC_PARSE = "deterministic_parse"
    HEURISTIC = "heuristic"
    MODEL_WRITTEN = "model_written"
    USER_STATED = "user_stated"


class PromotionPolicy(StrEnum):
    """Whether a memory is offered to models (seed 000 §4.5 promotion, §8 R11)."""

    AUTO = "auto"
    PROMOTED = "promoted"
    NOT_PROMOTED = "not_promoted"
    AUDIT_ONLY = "audit_only"


class Provider(StrEnum):
    """Provider wire formats the serializers speak."""

    OPENAI_CHAT = "openai-chat"
    ANTHROPIC = "anthropic"
    OPENAI_RESPONSES = "openai-responses"


class PolicyFamily(StrEnum):
    """The nine policy families of seed 000 §4.5 plus the seed 001 additions."""

    OWNERSHIP = "ownership"
    VISIBILITY = "visibility"
    PRIVACY = "privacy"
    FRESHNESS = "freshness"
    PROMOTION = "promotion"
    REHYDRATION = "rehydration"
    CONFLICT = "conflict"
    RECOVERY = "recovery"
    RETENTION = "retention"
    AUTHORITY = "authority"
    BUDGET = "budget"


class DecisionKind(StrEnum):
    """What a per-record decision did."""

    INCLUDE = "include"
    SHAPE = "shape"
    OMIT = "omit"
    PROTECT = "protect"
    REHYDRATE = "rehydrate"
    REFUSE = "refuse"
    MARK_STALE = "mark_stale"
    MARK_CONFLICT = "mark_conflict"


class OmissionReason(StrEnum):
    """The one closed enumeration of reasons a candidate did not reach the payload whole.

    Branch exclusions (``OUT_OF_LINEAGE``) are reported apart from budget omissions.
    """

    OUT_OF_LINEAGE = "out_of_lineage"
    PARTICIPANT_PRIVATE = "participant_private"
    AUDIT_ONLY = "audit_only"
    NOT_PROMOTED = "not_promoted"
    PRIVACY_RESTRICTED = "privacy_restricted"
    PROVIDER_RESTRICTED = "provider_restricted"
    STALE = "stale"
    SUPERSEDED = "superseded"
    BUDGET = "budget"
    RETENTION_DELETED = "retention_deleted"
    RUNTIME_ONLY = "runtime_only"
    DUPLICATE = "duplicate"
    REPLACED_BY_MEMORY = "replaced_by_memory"
    COMPACTED = "compacted"
    LOW_CONFIDENCE = "low_confidence"
    AUTHORITY_OVERRIDDEN = "authority_overridden"
    SITUATIONAL_NOT_MATCHED = "situational_not_matched"
    REHYDRATION_REFUSED = "rehydration_refused"
    OTHER_PARTICIPANT_TOOLS = "other_participant_tools"
    UNSUPPORTED_CONTENT = "unsupported_content"
    OUTSIDE_WINDOW = "outside_window"
