"""Scenario fixtures: a runtime graph built through the public recording API, plus probes.

A :class:`Scenario` builds one case into a :class:`~contextledger.ledger.Ledger` at a
history multiplier ``scale`` (1, 10, 100) and returns a :class:`BuiltCase`: where and for
whom to assemble (conversation, branch, participant, provider, budget, ``now``) and the
``must_see`` / ``must_not_see`` facts (issue "Prove it"; seed 000 §9.1–9.2, seed 001 §5).

Sizing (seed 000 §9.1 reports replays of 961–1,986 tokens): at ``scale=1`` every
scenario's replay request is 900–2,100 tokens; each seed scenario's replay is its
:data:`SEED_REPLAY_TOKENS` figure up to ~1 % above it (``Script.filler(..., fit=True)``).  At ``scale=k`` the scenario records
``(k - 1) × history_tokens`` extra tokens of older, completed, unrelated tool work
(:meth:`Script.filler`), so its history is about ``k`` times as long while the facts that
matter stay the same.

Determinism: every timestamp the assembler reads (``observed_at``) comes from the
script's clock, which starts at :data:`T0`; ``now`` is fixed per scenario; filler text
comes from a seeded generator.  Building the same scenario twice gives the same graph
(up to generated record ids).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from contextledger.bench.probes import Fact
from contextledger.ledger import Ledger
from contextledger.records.enums import PrivacyClass, RuntimeKind, Visibility
from contextledger.records.models import Message
from contextledger.tokens import get_tokenizer

__all__ = ["SEED_BUDGET_SHARE", "SEED_REPLAY_TOKENS", "T0", "BuiltCase", "Scenario", "Script", "filler_tokens", "seed_budget"]

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
"""Start of every scenario's clock (a Monday, 09:00 UTC)."""


SEED_REPLAY_TOKENS: dict[str, int] = {"seed-1": 1020, "seed-2": 1905, "seed-3": 1051, "seed-4": 1008, "seed-5": 961, "seed-6": 1986}
"""Replay sizes seed 000 §9.1 reports per scenario (tokens); each seed scenario is sized
to about this at 1× and uses it as its per-scale history length."""

SEED_BUDGET_SHARE = 0.10
"""A seed scenario's budget is this share of the seed's replay size: the seed reports
82.2–90.1 % reduction, so a 90 % target leaves at most 10 % of the replay."""


def seed_budget(name: str) -> int:
    """The token budget of seed scenario ``name``: ``round(0.10 × SEED_REPLAY_TOKENS[name])``.

    Raises:
        KeyError: not a seed scenario.
    """
    return round(SEED_BUDGET_SHARE * SEED_REPLAY_TOKENS[name])


@dataclass(frozen=True, kw_only=True)
class BuiltCase:
    """One recorded case, ready to assemble and probe.

    Attributes:
        conversation_id / branch_id / participant_id: the generation boundary
            (``None`` = active branch / default participant).
        provider: ``"openai-chat"`` or ``"anthropic"``.
        budget_tokens: the token budget given to every strategy (o200k tokens).
        now: the fixed evaluation time.
        must_see / must_not_see: the probes.
    """

    conversation_id: str
    branch_id: str | None
    participant_id: str | None
    provider: str
    budget_tokens: int
    now: datetime
    must_see: tuple[Fact, ...]
    must_not_see: tuple[Fact, ...]


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """A named case of the suite.

    Attributes:
        name: stable id used in reports (``seed-1`` … ``seed-6``, ``coding-walkthrough`` …).
        title: one line for tables.
        source: the article section it comes from.
        seed_scenario: ``True`` for the six scenarios of seed 000 §9.1 (≥ 90 % reduction
            required).
        build: ``build(ledger, scale) -> BuiltCase``.
    """

    name: str
    title: str
    source: str
    seed_scenario: bool
    build: Callable[[Ledger, int], BuiltCase]


def filler_tokens(scale: int, base: int, history: int) -> int:
    """Tokens of filler history at ``scale``: ``base`` at 1×, plus ``(scale - 1) × history``.

    ``history`` is the scenario's approximate 1× replay size in tokens.

    Raises:
        ValueError: ``scale < 1``.
    """
    if scale < 1:
        raise ValueError(f"scale must be >= 1, got {scale}")
    return base + (scale - 1) * history


