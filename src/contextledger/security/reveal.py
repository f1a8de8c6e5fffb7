"""Showing a restricted payload: only on an explicit request, which is recorded.

The raw payload of a ``secret_like`` artifact, and the original of a message whose
secrets were redacted, never reach a model request (the default policy denies both raw
sending and rehydration of the class; seed 000 §8 R12).  A person may still need them —
to rotate the leaked key, to audit — so :func:`rehydrate_artifact` and
:func:`original_message_parts` return them when asked with ``reveal=True``; each such
request is a :class:`~contextledger.records.models.PolicyDecision` (family
``rehydration``, decision ``reveal_secret``) naming who asked and why.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from contextledger.errors import NotFoundError, PolicyError
from contextledger.ids import new_id
from contextledger.records.enums import PolicyFamily, PrivacyClass
from contextledger.records.models import PolicyDecision
from contextledger.security.screen import SECRETS_KEY
from contextledger.store.base import Scope

if TYPE_CHECKING:
    from contextledger.runtime import HasRuntime

__all__ = ["REVEAL_DECISION", "original_message_parts", "rehydrate_artifact"]

REVEAL_DECISION = "reveal_secret"
"""``PolicyDecision.decision`` of an explicit request to see a secret-like payload."""


def _record(ledger: HasRuntime, scope: Scope, conversation_id: str, record_id: str, actor: str, reason: str) -> None:
    with ledger.runtime.store.writer(scope) as w:
        w.add_decision(PolicyDecision(
            id=new_id("dec"), tenant_id=scope.tenant_id, conversation_id=conversation_id, family=PolicyFamily.REHYDRATION,
            decision=REVEAL_DECISION, record_id=record_id, reason=reason, actor=actor, created_at=datetime.now(UTC),
        ))


def _refuse(kind: str, record_id: str) -> PolicyError:
    return PolicyError(f"{kind} {record_id} is secret_like: its raw payload is shown only on an explicit request (reveal=True, `--reveal-secrets`), which is recorded")


def rehydrate_artifact(ledger: HasRuntime, scope: Scope, artifact_id: str, *, reveal: bool = False, actor: str = "api", reason: str = "explicit request") -> bytes:
    """The exact raw bytes of an artifact, verified against its sha256 (and decrypted).

    Raises:
        NotFoundError: no such artifact in the tenant.
        PolicyError: the artifact is ``secret_like`` and ``reveal`` is false.
        IntegrityError / BackendError: see ``SqlStore.read_artifact_bytes``.
    """
    art = ledger.runtime.store.get_artifact(scope, artifact_id)
    if art.privacy_class is PrivacyClass.SECRET_LIKE:
        if not reveal:
            raise _refuse("artifact", artifact_id)
        data = ledger.runtime.store.read_artifact_bytes(scope, art)
        _record(ledger, scope, art.conversation_id, art.id, actor, reason)
        return data
    return ledger.runtime.store.read_artifact_bytes(scope, art)


def original_message_parts(ledger: HasRuntime, scope: Scope, conversation_id: str, message_id: str, *, reveal: bool = False, actor: str = "api", reason: str = "explicit request") -> list[dict[str, Any]]:
    """The parts of a message as recorded, before its secrets were redacted (for a
    message without secrets: its stored parts).

    Raises:
        NotFoundError: no such message in the conversation.
        PolicyError: the message held secrets and ``reveal`` is false.
    """
    msgs = ledger.runtime.store.messages(scope, conversation_id, ids=[message_id])
    if not msgs:
        raise NotFoundError("message", message_id)
    msg = msgs[0]
    found = msg.metadata.get(SECRETS_KEY)
    if not isinstance(found, dict):
        return [p.model_dump(mode="json") for p in msg.parts]
    if not reveal:
        raise _refuse("message", message_id)
    raw = ledger.runtime.store.blobs.get(str(found["raw_blob_key"]))
    _record(ledger, scope, conversation_id, message_id, actor, reason)
    return list(json.loads(raw.decode("utf-8", "surrogatepass")))
