"""Profile one service worker under ``bench proxy``'s sequential agent (delta mode) in a
conversation holding N recorded artifacts: where the proxy's time per request goes.

    python scripts/profile_proxy.py [N] [TURNS] [OUT.prof] [HISTORY_DIR]

Starts the scripted upstream, records the history (``bench scale``'s pipeline shape),
runs ``contextledger serve`` under ``cProfile`` (one profiler per thread, merged: the
assembly runs in the worker threads), drives TURNS turns (two requests each)
after a two-turn warm-up, stops the service with SIGINT (so the profile is written) and
prints the top functions by cumulative and by own time, with the passthrough count.
With ``HISTORY_DIR`` the recorded history is kept there (built on the first run) and each
run profiles a fresh copy of it, so runs of two code versions can alternate on the same
history.  Set ``CONTEXTLEDGER_EMBEDDINGS=off`` to build without vectors (minutes instead
of hours on a shared machine).
"""

from __future__ import annotations

import asyncio
import pstats
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path


def _serve_profiled(out: str, argv: list[str]) -> None:
    """Run the CLI with ``argv`` under one ``cProfile`` profiler per thread (the main
    thread's and every thread started later), merged into ``out`` at exit."""
    import cProfile
    import runpy
    import threading

    profiles = [cProfile.Profile()]
    lock = threading.Lock()

    def start(frame: object, event: str, arg: object) -> None:
        p = cProfile.Profile()
        with lock:
            profiles.append(p)
        p.enable()

    threading.setprofile(start)
    sys.argv = ["contextledger", *argv]
    profiles[0].enable()
    try:
        runpy.run_module("contextledger.cli.main", run_name="__main__")
    except SystemExit:
        pass
    finally:
        profiles[0].disable()
        with lock:
            merged = pstats.Stats(profiles[0])
            for p in profiles[1:]:
                p.create_stats()
                if p.stats:  # type: ignore[attr-defined]
                    merged.add(p)
        merged.dump_stats(out)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--serve-profiled":
        _serve_profiled(sys.argv[2], sys.argv[3:])
        return
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
    kept = Path(sys.argv[4]) if len(sys.argv) > 4 else None
    up_port, port = _free_port(), _free_port()
    upstream = [sys.executable, "-m", "uvicorn", "--factory", "contextledger.server.scripted:default_app", "--port", str(up_port), "--log-level", "warning"]
    with _process(upstream, f"http://127.0.0.1:{up_port}/stats"), tempfile.TemporaryDirectory() as home:
        if kept is not None and (kept / "conversation").is_file():
            shutil.copytree(kept, home, dirs_exist_ok=True)
            conv_id = (kept / "conversation").read_text().strip()
        else:
            ledger = Ledger.open(home=home)
            conv_id = build_history(ledger, n)[0]
            ledger.close()
            if kept is not None:
                shutil.copytree(home, kept, dirs_exist_ok=True)
                (kept / "conversation").write_text(conv_id)
        serve = [sys.executable, __file__, "--serve-profiled", str(out), "--home", home, "serve",
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