_WORDS = (
    "release", "notes", "pipeline", "cache", "invoice", "quota", "region", "latency", "ticket",
    "backlog", "vendor", "renewal", "staging", "metrics", "dashboard", "alert", "rollout",
    "checklist", "archive", "template", "schedule", "summary", "budget", "forecast", "draft",
    "review", "policy", "export", "import", "mapping", "index", "shard", "replica", "queue",
    "worker", "batch", "window", "retention", "audit", "owner", "team", "milestone", "roadmap",
    "glossary", "onboarding", "handbook", "survey", "feedback", "pricing", "tier", "contract",
)


_MIN_LISTING_COST = 40
"""Estimated cost (tokens, as :meth:`Script.filler` counts) of a one-line listing exchange."""


@dataclass
class Script:
    """A thin, deterministic driver over :class:`~contextledger.ingest.recorder.Recorder`.

    Call ids are ``call_001``, ``call_002`` …; the clock advances one minute per recorded
    tool result unless told otherwise.
    """

    ledger: Ledger
    title: str
    system_prompt: str
    seed: str
    runtime_kind: RuntimeKind = RuntimeKind.CHAT
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rec = self.ledger.recorder()
        self.conv = self.rec.start_conversation(title=self.title, system_prompt=self.system_prompt, metadata=self.metadata, runtime_kind=self.runtime_kind)
        self.clock = T0
        self._calls = 0
        self._rng = random.Random(self.seed)
        self.last_artifact_id = ""

    @property
    def id(self) -> str:
        """The conversation id."""
        return self.conv.id

    def tick(self, minutes: float = 1) -> datetime:
        """Advance the clock by ``minutes`` and return it."""
        self.clock = self.clock + timedelta(minutes=minutes)
        return self.clock

    def next_call_id(self) -> str:
        """A fresh call id (``call_NNN``)."""
        self._calls += 1
        return f"call_{self._calls:03d}"

    def user(self, text: str, **kw: Any) -> Message:
        """Record a user message."""
        return self.rec.record_message(self.id, "user", text, **kw)

    def say(self, text: str, **kw: Any) -> Message:
        """Record an assistant text turn (no tool calls)."""
        msg, _ = self.rec.record_assistant(self.id, text=text, **kw)
        return msg

    def call(
        self,
        tool: str,
        args: Mapping[str, Any],
        result: str | None = None,
        *,
        text: str = "",
        is_error: bool = False,
        privacy: PrivacyClass = PrivacyClass.INTERNAL,
        visibility: Visibility | None = None,
        participant_id: str | None = None,
        branch_id: str | None = None,
        speaker_label: str | None = None,
        observed_at: datetime | None = None,
        call_id: str | None = None,
    ) -> str:
        """Record one assistant tool call and (unless ``result`` is ``None``) its result.

        ``visibility=None`` keeps the recorder's default (branch; participant-private run
        state of an isolated participant; audit-only for a child subagent).  Returns the
        call id.  A call left without a result stays pending.
        """
        cid = call_id or self.next_call_id()
        self.rec.record_assistant(
            self.id, text=text, tool_calls=[{"call_id": cid, "tool_name": tool, "arguments": dict(args)}],
            branch_id=branch_id, participant_id=participant_id, speaker_label=speaker_label, visibility=visibility,
        )
        if result is not None:
            self.result(cid, result, is_error=is_error, privacy=privacy, visibility=visibility, observed_at=observed_at)
        return cid

    def parallel(self, calls: Sequence[tuple[str, Mapping[str, Any], str]], *, text: str = "", participant_id: str | None = None) -> list[str]:
        """Record one assistant turn with several calls, then each result in call order."""
        ids = [self.next_call_id() for _ in calls]
        self.rec.record_assistant(
            self.id, text=text, participant_id=participant_id,
            tool_calls=[{"call_id": cid, "tool_name": tool, "arguments": dict(args)} for cid, (tool, args, _) in zip(ids, calls, strict=True)],
        )
        for cid, (_, _, result) in zip(ids, calls, strict=True):
            self.result(cid, result)
        return ids

    def result(
        self,
        call_id: str,
        result: str,
        *,
        is_error: bool = False,
        privacy: PrivacyClass = PrivacyClass.INTERNAL,
        visibility: Visibility | None = None,
        observed_at: datetime | None = None,
    ) -> str:
        """Record the result of an earlier call (advances the clock one minute); returns
        the new artifact id (also kept in :attr:`last_artifact_id`)."""
        when = observed_at or self.tick()
        _, art, _ = self.rec.record_tool_result(self.id, call_id, result, is_error=is_error, privacy_class=privacy, visibility=visibility, observed_at=when)
        self.last_artifact_id = art.id
        return art.id

    # -- filler --------------------------------------------------------------------------
    def _sentence(self, n: int) -> str:
        return " ".join(self._rng.choice(_WORDS) for _ in range(n)).capitalize() + "."

    def _filler_exchange(self, k: int) -> tuple[str, dict[str, Any], str]:
        kind = k % 3
        if kind == 0:
            q = " ".join(self._rng.choice(_WORDS) for _ in range(3))
            hits = [
                {"id": f"doc-{self._rng.randint(1000, 9999)}", "title": self._sentence(4), "snippet": self._sentence(18)}
                for _ in range(4)
            ]
            return "search_docs", {"query": q}, json.dumps({"query": q, "hits": hits}, ensure_ascii=False)
        if kind == 1:
            return self._listing(22)
        ticket = f"OPS-{self._rng.randint(100, 999)}"
        body = {
            "status": 200,
            "ticket": ticket,
            "state": self._rng.choice(("closed", "resolved", "done")),
            "comments": [{"author": f"user{self._rng.randint(1, 40)}", "text": self._sentence(16)} for _ in range(3)],
        }
        return "http_get", {"url": f"https://tracker.example.com/api/{ticket}"}, json.dumps(body, ensure_ascii=False)

    def _listing(self, lines: int) -> tuple[str, dict[str, Any], str]:
        folder = f"archive/{self._rng.choice(_WORDS)}"
        rows = [f"{self._rng.choice(_WORDS)}_{self._rng.randint(10, 99)}.md\t{self._rng.randint(200, 90000)} bytes" for _ in range(lines)]
        return "list_dir", {"path": folder}, "\n".join(rows)

    def filler(self, tokens: int, *, participant_id: str | None = None, branch_id: str | None = None, fit: bool = False) -> int:
        """Record completed, unrelated tool work until about ``tokens`` tokens of history
        were added (older housekeeping the current task does not depend on).

        By default the last exchange may overshoot ``tokens`` by up to one exchange
        (~100–200 tokens).  ``fit=True`` stops before an exchange that would leave less
        than one short listing's worth of room and records a directory listing sized to
        the remainder instead (one listing line is ~9 tokens), so the history can be sized
        to within ~10 tokens — the seed scenarios use it to match seed 000 §9.1's replay
        sizes.

        Returns the number of exchanges recorded.
        """
        tok = get_tokenizer()

        def cost(args: Mapping[str, Any], result: str) -> int:
            return tok.count(result) + tok.count(json.dumps(args)) + 20

        added = 0
        k = 0
        while added < tokens:
            tool, args, result = self._filler_exchange(k)
            if fit and added + cost(args, result) + _MIN_LISTING_COST > tokens:
                # the last exchange: a listing sized to the remainder (never a gap
                # smaller than one exchange that nothing could fill)
                tool, args, result = self._listing(48)
                rows = result.split("\n")
                while rows and added + cost(args, "\n".join(rows)) > tokens:
                    rows.pop()
                if rows:
                    self.call(tool, args, "\n".join(rows), participant_id=participant_id, branch_id=branch_id)
                    k += 1
                break
            self.call(tool, args, result, participant_id=participant_id, branch_id=branch_id)
            added += cost(args, result)
            k += 1
            if k % 4 == 0:
                note = f"Housekeeping step {k} done; nothing further needed there."
                self.say(note, participant_id=participant_id, branch_id=branch_id)
                added += tok.count(note) + 4
        return k
