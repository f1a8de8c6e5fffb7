"""A reusable harness for hostile-input property runs (importers, the recorder API, any
request parser): inputs generated and mutated from real seeds, one rule to check.

A parser survives when every input either parses or raises one of the expected error
types (contextledger's clear errors); any other exception is a failure whose example
hypothesis shrinks and prints.  Per-example cost is what bounds the counts, so seeds are
small (the head of each real file) and the work per example is parse-only; heavier
checks (loading into a ledger) run on a sample.

Counts: ``CONTEXTLEDGER_FUZZ_EXAMPLES`` inputs per importer (default 2,000, so the nine
importers fit the suite's time budget on two cores; ``CONTEXTLEDGER_FUZZ_EXAMPLES=10000``
for the long run) scales every run; other runs take a share of it.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

__all__ = ["HOSTILE_STRINGS", "INPUTS_PER_EXAMPLE", "examples", "fuzz_settings", "hostile_text", "inputs", "make_input", "real_seeds", "survives"]

HOSTILE_STRINGS = [
    "", "\x00", "\ud800", "\udfff x", "a\x00b\ud83d", "😀" * 50, "\u202e\u2066", "\r\n\r", "{" * 300, "[" * 5000 + "]" * 5000,
    '{"a":' * 150 + "1" + "}" * 150, "x" * 70000, "AKIA2E0A8F3B244C9986", "password = 'hunter2hunter2'", "'; DROP TABLE messages; --",
    "<script>alert(1)</script>", "%s%s%n", "\\u0000\\ud800", "NaN", "-Infinity", "1e999999",
]
"""Texts that broke (or could break) storage, parsing, counting or printing."""


def examples(default: int = 2_000, share: float = 1.0, *, per_example: int = 1) -> int:
    """How many hypothesis examples make ``CONTEXTLEDGER_FUZZ_EXAMPLES`` (or ``default``)
    inputs, times ``share``, when each example carries ``per_example`` inputs (at least 20)."""
    base = int(os.environ.get("CONTEXTLEDGER_FUZZ_EXAMPLES", default))
    return max(20, int(base * share) // per_example)


def fuzz_settings(n: int) -> Any:
    """Hypothesis settings for a long, deterministic, deadline-free run of ``n`` examples."""
    return settings(
        max_examples=n, deadline=None, derandomize=True, database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture],
    )


def real_seeds(root: Path, formats: Sequence[str], *, max_bytes: int = 1500, per_format: int = 6) -> list[bytes]:
    """Heads of real transcripts (whole lines, at most ``max_bytes``; a JSON document is
    kept whole when small enough, else truncated as a corruption seed)."""
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    seeds: list[bytes] = []
    for fmt in formats:
        entries = sorted((e for e in manifest if e["format"] == fmt), key=lambda e: e["bytes"])[:per_format]
        for e in entries:
            data = (root / e["path"]).read_bytes()
            if len(data) > max_bytes:
                cut = data.rfind(b"\n", 0, max_bytes)
                data = data[: cut + 1] if cut > 0 else data[:max_bytes]
            seeds.append(data)
    return seeds


def _mutate(data: bytes, rnd: random.Random) -> bytes:
    """One to four byte- and line-level edits: flip, insert hostile text, delete, duplicate
    or splice a range, truncate, swap lines."""
    buf = bytearray(data)
    for _ in range(rnd.randint(1, 4)):
        op = rnd.randrange(7)
        n = len(buf)
        i = rnd.randrange(n + 1)
        j = min(n, i + rnd.randint(0, 64))
        if op == 0 and n:
            buf[min(i, n - 1)] = rnd.randrange(256)
        elif op == 1:
            buf[i:i] = rnd.choice(HOSTILE_STRINGS).encode("utf-8", "surrogatepass")
        elif op == 2:
            del buf[i:j]
        elif op == 3:
            buf[i:i] = buf[i:j] * rnd.randint(1, 3)
        elif op == 4:
            buf = buf[:i]
        elif op == 5:
            lines = bytes(buf).split(b"\n")
            rnd.shuffle(lines)
            buf = bytearray(b"\n".join(lines))
        else:
            buf[i:j] = json.dumps(rnd.choice(HOSTILE_STRINGS)).encode()
    return bytes(buf)


_KEYS = ["role", "content", "type", "message", "tool_calls", "id", "name", "arguments", "uuid", "parentUuid", "trajectory", "history", "messages", "text", "tool_use_id", "input"]


def _json_value(rnd: random.Random, depth: int = 0) -> Any:
    r = rnd.random()
    if depth >= 4 or r < 0.45:
        return rnd.choice([None, True, False, rnd.randint(-(2**70), 2**70), rnd.random() * 1e6, rnd.choice(HOSTILE_STRINGS), "".join(chr(rnd.randrange(0x20, 0x2FFF)) for _ in range(rnd.randrange(12)))])
    if r < 0.7:
        return [_json_value(rnd, depth + 1) for _ in range(rnd.randrange(5))]
    return {rnd.choice(_KEYS): _json_value(rnd, depth + 1) for _ in range(rnd.randrange(5))}


def make_input(seed: int, seeds: Sequence[bytes]) -> bytes:
    """The input of one example, a pure function of ``seed``: a real seed as it is, a
    mutated seed, a generated JSON document, or generated JSON Lines."""
    rnd = random.Random(seed)
    r = rnd.random()
    if r < 0.1:
        return rnd.choice(list(seeds))
    if r < 0.8:
        return _mutate(rnd.choice(list(seeds)), rnd)
    if r < 0.9:
        return json.dumps(_json_value(rnd)).encode()
    return b"\n".join(json.dumps(_json_value(rnd)).encode() for _ in range(rnd.randint(1, 4)))


INPUTS_PER_EXAMPLE = 10
"""Inputs one hypothesis example carries: hypothesis's own cost is paid once per batch."""


def inputs(seeds: Sequence[bytes]) -> st.SearchStrategy[list[bytes]]:
    """A batch of :data:`INPUTS_PER_EXAMPLE` inputs, each built by :func:`make_input` from
    an integer drawn once per example (a failure prints the batch; each input is a pure
    function of the drawn seed, so it reproduces)."""
    return st.integers(min_value=0, max_value=2**60).map(lambda seed: [make_input(seed * INPUTS_PER_EXAMPLE + k, seeds) for k in range(INPUTS_PER_EXAMPLE)])


def hostile_text() -> st.SearchStrategy[str]:
    """Text for recorder calls: hostile strings, arbitrary code points (surrogates
    included) and their concatenations, from one drawn integer."""

    def build(seed: int) -> str:
        rnd = random.Random(seed)
        r = rnd.random()
        if r < 0.4:
            return rnd.choice(HOSTILE_STRINGS)
        if r < 0.7:
            return "".join(chr(rnd.randrange(0, 0x10FFFF)) for _ in range(rnd.randrange(30)))
        return "".join(rnd.choice(HOSTILE_STRINGS) for _ in range(rnd.randrange(4)))

    return st.integers(min_value=0, max_value=2**63).map(build)


def survives(call: Callable[[], Any], expected: tuple[type[BaseException], ...]) -> BaseException | None:
    """Run ``call``; return the expected error it raised (``None`` on success).  Any other
    exception propagates, so hypothesis reports it with its shrunk input."""
    try:
        call()
    except expected as exc:
        return exc
    return None
