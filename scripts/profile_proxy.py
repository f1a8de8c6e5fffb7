"""Profile one service worker under ``bench proxy``'s sequential agent (delta mode) in a
conversation holding N recorded artifacts: where the proxy's time per request goes.

    python scripts/profile_proxy.py [N] [TURNS] [OUT.prof]

Starts the scripted upstream, records the history (``bench scale``'s pipeline shape),
runs ``contextledger serve`` under ``cProfile``, drives TURNS turns (two requests each)
after a two-turn warm-up, stops the service with SIGINT (so the profile is written) and
prints the top functions by cumulative and by own time, with the passthrough count.
"""

from __future__ import annotations

import asyncio
import pstats
import signal
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> None:
    from contextledger.bench.proxy_load import (
        Passthroughs,
        _free_port,
        _process,
        _sequential,
        _wait,
    )
    from contextledger.bench.scale import build_history
    from contextledger.ledger import Ledger

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    turns = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    out = Path(sys.argv[3]) if len(sys.argv) > 3 else Path(tempfile.gettempdir()) / "proxy.prof"
    up_port, port = _free_port(), _free_port()
    upstream = [sys.executable, "-m", "uvicorn", "--factory", "contextledger.server.scripted:default_app", "--port", str(up_port), "--log-level", "warning"]
    with _process(upstream, f"http://127.0.0.1:{up_port}/stats"), tempfile.TemporaryDirectory() as home:
        ledger = Ledger.open(home=home)
        conv_id = build_history(ledger, n)[0]
        ledger.close()
        serve = [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "contextledger.cli.main", "--home", home, "serve",
                 "--port", str(port), "--openai-upstream", f"http://127.0.0.1:{up_port}/v1"]
        proc = subprocess.Popen(serve, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _wait(f"http://127.0.0.1:{port}/healthz", proc)
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            headers = {"x-contextledger-conversation": conv_id, "x-contextledger-history": "delta"}
            asyncio.run(_sequential(url, 2, headers=headers, delta=True, tag="warm-up"))
            tally = Passthroughs()
            latencies, parts = asyncio.run(_sequential(url, turns, headers=headers, delta=True, tag="measured", tally=tally))
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=120)
    latencies.sort()
    print(f"{len(latencies)} requests at {n:,} artifacts: p50 {latencies[len(latencies) // 2]:.1f} ms; passthroughs {tally.as_dict()}")
    print({k: round(sorted(v)[len(v) // 2], 2) for k, v in parts.items()})
    stats = pstats.Stats(str(out))
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
