"""The versioned provider price table (``prices.toml``) and its user override (issue 23;
seed 001 problem 7, cost control).

The shipped table lives next to this module; ``CONTEXTLEDGER_PRICES`` (or the ``path``
argument of :func:`load_prices`) names a TOML file of the same shape merged over it —
per provider, per model, per field — so a user can correct one figure or add a model
without copying the table.  Prices are USD per million tokens (issue 23, "a provider cost
model … from a versioned table the user can override").

Shape::

    version = "2026-12-02"
    [providers.<provider>]            # "anthropic" | "openai"
    source = "<pricing page URL>"     retrieved = "<date>"
    [providers.<provider>.default]    # the row of an unknown model
    [providers.<provider>.models.<model-prefix>]
    input = 3.0   cache_read = 0.3   cache_write_5m = 3.75   cache_write_1h = 6.0
    output = 15.0 min_cacheable = 1024

A model name is priced by the longest key that is a prefix of it
(``claude-opus-4-6-20260101`` → ``claude-opus-4-6``); no match → the provider's default
row, labelled ``"default (unknown model)"``.
"""

from __future__ import annotations

import functools
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextledger.errors import InputError

__all__ = [
    "FIELDS",
    "PRICES_ENV",
    "UNKNOWN_MODEL_LABEL",
    "ModelPrice",
    "PriceTable",
    "load_prices",
    "price_family",
]

PRICES_ENV = "CONTEXTLEDGER_PRICES"
"""Environment variable naming a TOML override file."""
UNKNOWN_MODEL_LABEL = "default (unknown model)"
"""``ModelPrice.matched`` of a model no table key is a prefix of."""
FIELDS = ("input", "cache_read", "cache_write_5m", "cache_write_1h", "output")
"""Price fields of a row, USD per million tokens."""
_SHIPPED = Path(__file__).with_name("prices.toml")


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """One row of the table: USD per million tokens, and the minimum cacheable prefix.

    ``matched`` is the table key that priced the model, or :data:`UNKNOWN_MODEL_LABEL`.
    """

    provider: str
    matched: str
    input: float
    cache_read: float
    cache_write_5m: float
    cache_write_1h: float
    output: float
    min_cacheable: int


@dataclass(frozen=True, slots=True)
class PriceTable:
    """The merged table: ``version`` (``"<shipped>+<override path>"`` when overridden),
    and per provider its metadata (``source``, ``retrieved`` …), default and model rows."""

    version: str
    providers: dict[str, dict[str, Any]]

    def price(self, provider: str, model: str | None) -> ModelPrice:
        """The row pricing ``model`` of ``provider`` (a wire format name such as
        ``"openai-chat"`` is reduced with :func:`price_family`).

        Raises :class:`~contextledger.errors.InputError` for a provider the table has no
        section for.
        """
        family = price_family(provider)
        section = self.providers.get(family)
        if section is None:
            raise InputError(f"price table {self.version}: no prices for provider {family!r}")
        models: dict[str, dict[str, Any]] = section.get("models", {})
        name = model or ""
        keys = [key for key in models if name.startswith(key)]
        if keys:
            key = max(keys, key=len)
            return _row(family, key, models[key])
        return _row(family, UNKNOWN_MODEL_LABEL, section["default"])

    def source(self, provider: str) -> str:
        """The pricing page URL and retrieval date of ``provider``'s section, one line."""
        section = self.providers.get(price_family(provider), {})
        return f"{section.get('source', '?')} (retrieved {section.get('retrieved', '?')})"


def price_family(provider: str) -> str:
    """The price-table section of a wire format: ``"openai-chat"`` / ``"openai-responses"``
    → ``"openai"``; any other name is returned unchanged."""
    return "openai" if provider.startswith("openai") else provider


def _row(provider: str, matched: str, row: dict[str, Any]) -> ModelPrice:
    return ModelPrice(
        provider=provider,
        matched=matched,
        min_cacheable=int(row["min_cacheable"]),
        **{field: float(row[field]) for field in FIELDS},
    )


def load_prices(path: str | Path | None = None) -> PriceTable:
    """The shipped table, with ``path`` (else ``$CONTEXTLEDGER_PRICES``, if set) merged
    over it.

    Raises :class:`~contextledger.errors.InputError` with one line naming the file and
    the problem: unreadable file, TOML syntax error, a row missing a field or with a
    negative / non-numeric price, a provider without a default row.
    """
    chosen = path if path is not None else os.environ.get(PRICES_ENV) or None
    if chosen is None:
        return _load(None, 0)
    try:
        stamp = Path(chosen).stat().st_mtime_ns
    except OSError:
        stamp = -1
    return _load(str(chosen), stamp)


@functools.lru_cache(maxsize=8)
def _load(override: str | None, stamp: int) -> PriceTable:
    """The merged table; ``stamp`` (the override's mtime) keys the cache so an edited
    file is read again."""
    base = _read(_SHIPPED)
    version = str(base.get("version", "?"))
    providers: dict[str, dict[str, Any]] = base.get("providers", {})
    if override is not None:
        extra = _read(Path(override))
        providers = _merge(providers, extra.get("providers", {}), override)
        version = f"{version}+{extra.get('version', Path(override).name)}"
    table = PriceTable(version=version, providers=providers)
    _check(table, override or str(_SHIPPED))
    return table


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise InputError(f"price file {path}: cannot read ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"price file {path}: not valid TOML ({exc})") from None


def _merge(base: dict[str, Any], extra: Any, where: str) -> dict[str, Any]:
    if not isinstance(extra, dict):
        raise InputError(f"price file {where}: [providers] must be a table")
    merged = {name: dict(section) for name, section in base.items()}
    for name, section in extra.items():
        if not isinstance(section, dict):
            raise InputError(f"price file {where}: providers.{name} must be a table")
        target = merged.setdefault(name, {})
        for key, value in section.items():
            if key == "models" and isinstance(value, dict):
                models = {k: dict(v) for k, v in target.get("models", {}).items()}
                for model, row in value.items():
                    if not isinstance(row, dict):
                        raise InputError(f"price file {where}: providers.{name}.models.{model} must be a table")
                    models[model] = {**models.get(model, {}), **row}
                target["models"] = models
            elif key == "default" and isinstance(value, dict):
                target["default"] = {**target.get("default", {}), **value}
            else:
                target[key] = value
    return merged


def _check(table: PriceTable, where: str) -> None:
    for name, section in table.providers.items():
        if not isinstance(section.get("default"), dict):
            raise InputError(f"price file {where}: providers.{name} has no [default] row")
        rows = {"default": section["default"], **{f"models.{k}": v for k, v in section.get("models", {}).items()}}
        for label, row in rows.items():
            for field in (*FIELDS, "min_cacheable"):
                value = row.get(field)
                if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                    raise InputError(
                        f"price file {where}: providers.{name}.{label}.{field} must be a number ≥ 0, got {value!r}"
                    )
