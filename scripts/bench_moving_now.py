"""``python scripts/bench_moving_now.py N``: assembly latency on the coding history with a
moving ``now``, before and after the aged-text split, in one process.

The coding history of ``N`` artifacts (``bench.scale.build_shape``) is recorded into a
temporary SQLite ledger; then four blocks, each of three modes — a fixed ``now``; ``now``
moving 67 s a request with whole texts re-tokenised (``tokens.aged_split`` disabled, the
behaviour before); ``now`` moving with the split — of 12 requests (2 warm-ups) after
clearing the token-count cache.  Prints JSON: per mode p50/p95 ms and the median number
of characters handed to the BPE encoder per request (deterministic, unlike wall times
on a shared machine).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

os.environ["CONTEXTLEDGER_EMBEDDINGS"] = "off"

import contextledger.tokens as tokens_module
from contextledger.bench.scale import build_shape, scale_now
from contextledger.ledger import Ledger

STEP_S = 67
BLOCKS = 4
PER_BLOCK = 12
WARM_UP = 2


def main(n: int) -> dict[str, Any]:
    """Run the measurement on a history of ``n`` artifacts (module docstring)."""
    tmp = tempfile.mkdtemp(prefix="cl-moving-now-")
    ledger = Ledger.open(f"sqlite:///{tmp}/ledger.db", blobs=Path(tmp) / "blobs")
    t0 = time.time()
    conv, _ = build_shape(ledger, n, "coding")
    build_s = time.time() - t0
    now = scale_now(n, "coding")
    tok = tokens_module.get_tokenizer()
    enc = tok._enc
    encoded = [0]
    original_encode = type(enc).encode

    def counting_encode(text: str, **kw: Any) -> list[int]:
        encoded[0] += len(text)
        return original_encode(enc, text, **kw)

    enc.encode = counting_encode  # type: ignore[method-assign]
    split = tokens_module.aged_split
    times: dict[str, list[float]] = {"fixed": [], "whole": [], "split": []}
    chars: dict[str, list[int]] = {"fixed": [], "whole": [], "split": []}
    offset = 0
    for _ in range(BLOCKS):
        for mode in times:
            tokens_module.aged_split = split if mode != "whole" else (lambda _text: None)
            tok.count.cache_clear()
            for k in range(PER_BLOCK):
                at = now if mode == "fixed" else now + timedelta(seconds=offset)
                offset += STEP_S
                encoded[0] = 0
                s = time.perf_counter()
                ledger.assemble(conv, provider="openai-chat", budget_tokens=4000, now=at, persist=False, replay="estimate")
                if k >= WARM_UP:
                    times[mode].append((time.perf_counter() - s) * 1000)
                    chars[mode].append(encoded[0])
    tokens_module.aged_split = split
    ledger.close()
    out: dict[str, Any] = {"artifacts": n, "build_s": round(build_s, 1)}
    for mode, ts in times.items():
        ts.sort()
        out[mode] = {
            "p50_ms": round(statistics.median(ts), 2), "p95_ms": round(ts[int(len(ts) * 0.95)], 2),
            "encoded_chars_per_request_median": int(statistics.median(chars[mode])), "requests": len(ts),
        }
    return out


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10000), indent=1))
