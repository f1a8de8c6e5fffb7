"""The second recording tier: what is derived from the durable records (seed 000 §4.3,
§4.4): a tool result's :class:`~contextledger.records.models.ToolMemory`, its links to
earlier memories of the same subject, and the retrieval documents (full-text terms,
vectors when an encoder is on) of messages and memories.

Nothing here is the only copy of anything: every record written here can be derived
again from the first tier (:mod:`contextledger.ingest.durable`).  Today both tiers are
written in the same transaction by :class:`~contextledger.ingest.recorder.Recorder`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextledger.records.enums import PromotionPolicy, RuntimeKind, Visibility
from contextledger.records.models import Message, ToolArtifact, ToolMemory
from contextledger.retrieval.documents import searchable_artifact
from contextledger.retrieval.index import index_records

if TYPE_CHECKING:
    from contextledger.memory.continuation import Command
    from contextledger.runtime import Runtime
    from contextledger.security.screen import ScreenedResult
    from contextledger.store.base import Scope
    from contextledger.store.sql import Writer

__all__ = ["derive_result_memory", "index_message"]


def index_message(w: Writer, msg: Message) -> None:
    """Index the retrieval documents of ``msg`` (just inserted) inside ``w``'s transaction."""
    index_records(w, [msg])


def derive_result_memory(
    runtime: Runtime,
    w: Writer,
    scope: Scope,
    art: ToolArtifact,
    stored: ToolArtifact,
    screened: ScreenedResult,
    *,
    size_bytes: int,
    content_type: str,
    visibility: Visibility,
    child: bool,
    action_text: str | None,
    continues: Command | None = None,
) -> ToolMemory:
    """Derive, write, link and index the memory of one tool result inside ``w``'s transaction.

    Args:
        art: the artifact as built (before screening); ``stored`` the one written.
        screened: the result's screening (its text is the derivation's input; a binary
            payload is described as ``<binary payload, N bytes, TYPE>``).
        visibility: the artifact's visibility, which the memory shares.
        child: a child subagent's result: its memory is ``not_promoted`` and
            ``subagent_child``.
        continues: the command a continuation result belongs to (a Codex ``write_stdin``
            of a running ``exec_command``; :func:`contextledger.memory.continuation.continued_command`).

    Returns the memory as written.
    """
    from contextledger.memory.derive import derive_memory
    from contextledger.memory.linking import link_on_write

    vis = visibility
    mem = screened.memory(derive_memory(art, screened.text if screened.text is not None else f"<binary payload, {size_bytes} bytes, {content_type}>", action_text=action_text, registry=runtime.extractors, continues=continues))
    if child:
        mem = mem.model_copy(update={"promotion_policy": PromotionPolicy.NOT_PROMOTED, "visibility_scope": vis, "runtime_kind": RuntimeKind.SUBAGENT_CHILD})
    elif mem.visibility_scope is not vis:
        mem = mem.model_copy(update={"visibility_scope": vis})
    w.add_memory(mem)
    link_on_write(runtime.store, w, scope, mem)
    index_records(w, [mem], artifacts={stored.id: searchable_artifact(stored, screened.text)})
    return mem
