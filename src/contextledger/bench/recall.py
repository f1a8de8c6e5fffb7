"""The recall suite: an older fact asked for in other words (seed 001 §4.5; roadmap v1.1).

Each case records, through the public recorder, one conversation: early tool results
holding a fact and its distractors (same domain, other values), then unrelated tool
work (``FILLER`` exchanges × the history multiplier), then a user question that refers
to the fact by paraphrase, synonyms or — for the Japanese cases — other Japanese words.
The question is scored on the **assembled context of the real pipeline**: the request
:class:`~contextledger.assembly.assembler.Assembler` builds at a fixed budget (OpenAI
Chat, o200k tokens, payload overhead included), with its retrieval stage asking

* ``none``: no route (the recent window, the newest memories and the task statement only);
* ``keyword``: the keyword routes (``keyword``, ``memory``, ``artifact``);
* ``semantic``: the ``semantic`` route alone;
* ``hybrid``: every assembly route fused (RRF) and the graph route — the default.

A case is recalled when its fact's answer string appears in the payload.  Every mode
reads the same ledger; embeddings are computed when recording (the ``retrieval`` extra is
required).  :func:`measure_latency` times assembly at a larger history with and without
the semantic route, in one run.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextledger.bench.recall_suites import _embeddings

__all__ = ["CASES", "MODES", "RecallCase", "measure_cost", "recall_markdown", "run_recall"]

MODES = ("none", "keyword", "semantic", "hybrid")
"""Columns of the suite, in order."""

BUDGET = 400
"""The default budget (tokens of the whole request)."""

FILLER = 30
"""Unrelated exchanges at 1× history."""

_ROUTES: dict[str, tuple[str, ...]] = {
    "none": (),
    "keyword": ("keyword", "memory", "artifact"),
    "semantic": ("semantic",),
    "hybrid": ("keyword", "semantic", "artifact", "memory", "graph"),
}


@dataclass(frozen=True, kw_only=True)
class RecallCase:
    """One question about an older fact.

    Attributes:
        name: case id; ``lang``: ``en`` or ``ja``.
        fact: ``(tool, arguments, result)`` holding the answer.
        distractors: results of the same tool with other values.
        question: the user's question, in other words than the fact's.
        answer: the string that must reach the model.
    """

    name: str
    lang: str
    fact: tuple[str, dict[str, Any], str]
    distractors: tuple[str, ...]
    question: str
    answer: str


CASES: tuple[RecallCase, ...] = (
    RecallCase(
        name="staging-db-port", lang="en",
        fact=("get_config", {"service": "postgres", "env": "staging"}, "staging database: host db-stg.internal, port 5433, pool size 20"),
        distractors=("redis cache: host cache-stg.internal, port 6379, max memory 2gb", "web frontend: listening on port 8080, 4 workers", "metrics exporter: port 9100, scrape interval 15s"),
        question="Which number do I connect to for the pre-production data store?", answer="5433",
    ),
    RecallCase(
        name="on-call-engineer", lang="en",
        fact=("read_file", {"path": "ops/rotation.md"}, "Rotation this week: primary Priya Natarajan, secondary Tom Alvarez. Escalate after 15 minutes."),
        distractors=("Team offsite: March 14 in Lisbon, hotel booked for 12 people.", "Code owners for billing/: Wei Zhang and Maria Costa.", "Hiring: two backend roles open, interviews on Tuesdays."),
        question="Who should I page if production goes down right now?", answer="Priya Natarajan",
    ),
    RecallCase(
        name="flaky-checkout-test", lang="en",
        fact=("run_tests", {"suite": "e2e"}, "test_checkout_timeout fails intermittently: the payment sandbox answers in 4-9 s and the test waits 5 s"),
        distractors=("test_login_redirect passed in 0.8 s", "test_search_pagination passed; 240 assertions", "test_profile_avatar skipped: requires S3 credentials"),
        question="Why does the purchase flow check break only some of the time?", answer="payment sandbox",
    ),
    RecallCase(
        name="refund-window", lang="en",
        fact=("get_policy", {"name": "refunds"}, "Refunds: unused licenses can be returned within 30 days of purchase for the full amount"),
        distractors=("Shipping: hardware ships within 5 business days", "Support hours: 9:00-18:00 CET on weekdays", "Discounts: education customers get 40% off"),
        question="How long do buyers have to get their money back?", answer="30 days",
    ),
    RecallCase(
        name="removed-stdlib-modules", lang="en",
        fact=("web_search", {"query": "python 3.13 what's new"}, "Python 3.13 removes the cgi, crypt, telnetlib and nntplib modules (PEP 594 dead batteries)"),
        distractors=("Python 3.13 adds an experimental JIT compiler", "Python 3.13 ships a new interactive shell with colour", "Python 3.12 improves error messages for NameError"),
        question="Which standard library packages disappear in the newest interpreter release?", answer="telnetlib",
    ),
    RecallCase(
        name="ja-prod-db-port", lang="ja",
        fact=("get_config", {"env": "prod"}, "本番環境のデータベースはホストdb-prd、ポート5433で稼働しています"),
        distractors=("キャッシュサーバーはポート6379を使用しています", "ウェブサーバーはポート8080で待ち受けています", "監視エージェントはポート9100です"),
        question="運用中のDBにはどの番号でつなげばいいですか？", answer="5433",
    ),
    RecallCase(
        name="ja-meeting-moved", lang="ja",
        fact=("read_calendar", {"week": "next"}, "来週の定例会議は木曜日の午後3時に変更されました"),
        distractors=("社内研修は金曜日の午前10時から開始します", "新製品の発表会は来月の第二月曜日です", "健康診断の予約は水曜日の午後です"),
        question="次の週次ミーティングはいつに移りましたか？", answer="木曜日の午後3時",
    ),
    RecallCase(
        name="ja-invoice-due", lang="ja",
        fact=("get_billing", {"account": "A-12"}, "請求書の支払期限は毎月25日です。遅延すると手数料がかかります"),
        distractors=("領収書はメールで送付されます", "契約更新は年に一度、四月に行います", "見積書の有効期間は30日間です"),
        question="インボイスはいつまでに払わなければなりませんか？", answer="25日",
    ),
)
"""The suite (5 English, 3 Japanese)."""

_FILLER = (
    ("list_dir", "src/ holds {n} files: app.py, models.py, views.py, utils.py"),
    ("git_status", "On branch feature-{n}: 2 files modified, nothing staged"),
    ("run_linter", "checked {n} files, 0 problems"),
    ("http_get", "GET /api/items?page={n} returned 200 with 25 items"),
    ("read_file", "docs/changelog.md section {n}: minor wording fixes"),
)


def _record(ledger: Any, case: RecallCase, scale: int) -> str:
    rec = ledger.recorder()
    conv = rec.start_conversation(title=case.name)
    rec.record_message(conv.id, "user", "Please help me with today's tasks." if case.lang == "en" else "今日の作業を手伝ってください。")
    tool, args, _ = case.fact
    results = [case.fact[2], *case.distractors]
    for i, text in enumerate(results):
        _, calls = rec.record_assistant(conv.id, tool_calls=[{"call_id": f"f{i}", "tool_name": tool, "arguments": {**args, "i": i}}])
        rec.record_tool_result(conv.id, calls[0].call_id, text)
    for n in range(FILLER * scale):
        ftool, template = _FILLER[n % len(_FILLER)]
        _, calls = rec.record_assistant(conv.id, tool_calls=[{"call_id": f"x{n}", "tool_name": ftool, "arguments": {"n": n}}])
        rec.record_tool_result(conv.id, calls[0].call_id, template.format(n=n))
    rec.record_message(conv.id, "user", case.question)
    return str(conv.id)


def _context(ledger: Any, conv: str, mode: str, budget: int) -> tuple[str, int, float]:
    """``(payload JSON, assembled tokens, milliseconds)`` of the request assembled with
    ``mode``'s routes (not persisted, replay by estimate)."""
    import json

    from contextledger.assembly.assembler import Assembler
    from contextledger.assembly.retrieval import RetrievalRouter

    assembler = Assembler(ledger, ledger.policy, router=RetrievalRouter(_ROUTES[mode]))
    t0 = time.perf_counter()
    res = assembler.assemble(ledger.scope(), conv, provider="openai-chat", budget_tokens=budget, persist=False, replay="estimate")
    ms = (time.perf_counter() - t0) * 1000
    return json.dumps(res.payload, ensure_ascii=False), res.record.assembled_tokens, ms


