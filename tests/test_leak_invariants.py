"""Leak invariants over random graphs: tenants, sibling branches, participants with
private state, unpromoted child subagents, restricted privacy classes, secrets and
retention-deleted payloads.  Every forbidden record carries a canary string; no canary
may reach any viewer's payload, explanation or search result.

Graph ``seed`` is recorded into one ledger per backend (SQLite, PostgreSQL) and assembled
for every viewer (each participant, the branch, both providers), explained and searched.
Recording and assembling cost tens of milliseconds each, so the suite checks
``CONTEXTLEDGER_LEAK_GRAPHS`` graphs (default 12) per backend
(``CONTEXTLEDGER_LEAK_GRAPHS_POSTGRESQL`` for another count there) in
``CONTEXTLEDGER_LEAK_SHARDS`` shards (default 1; ``make fuzz`` checks 10,000 graphs in
shards that pytest-xdist spreads over the cores).  Shard ``k`` of ``n`` checks the seeds
``k, k + n, k + 2n, …``: every graph of a run is different and every run is the same."""

from __future__ import annotations

import json
import os
import random
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import _admin_exec
from contextledger.ledger import Ledger
from contextledger.records.enums import (
    PrivacyClass,
    RuntimeIsolationPolicy,
    RuntimeKind,
    Visibility,
)
from contextledger.retrieval import search
from contextledger.security.crypto import Keyring

