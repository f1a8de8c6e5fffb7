"""RFC 9457 problem details for every error of the REST API.

Each error answers ``application/problem+json`` with ``type``, ``title``, ``status`` and
``detail`` (plus ``errors`` for request validation).  Errors by who is at fault:

* :class:`~contextledger.errors.NotFoundError` → 404, :class:`ScopeError` → 403, any
  other :class:`~contextledger.errors.InputError` (and policy errors) → 400;
* request bodies that do not match the schema → 422;
* :class:`~contextledger.errors.StoredDataError` (integrity) → 409;
* :class:`~contextledger.errors.BackendError` → 503;
* anything else → 500 with a generic detail (never a traceback; the exception is logged).

The proxy routes answer in the provider's own error shape instead
(:mod:`contextledger.server.proxy.errors`).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException

from contextledger.errors import (
    BackendError,
    ContextLedgerError,
    InputError,
    NotFoundError,
    PolicyError,
    ScopeError,
    StoredDataError,
)

__all__ = ["PROBLEM_JSON", "Problem", "install_problem_handlers", "problem_response"]

PROBLEM_JSON = "application/problem+json"
_TYPE_BASE = "urn:contextledger:problem:"
_log = logging.getLogger("contextledger.server")


class Problem(BaseModel):
    """An RFC 9457 problem details object."""

    model_config = ConfigDict(extra="allow")

    type: str = "about:blank"
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None


def problem_response(status: int, title: str, detail: str | None = None, *, kind: str | None = None, instance: str | None = None, headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    """A ``application/problem+json`` response (``kind`` names the problem type)."""
    body = Problem(type=_TYPE_BASE + kind if kind else "about:blank", title=title, status=status, detail=detail, instance=instance, **extra)
    return JSONResponse(body.model_dump(exclude_none=True), status_code=status, media_type=PROBLEM_JSON, headers=headers)


def _status_of(exc: ContextLedgerError) -> tuple[int, str, str]:
    if isinstance(exc, NotFoundError):
        return 404, "Not Found", "not-found"
    if isinstance(exc, ScopeError):
        return 403, "Forbidden", "scope"
    if isinstance(exc, InputError | PolicyError):
        return 400, "Bad Request", "invalid-input"
    if isinstance(exc, StoredDataError):
        return 409, "Stored data failed verification", "integrity"
    if isinstance(exc, BackendError):
        return 503, "Storage unavailable", "backend"
    return 400, "Bad Request", "invalid-input"


def install_problem_handlers(app: FastAPI) -> None:
    """Register the handlers that turn every error into problem details."""

    async def ledger_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ContextLedgerError)
        status, title, kind = _status_of(exc)
        return problem_response(status, title, str(exc), kind=kind, instance=request.url.path)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 303 and exc.headers and "Location" in exc.headers:
            return RedirectResponse(exc.headers["Location"], status_code=303)
        title = {401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed"}.get(exc.status_code, "HTTP error")
        headers = dict(exc.headers or {})
        return problem_response(exc.status_code, title, str(exc.detail) if exc.detail else None, instance=request.url.path, headers=headers or None)

    async def validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = [{"loc": [str(x) for x in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))} for e in exc.errors()]
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        detail = f"{'.'.join(first['loc'])}: {first['msg']}"
        return problem_response(422, "Unprocessable Content", detail, kind="validation", instance=request.url.path, errors=errors)

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        _log.error("unexpected error on %s %s: %s", request.method, request.url.path, type(exc).__name__, exc_info=exc)
        return problem_response(500, "Internal Server Error", "an unexpected error occurred; it was logged", kind="internal", instance=request.url.path)

    app.add_exception_handler(ContextLedgerError, ledger_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(Exception, unexpected)
