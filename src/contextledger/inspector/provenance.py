"""Provenance chains for the inspector: memory → artifact → raw bytes (seed 000 §2.5,
§4.11): which raw observation a compact memory was derived from, and the exact bytes,
verified against the recorded sha256.

The bytes are shown only where the policy would rehydrate them for the request's
provider (privacy class and rehydration policy, as the assembler decides stage-2
rehydration); otherwise the page says which policy withheld them.  A payload removed by
retention says so, with the date.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from contextledger.errors import IntegrityError, NotFoundError
from contextledger.records.models import ToolArtifact, ToolMemory
from contextledger.store.base import Scope

if TYPE_CHECKING:
    from contextledger.runtime import HasRuntime

__all__ = ["MAX_SHOWN_BYTES", "ArtifactView", "artifact_view", "memory_chain"]

MAX_SHOWN_BYTES = 256 * 1024
"""Largest payload shown whole on a page (larger ones are cut, the check covers all)."""


@dataclass(kw_only=True)
class ArtifactView:
    """One artifact with its verification and (if allowed) its bytes.

    Attributes:
        verified: ``True`` when the bytes match the recorded sha256, ``False`` when they
            do not or are missing, ``None`` when they could not be read (retention).
        withheld: why the bytes are not shown (``None``: shown).
        text: the bytes as UTF-8 text (cut at :data:`MAX_SHOWN_BYTES`), when shown.
    """

    artifact: ToolArtifact
    memories: list[ToolMemory]
    verified: bool | None
    problem: str | None
    withheld: str | None
    text: str | None
    truncated: bool


def _withheld(source: HasRuntime, art: ToolArtifact, provider: str | None) -> str | None:
    """Why the policy would not rehydrate ``art`` for ``provider`` (``None``: it would).
    The privacy classes decide; the per-request byte budgets do not apply to an audit."""
    from contextledger.assembly.families import PrivacyEvaluator

    policy = source.runtime.policy
    privacy = PrivacyEvaluator(policy, provider or "openai-chat").check(art.privacy_class)
    if privacy is not None:
        return f"withheld by the privacy policy ({privacy.reason.value}: {privacy.detail})"
    if art.privacy_class.value in policy.rehydration.denied_privacy_classes:
        return f"withheld by the rehydration policy (privacy class {art.privacy_class.value} is never rehydrated)"
    return None


def artifact_view(source: HasRuntime, scope: Scope, artifact_id: str, *, provider: str | None = None) -> ArtifactView:
    """An artifact, the memories derived from it, the sha256 check and its bytes when
    the policy allows rehydrating them for ``provider``.

    Raises:
        NotFoundError: unknown artifact in the scope's tenant.
    """
    store = source.runtime.store
    art = store.get_artifact(scope, artifact_id)
    mems = [m for m in store.memories(scope, art.conversation_id, artifact_ids=[art.id])]
    if art.deleted_at is not None:
        return ArtifactView(artifact=art, memories=mems, verified=None, problem=f"payload deleted by retention on {art.deleted_at:%Y-%m-%d %H:%M} UTC",
                            withheld=None, text=None, truncated=False)
    try:
        data = store.read_artifact_bytes(scope, art)
    except IntegrityError as exc:
        return ArtifactView(artifact=art, memories=mems, verified=False, problem=str(exc), withheld=None, text=None, truncated=False)
    except NotFoundError as exc:
        return ArtifactView(artifact=art, memories=mems, verified=None, problem=str(exc), withheld=None, text=None, truncated=False)
    withheld = _withheld(source, art, provider)
    text = None if withheld else data[:MAX_SHOWN_BYTES].decode("utf-8", "replace")
    return ArtifactView(artifact=art, memories=mems, verified=True, problem=None, withheld=withheld, text=text, truncated=withheld is None and len(data) > MAX_SHOWN_BYTES)


def memory_chain(source: HasRuntime, scope: Scope, memory_id: str) -> tuple[ToolMemory, list[ToolArtifact]]:
    """A memory and the artifacts it was derived from (its ``source_artifact_ids``;
    an id that no longer resolves is left out — the page lists the ids it has).

    Raises:
        NotFoundError: unknown memory in the scope's tenant.
    """
    store = source.runtime.store
    mem = store.get_memory(scope, memory_id)
    arts = []
    for aid in mem.source_artifact_ids:
        try:
            arts.append(store.get_artifact(scope, aid))
        except NotFoundError:
            continue
    return mem, arts
