"""Shared CLI plumbing: options, the ledger from ``--db``/``--home``, JSON output and
clean errors (a :class:`ContextLedgerError` prints one line and exits 1 — never a
traceback)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from contextledger.errors import ContextLedgerError, InputError
from contextledger.ledger import Ledger

__all__ = ["State", "console", "emit_json", "fail_cleanly", "parse_now", "state"]

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)
F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class State:
    """Global options (``--db``, ``--home``, ``--tenant``)."""

    db: str | None = None
    home: str | None = None
    tenant: str = "default"
    _ledger: Ledger | None = None

    def close(self) -> None:
        """Close the ledger opened by this invocation, if any."""
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None

    def ledger(self) -> Ledger:
        """The ledger opened from the global options (opened once)."""
        if self._ledger is None:
            self._ledger = Ledger.open(self.db, home=self.home)
        return self._ledger


state = State()


def emit_json(data: Any) -> None:
    """Print ``data`` as JSON on stdout (UTF-8, stable key order as given)."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


@contextmanager
def fail_cleanly(as_json: bool = False) -> Iterator[None]:
    """Turn contextledger errors — and file-system errors (a read-only or full disk, a
    missing permission) — into a one-line message (or JSON) and exit status 1."""
    try:
        yield
    except (ContextLedgerError, OSError) as exc:
        if isinstance(exc, OSError) and not isinstance(exc, ContextLedgerError):
            where = f": {exc.filename}" if exc.filename else ""
            message = f"{exc.strerror or exc}{where}"
        else:
            message = str(exc)
        if as_json:
            emit_json({"error": type(exc).__name__, "message": message})
        else:
            err_console.print(f"[red]error:[/red] {escape(message)}", markup=True, soft_wrap=True)
        raise typer.Exit(1) from None


def parse_now(value: str | None) -> datetime | None:
    """Parse ``--now`` (ISO 8601; ``Z`` allowed; naive times are taken as UTC).

    Raises:
        InputError: not an ISO 8601 timestamp.
    """
    if value is None:
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"--now: not an ISO 8601 time: {value!r}") from None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)
