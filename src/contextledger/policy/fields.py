"""Building blocks shared by the policy file's sections (:mod:`contextledger.policy.model`,
:mod:`contextledger.policy.tools`): the frozen section base and the integer field types."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, StrictInt

__all__ = ["NonNegativeInt", "PositiveInt", "Section"]


class Section(BaseModel):
    """Base of every policy section: frozen, unknown keys forbidden."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def _positive(value: int) -> int:
    if value <= 0:
        raise ValueError(f"must be greater than 0, got {value}")
    return value


def _non_negative(value: int) -> int:
    if value < 0:
        raise ValueError(f"must be 0 or more, got {value}")
    return value


PositiveInt = Annotated[StrictInt, AfterValidator(_positive)]
"""An integer above 0 (a bool is refused)."""
NonNegativeInt = Annotated[StrictInt, AfterValidator(_non_negative)]
"""An integer of 0 or more (a bool is refused)."""
