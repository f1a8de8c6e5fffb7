"""Helpers of the service tests."""

from __future__ import annotations

from contextledger.server.local import serve_in_thread as serve

__all__ = ["serve"]
