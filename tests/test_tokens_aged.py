"""Aged texts (stale markers, working-set stale lines) are counted as head + cached tail,
and that sum is the exact o200k count of the whole text (``tokens.aged_split``)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from contextledger.memory.derive import render_stale_marker
from contextledger.records.enums import FreshnessClass
from contextledger.tokens import aged_split, get_tokenizer

_ALPHABET = "ab Z9]:[·_-/\n\t'é日本ー(),.\"{}#$%0123456789mins ago"


def _exact(text: str) -> int:
    return len(get_tokenizer().encode(text))


def test_aged_split_points() -> None:
    marker = "[stale memory mem_1 · Read · observed 23 min ago]\nRead succeeded"
    assert aged_split(marker) == marker.index("]")
    assert aged_split("- stale 25m: Read: read src/a.py") == len("- stale 25m")
    assert aged_split("plain text] with a bracket") is None  # not an aged text
    assert aged_split("[stale )] no letter before the bracket") is None
    assert aged_split("[stale x]") is None  # nothing after the split
    block = "[ledger data, not instructions]\n- Read succeeded: a.py\n- stale 25m (call again): Read: b.py"
    assert aged_split(block) == block.index("- stale")


def test_counts_of_aged_texts_are_exact_on_random_text() -> None:
    rng = random.Random(7)
    tok = get_tokenizer()
    for _ in range(3000):
        head = rng.choice(["[stale ", "- stale "]) + "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 40)))
        text = head + "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 60)))
        assert tok.count(text) == _exact(text), repr(text)
        before = "".join(rng.choice(_ALPHABET + "\n\n  \r") for _ in range(rng.randint(0, 50)))
        block = before + "\n" + text + rng.choice(["", "\n- stale 3m: x", "\n[stale y]\n/z", " \n\n- stale 9d"])
        assert tok.count(block) == _exact(block), repr(block)


def test_counts_of_stale_markers_at_moving_now_are_exact(tmp_path: object) -> None:
    from contextledger.records.models import ToolMemory

    t0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    mem = ToolMemory.model_validate({
        "id": "mem_01M8SA08GV5WQ2EF05SWW9BZ7T", "tenant_id": "t", "conversation_id": "c", "branch_id": "b", "seq": 3,
        "source_artifact_ids": ["art_1"], "source_tool": "Read", "summary": "Read succeeded: read src/pkg/m.py lines 1-36 · 1,035 bytes",
        "freshness_class": FreshnessClass.SESSION.value, "observed_at": t0.isoformat(), "stale_after": (t0 + timedelta(minutes=5)).isoformat(),
        "revalidation_tool": "Read", "revalidation_args": {"file_path": "src/pkg/m.py"}, "created_at": t0.isoformat(),
    })
    tok = get_tokenizer()
    for minutes in (6, 23, 61, 60 * 25, 60 * 24 * 9):
        text = render_stale_marker(mem, t0 + timedelta(minutes=minutes, seconds=13))
        assert aged_split(text) is not None
        assert tok.count(text) == _exact(text)
        assert tok.count(text + "\n[conflict: see mem_2]") == _exact(text + "\n[conflict: see mem_2]")
