"""``bench cost``: what a session costs after prompt caching, replayed turn by turn.

Each main-thread model call of a session (:mod:`contextledger.bench.cost_sessions`) is a
request.  Strategies, side by side, each priced with
:func:`~contextledger.providers.cost.conversation_cost` over the bodies of its requests
(Anthropic caching rules; the session's model priced from the shipped table):

* ``replay`` — the client's own bodies: Claude Code's fixed prefix (system + tools), the
  transcript up to the call, Claude Code's breakpoint on the last block.
* ``contextledger`` at each budget — the same client bodies sent, in order, through the
  real proxy (``contextledger serve``'s app on a loopback port, a fresh ledger per session
  and budget, every turn recorded and assembled with persistence, so state kept between
  requests applies), answered by a local upstream that returns the transcript's own
  answer; priced is the body the upstream received.  The budget is the context beside the
  fixed prefix: the proxy is given ``budget + fixed prefix tokens``.
* each peer strategy at each budget — the peer reduces the naive replay request of the
  turn (the proxy ledger's lineage up to the call) and its messages are sent with the same
  fixed prefix and a breakpoint on the last block, as its client would; its token
  budget is, like the proxy's, ``budget + fixed prefix tokens``.

Per strategy and session: requests, input tokens, cache read / write / uncached tokens,
USD, ratio to replay, must-see recall (mean over the probed turns — every
``probe_every``-th call — of :func:`~contextledger.bench.probes.check_probes` with the
facts :func:`~contextledger.bench.real.derive_probes` finds in the history before the
call), the exact-extension ratio (successive requests whose blocks extend the previous
request's blocks unchanged), the turns per prefix break (transitions / non-extensions;
all transitions when none breaks)
and, when the assembly records carry an ``epoch``, the turns per epoch.
"""

from __future__ import annotations

import copy
import itertools
import json
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contextledger.bench.cost_sessions import ModelCall, client_body, fixed_prefix
from contextledger.bench.probes import Fact, check_probes
from contextledger.providers.cost import (
    RequestCost,
    conversation_cost,
    request_blocks,
    total_cost,
    usage_cost,
)

if TYPE_CHECKING:
    from contextledger.bench.strategies import Strategy

__all__ = ["DEFAULT_BUDGETS", "CostRow", "Session", "cost_markdown", "cost_report", "run_cost", "session_tools"]

DEFAULT_BUDGETS = (8000, 32000)
"""Context budgets of the cost run (tokens beside the fixed prefix)."""
Progress = Callable[[int], None]


@dataclass(frozen=True)
class Session:
    """A named sequence of model calls."""

    name: str
    calls: tuple[ModelCall, ...]


