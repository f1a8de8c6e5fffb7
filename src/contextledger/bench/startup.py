"""``contextledger bench startup``: the CLI's start-up wall time against a bare interpreter.

Each command runs as a fresh process (the same Python as the running one, output
discarded), ``runs`` times, the commands interleaved so a load change on a shared machine
hits them alike; reported per command: median and minimum wall seconds and the median as
a multiple of ``python -c pass``.  The ledger is an empty one in a temporary folder,
opened (created and migrated) once before the timed runs, as a user's existing ledger is.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["StartupRow", "run_startup", "startup_markdown"]


@dataclass(frozen=True)
class StartupRow:
    """One command's wall times (seconds) over the runs."""

    command: str
    median_s: float
    min_s: float
    runs: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"command": self.command, "median_s": round(self.median_s, 4), "min_s": round(self.min_s, 4), "runs": self.runs}


def _commands(home: Path) -> list[tuple[str, list[str]]]:
    cli = [sys.executable, "-m", "contextledger.cli.main"]
    return [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("contextledger --help", [*cli, "--help"]),
        ("contextledger conversations (empty ledger)", [*cli, "--home", str(home), "conversations"]),
    ]


def run_startup(runs: int = 10) -> list[StartupRow]:
    """Time every command ``runs`` times, interleaved (module docstring).

    Raises:
        RuntimeError: a command exits non-zero (its stderr's last line is named).
    """
    with tempfile.TemporaryDirectory(prefix="cl-bench-startup-") as tmp:
        home = Path(tmp) / "home"
        cmds = _commands(home)
        # create and migrate the ledger (conversations never creates one)
        subprocess.run([sys.executable, "-c", f"from contextledger.ledger import Ledger; Ledger.open(home={str(home)!r}).close()"], capture_output=True, check=True)
        times: dict[str, list[float]] = {name: [] for name, _ in cmds}
        for _ in range(runs):
            for name, argv in cmds:
                t0 = time.perf_counter()
                done = subprocess.run(argv, capture_output=True, check=False)
                times[name].append(time.perf_counter() - t0)
                if done.returncode != 0:
                    last = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
                    raise RuntimeError(f"{name} exited {done.returncode}: {last[0]}")
    return [StartupRow(name, statistics.median(ts), min(ts), len(ts)) for name, ts in times.items()]


def startup_markdown(rows: list[StartupRow]) -> str:
    """The Markdown table of :func:`run_startup`'s rows (× the bare interpreter's median)."""
    base = rows[0].median_s
    lines = ["| command | median s | min s | × `python -c pass` |", "|---|---:|---:|---:|"]
    lines += [f"| {r.command} | {r.median_s:.3f} | {r.min_s:.3f} | {r.median_s / base:.1f} |" for r in rows]
    return "\n".join(lines) + "\n"
