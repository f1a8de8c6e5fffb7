"""Plain string and flag options without pydantic.

typer 0.29 coerces every parameter value through a pydantic ``TypeAdapter``, built the
first time the parameter is processed — for the global ``--db`` / ``--home`` / ``--tenant``
and ``--help`` that is every command, so even a listing paid pydantic's import (≈ 80 ms
of CPU).  For a ``str`` (``bool``) parameter without a custom parser or click type,
typer's adapter returns a value that already is a ``str`` (``bool``) unchanged, which is
what ``_PlainParam`` does without building it; any other value (bytes, ``"yes"`` for a
flag) and every other type still go through typer's own coercion.

:func:`install` applies this to the typer it finds; a typer without the adapter layer
(before 0.29: click's own types, no pydantic) is left as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["install"]

_INSTALLED = False


def install() -> None:
    """Route typer's coercion of plain ``str`` and ``bool`` parameters through ``_PlainParam``
    (module docstring); idempotent, and a no-op on a typer without ``typer._coercion``."""
    global _INSTALLED
    if _INSTALLED:
        return
    try:
        from typer import _coercion, core
    except ImportError:  # typer before the adapter layer: nothing to route
        return
    base = getattr(_coercion, "RuntimeParam", None)
    found = getattr(core, "build_runtime_param", None)
    if base is None or found is None:
        return
    original: Callable[[Any], Any] = found

    @dataclass(frozen=True)
    class _PlainParam(base):  # type: ignore[misc,valid-type]
        """A ``str`` or ``bool`` parameter: a value of exactly that type as it is,
        anything else through typer's adapter (built on first need)."""

        descriptor: Any = None
        fallback: list[Any] = field(default_factory=list)

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if type(value) is self.annotation:
                return value
            if not self.fallback:
                self.fallback.append(original(self.descriptor))
            return self.fallback[0]._coerce_value(value, param=param, ctx=ctx)

    def build(descriptor: Any) -> Any:
        info = descriptor.parameter_info
        plain = getattr(info, "parser", None) is None and getattr(info, "click_type", None) is None
        if descriptor.annotation in (str, bool) and plain and descriptor.file_annotation is None:
            return _PlainParam(parameter_info=info, annotation=descriptor.annotation, descriptor=descriptor)
        return original(descriptor)

    setattr(core, "build_runtime_param", build)  # noqa: B010 - typer.core does not export it
    _INSTALLED = True
