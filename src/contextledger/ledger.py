"""``Ledger``: the one object an application holds.

It owns the store (SQL + blobs), hands out recorders, imports transcripts, assembles
requests and explains them::

    from contextledger import Ledger
    ledger = Ledger.open()                       # ~/.contextledger (SQLite + blobs)
    result = ledger.import_file("session.jsonl")
    assembly = ledger.assemble(result.conversation_id, provider="anthropic", budget_tokens=4000)
    print(assembly.record.replay_tokens, assembly.record.assembled_tokens)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contextledger.config import LedgerConfig, resolve_config
from contextledger.records.enums import RuntimeKind
from contextledger.runtime import DEFAULT_TENANT, Runtime
from contextledger.store.base import Scope
from contextledger.store.blobs import LocalBlobStore, SqlBlobStore
from contextledger.store.sql import SqlStore

if TYPE_CHECKING:
    from contextledger.assembly.assembler import AssemblyResult
    from contextledger.compaction import Compaction
    from contextledger.graph.resume import ResumeState
    from contextledger.ingest.loader import ImportResult
    from contextledger.ingest.recorder import Recorder
    from contextledger.policy.constraints import Violation
    from contextledger.policy.model import Policy
    from contextledger.policy.rules import Rule
    from contextledger.records.enums import Visibility
    from contextledger.records.models import PolicyDecision
    from contextledger.security.crypto import KeyProvider, Keyring

__all__ = ["DEFAULT_TENANT", "Ledger"]


class Ledger:
    """Facade over a :class:`~contextledger.runtime.Runtime`: recording, importing,
    assembling, explaining.  Every operation is one call into the layer that owns it.

    Args:
        store: an opened :class:`~contextledger.store.sql.SqlStore`.
        policy: the policy used when ``assemble`` is given none (default: bundled).
        config: the storage locations the store was opened from, if known.
    """

    def __init__(self, store: SqlStore, *, policy: Policy | None = None, config: LedgerConfig | None = None) -> None:
        self.runtime = Runtime(store, policy=policy, config=config)

    @property
    def store(self) -> SqlStore:
        """The relational store and its blob store."""
        return self.runtime.store

    @classmethod
    def open(
        cls,
        db: str | None = None,
        *,
        home: str | Path | None = None,
        blobs: str | Path | None = None,
        policy: Policy | None = None,
        keys: KeyProvider | Keyring | None = None,
    ) -> Ledger:
        """Open (creating and migrating if needed) the ledger at ``db`` / ``home``.

        See :func:`contextledger.config.resolve_config` for how locations resolve.  A
        PostgreSQL ledger keeps its blobs in the database (shared by every process and
        host) unless ``blobs`` or ``CONTEXTLEDGER_BLOBS`` names a folder.  Restricted
        payloads are sealed with ``keys`` (a :class:`~contextledger.security.crypto.Keyring`
        or a provider returning one), else ``CONTEXTLEDGER_KEYS``, else the key file
        ``keys`` next to the blob folder (``CONTEXTLEDGER_KEY_FILE``), created on first use.

        Raises:
            BackendError: the database cannot be opened, or its folder or blob folder
                cannot be created (the message shows the URL with its password masked).
        """
        import sqlalchemy as sa

        from contextledger.errors import BackendError

        cfg: LedgerConfig = resolve_config(db, home, blobs)
        try:
            shown = sa.engine.make_url(cfg.db_url).render_as_string(hide_password=True)
        except sa.exc.ArgumentError:
            shown = "(unparseable URL)"
        try:
            store = SqlStore(cfg.db_url, LocalBlobStore(cfg.blob_root), inline_threshold_bytes=cfg.inline_threshold_bytes)
        except sa.exc.SQLAlchemyError as exc:
            orig = getattr(exc, "orig", None)
            reason = str(orig) if orig is not None else str(exc)
            raise BackendError(f"cannot open the database {shown!r}: {reason.strip().splitlines()[0] if reason.strip() else type(exc).__name__}") from None
        except OSError as exc:  # the home or blob folder cannot be created or written
            raise BackendError(f"cannot open the ledger at {shown!r}: {exc.strerror or exc} ({exc.filename})") from None
        if store.dialect == "postgresql" and not (blobs or os.environ.get("CONTEXTLEDGER_BLOBS")):
            # shared by every worker and host; blobs an earlier version wrote to the local
            # folder stay readable
            store.blobs = SqlBlobStore(store.engine, fallback=LocalBlobStore(cfg.blob_root))
        from contextledger.security.crypto import Keyring, SealingBlobStore, key_file_provider

        if isinstance(keys, Keyring):
            ring = keys
            keys = lambda: ring  # noqa: E731
        key_file = Path(os.environ.get("CONTEXTLEDGER_KEY_FILE") or cfg.blob_root.parent / "keys")
        store.blobs = SealingBlobStore(store.blobs, keys or key_file_provider(key_file))
        return cls(store, policy=policy, config=cfg)

    def close(self) -> None:
        """Release database connections."""
        self.runtime.close()

    @property
    def policy(self) -> Policy:
        """The default policy of this ledger."""
        return self.runtime.policy

    def scope(self, tenant_id: str = DEFAULT_TENANT, *, user_id: str | None = None, agent_id: str | None = None) -> Scope:
        """A :class:`Scope` for ``tenant_id``."""
        return self.runtime.scope(tenant_id, user_id=user_id, agent_id=agent_id)

    def recorder(self, scope: Scope | None = None) -> Recorder:
        """A :class:`~contextledger.ingest.recorder.Recorder` for ``scope`` (default tenant)."""
        from contextledger.ingest.recorder import Recorder

        return Recorder(self.runtime, scope or self.scope())

    # -- import, assemble, explain -------------------------------------------------------
    def import_file(self, path: str | Path, *, format: str = "auto", scope: Scope | None = None, trust_system_prompt: bool = True) -> ImportResult:
        """Parse and load one transcript file (one transaction; idempotent by content).

        Raises:
            ImportFormatError: the file is malformed (names file, line/record, reason).
        """
        from contextledger.ingest.loader import import_path

        return import_path(self.runtime, Path(path), format=format, scope=scope or self.scope(), trust_system_prompt=trust_system_prompt)

    def assemble(
        self,
        conversation_id: str,
        *,
        branch_id: str | None = None,
        participant_id: str | None = None,
        provider: str = "openai-chat",
        budget_tokens: int | None = None,
        now: datetime | None = None,
        policy: Policy | None = None,
        trace: bool = False,
        runtime_kind: RuntimeKind | None = None,
        scope: Scope | None = None,
        persist: bool = True,
        replay: str = "auto",
        replaces: str | None = None,
        defer: bool = False,
    ) -> AssemblyResult:
        """Assemble the context of the next model request and record it.

        Between two persisted requests of one conversation the request extends the
        previous one byte for byte while the new records fit (policy ``[epoch]``;
        :mod:`contextledger.assembly.epoch`); ``record.epoch`` says why it did or did not.

        Args:
            budget_tokens: token budget (o200k tokens, payload overhead included);
                default from the policy.
            now: the evaluation time (freshness); default: the current time.  Pass it to
                make an assembly reproducible.
            trace: keep the full per-record decision trace on the record.
            replay: how the naive full-transcript request is measured for the record:
                ``"exact"`` serializes and counts it (work grows with the history),
                ``"estimate"`` sums the stored per-record counts (constant work),
                ``"auto"`` (default) is exact up to 1,000 lineage messages and an
                estimate beyond; ``record.replay_mode`` says which.
            replaces: the id of an assembly of this same request that was not sent
                (made again, e.g. with a smaller budget): never the epoch state.
            defer: return a provisional record (id, counts, epoch) and write the full
                record later (:mod:`contextledger.store.deferred`: started with
                ``store.deferred.start(record.id)``; any read of the conversation's
                assemblies in this process writes it first).

        Raises:
            NotFoundError: unknown conversation, branch or participant.
            InputError: unknown provider or replay mode, bad budget, naive ``now``.
        """
        from contextledger.assembly.assembler import Assembler

        return Assembler(self.runtime, self.runtime.resolve_policy(policy)).assemble(
            scope or self.scope(),
            conversation_id,
            branch_id=branch_id,
            participant_id=participant_id,
            provider=provider,
            budget_tokens=budget_tokens,
            now=now,
            trace=trace,
            runtime_kind=runtime_kind,
            persist=persist,
            replay=replay,
            replaces=replaces,
            defer=defer,
        )

    def compact(self, conversation_id: str, *, branch_id: str | None = None, keep_recent_units: int = 6, now: datetime | None = None, scope: Scope | None = None) -> Compaction:
        """Fold old history into one handoff message (seed 001 §10); the recent tail stays
        raw and every covered record stays rehydratable.  See
        :func:`contextledger.compaction.compact`.

        Raises:
            InputError: nothing to compact; HandoffError: a mandatory section is missing.
        """
        from contextledger.compaction import compact

        return compact(self.runtime, scope or self.scope(), conversation_id, branch_id=branch_id, keep_recent_units=keep_recent_units, now=now)

    def promote(self, record_id: str, *, to: Visibility, actor: str, reason: str, scope: Scope | None = None) -> PolicyDecision:
        """Widen a record's visibility (child → parent, private → branch, audit-only →
        visible), recorded as a promotion PolicyDecision with who and why in the same
        transaction (seed 000 §4.14).  See :func:`contextledger.graph.promotion.promote`.

        Raises:
            PromotionError: the visibility would not widen, or a child's run is not in a
                terminal state yet.
        """
        from contextledger.graph.promotion import promote

        return promote(self.runtime, scope or self.scope(), record_id, to=to, actor=actor, reason=reason)

    def resume_state(self, conversation_id: str, *, branch_id: str | None = None, participant_id: str | None = None, scope: Scope | None = None) -> ResumeState:
        """Runtime state to resume from, read from the newest ContinuationCheckpoint (never
        by searching the transcript).  See :func:`contextledger.graph.resume.resume_state`."""
        from contextledger.graph.resume import resume_state

        return resume_state(self.runtime, scope or self.scope(), conversation_id, branch_id=branch_id, participant_id=participant_id)

    def rehydrate(
        self, artifact_id: str, *, conversation_id: str | None = None, scope: Scope | None = None, reveal: bool = False,
        actor: str = "api", reason: str = "explicit request",
    ) -> bytes:
        """The exact raw bytes of an artifact, verified against its sha256.  A
        ``secret_like`` artifact's bytes are returned only with ``reveal=True``, and that
        request is recorded as a PolicyDecision (``actor``, ``reason``).  See
        :func:`contextledger.security.reveal.rehydrate_artifact`.

        Args:
            artifact_id: the artifact's id, or the handle a payload shows (``a12``; a
                memory handle ``m12`` names the artifact it was derived from), which
                needs ``conversation_id`` (:mod:`contextledger.handles`).

        Raises:
            NotFoundError / IntegrityError; PolicyError: a secret-like artifact without
            ``reveal``; InputError: a handle without ``conversation_id``.
        """
        from contextledger.handles import resolve_artifact_ref
        from contextledger.security.reveal import rehydrate_artifact

        sc = scope or self.scope()
        art_id = resolve_artifact_ref(self.store, sc, conversation_id, artifact_id)
        return rehydrate_artifact(self, sc, art_id, reveal=reveal, actor=actor, reason=reason)

    def explain(self, assembly_id: str, *, record_id: str | None = None, scope: Scope | None = None) -> dict[str, Any]:
        """Why each record was included, shaped or omitted in an assembly."""
        from contextledger.explain import explain_assembly

        return explain_assembly(self.runtime, scope or self.scope(), assembly_id, record_id=record_id)

    def add_rules(self, conversation_id: str, rules: Sequence[Rule], *, scope: Scope | None = None, branch_id: str | None = None) -> int:
        """Attach rules (project files, organisation policy …) to a conversation; the
        assembler applies them by authority and scope.  Returns how many were new
        (idempotent on rule id)."""
        scope = scope or self.scope()
        self.store.get_conversation(scope, conversation_id)
        n = 0
        with self.store.writer(scope) as w:
            for r in rules:
                n += int(w.add_rule(r.id, conversation_id, branch_id, r.order, r.model_dump(mode="json")))
        return n

    def load_project_rules(self, conversation_id: str, root: str | Path, *, touched_paths: Sequence[str] = (), touched_tools: Sequence[str] = (), scope: Scope | None = None) -> int:
        """Load ``AGENTS.md`` / ``CLAUDE.md`` and path-scoped rule files under ``root``
        (seed 001 §6 problem 4) and attach them to the conversation."""
        from contextledger.policy.rules import load_rule_files

        return self.add_rules(conversation_id, load_rule_files(Path(root), touched_paths, touched_tools), scope=scope)

    def rules(self, conversation_id: str, *, scope: Scope | None = None) -> list[Rule]:
        """Every rule attached to a conversation (pinned user constraints included)."""
        from contextledger.policy.rules import Rule

        bodies = self.store.rule_bodies(scope or self.scope(), conversation_id)
        return [Rule.model_validate({k: v for k, v in b.items() if not k.startswith("_")}) for b in bodies]

    def check_tool_call(self, conversation_id: str, tool_name: str, arguments: dict[str, Any], *, scope: Scope | None = None) -> list[Violation]:
        """Hard-constraint check the caller runs *before* a tool executes (seed 001 §6
        problem 4: hard constraints are enforced by the runtime).  Returns violations;
        empty means allowed."""
        from contextledger.policy.constraints import check_tool_call

        return check_tool_call(self.rules(conversation_id, scope=scope), tool_name, arguments)

    def apply_retention(self, artifact_id: str, *, reason: str, actor: str = "retention", scope: Scope | None = None, now: datetime | None = None) -> None:
        """Delete an artifact's raw payload (retention, seed 000 §4.15): the row keeps its
        sha256, size and memory; the inline text and the blob (unless another artifact
        shares it) are removed; a retention PolicyDecision records who and why.  Later
        assemblies omit the raw payload with reason ``retention_deleted``."""
        from contextledger.graph.retention import apply_retention

        apply_retention(self.runtime, scope or self.scope(), artifact_id, reason=reason, actor=actor, now=now)

    def verify_provenance(self, conversation_id: str, *, scope: Scope | None = None) -> dict[str, list[str]]:
        """Re-derive the integrity of every memory's evidence (seed 000 §8 R4, §9.2).

        For each memory whose artifact is missing, retention-deleted or whose bytes no
        longer match the recorded sha256, a repair is attempted from the remaining
        evidence (another artifact with the same call id, tool and sha256); otherwise the
        memory is marked ``unverifiable`` — never given a fabricated substitute id.  Each
        attempt is counted on the memory and recorded as a PolicyDecision.

        Returns ``{"ok": [...], "repaired": [...], "unverifiable": [...]}`` (memory ids).
        """
        from contextledger.graph.provenance import verify_provenance

        return verify_provenance(self.runtime, scope or self.scope(), conversation_id)

    def participants_named(self, scope: Scope, conversation_id: str, names: Sequence[str]) -> list[str]:
        """Ids of the participants whose name or id is in ``names``."""
        wanted = set(names)
        return [p.id for p in self.store.participants(scope, conversation_id) if p.name in wanted or p.id in wanted]
