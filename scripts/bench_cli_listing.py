"""CLI start-up on a ledger of about 10^4 artifacts: ``--help``, ``conversations`` and
``conversations --json``, each a fresh process, RUNS runs, median wall and CPU seconds.

    python scripts/bench_cli_listing.py [HOME] [RUNS]

HOME (default: a temporary folder) gets the ledger when it has none: 8 conversations of
100 tool exchanges recorded through the batched recorder, then copied at the SQL level
(every id suffixed) 12 times: 104 conversations with exchanges (+13 without), 10,400
artifacts, 21,034 messages.  The copies carry no retrieval documents (a listing never
reads them).  CPU is the children's user + system time (``resource.getrusage``).
"""

from __future__ import annotations

import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONVERSATIONS, EXCHANGES, COPIES = 8, 100, 12


def build(home: Path) -> None:
    """Record the base conversations, then copy them (module docstring)."""
    from contextledger.ingest.batch import Exchange, record_exchanges
    from contextledger.ledger import Ledger

    led = Ledger.open(home=home)
    rec = led.recorder()
    for c in range(CONVERSATIONS):
        conv = rec.start_conversation(title=f"task {c}: fix the failing test in module_{c}.py", system_prompt="You are a coding agent.")
        rec.record_message(conv.id, "user", f"Fix the failing test in module_{c}.py.")
        record_exchanges(rec, conv.id, [
            Exchange(call_id=f"c{c}_{i}", tool_name="Bash", arguments={"command": f"cat module_{c}/file_{i}.py"}, result=f"line {i}\n" * 20)
            for i in range(EXCHANGES)
        ])
    rec.start_conversation(title="an empty conversation")
    led.close()
    conn = sqlite3.connect(home / "ledger.db", isolation_level=None)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'retrieval_%'")]
    columns = {t: [r[1] for r in conn.execute(f"PRAGMA table_info('{t}')")] for t in tables}
    convs = [r[0] for r in conn.execute("SELECT id FROM conversations")]
    conn.execute("BEGIN")
    for k in range(1, COPIES + 1):
        suffix = f"x{k}"
        for t in tables:
            cols = columns[t]
            key = "id" if t == "conversations" else "conversation_id" if "conversation_id" in cols else None
            if key is None:
                continue
            for conv in convs:
                rows = []
                for row in conn.execute(f"SELECT * FROM {t} WHERE {key} = ?", (conv,)).fetchall():
                    rows.append([
                        v + suffix if isinstance(v, str) and (name == "id" or (name.endswith("_id") and name not in ("tenant_id", "user_id")))
                        else v.replace(conv, conv + suffix) if isinstance(v, str) and name == "body" else v
                        for name, v in zip(cols, row, strict=True)
                    ])
                if rows:
                    conn.executemany(f"INSERT INTO {t} ({','.join(cols)}) VALUES ({','.join('?' * len(cols))})", rows)
    conn.execute("COMMIT")
    conn.close()


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``argv`` (output discarded)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    home = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="cl-cli-listing-"))
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    if not (home / "ledger.db").exists():
        build(home)
    with sqlite3.connect(f"file:{home / 'ledger.db'}?mode=ro", uri=True) as conn:
        n_conv, n_art = (conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("conversations", "tool_artifacts"))
    cli = [sys.executable, "-m", "contextledger.cli.main"]
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "contextledger --help": [*cli, "--help"],
        "contextledger conversations": [*cli, "--home", str(home), "conversations"],
        "contextledger conversations --json": [*cli, "--home", str(home), "conversations", "--json"],
    }
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(runs):  # interleaved, so a load change hits every command alike
        for name, argv in commands.items():
            times[name].append(timed(argv))
    print(f"ledger: {home} ({n_conv:,} conversations, {n_art:,} artifacts); {runs} runs each, medians")
    print("| command | wall s | CPU s | wall min s |")
    print("|---|---:|---:|---:|")
    for name, ts in times.items():
        print(f"| {name} | {statistics.median(w for w, _ in ts):.3f} | {statistics.median(c for _, c in ts):.3f} | {min(w for w, _ in ts):.3f} |")


if __name__ == "__main__":
    main()
