"""Signing a browser in to the inspector's pages with an API key.

A browser cannot add the ``x-contextledger-key`` header to the links it follows, so on a
service that has keys (any service not bound to loopback, or one where a key was created)
the pages send it to ``/sign-in``: the key typed there is checked like a header key and
kept in the HttpOnly, ``SameSite=Strict`` cookie :data:`~contextledger.server.deps.KEY_COOKIE`
(``Secure`` over HTTPS), which only the pages accept.  ``POST /sign-out`` clears it.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from contextledger.server.deps import KEY_COOKIE, ledger_of
from contextledger.server.html import render
from contextledger.server.keys import tenant_of_key

__all__ = ["router", "safe_next"]

router = APIRouter(include_in_schema=False)

_MAX_FORM_BYTES = 4096


def safe_next(target: str | None) -> str:
    """``target`` when it is a path on this service (``/…``, never ``//host`` or a URL with
    a scheme), else ``/``: a sign-in never redirects elsewhere."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


@router.get("/sign-in", response_class=HTMLResponse)
def sign_in_page(request: Request, next: str = "/") -> HTMLResponse:
    return render(request, "sign_in.html", title="Sign in", next=safe_next(next), error=None)


@router.post("/sign-in", response_model=None)
async def sign_in(request: Request) -> Response:
    body = await request.body()
    form = parse_qs(body[:_MAX_FORM_BYTES].decode("utf-8", errors="replace"))
    key = (form.get("key") or [""])[0].strip()
    target = safe_next((form.get("next") or ["/"])[0])
    tenant = await run_in_threadpool(tenant_of_key, ledger_of(request), key) if key else None
    if tenant is None:
        return render(request, "sign_in.html", status_code=401, title="Sign in", next=target, error="unknown or revoked API key")
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(KEY_COOKIE, key, httponly=True, samesite="strict", secure=request.url.scheme == "https", path="/")
    return response


@router.post("/sign-out", response_model=None)
def sign_out() -> Response:
    response = RedirectResponse("/sign-in", status_code=303)
    response.delete_cookie(KEY_COOKIE, path="/")
    return response
