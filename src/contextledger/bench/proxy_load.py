"""The proxy under load: N service workers over PostgreSQL, concurrent agents on loopback.

``run_proxy_load`` starts a scripted upstream (:mod:`contextledger.server.scripted`, one
process) and ``contextledger serve --workers N`` over a fresh PostgreSQL database, then
drives ``agents`` concurrent agents for ``turns`` turns each (a turn: a user message, a
tool call, its result, a closing text — two model requests), once straight to the
upstream and once through the proxy, with the same bodies.  It reports throughput and the
latency the proxy adds (p50 / p99, and as ratios to the direct call), and checks the
ledger afterwards: every conversation, message, tool call and artifact exactly once, and
every request the upstream received valid under the provider's rules.

Needs the ``server`` and ``postgres`` extras.  A benchmark, not a test: its figures are
reported in ``docs/benchmark.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Passthroughs", "ProxyLoadReport", "passthrough_failure", "run_proxy_latency", "run_proxy_load"]

PASSTHROUGH_HEADER = "x-contextledger-passthrough"
ASSEMBLY_HEADER = "x-contextledger-assembly-id"

TOOLS = [{"type": "function", "function": {"name": "run", "description": "Run a shell command.", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]


@dataclass(kw_only=True)
class Passthroughs:
    """The proxied requests of a measured set that were not assembled: answered with
    ``x-contextledger-passthrough`` (forwarded as the client sent them) or without an
    ``x-contextledger-assembly-id``.  ``reasons``: the first few, as the header gives them."""

    requests: int = 0
    count: int = 0
    reasons: list[str] = field(default_factory=list)

    def note(self, headers: Any) -> None:
        """Count one proxied response by its ``headers`` (a case-insensitive mapping)."""
        self.requests += 1
        reason = headers.get(PASSTHROUGH_HEADER)
        if reason is None and headers.get(ASSEMBLY_HEADER) is None:
            reason = f"no {ASSEMBLY_HEADER} header"
        if reason is not None:
            self.count += 1
            if len(self.reasons) < 3:
                self.reasons.append(reason)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"requests": self.requests, "passthroughs": self.count, "reasons": list(self.reasons)}


@dataclass(kw_only=True)
class ProxyLoadReport:
    """What one load run measured (latencies in ms, throughput in requests/s)."""

    workers: int
    agents: int
    turns: int
    requests: int
    direct: dict[str, float]
    proxied: dict[str, float]
    added_ms: dict[str, float]
    ratios: dict[str, float]
    upstream_requests: int
    upstream_invalid: int
    conversations: int
    messages: int
    tool_calls: int
    artifacts: int
    expected: dict[str, int]
    lost_or_duplicated: int
    passthroughs: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 120.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the process exited with {proc.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout_s:.0f} s")


@contextlib.contextmanager
def _process(args: list[str], ready_url: str, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(args, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait(ready_url, proc)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def _database(admin_url: str) -> Iterator[str]:
    import psycopg

    name = f"bench_proxy_{uuid.uuid4().hex[:12]}"
    plain = admin_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type,unused-ignore]
    try:
        yield admin_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type,unused-ignore]


def _quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {"p50_ms": round(pick(0.5), 2), "p99_ms": round(pick(0.99), 2), "mean_ms": round(statistics.fmean(ordered), 2)}


async def _agent(client: Any, url: str, agent: int, turns: int, run: str, latencies: list[float], tally: Passthroughs | None) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a build agent."},
        {"role": "user", "content": f"[{run}] agent {agent}: keep the build green. Never force-push."},
    ]
    for turn in range(turns):
        if turn:
            messages.append({"role": "user", "content": f"Turn {turn}: run the next step."})
        for _ in range(2):
            body = {"model": "gpt-4o", "messages": messages, "tools": TOOLS}
            started = time.perf_counter()
            response = await client.post(url, json=body, headers={"authorization": "Bearer sk-bench"})
            latencies.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
            if tally is not None:
                tally.note(response.headers)
            message = response.json()["choices"][0]["message"]
            messages.append({k: v for k, v in message.items() if k in ("role", "content", "tool_calls")})
            for call in message.get("tool_calls") or []:
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": f"step {turn} of agent {agent}: ok\n" + "build log line\n" * 20})


async def _drive(url: str, agents: int, turns: int, run: str, tally: Passthroughs | None = None) -> tuple[list[float], float]:
    import httpx

    latencies: list[float] = []
    limits = httpx.Limits(max_connections=agents, max_keepalive_connections=agents)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        started = time.perf_counter()
        await asyncio.gather(*(_agent(client, url, a, turns, run, latencies, tally) for a in range(agents)))
        elapsed = time.perf_counter() - started
    return latencies, elapsed


def _ledger_counts(db_url: str, run: str) -> tuple[int, int, int, int]:
    from contextledger.ledger import Ledger

    with tempfile.TemporaryDirectory() as home:
        ledger = Ledger.open(db_url, home=home)
        try:
            scope = ledger.scope()
            convs = [c for c in ledger.store.list_conversations(scope) if run in c.conversation.title]
            return len(convs), sum(c.message_count for c in convs), sum(c.tool_call_count for c in convs), sum(c.artifact_count for c in convs)
        finally:
            ledger.close()


def run_proxy_load(*, pg_admin_url: str, workers: int = 4, agents: int = 32, turns: int = 50) -> ProxyLoadReport:
    """Run the load benchmark (see module docstring).

    Raises:
        RuntimeError: a process did not start, or a request failed.
    """
    import httpx

    up_port, proxy_port = _free_port(), _free_port()
    run = uuid.uuid4().hex[:8]
    upstream_args = [sys.executable, "-m", "uvicorn", "--factory", "contextledger.server.scripted:default_app", "--port", str(up_port), "--log-level", "warning"]
    with _database(pg_admin_url) as db_url, tempfile.TemporaryDirectory() as home, \
            _process(upstream_args, f"http://127.0.0.1:{up_port}/stats"):
        # the proxy's database is migrated before its workers start
        from contextledger.ledger import Ledger

        Ledger.open(db_url, home=home).close()
        direct, direct_s = asyncio.run(_drive(f"http://127.0.0.1:{up_port}/v1/chat/completions", agents, turns, run))
        serve_args = [sys.executable, "-m", "contextledger.cli.main", "--db", db_url, "--home", home, "serve", "--port", str(proxy_port),
                      "--workers", str(workers), "--openai-upstream", f"http://127.0.0.1:{up_port}/v1"]
        with _process(serve_args, f"http://127.0.0.1:{proxy_port}/healthz"):
            before = httpx.get(f"http://127.0.0.1:{up_port}/stats").json()
            tally = Passthroughs()
            proxied, proxied_s = asyncio.run(_drive(f"http://127.0.0.1:{proxy_port}/v1/chat/completions", agents, turns, run, tally))
            after = httpx.get(f"http://127.0.0.1:{up_port}/stats").json()
        counts = _ledger_counts(db_url, run)
    requests = agents * turns * 2
    expected = {"conversations": agents, "messages": agents * (1 + 4 * turns), "tool_calls": agents * turns, "artifacts": agents * turns}
    got = dict(zip(("conversations", "messages", "tool_calls", "artifacts"), counts, strict=True))
    d, p = _quantiles(direct), _quantiles(proxied)
    return ProxyLoadReport(
        workers=workers, agents=agents, turns=turns, requests=requests,
        direct={**d, "throughput_rps": round(requests / direct_s, 1)}, proxied={**p, "throughput_rps": round(requests / proxied_s, 1)},
        added_ms={"p50": round(p["p50_ms"] - d["p50_ms"], 2), "p99": round(p["p99_ms"] - d["p99_ms"], 2)},
        ratios={"p50": round(p["p50_ms"] / d["p50_ms"], 2), "p99": round(p["p99_ms"] / d["p99_ms"], 2), "throughput": round((requests / proxied_s) / (requests / direct_s), 3)},
        upstream_requests=int(after["requests"]) - int(before["requests"]), upstream_invalid=int(after["invalid"]) - int(before["invalid"]),
        expected=expected, lost_or_duplicated=sum(abs(got[k] - expected[k]) for k in expected),
        conversations=got["conversations"], messages=got["messages"], tool_calls=got["tool_calls"], artifacts=got["artifacts"],
        passthroughs=tally.as_dict(),
    )


async def _sequential(
    url: str, turns: int, *, headers: dict[str, str], delta: bool, tag: str, tally: Passthroughs | None = None
) -> tuple[list[float], dict[str, list[float]]]:
    """One agent, one request at a time: per-request latency (ms) and the service's
    ``Server-Timing`` parts when present; proxied responses counted in ``tally``."""
    import httpx

    latencies: list[float] = []
    parts: dict[str, list[float]] = {}
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are a data pipeline agent."}]
    async with httpx.AsyncClient(timeout=120) as client:
        for turn in range(turns):
            new: list[dict[str, Any]] = [{"role": "user", "content": f"[{tag}] turn {turn}: run the next step. Never drop a partition."}]
            for _ in range(2):
                messages = [history[0], *new] if delta else [*history, *new]
                started = time.perf_counter()
                response = await client.post(url, json={"model": "gpt-4o", "messages": messages, "tools": TOOLS}, headers={"authorization": "Bearer sk-bench", **headers})
                latencies.append((time.perf_counter() - started) * 1000)
                response.raise_for_status()
                if tally is not None:
                    tally.note(response.headers)
                for item in filter(None, response.headers.get("server-timing", "").split(",")):
                    name, _, dur = item.strip().partition(";dur=")
                    parts.setdefault(name, []).append(float(dur))
                message = response.json()["choices"][0]["message"]
                history += new
                new = [{k: v for k, v in message.items() if k in ("role", "content", "tool_calls")}]
                for call in message.get("tool_calls") or []:
                    new.append({"role": "tool", "tool_call_id": call["id"], "content": f"turn {turn}: 1,204 rows written\n" + "ok\n" * 20})
                if not message.get("tool_calls"):
                    history += new
                    break
    return latencies, parts


def run_proxy_latency(*, sizes: tuple[int, ...] = (0, 10_000), turns: int = 20) -> list[dict[str, Any]]:
    """The latency one sequential agent sees, straight to the scripted upstream and
    through one service worker (SQLite), in a fresh conversation (``0``: the client sends
    its whole history) and in a conversation already holding ``n`` recorded artifacts
    (the client names it and sends only new messages).  Each row's ``passthroughs``
    counts the measured requests that were not assembled (:class:`Passthroughs`)."""
    from contextledger.bench.scale import build_history
    from contextledger.ledger import Ledger

    rows: list[dict[str, Any]] = []
    up_port = _free_port()
    upstream_args = [sys.executable, "-m", "uvicorn", "--factory", "contextledger.server.scripted:default_app", "--port", str(up_port), "--log-level", "warning"]
    with _process(upstream_args, f"http://127.0.0.1:{up_port}/stats"):
        for n in sizes:
            with tempfile.TemporaryDirectory() as home:
                ledger = Ledger.open(home=home)
                conv_id = build_history(ledger, n)[0] if n else None
                ledger.close()
                headers = {"x-contextledger-conversation": conv_id, "x-contextledger-history": "delta"} if conv_id else {}
                direct, _ = asyncio.run(_sequential(f"http://127.0.0.1:{up_port}/v1/chat/completions", turns, headers={}, delta=bool(conv_id), tag="direct"))
                port = _free_port()
                serve_args = [sys.executable, "-m", "contextledger.cli.main", "--home", home, "serve", "--port", str(port), "--openai-upstream", f"http://127.0.0.1:{up_port}/v1"]
                with _process(serve_args, f"http://127.0.0.1:{port}/healthz"):
                    url = f"http://127.0.0.1:{port}/v1/chat/completions"
                    asyncio.run(_sequential(url, 2, headers=headers, delta=bool(conv_id), tag="warm-up"))
                    tally = Passthroughs()
                    proxied, parts = asyncio.run(_sequential(url, turns, headers=headers, delta=bool(conv_id), tag="measured", tally=tally))
            d, p = _quantiles(direct), _quantiles(proxied)
            rows.append({"recorded_artifacts": n, "requests": len(proxied), "direct": d, "proxied": p,
                         "added_ms": {"p50": round(p["p50_ms"] - d["p50_ms"], 2), "p99": round(p["p99_ms"] - d["p99_ms"], 2)},
                         "ratio_p50": round(p["p50_ms"] / d["p50_ms"], 2), "passthroughs": tally.as_dict(),
                         "server_timing_p50_ms": {k: round(statistics.median(v), 2) for k, v in parts.items()}})
    return rows


def passthrough_failure(report: dict[str, Any]) -> str | None:
    """One line naming the passthroughs of ``report``'s measured sets (the load run's
    ``passthroughs`` and each ``sequential`` row's), or ``None`` when every measured
    request was assembled — latency figures that mix in forwarded requests measure less
    than the proxy's work."""
    sets = [("load run", report.get("passthroughs") or {})]
    sets += [(f"sequential at {row['recorded_artifacts']:,} artifacts", row.get("passthroughs") or {}) for row in report.get("sequential", [])]
    total = sum(int(s.get("requests", 0)) for _, s in sets)
    bad = [(name, s) for name, s in sets if int(s.get("passthroughs", 0))]
    if not bad:
        return None
    count = sum(int(s["passthroughs"]) for _, s in bad)
    where = "; ".join(f"{name}: {s['passthroughs']} of {s['requests']}" for name, s in bad)
    first = next((r for _, s in bad for r in s.get("reasons", [])), "")
    return f"{count} of {total:,} measured proxied requests were not assembled ({where}); first reason: {first}"


def main() -> None:  # pragma: no cover - manual entry
    """``python -m contextledger.bench.proxy_load [PG_ADMIN_URL]`` prints the JSON report."""
    url = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CONTEXTLEDGER_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    print(json.dumps(run_proxy_load(pg_admin_url=url).as_dict(), indent=2))


if __name__ == "__main__":  # pragma: no cover
    main()
