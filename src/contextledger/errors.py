"""One exception hierarchy for contextledger, split by who is at fault.

``ContextLedgerError`` is the base.  Subclasses say whether the *caller's input*, the
*stored data*, a *backend* or a *policy* is at fault, and carry structured fields so that
CLIs and services can render them without parsing messages.
"""

from __future__ import annotations

__all__ = [
    "BackendError",
    "ContextLedgerError",
    "ImportFormatError",
    "InputError",
    "IntegrityError",
    "NotFoundError",
    "PolicyError",
    "PolicyFileError",
    "ProviderSerializationError",
    "ScopeError",
    "StoredDataError",
    "database_error_cause",
    "describe_os_error",
    "os_error_cause",
]


class ContextLedgerError(Exception):
    """Base of every error raised on purpose by contextledger."""


class InputError(ContextLedgerError):
    """The caller passed something invalid (bad argument, malformed file, unknown id)."""


class ImportFormatError(InputError):
    """A transcript file could not be imported.

    Attributes:
        path: the file being imported.
        location: ``"line 12"`` / ``"record 3"`` / ``"messages[4].tool_calls[0]"`` or ``None``
            when the problem concerns the whole file.
        reason: what was wrong, in one sentence.
    """

    def __init__(self, path: str, location: str | None, reason: str) -> None:
        self.path = path
        self.location = location
        self.reason = reason
        where = f"{path}, {location}" if location else path
        super().__init__(f"{where}: {reason}")


class NotFoundError(InputError):
    """A record addressed by id does not exist within the caller's scope."""

    def __init__(self, kind: str, record_id: str, detail: str | None = None) -> None:
        self.kind = kind
        self.record_id = record_id
        super().__init__(f"{kind} {record_id!r} not found" + (f": {detail}" if detail else ""))


class ScopeError(InputError):
    """A read or write was attempted without a tenant scope, or outside it (a denial)."""


class StoredDataError(ContextLedgerError):
    """Stored data is inconsistent (corrupt row, dangling reference)."""


class IntegrityError(StoredDataError):
    """A payload's bytes do not match the sha256 recorded for it, or its blob is missing.

    Attributes:
        record_id: the artifact or blob key concerned.
        expected: the recorded ``sha256:<hex>`` digest.
        actual: the digest of the bytes found (``None`` when the blob is missing).
    """

    def __init__(self, record_id: str, expected: str, actual: str | None) -> None:
        self.record_id = record_id
        self.expected = expected
        self.actual = actual
        found = "missing" if actual is None else actual
        super().__init__(f"{record_id}: payload integrity check failed (expected {expected}, found {found})")


class BackendError(ContextLedgerError):
    """The storage backend failed (connection, lock timeout, missing optional driver)."""


class PolicyError(ContextLedgerError):
    """A policy file is invalid or a policy cannot be applied.

    Attributes:
        key_path: dotted path of the offending key (``"budget.buckets.recent_tail"``) or ``None``.
        problems: every invalid value, ``(key path or None, reason)`` each, the first being
            ``key_path``'s (empty when the error is not about values, e.g. a TOML syntax error).
    """

    def __init__(self, message: str, key_path: str | None = None, source: str | None = None,
                 problems: tuple[tuple[str | None, str], ...] = ()) -> None:
        self.key_path = key_path
        self.source = source
        self.problems = problems
        prefix = ""
        if source:
            prefix += f"{source}: "
        if key_path:
            prefix += f"{key_path}: "
        super().__init__(prefix + message)


class PolicyFileError(PolicyError, InputError):
    """A policy file cannot be read (missing, a folder, no permission): an input error
    (CLI exit 2, like any unreadable file), and a :class:`PolicyError` for callers that
    catch those."""


class ProviderSerializationError(ContextLedgerError):
    """A provider serializer met content it cannot express (it never drops silently)."""


_OS_CAUSES = {
    "ENOSPC": "disk full",
    "EDQUOT": "disk quota exceeded",
    "EROFS": "read-only file system",
    "EACCES": "permission denied",
    "EPERM": "operation not permitted",
    "ELOOP": "symlink loop",
    "ENOENT": "no such file or directory",
    "ENOTDIR": "not a directory",
    "EISDIR": "is a directory",
    "EIO": "I/O error",
    "EMFILE": "too many open files",
}

_SQLITE_CAUSES = {
    "SQLITE_FULL": "disk full",
    "SQLITE_READONLY": "read-only ledger",
    "SQLITE_PERM": "permission denied",
    "SQLITE_IOERR": "I/O error",
    "SQLITE_CANTOPEN": "cannot open the database file",
    "SQLITE_CORRUPT": "the database file is corrupt",
    "SQLITE_NOTADB": "not a database file",
    "SQLITE_BUSY": "the database is locked by another process",
}


def os_error_cause(exc: OSError) -> str:
    """The cause of an OS error in a few plain words (``"disk full"``, ``"read-only file
    system"``, ``"permission denied"``, ``"symlink loop"`` …), else its ``strerror``."""
    import errno

    name = errno.errorcode.get(exc.errno or 0, "")
    return _OS_CAUSES.get(name) or (exc.strerror or type(exc).__name__).strip()


def describe_os_error(exc: OSError) -> str:
    """One line for an OS error: its cause, the system's own words when they differ, and
    the file (``"disk full (No space left on device): /ledger/blobs/ab/cd"``)."""
    cause = os_error_cause(exc)
    own = (exc.strerror or "").strip()
    text = f"{cause} ({own})" if own and own.lower() != cause.lower() else cause
    if exc.filename is not None:
        text += f": {exc.filename}"
    if getattr(exc, "filename2", None) is not None:
        text += f" -> {exc.filename2}"
    return text


def database_error_cause(exc: BaseException) -> str | None:
    """The cause of a database driver error (SQLite's result code, e.g. ``SQLITE_FULL`` →
    ``"disk full"``; ``SQLITE_READONLY_*`` → ``"read-only ledger"``), or ``None`` when the
    driver does not name one."""
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    base = name.split("_", 2)
    key = "_".join(base[:2]) if len(base) >= 2 else name
    return _SQLITE_CAUSES.get(key)
