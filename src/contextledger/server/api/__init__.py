"""The REST API under ``/api`` (errors are RFC 9457 problem details)."""

from __future__ import annotations

from fastapi import APIRouter

from contextledger.server.api import conversations, ledger_ops

__all__ = ["router"]

router = APIRouter(prefix="/api")
router.include_router(conversations.router)
router.include_router(ledger_ops.router)
