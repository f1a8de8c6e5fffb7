"""Payload fingerprints: the sha256 of every payload of a fixed set of assemblies.

A change that should not change what the model sees (a refactoring, a faster read, a new
cache) is checked by assembling the same requests before and after it and comparing the
payloads byte for byte.  The *fingerprint set* is:

* every scenario of the suite (:func:`~contextledger.bench.scenarios.all_scenarios`) at
  1× and 10× history, at its own budget, ``now`` and generation boundary;
* every supported real transcript of the data folder
  (:func:`~contextledger.bench.real.real_files`) at 4,000 and 16,000 tokens, at its
  default ``now`` (the time of its newest record);
* each of them for every provider of :data:`~contextledger.providers.registry.PROVIDERS`.

The ledgers are built once (:func:`build_ledgers`) into a folder with a
``manifest.json`` naming each assembly target; :func:`fingerprint` assembles every
target (not persisted, so the databases stay as built) and returns
``{key: {"sha256", "tokens", "decisions"}}`` with keys
``<case>|<scale or budget>|<provider>`` (``decisions``: the hash of the record's omission
summary, selected refs, buckets, rule conflicts and per-record trace, so a change of
what is explained shows too); :func:`compare` lists the differences between two such
maps.  Payloads name records by handles (``m12``, ``a12``: :mod:`contextledger.handles`),
never by random ids, so payloads no longer depend on the ids a build drew (the real
transcripts give the same payloads on every build: ``tests/test_import_determinism.py``).  Fingerprints taken before handles (payloads quoting
``mem_…`` / ``art_…`` ids) differ from any taken after: rebuild the reference.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = [
    "FINGERPRINT_BUDGETS",
    "FINGERPRINT_SCALES",
    "Target",
    "build_ledgers",
    "compare",
    "fingerprint",
    "payload_sha256",
]

FINGERPRINT_SCALES = (1, 10)
"""History multipliers of the scenarios in the fingerprint set."""

FINGERPRINT_BUDGETS = (4000, 16000)
"""Budgets (tokens) of the real transcripts in the fingerprint set."""

MANIFEST = "manifest.json"

Progress = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class Target:
    """One assembly of the set (without its provider).

    ``home`` is the ledger folder relative to the set's root; ``label`` the case name
    and its scale (``seed-1@10``) or budget (``swe-agent/x.traj@4000``); ``now`` an ISO
    time or ``None`` (the conversation's default); ``error`` the import failure of a
    source-defective file (no assembly).
    """

    label: str
    home: str
    conversation_id: str = ""
    branch_id: str | None = None
    participant_id: str | None = None
    budget_tokens: int = 0
    now: str | None = None
    error: str | None = None


def payload_sha256(payload: dict[str, Any]) -> str:
    """``sha256:<hex>`` of a payload's canonical JSON (sorted keys, UTF-8)."""
    data = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return "sha256:" + hashlib.sha256(data).hexdigest()


def build_ledgers(
    root: Path,
    *,
    real_root: Path | None,
    scales: Sequence[int] = FINGERPRINT_SCALES,
    budgets: Sequence[int] = FINGERPRINT_BUDGETS,
    scenario_names: Sequence[str] | None = None,
    match: str | None = None,
    progress: Progress | None = None,
) -> list[Target]:
    """Build the ledgers of the fingerprint set under ``root`` (which must not hold a
    manifest yet) and write ``root/manifest.json``; returns the targets.

    Scenarios get one SQLite ledger each (``scenarios/<name>-<scale>``); the real
    transcripts (``real_root``, skipped when ``None``) share one (``real``).  A file that
    fails to import is kept as a target with ``error`` set.

    Raises:
        FileExistsError: ``root`` already holds a manifest.
    """
    from contextledger.bench.real import real_files
    from contextledger.bench.scenarios import all_scenarios, get_scenario
    from contextledger.errors import ContextLedgerError
    from contextledger.ledger import Ledger

    if (root / MANIFEST).exists():
        raise FileExistsError(f"{root / MANIFEST} exists: the set is built already")
    root.mkdir(parents=True, exist_ok=True)
    targets: list[Target] = []
    scenarios = [get_scenario(n) for n in scenario_names] if scenario_names else list(all_scenarios())
    for sc in scenarios:
        for scale in scales:
            home = f"scenarios/{sc.name}-{scale}"
            if progress:
                progress(f"build {home}")
            ledger = Ledger.open(home=root / home)
            try:
                b = sc.build(ledger, scale)
            finally:
                ledger.close()
            targets.append(Target(
                label=f"{sc.name}@{scale}", home=home, conversation_id=b.conversation_id, branch_id=b.branch_id,
                participant_id=b.participant_id, budget_tokens=b.budget_tokens, now=b.now.isoformat(),
            ))
    if real_root is not None:
        ledger = Ledger.open(home=root / "real")
        try:
            for f in real_files(real_root, match=match):
                if progress:
                    progress(f"import {f.rel}")
                try:
                    conv_id = ledger.import_file(f.path).conversation_id
                except ContextLedgerError as exc:
                    targets.extend(Target(label=f"{f.rel}@{b}", home="real", error=f"{type(exc).__name__}: {exc}") for b in budgets)
                    continue
                targets.extend(Target(label=f"{f.rel}@{b}", home="real", conversation_id=conv_id, budget_tokens=b) for b in budgets)
        finally:
            ledger.close()
    (root / MANIFEST).write_text(json.dumps([asdict(t) for t in targets], indent=1) + "\n", encoding="utf-8")
    return targets


def load_targets(root: Path) -> list[Target]:
    """The targets of the set built under ``root``.

    Raises:
        FileNotFoundError: no manifest (build the set first).
    """
    return [Target(**t) for t in json.loads((root / MANIFEST).read_text(encoding="utf-8"))]


def fingerprint(
    root: Path,
    *,
    providers: Sequence[str] | None = None,
    match: str | None = None,
    progress: Progress | None = None,
) -> dict[str, dict[str, Any]]:
    """Assemble every target of the set under ``root`` for every provider (default: all
    of :data:`~contextledger.providers.registry.PROVIDERS`) and return
    ``{"<label>|<provider>": {"sha256": …, "tokens": n}}`` in a stable key order
    (``{"error": …}`` for a target that failed to import or to assemble).  Nothing is
    written to the ledgers.

    Raises:
        FileNotFoundError: no manifest under ``root``.
    """
    from contextledger.errors import ContextLedgerError
    from contextledger.ledger import Ledger
    from contextledger.providers.registry import PROVIDERS

    out: dict[str, dict[str, Any]] = {}
    ledgers: dict[str, Ledger] = {}
    try:
        for t in load_targets(root):
            if match and match not in t.label:
                continue
            if progress:
                progress(t.label)
            for provider in providers or PROVIDERS:
                key = f"{t.label}|{provider}"
                if t.error is not None:
                    out[key] = {"error": t.error}
                    continue
                ledger = ledgers.get(t.home)
                if ledger is None:
                    ledger = ledgers[t.home] = Ledger.open(home=root / t.home)
                try:
                    res = ledger.assemble(
                        t.conversation_id, branch_id=t.branch_id, participant_id=t.participant_id, provider=provider,
                        budget_tokens=t.budget_tokens, now=datetime.fromisoformat(t.now) if t.now else None,
                        persist=False, replay="estimate", trace=True,
                    )
                except ContextLedgerError as exc:
                    out[key] = {"error": f"{type(exc).__name__}: {exc}"}
                    continue
                r = res.record
                explained = {"omitted": r.omitted, "selected": r.selected_refs, "buckets": r.buckets, "conflicts": r.rule_conflicts, "trace": r.trace}
                out[key] = {"sha256": payload_sha256(res.payload), "tokens": r.assembled_tokens, "decisions": payload_sha256(explained)}
    finally:
        for ledger in ledgers.values():
            ledger.close()
    return dict(sorted(out.items()))


def compare(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> list[str]:
    """One line per difference between two fingerprint maps: a key only in one of them,
    a payload (or error) that changed, with the token counts, or — when both maps have
    them — decisions that changed under the same payload."""
    lines: list[str] = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a is None:
            lines.append(f"added    {key}")
        elif b is None:
            lines.append(f"missing  {key}")
        elif (a.get("sha256"), a.get("error")) != (b.get("sha256"), b.get("error")):
            lines.append(f"changed  {key}: {a.get('tokens', a.get('error'))} -> {b.get('tokens', b.get('error'))} tokens")
        elif "decisions" in a and "decisions" in b and a["decisions"] != b["decisions"]:
            lines.append(f"decided  {key}: same payload, other decisions")
    return lines
