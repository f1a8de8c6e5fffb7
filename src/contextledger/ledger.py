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
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contextledger.config import LedgerConfig, resolve_config
from contextledger.records.enums import RuntimeKind
from contextledger.records.models import Message, ToolArtifact, ToolMemory
from contextledger.store.base import Scope
from contextledger.store.blobs import LocalBlobStore, SqlBlobStore
from contextledger.store.sql import SqlStore, Writer

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

__all__ = ["DEFAULT_TENANT", "Ledger"]

DEFAULT_TENANT = "default"
"""Tenant used by the CLI and by ``Ledger.recorder()`` when none is given."""


class Ledger:
    """Facade over a store: recording, importing, assembling, explaining.

    Args:
        store: an opened :class:`~contextledger.store.sql.SqlStore`.
        policy: the policy used when ``assemble`` is given none (default: bundled).
    """

    def __init__(self, store: SqlStore, *, policy: Policy | None = None) -> None:
        self.store = store
        self._policy = policy

    @classmethod
    def open(cls, db: str | None = None, *, home: str | Path | None = None, blobs: str | Path | None = None, policy: Policy | None = None) -> Ledger:
        """Open (creating and migrating if needed) the ledger at ``db`` / ``home``.

        See :func:`contextledger.config.resolve_config` for how locations resolve.  A
        PostgreSQL ledger keeps its blobs in the database (shared by every process and
        host) unless ``blobs`` or ``CONTEXTLEDGER_BLOBS`` names a folder.

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
        return cls(store, policy=policy)

    def close(self) -> None:
        """Release database connections."""
        self.store.close()

    @property
    def policy(self) -> Policy:
        """The default policy of this ledger."""
        if self._policy is None:
            from contextledger.policy.loader import default_policy

            self._policy = default_policy()
        return self._policy

    def scope(self, tenant_id: str = DEFAULT_TENANT, *, user_id: str | None = None, agent_id: str | None = None) -> Scope:
        """A :class:`Scope` for ``tenant_id``."""
        return Scope(tenant_id=tenant_id, user_id=user_id, agent_id=agent_id)

    def recorder(self, scope: Scope | None = None) -> Recorder:
        """A :class:`~contextledger.ingest.recorder.Recorder` for ``scope`` (default tenant)."""
        from contextledger.ingest.recorder import Recorder

        return Recorder(self, scope or self.scope())

    # -- hooks used by the recorder ------------------------------------------------------
    def put_blob_if_large(self, raw: bytes) -> str | None:
        """Store ``raw`` in the blob store when it exceeds the inline threshold or is not
        UTF-8 text without NUL (binary payloads are never inlined, and no database can
        hold a NUL in text); return its key, else ``None`` (the payload stays inline in
        the artifact row)."""
        if len(raw) > self.store.inline_threshold_bytes or b"\x00" in raw:
            return self.store.blobs.put(raw)
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return self.store.blobs.put(raw)
        return None

    def derive_memory(self, artifact: ToolArtifact, raw_text: str, *, action_text: str | None = None) -> ToolMemory:
        """Derive the ToolMemory of an artifact with the default extractor registry."""
        from contextledger.memory.derive import derive_memory

        return derive_memory(artifact, raw_text, action_text=action_text)

    def link_new_memory(self, w: Writer, scope: Scope, memory: ToolMemory) -> None:
        """Link a new memory to earlier ones about the same subject (file staleness,
        supersession) inside the writer's transaction."""
        from contextledger.memory.linking import link_on_write

        link_on_write(self.store, w, scope, memory)

    def pin_constraints_from(self, scope: Scope, message: Message) -> int:
        """Pin the user constraints stated in ``message`` ("never …", "do not …") as rule
        records linked to it; returns how many were pinned."""
        from contextledger.policy.pinning import pin_user_constraints

        return pin_user_constraints(self.store, scope, message)

    # -- import, assemble, explain -------------------------------------------------------
    def import_file(self, path: str | Path, *, format: str = "auto", scope: Scope | None = None, trust_system_prompt: bool = True) -> ImportResult:
        """Parse and load one transcript file (one transaction; idempotent by content).

        Raises:
            ImportFormatError: the file is malformed (names file, line/record, reason).
        """
        from contextledger.ingest.loader import import_path

        return import_path(self, Path(path), format=format, scope=scope or self.scope(), trust_system_prompt=trust_system_prompt)

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
    ) -> AssemblyResult:
        """Assemble the context of the next model request and record it.

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

        Raises:
            NotFoundError: unknown conversation, branch or participant.
            InputError: unknown provider or replay mode, bad budget, naive ``now``.
        """
        from contextledger.assembly.assembler import Assembler

        return Assembler(self, policy or self.policy).assemble(
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
        )

    def compact(self, conversation_id: str, *, branch_id: str | None = None, keep_recent_units: int = 6, now: datetime | None = None, scope: Scope | None = None) -> Compaction:
        """Fold old history into one handoff message (seed 001 §10); the recent tail stays
        raw and every covered record stays rehydratable.  See
        :func:`contextledger.compaction.compact`.

        Raises:
            InputError: nothing to compact; HandoffError: a mandatory section is missing.
        """
        from contextledger.compaction import compact

        return compact(self, scope or self.scope(), conversation_id, branch_id=branch_id, keep_recent_units=keep_recent_units, now=now)

    def promote(self, record_id: str, *, to: Visibility, actor: str, reason: str, scope: Scope | None = None) -> PolicyDecision:
        """Widen a record's visibility (child → parent, private → branch, audit-only →
        visible), recorded as a promotion PolicyDecision with who and why in the same
        transaction (seed 000 §4.14).  See :func:`contextledger.graph.promotion.promote`.

        Raises:
            PromotionError: the visibility would not widen, or a child's run is not in a
                terminal state yet.
        """
        from contextledger.graph.promotion import promote

        return promote(self, scope or self.scope(), record_id, to=to, actor=actor, reason=reason)

    def resume_state(self, conversation_id: str, *, branch_id: str | None = None, participant_id: str | None = None, scope: Scope | None = None) -> ResumeState:
        """Runtime state to resume from, read from the newest ContinuationCheckpoint (never
        by searching the transcript).  See :func:`contextledger.graph.resume.resume_state`."""
        from contextledger.graph.resume import resume_state

        return resume_state(self, scope or self.scope(), conversation_id, branch_id=branch_id, participant_id=participant_id)

    def rehydrate(self, artifact_id: str, *, scope: Scope | None = None) -> bytes:
        """The exact raw bytes of an artifact, verified against its sha256.

        Raises:
            NotFoundError / IntegrityError.
        """
        return self.store.read_artifact_bytes(scope or self.scope(), artifact_id)

    def explain(self, assembly_id: str, *, record_id: str | None = None, scope: Scope | None = None) -> dict[str, Any]:
        """Why each record was included, shaped or omitted in an assembly."""
        from contextledger.explain import explain_assembly

        return explain_assembly(self, scope or self.scope(), assembly_id, record_id=record_id)

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

    def apply_retention(self, artifact_id: str, *, reason: str, actor: str = "retention", scope: Scope | None = None) -> None:
        """Delete an artifact's raw payload (retention, seed 000 §4.15): the row keeps its
        sha256, size and memory; the inline text and the blob (unless another artifact
        shares it) are removed; a retention PolicyDecision records who and why.  Later
        assemblies omit the raw payload with reason ``retention_deleted``."""
        import sqlalchemy as sa

        from contextledger.ids import new_id
        from contextledger.records.enums import PolicyFamily
        from contextledger.records.models import PolicyDecision
        from contextledger.store import schema as S

        scope = scope or self.scope()
        art = self.store.get_artifact(scope, artifact_id)
        now = datetime.now(UTC)
        mems = self.store.memories(scope, art.conversation_id, artifact_ids=[art.id])
        with self.store.writer(scope) as w:
            w.update_artifact(art.model_copy(update={"deleted_at": now, "inline_text": None}))
            for m in mems:
                # a derived memory may quote the payload: keep only metadata and provenance
                w.update_memory(m.model_copy(update={
                    "summary": f"{m.source_tool} {m.status.value}: payload deleted by retention ({art.size_bytes:,} bytes, {art.sha256[:19]})",
                    "payload": {"retention": "deleted", "size_bytes": art.size_bytes, "sha256": art.sha256},
                    "limits": f"payload deleted by retention: {reason}",
                }))
            w.conn.execute(S.tool_artifacts.update().where(S.tool_artifacts.c.id == art.id, S.tool_artifacts.c.tenant_id == scope.tenant_id).values(inline_text=None))
            w.add_decision(PolicyDecision(id=new_id("dec"), tenant_id=scope.tenant_id, conversation_id=art.conversation_id, family=PolicyFamily.RETENTION, decision="delete_payload", record_id=art.id, reason=reason, actor=actor, created_at=now))
            shared = 0
            if art.blob_key:
                t = S.tool_artifacts
                shared = int(w.conn.execute(sa.select(sa.func.count()).where(t.c.blob_key == art.blob_key, t.c.id != art.id, t.c.inline_text.is_(None))).scalar_one())
        if art.blob_key and not shared and hasattr(self.store.blobs, "delete"):
            self.store.blobs.delete(art.blob_key)

    def verify_provenance(self, conversation_id: str, *, scope: Scope | None = None) -> dict[str, list[str]]:
        """Re-derive the integrity of every memory's evidence (seed 000 §8 R4, §9.2).

        For each memory whose artifact is missing, retention-deleted or whose bytes no
        longer match the recorded sha256, a repair is attempted from the remaining
        evidence (another artifact with the same call id, tool and sha256); otherwise the
        memory is marked ``unverifiable`` — never given a fabricated substitute id.  Each
        attempt is counted on the memory and recorded as a PolicyDecision.

        Returns ``{"ok": [...], "repaired": [...], "unverifiable": [...]}`` (memory ids).
        """
        from contextledger.errors import IntegrityError, NotFoundError
        from contextledger.ids import new_id
        from contextledger.memory.links import repair_provenance
        from contextledger.records.enums import PolicyFamily
        from contextledger.records.models import PolicyDecision

        scope = scope or self.scope()
        arts = {a.id: a for a in self.store.artifacts(scope, conversation_id)}
        healthy: dict[str, bool] = {}

        def ok(artifact_id: str) -> bool:
            if artifact_id not in healthy:
                art = arts.get(artifact_id)
                try:
                    healthy[artifact_id] = art is not None and art.deleted_at is None and bool(self.store.read_artifact_bytes(scope, art))
                except (IntegrityError, NotFoundError):
                    healthy[artifact_id] = False
                healthy[artifact_id] = healthy[artifact_id] or (art is not None and art.size_bytes == 0 and art.deleted_at is None)
            return healthy[artifact_id]

        report: dict[str, list[str]] = {"ok": [], "repaired": [], "unverifiable": []}
        now = datetime.now(UTC)
        for mem in self.store.memories(scope, conversation_id):
            fixed, outcome = repair_provenance(mem, artifact_exists=lambda a: a in arts, artifact_hash_ok=ok, candidates=list(arts.values()))
            report[outcome].append(mem.id)
            if outcome == "ok":
                continue
            with self.store.writer(scope) as w:
                w.update_memory(fixed)
                w.add_decision(PolicyDecision(
                    id=new_id("dec"), tenant_id=scope.tenant_id, conversation_id=conversation_id, family=PolicyFamily.RETENTION,
                    decision=f"provenance_{outcome}", record_id=mem.id, reason=outcome, actor="verify_provenance",
                    detail={"repair_attempts": fixed.repair_attempts, "source_artifact_ids": list(fixed.source_artifact_ids)}, created_at=now,
                ))
        return report

    def participants_named(self, scope: Scope, conversation_id: str, names: Sequence[str]) -> list[str]:
        """Ids of the participants whose name or id is in ``names``."""
        wanted = set(names)
        return [p.id for p in self.store.participants(scope, conversation_id) if p.name in wanted or p.id in wanted]
