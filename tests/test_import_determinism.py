"""Two imports of one transcript give the same assembly (issue 12, "Deterministic imports").

Every supported real transcript of ``../shared/data/real`` (``CONTEXTLEDGER_REAL_DATA``)
is imported into two fresh ledgers, on SQLite and on PostgreSQL, and assembled once in
each at one budget, the default ``now`` (the newest record's time) and the bundled
policy: the payloads must be byte-identical and the selections equal.  Record ids are
random, so a selected record is compared by its place in the transcript (``seq``, or the
call id of a tool call); the payload is compared as it is — it quotes no id, only handles
(``m12``, ``a12``, :mod:`contextledger.handles`).  Handles are also checked to be unique per
conversation.  The slowest test of the suite (every real file imported twice per backend).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import sqlalchemy as sa

from contextledger.bench.real import real_files
from contextledger.ledger import Ledger
from contextledger.store import schema as S

BUDGET = 4000
_ID = re.compile(r"\b(?:mem|art)_[0-9A-HJKMNP-TV-Z]{26}\b")


def _places(led: Ledger, conversation_id: str) -> dict[str, str]:
    """Record id → its place in the transcript (``<table>@<seq>``, ``call@<call id>``)."""
    out: dict[str, str] = {}
    with led.store.reader() as conn:
        for t in (S.messages, S.tool_artifacts, S.tool_memories, S.skill_states, S.checkpoints, S.rules):
            rows = conn.execute(sa.select(t.c.id, t.c.seq).where(t.c.conversation_id == conversation_id))
            out.update({str(r.id): f"{t.name}@{r.seq}" for r in rows})
        rows = conn.execute(sa.select(S.tool_calls.c.id, S.tool_calls.c.call_id).where(S.tool_calls.c.conversation_id == conversation_id))
        out.update({str(r.id): f"call@{r.call_id}" for r in rows})
    return out


def _handles_unique(led: Ledger, conversation_id: str) -> None:
    """At most one artifact and one memory per ``seq`` in the conversation."""
    with led.store.reader() as conn:
        for t in (S.tool_artifacts, S.tool_memories):
            seqs = Counter(int(r[0]) for r in conn.execute(sa.select(t.c.seq).where(t.c.conversation_id == conversation_id)))
            assert [s for s, n in seqs.items() if n > 1] == [], f"{t.name}: two records share a handle"


def _assemble_all(url: str, blobs: Path, root: Path) -> dict[str, tuple[str, tuple[str, ...], dict[str, int], int]]:
    """``{file: (payload JSON, selection by place, omitted, tokens)}`` of one fresh ledger."""
    out = {}
    led = Ledger.open(url, blobs=blobs)
    try:
        for f in real_files(root):
            try:
                conv = led.import_file(f.path).conversation_id
            except Exception as exc:  # a source-defective file fails the same way twice
                out[f.rel] = (f"error: {type(exc).__name__}: {exc}", (), {}, 0)
                continue
            _handles_unique(led, conv)
            res = led.assemble(conv, budget_tokens=BUDGET, persist=False)
            places = _places(led, conv)
            selection = tuple(places.get(r, r) for r in res.record.selected_refs)
            out[f.rel] = (json.dumps(res.payload, sort_keys=True, ensure_ascii=False), selection, dict(res.record.omitted), res.record.assembled_tokens)
    finally:
        led.close()
    return out


def _difference(rel: str, a: tuple[str, tuple[str, ...], dict[str, int], int], b: tuple[str, tuple[str, ...], dict[str, int], int]) -> str:
    """One line saying how the two assemblies of ``rel`` differ."""
    what = [name for name, x, y in (("payload", a[0], b[0]), ("selection", a[1], b[1]), ("omitted", a[2], b[2])) if x != y]
    only = sorted(set(a[1]) ^ set(b[1]))[:4]
    return f"{rel}: {a[3]} vs {b[3]} tokens; differs in {', '.join(what)}" + (f" (e.g. {only})" if only else "")


def _compare(first: dict[str, tuple[str, tuple[str, ...], dict[str, int], int]], second: dict[str, tuple[str, tuple[str, ...], dict[str, int], int]]) -> None:
    assert list(first) == list(second)
    differ = [_difference(rel, first[rel], second[rel]) for rel in first if first[rel] != second[rel]]
    assert differ == [], f"{len(differ)} of {len(first)} real transcripts assemble differently on a second import"
    # the payloads quote handles, never a random id
    quoted = {rel for rel, (p, *_) in first.items() if not p.startswith("error:") and _ID.search(p)}
    assert quoted == set(), "payloads quoting a random memory or artifact id"


def test_two_imports_give_the_same_assembly_on_sqlite(real_data: Path, tmp_path: Path) -> None:
    a = _assemble_all(f"sqlite:///{tmp_path / 'a.db'}", tmp_path / "blobs-a", real_data)
    b = _assemble_all(f"sqlite:///{tmp_path / 'b.db'}", tmp_path / "blobs-b", real_data)
    _compare(a, b)