GRAPHS = int(os.environ.get("CONTEXTLEDGER_LEAK_GRAPHS", "12"))
GRAPHS_BY_DIALECT = {"sqlite": GRAPHS, "postgresql": int(os.environ.get("CONTEXTLEDGER_LEAK_GRAPHS_POSTGRESQL", str(GRAPHS)))}
SHARDS = max(1, int(os.environ.get("CONTEXTLEDGER_LEAK_SHARDS", "1")))
WORK = Path(tempfile.mkdtemp(prefix="cl-leak-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def led(request: pytest.FixtureRequest) -> Iterator[Ledger]:
    """One ledger per backend for the module's graphs (they never share a tenant)."""
    if request.param == "sqlite":
        url = f"sqlite:///{WORK / 'leak.db'}"
        ledger = Ledger.open(url, blobs=WORK / "blobs", keys=Keyring((("k", bytes(32)),)))
        try:
            yield ledger
        finally:
            ledger.close()
        return
    admin = request.getfixturevalue("pg_admin")
    name = f"test_leak_{uuid.uuid4().hex[:12]}"
    _admin_exec(admin, f'CREATE DATABASE "{name}"')
    ledger = Ledger.open(f"{admin.rsplit('/', 1)[0]}/{name}", blobs=WORK / f"blobs-{name}", keys=Keyring((("k", bytes(32)),)))
    try:
        yield ledger
    finally:
        ledger.close()
        _admin_exec(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _exchange(rec: object, conv: str, n: str, text: str, *, participant: str | None = None, branch: str | None = None, **result: object) -> None:
    rec.record_assistant(conv, text="checking", tool_calls=[{"call_id": f"c{n}", "tool_name": "Bash", "arguments": {"command": f"step {n}"}}], participant_id=participant, branch_id=branch)  # type: ignore[attr-defined]
    rec.record_tool_result(conv, f"c{n}", text, **result)  # type: ignore[attr-defined]


def _graph(led: Ledger, seed: int) -> tuple[str, list[str | None], set[str], dict[str | None, set[str]]]:
    """Record one random graph; returns (conversation, viewers, canaries forbidden to
    everyone, canaries forbidden per viewer)."""
    rnd = random.Random(seed)
    tag = f"{seed:x}"
    forbidden: set[str] = set()
    # another tenant's conversation
    other = led.recorder(led.scope(f"other-{tag}"))
    oc = other.start_conversation(title="other")
    other.record_message(oc.id, "user", f"LEAKTENANT{tag} do not cross")
    forbidden.add(f"LEAKTENANT{tag}")

    rec = led.recorder(led.scope(f"t-{tag}"))
    conv = rec.start_conversation(title="graph", system_prompt="You are a test agent.")
    p1 = rec.add_participant(conv.id, "alpha", runtime_kind=RuntimeKind.MULTI_MODEL, isolation_policy=RuntimeIsolationPolicy.PARTICIPANT)
    p2 = rec.add_participant(conv.id, "beta", runtime_kind=RuntimeKind.MULTI_MODEL, isolation_policy=RuntimeIsolationPolicy.PARTICIPANT)
    child = rec.add_participant(conv.id, "child", runtime_kind=RuntimeKind.SUBAGENT_CHILD, parent_participant_id=p1.id, isolation_policy=RuntimeIsolationPolicy.CHILD_AUDIT_ONLY)
    first = rec.record_message(conv.id, "user", f"task {tag}: fix the build")
    per_viewer: dict[str | None, set[str]] = {p1.id: set(), p2.id: set(), None: set()}
    steps = list(range(rnd.randint(3, 7)))
    rnd.shuffle(steps)
    for k, kind in enumerate(rnd.choice(["private", "child", "secret", "restricted", "deleted", "promoted", "filler"]) for _ in steps):
        n = f"{tag}x{k}"
        if kind == "private":
            owner, other_p = (p1, p2) if rnd.random() < 0.5 else (p2, p1)
            _exchange(rec, conv.id, n, f"LEAKPRIV{n} private to {owner.name}", participant=owner.id, visibility=Visibility.PARTICIPANT_PRIVATE)
            per_viewer[other_p.id].add(f"LEAKPRIV{n}")
            per_viewer[None].add(f"LEAKPRIV{n}")
        elif kind == "child":
            _exchange(rec, conv.id, n, f"LEAKCHILD{n} child workspace", participant=child.id)
            forbidden.add(f"LEAKCHILD{n}")
        elif kind == "secret":
            key = "".join(rnd.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16))
            _exchange(rec, conv.id, n, f"export AWS_ACCESS_KEY_ID=AKIA{key}\nok")
            forbidden.add(f"AKIA{key}")
        elif kind == "promoted":
            # one of the owner's private results is promoted to the branch: it may be seen,
            # its private sibling still may not
            owner, other_p = (p1, p2) if rnd.random() < 0.5 else (p2, p1)
            _exchange(rec, conv.id, n, f"PROMOTED{n} shared by {owner.name}", participant=owner.id, visibility=Visibility.PARTICIPANT_PRIVATE)
            art = led.store.artifacts(led.scope(f"t-{tag}"), conv.id, call_ids=[f"c{n}"])[0]
            led.promote(art.id, to=Visibility.BRANCH, actor="lead", reason="share", scope=led.scope(f"t-{tag}"))
            _exchange(rec, conv.id, n + "p", f"LEAKPRIV{n}p still private to {owner.name}", participant=owner.id, visibility=Visibility.PARTICIPANT_PRIVATE)
            per_viewer[other_p.id].add(f"LEAKPRIV{n}p")
            per_viewer[None].add(f"LEAKPRIV{n}p")
        elif kind == "restricted":
            _exchange(rec, conv.id, n, f"LEAKGOOGLE{n} mailbox contents", privacy_class=PrivacyClass.GOOGLE_USER_DATA)
            forbidden.add(f"LEAKGOOGLE{n}")
        elif kind == "deleted":
            _exchange(rec, conv.id, n, f"LEAKDELETED{n} " + "payload " * rnd.randint(1, 900))
            art = led.store.artifacts(led.scope(f"t-{tag}"), conv.id, call_ids=[f"c{n}"])[0]
            led.apply_retention(art.id, reason="test", scope=led.scope(f"t-{tag}"))
            forbidden.add(f"LEAKDELETED{n}")
        else:
            _exchange(rec, conv.id, n, f"filler {n}")
    # a sibling branch forked at the task: its records never reach the main branch
    sibling = rec.fork(conv.id, first.id, name="sibling", activate=False)
    rec.record_message(conv.id, "user", f"LEAKSIBLING{tag} other branch", branch_id=sibling.id)
    forbidden.add(f"LEAKSIBLING{tag}")
    rec.record_message(conv.id, "user", "status?")
    return conv.id, [p1.id, p2.id, None], forbidden, per_viewer


@pytest.mark.parametrize("shard", range(SHARDS))
def test_no_forbidden_record_reaches_any_viewer(led: Ledger, shard: int) -> None:
    allowed_seen = 0
    seeds = range(shard, GRAPHS_BY_DIALECT[led.store.dialect], SHARDS)
    if not seeds:
        pytest.skip(f"shard {shard} of {SHARDS} has no graph: {GRAPHS_BY_DIALECT[led.store.dialect]} on {led.store.dialect}")
    for seed in seeds:
        conv, viewers, forbidden, per_viewer = _graph(led, seed)
        scope = led.scope(f"t-{seed:x}")
        for i, viewer in enumerate(viewers):
            provider = ("openai-chat", "anthropic")[(seed + i) % 2]
            res = led.assemble(conv, participant_id=viewer, provider=provider, budget_tokens=random.Random(seed + i).choice([600, 2000, 8000]), scope=scope, trace=True)
            seen = json.dumps(res.payload, ensure_ascii=False) + json.dumps(led.explain(res.record.id, scope=scope), ensure_ascii=False)
            # search: every canary as the query, the viewer's recall never shows it
            hits = search(led, scope, conv, " ".join(sorted(forbidden | per_viewer[viewer])), participant_id=viewer, provider=provider, encoder=None)
            seen += json.dumps([h.text for h in hits.hits], ensure_ascii=False)
            for canary in forbidden | per_viewer[viewer]:
                assert canary not in seen, f"graph seed {seed}: {canary} reached viewer {viewer} ({provider})"
            allowed_seen += seen.count("PROMOTED") + seen.count("filler ")
    # the payloads carry what may be seen (promoted results, fillers): the check has teeth
    assert allowed_seen > 0
