"""``[retention]`` and ``[trace]``: what never reaches model context and what is kept for
audits (seed 000 §4.5, §4.15)."""

from __future__ import annotations

from pydantic import StrictBool, field_validator

from contextledger.policy.fields import Section

__all__ = ["RetentionSection", "TraceSection"]


class RetentionSection(Section):
    """``[retention]`` (seed 000 §4.5, §4.15).

    Attributes:
        honour_deleted_at: records with ``deleted_at`` never reach model context.
        audit_only_in_model_context: must be ``false``: audit-only records never reach
            model context.
    """

    honour_deleted_at: StrictBool
    audit_only_in_model_context: StrictBool

    @field_validator("audit_only_in_model_context")
    @classmethod
    def _audit_only_stays_out(cls, value: bool) -> bool:
        if value:
            raise ValueError("must be false: audit_only records never reach model context")
        return value


class TraceSection(Section):
    """``[trace]``: keep per-record traces (seed 000 §4.5: only for tests and audits)."""

    keep_trace: StrictBool
