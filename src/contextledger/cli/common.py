"""Shared CLI plumbing: options, the ledger from ``--db``/``--home``, JSON output and
clean errors.

Errors go to stderr, never stdout (with ``--json``: one JSON object per error and line,
``{"error", "message", "exit_code"}``), so a consumer of stdout only ever reads data.  An
expected failure is one line and a documented exit status (:data:`EXIT_CODES`), never a
Python traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import typer

from contextledger.errors import (
    BackendError,
    ContextLedgerError,
    InputError,
    NotFoundError,
    PolicyError,
    StoredDataError,
)
from contextledger.limits import utf8_bytes

if TYPE_CHECKING:
    from rich.console import Console

    from contextledger.ledger import Ledger
    from contextledger.store.base import Scope

__all__ = [
    "EXIT_BACKEND",
    "EXIT_CODES",
    "EXIT_INPUT",
    "EXIT_INTERNAL",
    "EXIT_NOT_FOUND",
    "EXIT_POLICY",
    "EXIT_STORED_DATA",
    "PIPED_WIDTH",
    "LedgerNotFoundError",
    "State",
    "UsageError",
    "backend_error",
    "console",
    "emit_error",
    "emit_json",
    "exit_code_for",
    "fail_cleanly",
    "is_database_error",
    "parse_now",
    "print_rows",
    "rich_console",
    "rich_err_console",
    "state",
    "usage_error",
    "warn_if_now_before_newest",
]

EXIT_INTERNAL = 1
"""An unexpected failure (a defect: please report it); the only one that may print a
traceback, and only with ``CONTEXTLEDGER_DEBUG=1``."""
EXIT_INPUT = 2
"""Invalid input: a bad argument or option, a malformed or unreadable file (the shell
convention for usage errors; typer's own usage errors exit 2 as well)."""
EXIT_NOT_FOUND = 3
"""An id (conversation, branch, assembly, record, artifact) that does not exist in the
tenant."""
EXIT_BACKEND = 4
"""The database, the blob store or the key provider failed or cannot be reached."""
EXIT_POLICY = 5
"""A policy file is invalid, or the policy refuses the request (e.g. showing a
``secret_like`` payload without its explicit flag)."""
EXIT_STORED_DATA = 6
"""Stored data is inconsistent: a payload fails its sha256 check, a blob is missing."""

EXIT_CODES: dict[int, str] = {
    0: "success",
    EXIT_INTERNAL: "unexpected failure (a defect)",
    EXIT_INPUT: "input error (bad argument, malformed or unreadable file)",
    EXIT_NOT_FOUND: "not found (unknown id in this tenant, or no ledger at the given path)",
    EXIT_BACKEND: "backend error (database, blob store or key provider)",
    EXIT_POLICY: "policy error (invalid policy, or refused by the policy)",
    EXIT_STORED_DATA: "stored data error (integrity check failed, payload missing)",
}
"""Every exit status of ``contextledger`` and what it means (README "Exit codes")."""


def exit_code_for(exc: BaseException) -> int:
    """The exit status for an error (see :data:`EXIT_CODES`)."""
    if isinstance(exc, NotFoundError):
        return EXIT_NOT_FOUND
    if isinstance(exc, InputError):
        return EXIT_INPUT
    if isinstance(exc, PolicyError):
        return EXIT_POLICY
    if isinstance(exc, StoredDataError):
        return EXIT_STORED_DATA
    if isinstance(exc, BackendError | OSError):
        return EXIT_BACKEND
    if isinstance(exc, ContextLedgerError):
        return EXIT_INPUT
    return EXIT_INTERNAL


PIPED_WIDTH = 100_000
"""The console width when the output is not a terminal and ``COLUMNS`` is not set: a
line is never wrapped or cut to fit a width nobody reads it at (an id stays whole for
``grep`` and ``cut``)."""


class _LazyConsole:
    """A rich ``Console`` built on first use: importing ``rich.console`` is a third of
    ``--help``'s start-up, and ``--help``, ``--json`` output and plain listings never
    print through it.  Every attribute (and ``with``) is the real console's.  Written
    to something other than a terminal (a pipe, a file) and without ``COLUMNS``, it is
    :data:`PIPED_WIDTH` wide and never soft-wraps: rich would otherwise wrap at 80
    columns, or at the width of whatever terminal stdin or stderr is.  The console is
    built again when the stream or ``COLUMNS`` changed since (rich fixes both when it is
    built; an embedding program or a test runner may swap ``sys.stdout``)."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._real: Console | None = None
        self._for: tuple[Any, str | None] | None = None

    @property
    def real(self) -> Console:
        """The console itself (built now if it was not yet, or for another stream)."""
        import os

        target = (sys.stderr if self._options.get("stderr") else sys.stdout, os.environ.get("COLUMNS"))
        if self._real is None or self._for is None or self._for[0] is not target[0] or self._for[1] != target[1]:
            from rich.console import Console

            real = Console(**self._options)
            if not real.is_terminal and not (target[1] or "").isdigit():
                real.width = PIPED_WIDTH
                real.soft_wrap = True
            self._real, self._for = real, target
        return self._real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def __enter__(self) -> Console:
        return self.real.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self.real.__exit__(*exc)


console = cast("Console", _LazyConsole(highlight=False))
"""The CLI's stdout console (rich markup, no highlighting), built on first use."""
err_console = cast("Console", _LazyConsole(stderr=True, highlight=False))
"""The CLI's stderr console, built on first use."""


def rich_console() -> Console:
    """The console behind :data:`console`, for rich objects that take one (``Progress``)."""
    return cast("_LazyConsole", console).real


def rich_err_console() -> Console:
    """The console behind :data:`err_console` (stderr): progress bars that must keep
    stdout for data."""
    return cast("_LazyConsole", err_console).real

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

    def ledger(self, *, create: bool = False) -> Ledger:
        """The ledger opened from the global options (opened once).

        ``create``: the command records (``import``, ``serve``, ``keys create``) and may
        create the database and its folders.  Every other command needs an existing
        ledger: an SQLite file that does not exist is a :class:`NotFoundError` (exit 3)
        and nothing is created (a PostgreSQL database that does not exist fails to
        connect, exit 4).

        Raises:
            NotFoundError: no SQLite ledger at the resolved path and not ``create``.
        """
        if self._ledger is None:
            from contextledger.ledger import Ledger

            _check_path_kinds(self.db, self.home)
            if not create:
                _require_existing(self.db, self.home)
            self._ledger = Ledger.open(self.db, home=self.home)
        return self._ledger


class LedgerNotFoundError(NotFoundError):
    """No ledger at the database path a read-only command was given."""

    def __init__(self, where: str) -> None:
        self.kind, self.record_id = "ledger", where
        InputError.__init__(self, f"no ledger at {where} (check --db / --home / CONTEXTLEDGER_DB; `contextledger import` creates one)")


_SQLITE_MAGIC = b"SQLite format 3\x00"


def _check_path_kinds(db: str | None, home: str | None) -> None:
    """Raise :class:`InputError` when ``--home`` names something that is not a directory,
    or ``--db`` (a plain path or an ``sqlite:///`` URL) names a directory or a non-empty
    file that does not start with the SQLite header."""
    if home is not None and Path(home).exists() and not Path(home).is_dir():
        raise InputError(f"--home {home} names a file, not a directory (give the folder that holds ledger.db)")
    if db is None:
        return
    target = Path(db.removeprefix("sqlite:///")) if db.startswith("sqlite:///") or "://" not in db else None
    if target is None or str(target) == ":memory:":
        return
    if target.is_dir():
        raise InputError(f"--db {db} is a directory, not an SQLite database file")
    if target.is_file() and target.stat().st_size > 0:
        try:
            with target.open("rb") as fh:
                head = fh.read(len(_SQLITE_MAGIC))
        except OSError:
            return  # Ledger.open reports the OS error with its cause
        if head != _SQLITE_MAGIC:
            raise InputError(f"--db {db} is not an SQLite database (the file does not start with the SQLite header)")


def _require_existing(db: str | None, home: str | None) -> None:
    """Raise :class:`LedgerNotFoundError` when the resolved database is an SQLite file
    that does not exist (an in-memory or server database is not checked here)."""
    from contextledger.config import resolve_config

    url = resolve_config(db, home).db_url
    if not url.startswith("sqlite"):
        return
    import sqlalchemy as sa

    try:
        database = sa.engine.make_url(url).database
    except sa.exc.ArgumentError:
        return  # Ledger.open reports an unparseable URL
    if database and database != ":memory:" and not database.startswith("file:") and not Path(database).exists():
        raise LedgerNotFoundError(database)


state = State()


def emit_json(data: Any) -> None:
    """Print ``data`` as JSON on stdout (UTF-8, stable key order as given; a lone
    surrogate, which no UTF-8 stream accepts, is printed as U+FFFD)."""
    text = json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n"
    sys.stdout.write(utf8_bytes(text).decode("utf-8"))


def _message(exc: BaseException) -> str:
    if isinstance(exc, OSError) and not isinstance(exc, ContextLedgerError):
        from contextledger.errors import describe_os_error

        return describe_os_error(exc)
    return str(exc)


def emit_error(exc: BaseException, as_json: bool, **fields: Any) -> int:
    """Print one error on stderr (a line of text, or with ``as_json`` one JSON object on
    one line, with ``fields`` added) and return its exit status."""
    code = exit_code_for(exc)
    message = _message(exc)
    if as_json:
        sys.stderr.write(json.dumps({"error": type(exc).__name__, "message": message, "exit_code": code, **fields}, ensure_ascii=False, default=str) + "\n")
    else:
        from rich.markup import escape

        err_console.print(f"[red]error:[/red] {escape(message)}", markup=True, soft_wrap=True)
    return code


@contextmanager
def fail_cleanly(as_json: bool = False) -> Iterator[None]:
    """Turn contextledger errors — and file-system and database errors (a read-only or
    full disk, a missing permission, a lost connection) — into one message on stderr and
    the exit status of :func:`exit_code_for`."""
    try:
        yield
    except (ContextLedgerError, OSError) as exc:
        raise typer.Exit(emit_error(exc, as_json)) from None
    except Exception as exc:
        if not is_database_error(exc):
            raise
        raise typer.Exit(emit_error(backend_error(exc), as_json)) from None


class UsageError(InputError):
    """A command line typer/click rejected before the command ran (a missing argument, an
    unknown option, ``--budget abc``, ``--limit 0``): exit status 2 (:data:`EXIT_INPUT`)."""


def usage_error(exc: Exception) -> UsageError:
    """The :class:`UsageError` for a click exception: click's own message on one line,
    and where to find the usage (``see 'contextledger assemble --help'``)."""
    fmt = getattr(exc, "format_message", None)
    message = " ".join(str(fmt() if callable(fmt) else exc).split())
    ctx = getattr(exc, "ctx", None)
    path = getattr(ctx, "command_path", None)
    return UsageError(f"{message} (see '{path} --help')" if path else message)


def is_database_error(exc: BaseException) -> bool:
    """Whether ``exc`` is an SQLAlchemy (database driver) error.  SQLAlchemy is looked up
    only when it is loaded: no database error can come from a command that never
    imported it, so a command that needs no database never pays its import."""
    sa = sys.modules.get("sqlalchemy")
    return sa is not None and isinstance(exc, sa.exc.SQLAlchemyError)


def backend_error(exc: Exception) -> BackendError:
    """A :class:`BackendError` for a database driver error: the driver's first line,
    never the statement's parameters (transcript text)."""
    from contextledger.errors import database_error_cause

    orig = getattr(exc, "orig", None)
    reason = str(orig if orig is not None else exc).strip()
    first = reason.splitlines()[0] if reason else type(exc).__name__
    cause = database_error_cause(orig if orig is not None else exc)
    if cause is not None and cause.lower() not in first.lower():
        first = f"{cause} ({first})"
    return BackendError(f"database error: {first}")


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


NEWEST_WINDOW = 64
"""How many of a conversation's last messages (by ``seq``) :func:`warn_if_now_before_newest`
reads for the newest time: a bounded read, whatever the conversation's length."""


def warn_if_now_before_newest(ledger: Ledger, scope: Scope, conversation_id: str, now: datetime | None) -> None:
    """Print one warning line on stderr when ``--now`` (``now``; ``None``: not given) is
    earlier than the newest ``created_at`` among the conversation's last
    :data:`NEWEST_WINDOW` messages: the records after it are still included (``--now`` is
    not a cut-off) and are never stale.  Nothing when the conversation has no messages."""
    if now is None:
        return
    recent = ledger.store.messages(scope, conversation_id, last=NEWEST_WINDOW)
    newest = max((m.created_at for m in recent), default=None)
    if newest is None or now >= newest:
        return
    err_console.print(
        f"warning: --now {now.isoformat()} is earlier than the conversation's newest message ({newest.isoformat()}); "
        "records after it are still included and count as fresh",
        markup=False, highlight=False, soft_wrap=True,
    )


def _printable(cell: str) -> str:
    return cell if cell.isprintable() else "".join(ch if ch.isprintable() else " " for ch in cell)


def print_rows(header: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int] = ()) -> None:
    """Print a plain table on stdout: ``header``, a rule, then ``rows``, each column as
    wide as its widest cell (terminal cells, so wide characters count twice), two spaces
    apart; the columns numbered in ``right`` right-aligned, the last one not padded.
    Nothing is cut (ids stay whole), no markup is interpreted and a control character
    (a newline in a title) prints as a space: a listing of any length prints in time
    linear in its text, one line per row."""
    from rich.cells import cell_len

    table = [list(header), *([_printable(c) for c in r] for r in rows)]
    widths = [max(cell_len(r[i]) for r in table) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        out = []
        for i, cell in enumerate(cells):
            pad = " " * (widths[i] - cell_len(cell))
            out.append(pad + cell if i in right else cell + (pad if i < len(cells) - 1 else ""))
        return "  ".join(out)

    text = [line(table[0]), "  ".join("-" * w for w in widths), *(line(r) for r in table[1:])]
    sys.stdout.write(utf8_bytes("\n".join(text) + "\n").decode("utf-8"))
