"""Request bodies of the REST API (pydantic; they make the OpenAPI schema).

Field names follow the library's vocabulary (:mod:`contextledger.records`); sizes are
bounded so a request cannot ask for unbounded work.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from contextledger.records.enums import Visibility

__all__ = [
    "AssembleIn",
    "AssistantTurnIn",
    "BatchIn",
    "CompactIn",
    "ConversationIn",
    "MessageIn",
    "PromoteIn",
    "ToolCallIn",
    "ToolResultIn",
]

_Id = Annotated[str, Field(min_length=1, max_length=64)]
_Text = Annotated[str, Field(max_length=10_000_000)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ConversationIn(_Body):
    """A new conversation (``system_prompt``: the application's trusted instruction)."""

    title: Annotated[str, Field(max_length=200)] = ""
    system_prompt: _Text | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class MessageIn(_Body):
    """A message (``user`` / ``assistant`` text / ``developer``).  ``content_key`` makes
    recording idempotent (the same key twice returns the first message)."""

    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "developer"]
    content: _Text
    branch_id: _Id | None = None
    participant_id: _Id | None = None
    content_key: Annotated[str, Field(min_length=1, max_length=80)] | None = None


class ToolCallIn(_Body):
    """One tool call of an assistant turn (``arguments``: an object or the exact text)."""

    call_id: Annotated[str, Field(min_length=1, max_length=200)]
    tool_name: Annotated[str, Field(min_length=1, max_length=200)]
    arguments: dict[str, Any] | _Text = "{}"


class AssistantTurnIn(_Body):
    """An assistant turn and the tool calls it requested (recorded pending).  Recording
    the same call ids again is idempotent."""

    type: Literal["tool_calls"] = "tool_calls"
    text: _Text = ""
    tool_calls: Annotated[list[ToolCallIn], Field(max_length=256)] = Field(default_factory=list)
    branch_id: _Id | None = None
    participant_id: _Id | None = None


class ToolResultIn(_Body):
    """The complete raw result of ``call_id`` (stored whole before anything is reduced)."""

    type: Literal["tool_result"] = "tool_result"
    call_id: Annotated[str, Field(min_length=1, max_length=200)]
    result: _Text
    is_error: bool = False
    error_type: Annotated[str, Field(max_length=200)] | None = None
    content_type: Annotated[str, Field(max_length=200)] | None = None


BatchItem = Annotated[MessageIn | AssistantTurnIn | ToolResultIn, Field(discriminator="type")]


class BatchIn(_Body):
    """Records applied in order; the answer lists what each became."""

    records: Annotated[list[BatchItem], Field(min_length=1, max_length=1000)]


class AssembleIn(_Body):
    """An assembly of the conversation's next request (seed 000 §5)."""

    provider: Literal["openai-chat", "anthropic"] = "openai-chat"
    budget_tokens: Annotated[int, Field(gt=0, le=2_000_000)] | None = None
    branch_id: _Id | None = None
    participant_id: _Id | None = None
    now: datetime | None = Field(default=None, description="evaluation time (timezone-aware ISO 8601); default: now")
    trace: bool = False


class PromoteIn(_Body):
    """Widen a record's visibility, recorded as a promotion PolicyDecision."""

    to: Visibility
    actor: Annotated[str, Field(min_length=1, max_length=200)]
    reason: Annotated[str, Field(min_length=1, max_length=2000)]


class CompactIn(_Body):
    """Fold old history into a handoff summary (seed 001 §10); nothing is deleted."""

    branch_id: _Id | None = None
    keep_recent_units: Annotated[int, Field(ge=0, le=10_000)] = 6
    now: datetime | None = None
