"""Deferred assembly records: what only explain / the inspector read, written after the
response (issue "Incremental assembly").

The proxy allocates an assembly's id on the request path and sends the request; the
assembly's decision list, the comparison with the previous assembly and the write of the
record (:func:`contextledger.assembly.record.persist`) are one *pending* job, started once
the response is sent (:meth:`DeferredAssemblies.start`).  Jobs are ordered per
conversation: a job runs only after every earlier job of its conversation, and any reader
of this process that asks the store for an assembly of a conversation (the epoch state
of its next request, explain, the inspector, ``/api``) first runs — or waits for — that
conversation's pending jobs (:meth:`DeferredAssemblies.settle`), so it always sees the
previous assembly.  Fields that become known before the job ran (the upstream's usage,
the proxy mode) are merged into the record it writes (:meth:`DeferredAssemblies.annotate`).
A job that fails is logged (assembly id, conversation, error), never raised to the
client; it is not retried.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DeferredAssemblies", "PendingAssembly"]

_log = logging.getLogger("contextledger.store.deferred")

_local = threading.local()
"""``running``: the job this thread is running (its own reads never wait for it)."""


@dataclass(eq=False)
class PendingAssembly:
    """One assembly whose record is written later.

    Attributes:
        assembly_id / conversation_id: the record's ids (the id is the one the response
            carried).
        work: writes the record; given the fields to merge into it (``{}`` for none).
    """

    assembly_id: str
    conversation_id: str
    work: Callable[[dict[str, Any]], None]
    fields: dict[str, Any] = field(default_factory=dict)
    done: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        """Write the record once (later calls wait for the first, then return); a
        failure is logged with the assembly id and never raised."""
        with self.lock:
            if self.done:
                return
            _local.running = self
            try:
                self.work(dict(self.fields))
            except Exception as exc:
                _log.error("assembly %s of conversation %s not recorded: %s: %s", self.assembly_id, self.conversation_id, type(exc).__name__, exc, exc_info=exc)
            finally:
                self.done = True
                _local.running = None


class DeferredAssemblies:
    """The pending assemblies of one store in this process, in order per conversation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_conversation: dict[str, list[PendingAssembly]] = {}
        self._by_id: dict[str, PendingAssembly] = {}

    def add(self, job: PendingAssembly) -> None:
        """Register ``job`` after every earlier job of its conversation."""
        with self._lock:
            self._by_conversation.setdefault(job.conversation_id, []).append(job)
            self._by_id[job.assembly_id] = job

    def pending(self) -> int:
        """How many jobs have not run yet."""
        with self._lock:
            return len(self._by_id)

    def start(self, assembly_id: str) -> None:
        """Run the job of ``assembly_id`` (and first every earlier job of its
        conversation) in the calling thread; nothing when it already ran."""
        with self._lock:
            job = self._by_id.get(assembly_id)
        if job is not None:
            self._run_through(job.conversation_id, job)

    def settle(self, conversation_id: str | None = None, assembly_id: str | None = None) -> None:
        """Run (or wait for) the pending jobs a read needs: those of ``conversation_id``,
        up to that of ``assembly_id`` when only it is named, every job when neither is.
        A read made by a running job never waits (its own conversation's earlier jobs
        already ran)."""
        if getattr(_local, "running", None) is not None or not self._by_id:
            return
        if conversation_id is None and assembly_id is not None:
            with self._lock:
                job = self._by_id.get(assembly_id)
            if job is not None:
                self._run_through(job.conversation_id, job)
            return
        with self._lock:
            names = [conversation_id] if conversation_id is not None else list(self._by_conversation)
        for name in names:
            self._run_through(name, None)

    def annotate(self, assembly_id: str, fields: dict[str, Any]) -> bool:
        """Merge ``fields`` into the record of a job that has not run yet: ``True``;
        ``False`` when there is no such job (the record is stored: annotate it there)."""
        with self._lock:
            job = self._by_id.get(assembly_id)
        if job is None:
            return False
        with job.lock:
            if job.done:
                return False
            job.fields.update(fields)
            return True

    def _run_through(self, conversation_id: str, last: PendingAssembly | None) -> None:
        """Run the conversation's jobs in order, through ``last`` (all when ``None``)."""
        while last is None or not last.done:
            with self._lock:
                queue = self._by_conversation.get(conversation_id)
                if not queue:
                    return
                job = queue[0]
            job.run()
            with self._lock:
                queue = self._by_conversation.get(conversation_id) or []
                if queue and queue[0] is job:
                    queue.pop(0)
                    self._by_id.pop(job.assembly_id, None)
                if not queue:
                    self._by_conversation.pop(conversation_id, None)
            if job is last:
                return
