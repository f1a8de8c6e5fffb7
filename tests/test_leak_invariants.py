"""Leak invariants over random graphs: tenants, sibling branches, participants with
private state, unpromoted child subagents, restricted privacy classes, secrets and
retention-deleted payloads.  Every forbidden record carries a canary string; no canary
may reach any viewer's payload, explanation or search result.

One graph per example is recorded into one shared SQLite ledger and assembled for every
viewer (each participant, the branch, both providers).  Recording and assembling cost
tens of milliseconds each, so the default run is ``CONTEXTLEDGER_LEAK_GRAPHS`` (12) graphs;
raise it for a long run (README "Security")."""

from __future__ import annotations

import json
import os
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextledger.ledger import Ledger
from contextledger.records.enums import (
    PrivacyClass,
    RuntimeIsolationPolicy,
    RuntimeKind,
    Visibility,
)
from contextledger.retrieval import search
from contextledger.security.crypto import Keyring
from fuzzing import fuzz_settings

GRAPHS = int(os.environ.get("CONTEXTLEDGER_LEAK_GRAPHS", "12"))
WORK = Path(tempfile.mkdtemp(prefix="cl-leak-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))


@pytest.fixture(scope="module")
def led() -> Iterator[Ledger]:
    ledger = Ledger.open(f"sqlite:///{WORK / 'leak.db'}", blobs=WORK / "blobs", keys=Keyring((("k", bytes(32)),)))
    try:
        yield ledger
    finally:
        ledger.close()


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
    for k, kind in enumerate(rnd.choice(["private", "child", "secret", "restricted", "deleted", "filler"]) for _ in steps):
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


def test_no_forbidden_record_reaches_any_viewer(led: Ledger) -> None:
    @fuzz_settings(GRAPHS)
    @given(seed=st.integers(min_value=0, max_value=2**48))
    def run(seed: int) -> None:
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
                assert canary not in seen, (viewer, canary)

    run()