@dataclass(kw_only=True)
class CostRow:
    """One strategy × session (× budget) result; fields in the module docstring.
    ``budget`` is 0 for replay; ``recorded_usd`` (replay) the cost of the ``usage`` the
    transcript kept, output included, when every call has one."""

    session: str
    strategy: str
    budget: int
    requests: int
    tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    uncached_tokens: int
    usd: float
    vs_replay: float
    must_see_recall: float | None
    probed_turns: int
    extension_ratio: float | None
    turns_per_break: float | None
    turns_per_epoch: float | None = None
    model: str = ""
    price: str = ""
    recorded_usd: float | None = None
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (errors capped at 5)."""
        data = asdict(self)
        data["errors"] = data["errors"][:5]
        return data


def session_tools(calls: Sequence[ModelCall]) -> list[dict[str, Any]]:
    """Definitions for the tools a session calls that the fixed prefix does not declare
    (a minimal schema each, sorted by name), so every request declares what it uses."""
    _, _, tools = fixed_prefix()
    known = {t["name"] for t in tools}
    used = {b.get("name") for c in calls for b in c.answer["content"] if b.get("type") == "tool_use"}
    return [{"name": n, "description": f"The {n} tool.", "input_schema": {"type": "object", "properties": {}}} for n in sorted(u for u in used if isinstance(u, str) and u not in known)]


def _extension(bodies: Sequence[dict[str, Any]]) -> tuple[float | None, float | None]:
    """``(exact-extension ratio, turns per prefix break)`` of successive bodies."""
    keys = [[b.key for b in request_blocks("anthropic", body)] for body in bodies]
    transitions = len(keys) - 1
    if transitions <= 0:
        return None, None
    extended = sum(1 for a, b in itertools.pairwise(keys) if b[: len(a)] == a)
    breaks = transitions - extended
    return round(extended / transitions, 4), round(transitions / breaks, 2) if breaks else float(transitions)


def _row(session: Session, strategy: str, budget: int, bodies: list[dict[str, Any]], recall: list[float], replay_usd: float | None) -> CostRow:
    model = session.calls[0].model if session.calls else ""
    costs: list[RequestCost] = conversation_cost("anthropic", bodies, model=model)
    sums = total_cost(costs)
    ratio, per_break = _extension(bodies)
    usd = float(sums["usd"])
    return CostRow(
        session=session.name, strategy=strategy, budget=budget, requests=len(bodies), tokens=sums["total_tokens"],
        cache_read_tokens=sums["cache_read_tokens"], cache_write_tokens=sums["cache_write_tokens"], uncached_tokens=sums["uncached_tokens"],
        usd=round(usd, 6), vs_replay=round(usd / replay_usd, 4) if replay_usd else 1.0,
        must_see_recall=round(sum(recall) / len(recall), 4) if recall else None, probed_turns=len(recall),
        extension_ratio=ratio, turns_per_break=per_break, model=model, price=costs[0].price if costs else "",
    )


def _marked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = copy.deepcopy(messages)
    if out and isinstance(out[-1].get("content"), list) and out[-1]["content"]:
        out[-1]["content"][-1] = {**out[-1]["content"][-1], "cache_control": {"type": "ephemeral"}}
    elif out and isinstance(out[-1].get("content"), str):
        out[-1]["content"] = [{"type": "text", "text": out[-1]["content"], "cache_control": {"type": "ephemeral"}}]
    return out


class _Proxy:
    """The service app on a loopback port over a fresh ledger, with a local upstream
    answering each request with the answer queued for it."""

    def __init__(self, home: Path, header_budget: int) -> None:
        self.home = home
        self.header_budget = header_budget
        self.received: list[dict[str, Any]] = []
        self.answer: dict[str, Any] = {}
        self.conversation_id: str | None = None
        self.assembly_ids: list[str] = []

    def _upstream(self, request: Any) -> Any:
        import httpx

        body = json.loads(request.content)
        self.received.append(body)
        message = {"id": f"msg_{len(self.received):06d}", "type": "message", "role": "assistant", "model": body.get("model"),
                   "content": self.answer["content"], "stop_reason": "tool_use" if any(b.get("type") == "tool_use" for b in self.answer["content"]) else "end_turn",
                   "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
        return httpx.Response(200, json=message)

    @contextmanager
    def running(self) -> Iterator[_Proxy]:
        import httpx

        from contextledger.ledger import Ledger
        from contextledger.server.app import create_app
        from contextledger.server.local import serve_in_thread
        from contextledger.server.settings import ServerSettings

        self.ledger = Ledger.open(home=self.home)
        upstream = httpx.AsyncClient(transport=httpx.MockTransport(self._upstream))
        try:
            app = create_app(ServerSettings(anthropic_upstream="http://upstream.local"), ledger=self.ledger, http=upstream)
            with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=600.0) as client:
                self.client = client
                yield self
        finally:
            self.ledger.close()

    def send(self, body: dict[str, Any], answer: dict[str, Any], session_id: str) -> dict[str, Any]:
        """POST ``body``; returns the body the upstream received.  Raises RuntimeError on a
        non-200 answer or a pass-through (nothing assembled)."""
        self.answer = answer
        before = len(self.received)
        sent = {**body, "metadata": {"user_id": json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": session_id})}}
        response = self.client.post("/v1/messages", json=sent, headers={"x-contextledger-budget": str(self.header_budget)})
        if response.status_code != 200 or len(self.received) != before + 1:
            raise RuntimeError(f"proxy answered {response.status_code}: {response.text[:300]}")
        if "x-contextledger-passthrough" in response.headers:
            raise RuntimeError(f"proxy passed the request through: {response.headers['x-contextledger-passthrough']}")
        self.conversation_id = response.headers.get("x-contextledger-conversation", self.conversation_id)
        assembly = response.headers.get("x-contextledger-assembly-id")
        if assembly:
            self.assembly_ids.append(assembly)
        return self.received[-1]

    def probes(self) -> tuple[tuple[Fact, ...], tuple[Fact, ...]]:
        from contextledger.bench.real import derive_probes

        if self.conversation_id is None:
            return (), ()
        return derive_probes(self.ledger, self.conversation_id)

    def turns_per_epoch(self) -> float | None:
        scope = self.ledger.scope()
        epochs = set()
        for assembly_id in self.assembly_ids:
            record, _ = self.ledger.store.get_assembly(scope, assembly_id)
            epoch = getattr(record, "epoch", None)
            if epoch is None:
                return None
            epochs.add(str(epoch.get("id")) if isinstance(epoch, dict) else str(epoch))  # the epoch's id: its first assembly
        return round(len(self.assembly_ids) / len(epochs), 2) if epochs else None

    def replay_request(self) -> Any:
        """The naive replay request of the lineage so far cut before the newest answer
        (the last assistant message, recorded after the request was sent, and the
        placeholder results the replay renders for its calls)."""
        import dataclasses

        from contextledger.bench.harness import build_replay

        assert self.conversation_id is not None
        request = build_replay(self.ledger, self.conversation_id, None)
        messages = list(request.messages)
        last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=len(messages))
        return dataclasses.replace(request, messages=tuple(messages[:last]))


def _peer_body(strategy: Strategy, request: Any, budget: int, base: dict[str, Any]) -> dict[str, Any]:
    from contextledger.bench.lenient import lenient_payload
    from contextledger.providers.registry import count_payload_tokens

    def count(req: Any) -> int:
        return count_payload_tokens("anthropic", lenient_payload("anthropic", req)[0])

    reduced = strategy.reduce(request, budget_tokens=budget, count_tokens=count)
    payload, _ = lenient_payload("anthropic", reduced)
    return {**base, "messages": _marked(list(payload.get("messages") or []))}


def _prefix_tokens(body: dict[str, Any]) -> int:
    blocks = request_blocks("anthropic", {"system": body["system"], "tools": body["tools"]})
    return sum(b.tokens for b in blocks)


def _run_session(session: Session, budgets: Sequence[int], peers: Sequence[Strategy], probe_every: int, workdir: Path, progress: Progress | None) -> list[CostRow]:
    declared = session_tools(session.calls)
    bodies = [client_body(c, declared=declared) for c in session.calls]
    replay = _row(session, "replay", 0, bodies, [], None)
    usages = [c.usage for c in session.calls]
    if usages and all(usages):
        replay.recorded_usd = round(float(total_cost(usage_cost("anthropic", u or {}, model=c.model) for u, c in zip(usages, session.calls, strict=True))["usd"]), 6)
    rows = [replay]
    if progress:
        progress(len(bodies))
    prefix = _prefix_tokens(bodies[0]) if bodies else 0
    for budget in budgets:
        rows.extend(_run_budget(session, bodies, budget, prefix, peers, probe_every, workdir / f"b{budget}", replay, progress))
    return rows


def _run_budget(session: Session, bodies: list[dict[str, Any]], budget: int, prefix: int, peers: Sequence[Strategy], probe_every: int,
                home: Path, replay: CostRow, progress: Progress | None) -> list[CostRow]:
    proxy = _Proxy(home, budget + prefix)
    sent: list[dict[str, Any]] = []
    peer_bodies: dict[str, list[dict[str, Any]]] = {p.name: [] for p in peers}
    recall: dict[str, list[float]] = {name: [] for name in ("contextledger", "replay", *peer_bodies)}
    errors: list[str] = []
    with proxy.running():
        for turn, (call, body) in enumerate(zip(session.calls, bodies, strict=True)):
            probed = probe_every > 0 and turn > 0 and turn % probe_every == 0
            facts = proxy.probes() if probed else ((), ())
            try:
                sent.append(proxy.send(body, call.answer, f"00000000-0000-4000-8000-{budget:012d}"))
            except RuntimeError as exc:
                errors.append(f"turn {turn}: {exc}")
                sent.append(body)
            if peers:
                request = proxy.replay_request()
                base = {k: v for k, v in body.items() if k != "messages"}
                for strategy in peers:
                    try:
                        peer_bodies[strategy.name].append(_peer_body(strategy, request, budget + prefix, base))
                    except Exception as exc:  # a peer's failure is a result
                        errors.append(f"{strategy.name} turn {turn}: {type(exc).__name__}: {exc}")
                        peer_bodies[strategy.name].append(body)
            if probed and facts[0]:
                recall["contextledger"].append(check_probes(sent[-1], *facts).recall)
                recall["replay"].append(check_probes(body, *facts).recall)
                for name, got in peer_bodies.items():
                    recall[name].append(check_probes(got[-1], *facts).recall)
            if progress:
                progress(1)
        epochs = proxy.turns_per_epoch()
    if replay.must_see_recall is None and recall["replay"]:
        replay.must_see_recall, replay.probed_turns = round(sum(recall["replay"]) / len(recall["replay"]), 4), len(recall["replay"])
    row = _row(session, "contextledger", budget, sent, recall["contextledger"], replay.usd)
    row.turns_per_epoch, row.errors = epochs, [e for e in errors if e.startswith("turn ")]
    rows = [row]
    for name, got in peer_bodies.items():
        peer = _row(session, name, budget, got, recall[name], replay.usd)
        peer.errors = [e for e in errors if e.startswith(f"{name} ")]
        rows.append(peer)
    return rows


def run_cost(sessions: Sequence[Session], budgets: Sequence[int] = DEFAULT_BUDGETS, peers: Sequence[Strategy] = (), *,
             probe_every: int = 10, workdir: str | None = None, progress: Progress | None = None) -> list[CostRow]:
    """Rows for every session: replay, then per budget contextledger and each peer.

    ``progress`` is called with the number of requests done (total: requests ×
    (1 + number of budgets)).  A proxy or peer failure on a turn is listed in the row's
    ``errors`` and that turn is priced as the client's own body.
    """
    rows: list[CostRow] = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp, _quiet():
        for i, session in enumerate(sessions):
            if session.calls:
                rows.extend(_run_session(session, budgets, peers, probe_every, Path(tmp) / f"s{i}", progress))
    return rows


@contextmanager
def _quiet() -> Iterator[None]:
    """The per-request INFO logs of the HTTP client and the MCP mount off during a run
    (levels restored after)."""
    import logging

    loggers = [logging.getLogger(name) for name in ("httpx", "mcp", "mcp.server.streamable_http_manager", "alembic", "alembic.runtime.migration")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _totals(rows: Sequence[CostRow]) -> list[dict[str, Any]]:
    """Per strategy and budget over all sessions: requests, tokens, USD, ratio to replay."""
    replay = sum(r.usd for r in rows if r.strategy == "replay")
    groups: dict[tuple[str, int], list[CostRow]] = {}
    for r in rows:
        groups.setdefault((r.strategy, r.budget), []).append(r)
    out = []
    for (strategy, budget), group in groups.items():
        usd = sum(r.usd for r in group)
        recalls = [r.must_see_recall for r in group if r.must_see_recall is not None]
        ext = [r.extension_ratio for r in group if r.extension_ratio is not None]
        out.append({"strategy": strategy, "budget": budget, "requests": sum(r.requests for r in group), "tokens": sum(r.tokens for r in group),
                    "usd": round(usd, 6), "vs_replay": round(usd / replay, 4) if replay else 1.0,
                    "must_see_recall": round(sum(recalls) / len(recalls), 4) if recalls else None,
                    "extension_ratio": round(sum(ext) / len(ext), 4) if ext else None})
    return out


def cost_report(rows: Sequence[CostRow], *, sessions: Sequence[str], prices_version: str) -> dict[str, Any]:
    """The JSON report: ``rows``, ``totals`` (per strategy and budget), the price-table
    version and the fixed prefix label."""
    label, _, _ = fixed_prefix()
    return {"bench": "cost", "prices": prices_version, "fixed_prefix": label, "sessions": list(sessions),
            "rows": [r.as_dict() for r in rows], "totals": _totals(rows)}


def cost_markdown(report: dict[str, Any]) -> str:
    """Markdown tables of a :func:`cost_report`: totals, then one row per session."""
    head = "| strategy | budget | requests | tokens | USD | × replay | must-see recall | exact extensions |\n|---|---:|---:|---:|---:|---:|---:|---:|"
    lines = [f"Prices {report['prices']}; fixed prefix: {report['fixed_prefix']}.", "", head]
    for t in report["totals"]:
        lines.append(f"| {t['strategy']} | {t['budget'] or '-'} | {t['requests']} | {t['tokens']:,} | {t['usd']:.4f} | {t['vs_replay']:.2f} | {_pct(t['must_see_recall'])} | {_pct(t['extension_ratio'])} |")
    lines += ["", "| session | strategy | budget | requests | read | write | uncached | USD | × replay | recall | ext. | turns/break | turns/epoch |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in report["rows"]:
        lines.append(f"| {r['session']} | {r['strategy']} | {r['budget'] or '-'} | {r['requests']} | {r['cache_read_tokens']:,} | {r['cache_write_tokens']:,} | "
                     f"{r['uncached_tokens']:,} | {r['usd']:.4f} | {r['vs_replay']:.2f} | {_pct(r['must_see_recall'])} | {_pct(r['extension_ratio'])} | "
                     f"{r['turns_per_break'] if r['turns_per_break'] is not None else '-'} | {r['turns_per_epoch'] if r['turns_per_epoch'] is not None else '-'} |")
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"