def run_recall(scales: Sequence[int] = (1, 10), *, budget: int = BUDGET, cases: Sequence[str] | None = None, url: str | None = None) -> dict[str, Any]:
    """Run the suite; returns ``{"kind": "recall", "budget", "rows": [...], "summary":
    {scale: {mode: recall}}, "record_ms"}`` (a row per case × scale × mode: recalled,
    tokens of the request, assembly milliseconds).

    Raises:
        EmbeddingsUnavailable: the ``retrieval`` extra is missing.
    """
    from contextledger.retrieval.embed import get_encoder

    with _embeddings("auto"):
        get_encoder(required=True)
        return _run_recall(scales, budget, [c for c in CASES if cases is None or c.name in cases], url)


def _run_recall(scales: Sequence[int], budget: int, chosen: list[RecallCase], url: str | None) -> dict[str, Any]:
    from contextledger.ledger import Ledger

    rows: list[dict[str, Any]] = []
    record_ms: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger.open(url or f"sqlite:///{Path(tmp) / 'recall.db'}", blobs=Path(tmp) / "blobs")
        try:
            for scale in scales:
                for case in chosen:
                    t0 = time.perf_counter()
                    conv = _record(ledger, case, scale)
                    record_ms[scale] = record_ms.get(scale, 0.0) + (time.perf_counter() - t0) * 1000
                    for mode in MODES:
                        text, tokens, ms = _context(ledger, conv, mode, budget)
                        rows.append({"case": case.name, "lang": case.lang, "scale": scale, "mode": mode, "recalled": case.answer in text, "tokens": tokens, "ms": round(ms, 2)})
        finally:
            ledger.close()
    summary = {
        str(s): {m: round(sum(r["recalled"] for r in rows if r["scale"] == s and r["mode"] == m) / max(1, len(chosen)), 3) for m in MODES}
        for s in scales
    }
    return {"kind": "recall", "budget": budget, "provider": "openai-chat", "cases": len(chosen), "rows": rows, "summary": summary,
            "record_ms": {str(k): round(v, 1) for k, v in record_ms.items()}}


