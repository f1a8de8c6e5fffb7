"""Request dependencies shared by every router: the ledger and the caller's tenant.

A caller presents its API key as ``x-contextledger-key: <key>``; on ``/api`` also as
``Authorization: Bearer <key>`` (on the proxy routes ``Authorization`` / ``x-api-key``
carry the provider credential, which the service forwards and never reads); a browser on
the inspector's pages signs in once at ``/sign-in`` and presents the key as the HttpOnly,
``SameSite=Strict`` cookie :data:`KEY_COOKIE` (pages only: never on ``/api`` or the proxy).  Without a
key a request is served for the settings' tenant only while no key exists and the service
is bound to loopback (one local user).
"""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import HTTPException, Request
from starlette.concurrency import run_in_threadpool

from contextledger.ledger import Ledger
from contextledger.server.keys import KEY_PREFIX, any_active_key, tenant_of_key
from contextledger.store.base import Scope

__all__ = ["KEY_COOKIE", "KEY_HEADER", "SignInRequired", "ledger_of", "page_scope", "resolve_tenant", "service_of", "tenant_scope"]

KEY_HEADER = "x-contextledger-key"
"""Header carrying a contextledger API key."""

KEY_COOKIE = "contextledger_key"
"""Cookie carrying the API key a browser signed in with (inspector pages only)."""


class SignInRequired(HTTPException):
    """A page was asked for without a valid key: the browser is sent to ``/sign-in``."""

    def __init__(self, next_path: str) -> None:
        super().__init__(303, "sign in with an API key", headers={"Location": "/sign-in?" + urlencode({"next": next_path})})


def service_of(request: Request):  # type: ignore[no-untyped-def]  # -> ServiceState (import cycle)
    """The worker's :class:`~contextledger.server.app.ServiceState`."""
    return request.app.state.service


def ledger_of(request: Request) -> Ledger:
    """The worker's ledger."""
    ledger: Ledger = request.app.state.service.ledger
    return ledger


def _presented_key(request: Request, *, bearer: bool, cookie: bool = False) -> str | None:
    key = request.headers.get(KEY_HEADER) or (request.cookies.get(KEY_COOKIE) if cookie else None)
    if key:
        return key.strip()
    if bearer:
        auth = request.headers.get("authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token.strip().startswith(KEY_PREFIX):
            return token.strip()
    return None


def resolve_tenant(request: Request, *, bearer: bool, cookie: bool = False) -> str:
    """The tenant the request acts for (runs in a worker thread: database look-ups).
    ``cookie``: also accept the sign-in cookie (pages).

    Raises:
        HTTPException: 401 for a missing, unknown or revoked key.
    """
    service = request.app.state.service
    key = _presented_key(request, bearer=bearer, cookie=cookie)
    if key is not None:
        tenant = tenant_of_key(service.ledger, key)
        if tenant is None:
            raise HTTPException(401, "unknown or revoked API key", headers={"WWW-Authenticate": "Bearer"})
        return tenant
    if service.settings.loopback and not any_active_key(service.ledger):
        return str(service.settings.tenant)
    raise HTTPException(401, f"an API key is required: send it as {KEY_HEADER}", headers={"WWW-Authenticate": "Bearer"})


async def tenant_scope(request: Request) -> Scope:
    """FastAPI dependency: the caller's :class:`Scope` (``/api`` routes, pages)."""
    tenant = await run_in_threadpool(resolve_tenant, request, bearer=True)
    return Scope(tenant_id=tenant)


async def page_scope(request: Request) -> Scope:
    """FastAPI dependency of the inspector's pages: the caller's :class:`Scope`, from the
    key header, the sign-in cookie or the keyless loopback default.

    Raises:
        SignInRequired: no valid key (the browser is redirected to ``/sign-in``).
    """
    try:
        tenant = await run_in_threadpool(resolve_tenant, request, bearer=True, cookie=True)
    except HTTPException as exc:
        if exc.status_code != 401:
            raise
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise SignInRequired(target) from exc
    return Scope(tenant_id=tenant)
