"""Server-rendered HTML for the service's pages: one Jinja2 environment over the
templates shipped in the package (``server/templates``), autoescaped, and the static
files (``server/static``: one stylesheet, one small script; no CDN, no build step).

Needs the ``server`` extra (Jinja2).
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

__all__ = ["STATIC_PREFIX", "render", "static_router"]

STATIC_PREFIX = "/static/inspector"
"""URL prefix of the pages' static files."""

_STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


def _num(value: Any) -> str:
    return f"{int(value):,}" if isinstance(value, int | float) else str(value)


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if isinstance(value, datetime) else str(value or "")


def _pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


@cache
def _env() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("contextledger.server", "templates"),
        autoescape=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined,
    )
    env.filters.update(num=_num, when=_when, pretty=_pretty)
    env.globals["static"] = STATIC_PREFIX
    return env


def render(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """Render template ``name`` with ``context`` (plus ``request`` and ``path``)."""
    html = _env().get_template(name).render(request=request, path=request.url.path, **context)
    return HTMLResponse(html, status_code=status_code, headers={"Cache-Control": "no-store"})


static_router = APIRouter(include_in_schema=False)


@static_router.get(STATIC_PREFIX + "/{name}")
def static_file(name: str) -> Response:
    """A file of ``server/static`` (only plain names listed there; no paths)."""
    suffix = name[name.rfind(".") :] if "." in name else ""
    files = resources.files("contextledger.server").joinpath("static")
    if "/" in name or "\\" in name or suffix not in _STATIC_TYPES or not files.joinpath(name).is_file():
        return Response("not found", status_code=404, media_type="text/plain")
    return Response(files.joinpath(name).read_bytes(), media_type=_STATIC_TYPES[suffix], headers={"Cache-Control": "max-age=300"})
