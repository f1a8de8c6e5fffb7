"""What reaches the database is always storable, and database errors never quote it.

Two guards installed on every engine (:func:`engine_options`, :func:`install`):

* JSON bodies are serialized by :func:`dumps_json`: a NUL (``\\u0000``, refused by
  PostgreSQL ``jsonb``) or a lone UTF-16 surrogate (refused by every UTF-8 encoder)
  inside a string becomes U+FFFD;
* every other text parameter of every statement gets the same replacement
  (:func:`contextledger.limits.storable_text`), so a title, a participant name or a call id
  taken from a hostile transcript can never make an INSERT fail.

``hide_parameters`` keeps bound values (transcript text, secrets) out of SQLAlchemy's
error messages and logs: a backend error names the statement and the driver's reason,
never the data.  Raw tool-result bytes are not affected: a payload that is not clean
UTF-8 text lives in the blob store, byte for byte (see ``Runtime.put_blob_if_large``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import sqlalchemy as sa

from contextledger.limits import storable_text

__all__ = ["dumps_json", "engine_options", "install"]

_NUL_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def dumps_json(value: Any) -> str:
    """JSON text of ``value`` (UTF-8 characters kept as they are) with NUL and lone
    surrogates inside strings replaced by U+FFFD."""
    text = json.dumps(value, ensure_ascii=False)
    if "\\u0000" in text:
        text = _NUL_ESCAPE.sub("\\1\ufffd", text)
    return storable_text(text)[0]


def engine_options() -> dict[str, Any]:
    """Keyword arguments for ``sqlalchemy.create_engine`` (JSON serializer, hidden
    parameters in errors)."""
    return {"json_serializer": dumps_json, "hide_parameters": True}


def _unstorable(value: Any) -> bool:
    return type(value) is str and ("\x00" in value or (not value.isascii() and storable_text(value)[1] > 0))


def _clean_row(row: Any) -> Any:
    """``row`` itself when every value is storable (the common case: no copy)."""
    if isinstance(row, dict):
        if any(_unstorable(v) for v in row.values()):
            return {k: storable_text(v)[0] if type(v) is str else v for k, v in row.items()}
        return row
    if isinstance(row, tuple | list) and any(_unstorable(v) for v in row):
        return type(row)(storable_text(v)[0] if type(v) is str else v for v in row)
    return row


def _before_cursor_execute(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, executemany: bool) -> tuple[str, Any]:
    if not parameters:
        return statement, parameters
    if executemany:
        return statement, [_clean_row(r) for r in parameters]
    return statement, _clean_row(parameters)


def install(engine: sa.Engine) -> None:
    """Replace unstorable characters in every text parameter of ``engine``'s statements."""
    sa.event.listen(engine, "before_cursor_execute", _before_cursor_execute, retval=True)
