"""The service's derivation worker: drains the derivation queue in the background.

Live recording through the library drains each conversation right after its first tier
commits; rows stay queued when a process was killed between the tiers, or when a writer
queues without draining (:meth:`~contextledger.ingest.results.ResultRecording.queue_tool_result`).
The worker started by the app's lifespan (:func:`drain_worker`) drains them, every tenant,
in batches, off the event loop; it never runs inside a request's transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.concurrency import run_in_threadpool

from contextledger.ingest.drain import drain
from contextledger.ledger import Ledger

__all__ = ["DRAIN_INTERVAL_S", "drain_worker"]

DRAIN_INTERVAL_S = 0.5
"""Seconds between two looks at an empty queue."""

_log = logging.getLogger("contextledger.server")


async def _run(ledger: Ledger, interval_s: float, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            report = await run_in_threadpool(lambda: drain(ledger.runtime, skip_failed=True))
        except Exception as exc:  # a failing drain must not stop the service; the rows stay queued
            _log.warning("derivation queue: drain failed (%s: %s); retrying", type(exc).__name__, exc)
            report = None
        for queue_id, artifact_id, error in report.failed if report is not None else ():
            _log.warning("derivation queue: row %s (artifact %s) not derived, left queued: %s", queue_id, artifact_id, error)
        if report is None or not report.memories:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)


@contextlib.asynccontextmanager
async def drain_worker(ledger: Ledger, interval_s: float = DRAIN_INTERVAL_S) -> AsyncIterator[asyncio.Task[None]]:
    """Run the drain loop as a task for the body's duration; at exit the loop is told to
    stop and awaited (a drain under way finishes its transaction before the ledger
    closes)."""
    stop = asyncio.Event()
    task = asyncio.create_task(_run(ledger, interval_s, stop), name="contextledger-drain")
    try:
        yield task
    finally:
        stop.set()
        await task
