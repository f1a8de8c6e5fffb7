"""Policy sections for tool semantics: ``[edits]`` and ``[tools.<name>]``.

``[edits]`` bounds what an edit's memory carries of the change itself, and how many of
a file's newest changed lines the working set shows::

    [edits]
    change_max_lines = 20       # diff / new-text lines kept in an edit's memory
    change_max_bytes = 1500     # ... and bytes; the rest stays in the recorded call
    working_set_lines = 8       # newest changed lines shown per edited file

``[tools.<name>]`` declares a tool of your own: its kind (one of
:data:`~contextledger.memory.dialects.KINDS` but ``editor``) and which of its
arguments hold what.  A value is an argument name or an array of names tried in order::

    [tools.my_editor]
    kind = "edit"
    path = "file"
    old = "before"
    new = "after"

Required per kind: ``read`` / ``list`` / ``delete`` a ``path``; ``write`` a ``path`` and
``content``; ``edit`` a ``path`` and ``new`` (or ``edits``); ``insert`` a ``path`` and
``new``; ``patch`` a ``patch``; ``shell`` a ``command``; ``search`` / ``web_search`` a
``pattern``; ``fetch`` a ``url``.  A declaration wins over the built-in registry for that
name; a missing or unknown key is a :class:`~contextledger.errors.PolicyError` naming
``tools.<name>.<key>``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    StrictStr,
    model_validator,
)

from contextledger.memory.dialects import KINDS, ToolSpec
from contextledger.policy.fields import NonNegativeInt, PositiveInt, Section

__all__ = ["EditsSection", "ToolDeclaration", "declared_specs"]




def _names(value: object) -> object:
    """An argument name or an array of them → a tuple of names."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not value or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"expected an argument name or an array of argument names, got {type(value).__name__} {value!r}")
    return tuple(value)


def _kind(value: str) -> str:
    if value not in KINDS or value == "editor":
        known = ", ".join(k for k in KINDS if k != "editor")
        raise ValueError(f"unknown kind {value!r} (known: {known})")
    return value


Names = Annotated[tuple[StrictStr, ...], BeforeValidator(_names)]
_REQUIRED: dict[str, tuple[tuple[str, ...], ...]] = {
    "read": (("path",),), "list": (("path",),), "delete": (("path",),),
    "write": (("path",), ("content",)), "edit": (("path",), ("new", "edits")), "insert": (("path",), ("new",)),
    "patch": (("patch",),), "shell": (("command",),), "search": (("pattern",),), "web_search": (("pattern",),),
    "fetch": (("url",),),
}


class EditsSection(Section):
    """``[edits]``: how much of a change an edit's memory carries (lines and UTF-8 bytes;
    the rest is read from the recorded call) and how many newest changed lines the
    working set shows per edited file (0: paths and states only)."""

    change_max_lines: PositiveInt = 20
    change_max_bytes: PositiveInt = 1500
    working_set_lines: NonNegativeInt = 8


class ToolDeclaration(Section):
    """``[tools.<name>]``: a tool of the user's own (see the module docstring)."""

    kind: Annotated[StrictStr, AfterValidator(_kind)]
    path: Names = ()
    content: Names = ()
    old: Names = ()
    new: Names = ()
    edits: StrictStr | None = None
    patch: Names = ()
    command: Names = ()
    pattern: Names = ()
    url: Names = ()
    offset: StrictStr | None = None
    limit: StrictStr | None = None

    @model_validator(mode="after")
    def _required(self) -> ToolDeclaration:
        for choice in _REQUIRED.get(self.kind, ()):
            if not any(getattr(self, key) for key in choice):
                raise ValueError(f"a tool of kind {self.kind!r} needs {' or '.join(repr(k) for k in choice)} (the argument name)")
        return self

    def spec(self) -> ToolSpec:
        """The registry entry this declaration stands for."""
        data: dict[str, Any] = self.model_dump()
        return ToolSpec(agents=("policy",), **data)


def declared_specs(tools: dict[str, ToolDeclaration]) -> dict[str, ToolSpec]:
    """Tool name → registry entry, for :func:`~contextledger.memory.extractors.default_registry`."""
    return {name: decl.spec() for name, decl in sorted(tools.items())}
