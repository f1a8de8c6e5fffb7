"""The recall suite: an older fact asked for in other words (seed 001 §4.5; roadmap v1.1).

Each case records, through the public recorder, one conversation: early tool results
holding a fact and its distractors (same domain, other values), then unrelated tool
work (``FILLER`` exchanges × the history multiplier), then a user question that refers
to the fact by paraphrase, synonyms or — for the Japanese cases — other Japanese words.
The question is scored by what a model would read at a fixed budget:

* ``none``: the recent tail only (the newest records, newest first, up to the budget);
* ``keyword``: the recent tail's first :data:`TAIL_RECORDS` records, then the hits of the
  keyword routes (``keyword``, ``memory``, ``artifact``) up to the budget;
* ``semantic``: the same with the ``semantic`` route alone;
* ``hybrid``: the same with every search route fused (RRF) and the graph route;
* ``assembler``: ``Ledger.assemble`` at the same budget (the request as sent today).

A case is recalled when its fact's answer string appears in that text.  Tokens are
``o200k_base``.  Every mode reads the same ledger; embeddings are computed when
recording (the ``retrieval`` extra is required).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CASES", "MODES", "RecallCase", "measure_cost", "recall_markdown", "run_recall"]

MODES = ("none", "keyword", "semantic", "hybrid", "assembler")
"""Columns of the suite, in order."""

TAIL_RECORDS = 2
"""Recent records every retrieval mode keeps before the hits."""

FILLER = 30
"""Unrelated exchanges at 1× history."""

_ROUTES: dict[str, tuple[str, ...]] = {
    "keyword": ("keyword", "memory", "artifact"),
    "semantic": ("semantic",),
    "hybrid": ("rules", "keyword", "semantic", "artifact", "memory", "graph"),
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


def _pack(texts: Sequence[str], budget: int) -> str:
    from contextledger.tokens import get_tokenizer

    tok = get_tokenizer()
    out: list[str] = []
    used = 0
    for t in texts:
        n = tok.count(t) + 1  # and the newline before the next one
        if used + n > budget:
            continue
        out.append(t)
        used += n
    return "\n".join(out)


def _tail(ledger: Any, conv: str, n: int) -> list[str]:
    scope = ledger.scope()
    msgs = ledger.store.messages(scope, conv, last=n + 1)
    mems = {m.source_artifact_ids[0]: m.summary for m in ledger.store.memories(scope, conv, last=n + 1) if m.source_artifact_ids}
    out = []
    for m in reversed(msgs):
        for p in m.parts:
            if p.kind == "tool_result" and p.artifact_id in mems:
                out.append(mems[p.artifact_id])
            elif p.kind == "text" and p.text:
                out.append(p.text)
    return out[: n + 1]


def _context(ledger: Any, conv: str, case: RecallCase, mode: str, budget: int) -> tuple[str, float]:
    from contextledger.retrieval import RetrievalQuery, search

    t0 = time.perf_counter()
    if mode == "assembler":
        res = ledger.assemble(conv, provider="openai-chat", budget_tokens=budget, persist=False)
        import json

        return json.dumps(res.payload, ensure_ascii=False), (time.perf_counter() - t0) * 1000
    tail = _tail(ledger, conv, 40 if mode == "none" else TAIL_RECORDS)
    if mode == "none":
        return _pack(tail, budget), (time.perf_counter() - t0) * 1000
    last = ledger.store.messages(ledger.scope(), conv, last=1)[0]
    query = RetrievalQuery(text=case.question, vector_of=last.id)
    result = search(ledger, ledger.scope(), conv, query, routes=_ROUTES[mode], limit=20)
    hits = [h.excerpt or h.text for h in result.hits]  # the raw result when short and showable
    return _pack([*tail[: TAIL_RECORDS + 1], *hits], budget), (time.perf_counter() - t0) * 1000


def run_recall(scales: Sequence[int] = (1, 10), *, budget: int = 200, cases: Sequence[str] | None = None, url: str | None = None) -> dict[str, Any]:
    """Run the suite; returns ``{"kind": "recall", "budget", "rows": [...], "summary":
    {scale: {mode: recall}}, "record_ms"}`` (a row per case × scale × mode: recalled,
    tokens of the context, milliseconds).

    Raises:
        EmbeddingsUnavailable: the ``retrieval`` extra is missing.
    """
    import os

    from contextledger.ledger import Ledger
    from contextledger.retrieval.embed import get_encoder
    from contextledger.tokens import get_tokenizer

    os.environ["CONTEXTLEDGER_EMBEDDINGS"] = "auto"
    get_encoder(required=True)
    chosen = [c for c in CASES if cases is None or c.name in cases]
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
                        text, ms = _context(ledger, conv, case, mode, budget)
                        rows.append({"case": case.name, "lang": case.lang, "scale": scale, "mode": mode, "recalled": case.answer in text,
                                     "tokens": get_tokenizer().count(text), "ms": round(ms, 2)})
        finally:
            ledger.close()
    summary = {
        str(s): {m: round(sum(r["recalled"] for r in rows if r["scale"] == s and r["mode"] == m) / max(1, len(chosen)), 3) for m in MODES}
        for s in scales
    }
    return {"kind": "recall", "budget": budget, "tail_records": TAIL_RECORDS, "cases": len(chosen), "rows": rows, "summary": summary,
            "record_ms": {str(k): round(v, 1) for k, v in record_ms.items()}}


def recall_markdown(report: dict[str, Any]) -> str:
    """The summary table (recall per mode and history multiplier), the per-case grid and,
    when measured, the cost table."""
    lines = [f"Recall at {report['budget']} tokens ({report['cases']} cases):", "", "| history | " + " | ".join(MODES) + " |", "|---|" + "---:|" * len(MODES)]
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
    return "\n".join(lines) + "\n"


def measure_cost(records: int = 200, *, runs: int = 12) -> dict[str, Any]:
    """The price of the semantic route, measured in one run on the same history: recording
    throughput (tool exchanges per second through the recorder) with embeddings off and on,
    and the median search latency (ms, after 2 warm-up calls) without and with the semantic
    route on the ledger recorded with embeddings."""
    import os
    import statistics

    from contextledger.ledger import Ledger
    from contextledger.retrieval import request_query, search
    from contextledger.retrieval.embed import get_encoder
    from contextledger.tokens import get_tokenizer

    get_tokenizer().count("warm-up")  # loaded before either timing
    out: dict[str, Any] = {"records": records}
    for mode in ("off", "auto"):
        os.environ["CONTEXTLEDGER_EMBEDDINGS"] = mode
        if mode == "auto":
            get_encoder(required=True)
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
