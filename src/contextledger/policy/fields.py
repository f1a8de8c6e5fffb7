"""Building blocks shared by the policy file's sections (:mod:`contextledger.policy.sections`,
:mod:`contextledger.policy.tools`): the frozen section base, the field types (integers,
shares, staleness windows, privacy-class lists), the immutable :class:`FrozenMap` and the
:class:`KeyedValueError` a cross-key check raises."""

from __future__ import annotations

from typing import Annotated, Any, NoReturn, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, StrictInt

from contextledger.records.enums import PrivacyClass

__all__ = [
    "NEVER_STALE",
    "SHARE_SUM_TOLERANCE",
    "ClassTuple",
    "FrozenMap",
    "KeyedValueError",
    "NonNegativeInt",
    "PositiveInt",
    "Section",
    "Share",
    "StaleSeconds",
    "fmt_number",
    "freeze",
    "no_duplicates",
    "permutation_of",
]


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


SHARE_SUM_TOLERANCE = 1e-6
"""How far the bucket shares may sum from 1.0."""

NEVER_STALE = -1
"""``stale_after`` value meaning "never stale" (TOML has no null)."""


class KeyedValueError(ValueError):
    """A validation failure that names its own key path below the validated model.

    ``subpath`` is appended to the location pydantic reports, so a check written on a
    parent model can point at the child key it is about (``"budget.buckets"``).
    """

    def __init__(self, subpath: str, message: str) -> None:
        self.subpath = subpath
        self.message = message
        super().__init__(message)


_K = TypeVar("_K")
_V = TypeVar("_V")


class FrozenMap(dict[_K, _V]):
    """A ``dict`` that refuses mutation and hashes by its sorted items.

    Used for the provider- and tool-keyed tables of a policy, so a validated policy is
    immutable all the way down.  Raises ``TypeError`` on any mutating call.
    """

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("policy tables are immutable")

    __setitem__ = _refuse
    __delitem__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse
    __ior__ = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items(), key=lambda kv: str(kv[0]))))

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenMap, (dict(self),))

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenMap[_K, _V]:
        return self

    def __copy__(self) -> FrozenMap[_K, _V]:
        return self


def freeze(value: dict[Any, Any]) -> FrozenMap[Any, Any]:
    """``value`` as a :class:`FrozenMap` (the after-validator of a keyed policy table)."""
    return FrozenMap(value)


def _number(value: object) -> object:
    """Accept TOML integers and floats as numbers, nothing else (no strings, no bools)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, got {_describe(value)}")
    return float(value)


def _describe(value: object) -> str:
    return f"{type(value).__name__} {value!r}"


def _share(value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"must be between 0 and 1, got {fmt_number(value)}")
    return value


def _seconds_or_never(value: int) -> int:
    if value < 0 and value != NEVER_STALE:
        raise ValueError(f"must be 0 or more seconds, or -1 for never, got {value}")
    return value


def fmt_number(value: float) -> str:
    """``value`` as written in a message: ``1`` for a whole number, ``repr`` otherwise."""
    return repr(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(value)


Share = Annotated[float, BeforeValidator(_number), AfterValidator(_share)]
"""A fraction in [0, 1] (a TOML integer or float; no strings, no bools)."""
StaleSeconds = Annotated[StrictInt, AfterValidator(_seconds_or_never)]
"""Seconds of 0 or more, or :data:`NEVER_STALE`."""


def no_duplicates(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """Return ``values`` unchanged; raises ``ValueError`` naming the first repeated entry."""
    seen: set[Any] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"duplicate entry {str(value)!r}")
        seen.add(value)
    return values


def permutation_of(values: tuple[Any, ...], members: tuple[Any, ...], what: str) -> None:
    """Raise ``ValueError`` unless ``values`` lists each of ``members`` exactly once."""
    missing = [str(m) for m in members if m not in values]
    if len(values) != len(members) or missing:
        raise ValueError(f"must list each {what} exactly once" + (f"; missing {missing}" if missing else ""))


ClassTuple = Annotated[tuple[PrivacyClass, ...], AfterValidator(no_duplicates)]
"""Privacy classes, each at most once."""
