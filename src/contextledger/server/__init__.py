"""The contextledger service: REST API, provider-compatible proxy, pages.

Needs the ``server`` extra (``pip install 'contextledger[server]'``).  Start it with
``contextledger serve``; build the app in code with :func:`create_app`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastapi import FastAPI

    from contextledger.server.settings import ServerSettings

__all__ = ["create_app"]


def create_app(settings: ServerSettings | None = None, **kwargs: Any) -> FastAPI:
    """The service app (see :func:`contextledger.server.app.create_app`).

    Raises:
        ImportError: the ``server`` extra is not installed (the message names it).
    """
    try:
        from contextledger.server.app import create_app as _create
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(f"the contextledger service needs the server extra: pip install 'contextledger[server]' ({exc.name} is missing)") from exc
    return _create(settings, **kwargs)
