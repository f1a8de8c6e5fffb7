"""``Runtime``: what the layers under the :class:`~contextledger.ledger.Ledger` facade
work with — the store (SQL + blobs), the tokenizer, the default policy, the storage
configuration and scopes.

Assembly, ingestion, compaction, the graph operations and explain receive a runtime
(or anything carrying one: :class:`HasRuntime`, e.g. a ``Ledger``) and never import the
facade, so the package's imports form no cycle: the facade sits on top and composes
the layers; the layers sit on the runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from contextledger.store.base import Scope

if TYPE_CHECKING:
    from contextledger.config import LedgerConfig
    from contextledger.memory.extractors.registry import ExtractorRegistry
    from contextledger.policy.model import Policy
    from contextledger.records.enums import PrivacyClass
    from contextledger.store.blobs import BlobStore
    from contextledger.store.sql import SqlStore
    from contextledger.tokens import Tokenizer

__all__ = ["DEFAULT_TENANT", "HasRuntime", "Runtime"]

DEFAULT_TENANT = "default"
"""Tenant used by the CLI and by ``Ledger.recorder()`` when none is given."""


class Runtime:
    """The shared services of one opened ledger.

    Args:
        store: an opened :class:`~contextledger.store.sql.SqlStore`.
        policy: the policy used when an operation is given none (default: the bundled
            policy, loaded on first use).
        config: the resolved storage locations, when the store was opened from them.

    Nothing heavy is loaded until used: the tokenizer (o200k ranks, ~130 MiB) on the first
    count, the bundled policy on the first :meth:`resolve_policy` without a policy.
    """

    def __init__(self, store: SqlStore, *, policy: Policy | None = None, config: LedgerConfig | None = None) -> None:
        self.store = store
        self.config = config
        self._policy = policy

    @property
    def runtime(self) -> Runtime:
        """The runtime itself (a runtime is its own :class:`HasRuntime`)."""
        return self

    @property
    def blobs(self) -> BlobStore:
        """The blob store of large and binary payloads."""
        return self.store.blobs

    @property
    def tokenizer(self) -> Tokenizer:
        """The shared ``o200k_base`` tokenizer (loaded on first use, once per process)."""
        from contextledger.tokens import get_tokenizer

        return get_tokenizer()

    @property
    def policy(self) -> Policy:
        """The default policy of this runtime."""
        if self._policy is None:
            from contextledger.policy.loader import default_policy

            self._policy = default_policy()
        return self._policy

    @property
    def extractors(self) -> ExtractorRegistry:
        """The tool-result extractors for this runtime's policy: its declared tools
        (``[tools.<name>]``) and change limits (``[edits]``), built once per policy version."""
        from contextledger.memory.extractors.registry import registry_for_policy

        return registry_for_policy(self.policy)

    def resolve_policy(self, policy: Policy | None = None) -> Policy:
        """``policy``, or this runtime's default when ``None`` (DESIGN.md pipeline step 1:
        one immutable policy per request)."""
        return policy if policy is not None else self.policy

    def scope(self, tenant_id: str = DEFAULT_TENANT, *, user_id: str | None = None, agent_id: str | None = None) -> Scope:
        """A :class:`~contextledger.store.base.Scope` for ``tenant_id``."""
        return Scope(tenant_id=tenant_id, user_id=user_id, agent_id=agent_id)

    def put_blob_if_large(self, raw: bytes, privacy_class: PrivacyClass | None = None) -> str | None:
        """Store ``raw`` in the blob store when it exceeds the store's inline threshold
        (bytes) or is not UTF-8 text without NUL (binary payloads are never inlined, and no
        database can hold a NUL in text), or as a restricted payload when it holds a
        secret or its ``privacy_class`` is sealed at rest
        (:data:`~contextledger.security.crypto.SEALED_CLASSES`: :meth:`put_restricted_blob`),
        and return its key; else ``None`` (the payload stays inline in the artifact row).

        Raises:
            MissingKeyError: a restricted payload and no encryption key can be found or created.
        """
        from contextledger.security.crypto import SEALED_CLASSES
        from contextledger.security.screen import screen_result

        if privacy_class in SEALED_CLASSES or screen_result(raw) is not None:
            return self.put_restricted_blob(raw)
        if len(raw) > self.store.inline_threshold_bytes or b"\x00" in raw:
            return self.store.blobs.put(raw)
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return self.store.blobs.put(raw)
        return None

    def put_restricted_blob(self, raw: bytes) -> str:
        """Store a restricted payload (a secret-like result, the original of a redacted
        message) and return its key.  Restricted payloads never live inline in a row and
        are sealed (AES-GCM, :mod:`contextledger.security.crypto`) when the store seals
        (a ledger opened with ``Ledger.open``).

        Raises:
            MissingKeyError: no encryption key can be found or created.
        """
        from contextledger.security.crypto import SealingBlobStore

        if isinstance(self.store.blobs, SealingBlobStore):
            return self.store.blobs.put_sealed(raw)
        return self.store.blobs.put(raw)

    def close(self) -> None:
        """Release database connections."""
        self.store.close()


class HasRuntime(Protocol):
    """Anything that carries a :class:`Runtime` (a ``Runtime`` itself, a ``Ledger``)."""

    @property
    def runtime(self) -> Runtime: ...