def recall_markdown(report: dict[str, Any]) -> str:
    """The summary table (recall per mode and history multiplier), the per-case grid and,
    when measured, the cost table."""
    lines = [f"Recall from the assembled request at {report['budget']} tokens ({report['cases']} cases):", "", "| history | " + " | ".join(MODES) + " |", "|---|" + "---:|" * len(MODES)]
    for scale, by_mode in report["summary"].items():
        lines.append(f"| {scale}× | " + " | ".join(f"{by_mode[m]:.2f}" for m in MODES) + " |")
    lines += ["", "| case | lang | history | " + " | ".join(MODES) + " |", "|---|---|---:|" + "---|" * len(MODES)]
    grid: dict[tuple[str, str, int], dict[str, bool]] = {}
    for r in report["rows"]:
        grid.setdefault((r["case"], r["lang"], r["scale"]), {})[r["mode"]] = r["recalled"]
    for (case, lang, scale), by_mode in grid.items():
        lines.append(f"| {case} | {lang} | {scale}× | " + " | ".join("✓" if by_mode.get(m) else "·" for m in MODES) + " |")
    cost = report.get("cost")
    if cost:
        lines += ["", f"Cost, one run ({cost['records']} tool exchanges recorded each way):", "",
                  "| record/s, embeddings off | record/s, embeddings on | search p50 ms, no semantic | search p50 ms, with semantic |", "|---:|---:|---:|---:|",
                  f"| {cost['record_per_s_embeddings_off']} | {cost['record_per_s_embeddings_auto']} | {cost['search_p50_ms_without_semantic']} | {cost['search_p50_ms_with_semantic']} |"]
    lat = report.get("latency")
    if lat:
        lines += ["", f"Assembly latency at {lat['artifacts']:,} artifacts ({lat['shape']} history, vectors: {lat.get('vectors_from', 'model')}; one run, alternating):", "",
                  "| p50 ms, every route | p50 ms, without semantic | ratio | routes p50 ms, with / without semantic | embedding (batches) |", "|---:|---:|---:|---:|---:|",
                  f"| {lat['p50_ms_with_semantic']} | {lat['p50_ms_without_semantic']} | {lat['ratio']} | {lat['retrieval_p50_ms_with_semantic']} / {lat['retrieval_p50_ms_without_semantic']} "
                  f"| {lat['vectors']:,} vectors in {lat['embed_s']} s ({lat['embed_per_s']}/s) |"]
    if report.get("evidence") or report.get("paraphrase"):
        from contextledger.bench.recall_suites import evidence_markdown, paraphrase_markdown

        lines += ["", *(evidence_markdown(report["evidence"]).splitlines() if report.get("evidence") else [])]
        lines += ["", *(paraphrase_markdown(report["paraphrase"]).splitlines() if report.get("paraphrase") else [])]
    return "\n".join(lines) + "\n"


def measure_cost(records: int = 200, *, runs: int = 12) -> dict[str, Any]:
    """The price of the semantic route, measured in one run on the same history: recording
    throughput (tool exchanges per second through the recorder) with embeddings off and on,
    and the median search latency (ms, after 2 warm-up calls) without and with the semantic
    route on the ledger recorded with embeddings."""
    from contextledger.retrieval.embed import get_encoder
    from contextledger.tokens import get_tokenizer

    get_tokenizer().count("warm-up")  # loaded before either timing
    out: dict[str, Any] = {"records": records}
    for mode in ("off", "auto"):
        with _embeddings(mode):
            if mode == "auto":
                get_encoder(required=True)
            out.update(_cost_run(records, runs, mode))
    return out


def _cost_run(records: int, runs: int, mode: str) -> dict[str, Any]:
    """One ledger of :func:`measure_cost` recorded with embeddings ``mode``."""
    import statistics

    from contextledger.ledger import Ledger
    from contextledger.retrieval import request_query, search

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger.open(f"sqlite:///{Path(tmp) / 'cost.db'}", blobs=Path(tmp) / "blobs")
        try:
            rec = ledger.recorder()
            conv = rec.start_conversation(title="cost")
            t0 = time.perf_counter()
            for n in range(records):
                ftool, template = _FILLER[n % len(_FILLER)]
                _, calls = rec.record_assistant(conv.id, tool_calls=[{"call_id": f"x{n}", "tool_name": ftool, "arguments": {"n": n}}])
                rec.record_tool_result(conv.id, calls[0].call_id, template.format(n=n))
            out[f"record_per_s_embeddings_{mode}"] = round(records / (time.perf_counter() - t0), 1)
            if mode == "auto":
                msg = rec.record_message(conv.id, "user", "which page of items came back with 25 entries?")
                query = request_query(msg)
                for label, routes in (("search_p50_ms_without_semantic", _ROUTES["keyword"] + ("graph",)), ("search_p50_ms_with_semantic", _ROUTES["hybrid"])):
                    times = []
                    for _ in range(runs + 2):
                        t1 = time.perf_counter()
                        search(ledger, ledger.scope(), conv.id, query, routes=routes)
                        times.append((time.perf_counter() - t1) * 1000)
                    out[label] = round(statistics.median(times[2:]), 2)
        finally:
            ledger.close()
    return out


def measure_latency(artifacts: int = 10_000, *, runs: int = 30, shape: str = "pipeline", vectors: str = "model") -> dict[str, Any]:
    """Assembly latency with and without the semantic route, in one run on one history.

    Records the ``shape`` history of ``artifacts`` tool artifacts through the recorder
    with embeddings off (:func:`~contextledger.bench.scale.build_shape`, the history of
    ``bench scale``), embeds it afterwards in batches (``contextledger index``,
    :func:`~contextledger.retrieval.index.backfill`: embedding throughput in records per
    second) — or, with ``vectors="random"``, stores a random unit vector of the model's
    dimension per document instead (the search cost does not depend on the values; the
    report says which) — then times ``Ledger.assemble``'s pipeline (OpenAI Chat, 4,000 tokens, the
    scale bench's ``now``, not persisted, replay by estimate) with every assembly route
    and with every route but ``semantic``, alternating, after 2 warm-up calls each.

    Returns ``{"artifacts", "shape", "record_s", "embed_s", "vectors",
    "embed_per_s", "p50_ms_with_semantic", "p50_ms_without_semantic", "ratio",
    "retrieval_p50_ms_with_semantic", "retrieval_p50_ms_without_semantic", "routes_used_with_semantic", "routes_used_without_semantic"}``.

    Raises:
        EmbeddingsUnavailable: the ``retrieval`` extra is missing.
    """
    from contextledger.bench.scale import build_shape
    from contextledger.ledger import Ledger
    from contextledger.retrieval.embed import get_encoder
    from contextledger.retrieval.index import backfill

    with _embeddings("auto"):
        encoder = get_encoder(required=True)
    assert encoder is not None
    out: dict[str, Any] = {"artifacts": artifacts, "shape": shape}
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger.open(f"sqlite:///{Path(tmp) / 'latency.db'}", blobs=Path(tmp) / "blobs")
        try:
            with _embeddings("off"):
                conv, record_s = build_shape(ledger, artifacts, shape)
            out["record_s"] = round(record_s, 2)
            t0 = time.perf_counter()
            done = backfill(ledger.store, ledger.scope(), conv, encoder=encoder if vectors == "model" else _RandomVectors(encoder))
            out["vectors_from"] = "model" if vectors == "model" else "random unit vectors"
            out["embed_s"] = round(time.perf_counter() - t0, 2)
            out["vectors"] = done["vectors"]
            out["embed_per_s"] = round(done["vectors"] / max(out["embed_s"], 1e-9), 1)
            out.update(_time_variants(ledger, conv, encoder, artifacts, shape, runs))
        finally:
            ledger.close()
    out["ratio"] = round(out["p50_ms_with_semantic"] / max(out["p50_ms_without_semantic"], 1e-9), 3)
    return out


class _RandomVectors:
    """Random unit vectors under the model's name and dimension (latency runs only: the
    semantic route's work depends on the number of vectors, not their values)."""

    def __init__(self, model: Any) -> None:
        import numpy as np

        self.name, self.dim = model.name, model.dim
        self._rng = np.random.default_rng(0)

    def encode(self, texts: Sequence[str]) -> Any:
        import numpy as np

        v = self._rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def _time_variants(ledger: Any, conv: str, encoder: Any, artifacts: int, shape: str, runs: int) -> dict[str, Any]:
    """p50 of the assembly and of its routes, with and without ``semantic``, alternating."""
    import statistics

    from contextledger.assembly.assembler import Assembler
    from contextledger.assembly.retrieval import ASSEMBLY_ROUTES, RetrievalRouter
    from contextledger.bench.scale import scale_now

    variants = {
        "with_semantic": Assembler(ledger, ledger.policy, router=RetrievalRouter(ASSEMBLY_ROUTES, encoder=encoder)),
        "without_semantic": Assembler(ledger, ledger.policy, router=RetrievalRouter(tuple(r for r in ASSEMBLY_ROUTES if r != "semantic"), encoder=encoder)),
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    routes: dict[str, list[float]] = {k: [] for k in variants}
    out: dict[str, Any] = {}
    for i in range(runs + 2):
        for name, asm in variants.items():
            t1 = time.perf_counter()
            res = asm.assemble(ledger.scope(), conv, provider="openai-chat", budget_tokens=4000, now=scale_now(artifacts, shape), persist=False, replay="estimate")
            if i >= 2:
                times[name].append((time.perf_counter() - t1) * 1000)
                routes[name].append(res.record.timings_ms.get("retrieval", 0.0))
            out[f"routes_used_{name}"] = (res.record.retrieval or {}).get("routes_used")
    for name in variants:
        out[f"p50_ms_{name}"] = round(statistics.median(times[name]), 2)
        out[f"retrieval_p50_ms_{name}"] = round(statistics.median(routes[name]), 2)
    return out
