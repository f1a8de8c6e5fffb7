"""The evidence and paraphrase suites of ``bench recall``.

* **paraphrase** (:func:`run_paraphrase`): one tool session records every fact of
  :data:`~contextledger.bench.recall_cases.PARAPHRASE_CASES` and of the held-out
  :data:`~contextledger.bench.recall_cases.HELDOUT_CASES` as a tool result, then
  ``filler`` unrelated tool exchanges (at least 30), then each question is searched
  (:func:`contextledger.retrieval.search`) with the keyword routes only
  (``keyword``, ``memory``, ``artifact``), the semantic route only, and every search
  route fused (hybrid).  A case is recalled at ``k`` when its answer string is in the
  text or raw excerpt of one of the first ``k`` hits; the two sets are scored apart.
* **evidence** (:func:`run_evidence`): a long conversation without tool calls — sessions
  of chat turns that all name the same speaker, facts stated in the early sessions —
  then questions asked late, one after the other.  Per question, at the same token
  budget: does the **assembled request** (the real pipeline, OpenAI Chat, payload
  overhead included) hold the evidence, and do three fills of message texts (counted
  without any framing) — the **recent tail** (newest first), a **BM25 fill** (the
  keyword route's order) and a **semantic fill** (the semantic route's order) — hold
  it?  And ``search`` R@10 (evidence message among the first 10 hits) for keyword-only,
  semantic-only and hybrid.

Both need the ``retrieval`` extra (embeddings are computed when recording).  Everything
is generated from fixed templates: the same run gives the same numbers.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from contextledger.bench.recall_cases import HELDOUT_CASES, PARAPHRASE_CASES, ParaphraseCase

__all__ = ["EVIDENCE_FACTS", "FILLS", "SEARCH_MODES", "evidence_markdown", "paraphrase_markdown", "run_evidence", "run_paraphrase"]

SEARCH_MODES: dict[str, tuple[str, ...]] = {
    "keyword": ("keyword", "memory", "artifact"),
    "semantic": ("semantic",),
    "hybrid": ("rules", "keyword", "semantic", "artifact", "memory", "graph"),
}
"""The routes of each search column."""

FILLS = ("assembled", "recent", "bm25", "semantic")
"""Columns of the evidence table."""

_TOOL_FILLER = (
    ("list_dir", "src/ holds {n} files: app.py, models.py, views.py, utils.py"),
    ("git_status", "On branch feature-{n}: 2 files modified, nothing staged"),
    ("run_linter", "checked {n} files, 0 problems"),
    ("http_get", "GET /api/items?page={n} returned 200 with 25 items"),
    ("read_file", "docs/changelog.md section {n}: minor wording fixes"),
)


def _open(tmp: str, url: str | None) -> Any:
    from contextledger.ledger import Ledger

    return Ledger.open(url or f"sqlite:///{Path(tmp) / 'suite.db'}", blobs=Path(tmp) / "blobs")


def _found(hits: Sequence[Any], answer: str, k: int) -> bool:
    return any(answer in f"{h.text}\n{h.excerpt}" for h in hits[:k])


def _shares(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``{"cases", "summary": {mode: {"r1", "r10"}}, "by_lang": {lang: {mode: r10}},
    "misses": {mode: [case names missed at 10]}, "below_best": {"r1" | "r10": [cases
    hybrid misses at that depth while a single route finds them]}}`` of ``rows``."""
    n = max(1, len(rows))
    langs = sorted({r["lang"] for r in rows})
    return {
        "cases": len(rows),
        "summary": {m: {k: round(sum(r[m][k] for r in rows) / n, 3) for k in ("r1", "r10")} for m in SEARCH_MODES},
        "by_lang": {lang: {m: round(sum(r[m]["r10"] for r in rows if r["lang"] == lang) / max(1, sum(r["lang"] == lang for r in rows)), 3) for m in SEARCH_MODES} for lang in langs},
        "misses": {m: [r["case"] for r in rows if not r[m]["r10"]] for m in SEARCH_MODES},
        "below_best": {k: [r["case"] for r in rows if not r["hybrid"][k] and (r["keyword"][k] or r["semantic"][k])] for k in ("r1", "r10")},
    }


def run_paraphrase(
    *, filler: int = 30, cases: Sequence[ParaphraseCase] = PARAPHRASE_CASES, heldout: Sequence[ParaphraseCase] = HELDOUT_CASES, url: str | None = None,
) -> dict[str, Any]:
    """The paraphrase suite (module docstring): the facts of ``cases`` and ``heldout``
    recorded in one session (each set's facts are the other's distractors), each set's
    questions scored apart.

    Returns:
        ``{"kind": "paraphrase", "model", "filler", "rows": [{"case", "lang", "set",
        mode: {"r1", "r10"}}], "cases", "summary", "by_lang", "misses"`` (of ``cases``,
        :func:`_shares`) ``, "heldout": {the same of heldout}}``.

    Raises:
        EmbeddingsUnavailable: the ``retrieval`` extra is missing.
    """
    from contextledger.retrieval import search
    from contextledger.retrieval.embed import get_encoder

    everything = [(c, "tuned") for c in cases] + [(c, "heldout") for c in heldout]
    rows: list[dict[str, Any]] = []
    with _embeddings("auto"), tempfile.TemporaryDirectory() as tmp:
        encoder = get_encoder(required=True)
        ledger = _open(tmp, url)
        try:
            rec = ledger.recorder()
            conv = rec.start_conversation(title="paraphrase")
            rec.record_message(conv.id, "user", "Please help me with today's tasks.")
            for i, ((_, _, tool, result, _, _), _) in enumerate(everything):
                _, calls = rec.record_assistant(conv.id, tool_calls=[{"call_id": f"f{i}", "tool_name": tool, "arguments": {"i": i}}])
                rec.record_tool_result(conv.id, calls[0].call_id, result)
            for n in range(filler):
                ftool, template = _TOOL_FILLER[n % len(_TOOL_FILLER)]
                _, calls = rec.record_assistant(conv.id, tool_calls=[{"call_id": f"x{n}", "tool_name": ftool, "arguments": {"n": n}}])
                rec.record_tool_result(conv.id, calls[0].call_id, template.format(n=n))
            for (name, lang, _, _, question, answer), which in everything:
                row: dict[str, Any] = {"case": name, "lang": lang, "set": which}
                for mode, routes in SEARCH_MODES.items():
                    hits = search(ledger, ledger.scope(), conv.id, question, routes=routes, limit=10, encoder=encoder).hits
                    row[mode] = {"r1": _found(hits, answer, 1), "r10": _found(hits, answer, 10)}
                rows.append(row)
        finally:
            ledger.close()
    tuned = _shares([r for r in rows if r["set"] == "tuned"])
    return {"kind": "paraphrase", "model": encoder.name if encoder else None, "filler": filler, "rows": rows, **tuned,
            "heldout": _shares([r for r in rows if r["set"] == "heldout"])}


EVIDENCE_FACTS: tuple[tuple[str, str, str], ...] = (
    ("Caroline: my sister Ana moved to Porto last spring and opened a bakery there.", "Where does Caroline's sister live now?", "Porto"),
    ("Caroline: I finally adopted a dog, a grey whippet called Biscuit.", "What is the name of Caroline's pet?", "Biscuit"),
    ("Caroline: I signed up for the Lisbon half marathon in October.", "Which race is Caroline training for?", "Lisbon half marathon"),
    ("Caroline: my new job is at a robotics startup named Kestrel Labs.", "Where does Caroline work these days?", "Kestrel Labs"),
    ("Caroline: I am allergic to hazelnuts, so I skip most pastries.", "What food can Caroline not eat?", "hazelnuts"),
    ("Caroline: my grandmother taught me to play the cello when I was nine.", "Which instrument did Caroline learn as a child?", "cello"),
    ("Caroline: we booked a cabin near Lake Bled for our anniversary.", "Where are Caroline and her partner going for their anniversary?", "Lake Bled"),
    ("Caroline: I am reading The Remains of the Day for my book club.", "What book is Caroline's club reading?", "The Remains of the Day"),
    ("Caroline: my brother Tomas is studying marine biology in Galway.", "What does Caroline's brother study?", "marine biology"),
    ("Caroline: I painted the kitchen a dark teal colour last weekend.", "What colour is Caroline's kitchen?", "dark teal"),
    ("Caroline: our team volunteers at the Riverside food bank every second Saturday.", "Where does Caroline volunteer?", "Riverside food bank"),
    ("Caroline: I switched from coffee to rooibos tea because of my sleep.", "What does Caroline drink instead of coffee?", "rooibos"),
)
"""``(statement, question, answer)``: facts stated early, asked for late."""

_CHAT_FILLER = (
    ("Caroline: today was busy, lots of meetings and not much else.", "Melanie: that sounds tiring, Caroline. Did you get a break?"),
    ("Caroline: the weather turned cold again, I wore two sweaters.", "Melanie: stay warm, Caroline! Autumn came early this year."),
    ("Caroline: I tried a new recipe tonight, it was fine but nothing special.", "Melanie: cooking experiments are fun even when they are just fine."),
    ("Caroline: traffic on the way home was terrible, an hour stuck.", "Melanie: ugh, Caroline, podcasts help me in traffic."),
    ("Caroline: I watched a documentary about bridges, surprisingly good.", "Melanie: engineering films can be gripping, Caroline."),
    ("Caroline: slept badly, the neighbours had a party until late.", "Melanie: earplugs might help, Caroline."),
    ("Caroline: cleaned the flat all afternoon, it finally looks tidy.", "Melanie: that feeling after cleaning is the best, Caroline."),
    ("Caroline: went for a short walk in the park after lunch.", "Melanie: a walk always clears my head too, Caroline."),
)


def _evidence_conversation(ledger: Any, sessions: int, per_session: int) -> tuple[str, dict[str, str]]:
    """Record the conversation; returns ``(conversation id, answer → evidence message id)``."""
    rec = ledger.recorder()
    conv = rec.start_conversation(title="evidence")
    evidence: dict[str, str] = {}
    facts = list(EVIDENCE_FACTS)
    n = 0
    for s in range(sessions):
        rec.record_message(conv.id, "user", f"Caroline: hi Melanie, session {s + 1} here.")
        rec.record_message(conv.id, "assistant", f"Melanie: hello Caroline, good to hear from you again (session {s + 1}).")
        for t in range(per_session):
            if facts and s < sessions // 3 and t == 0:
                statement, _, answer = facts.pop(0)
                msg = rec.record_message(conv.id, "user", statement)
                evidence[answer] = msg.id
                rec.record_message(conv.id, "assistant", "Melanie: thanks for telling me, Caroline, I will remember that.")
                continue
            u, a = _CHAT_FILLER[n % len(_CHAT_FILLER)]
            n += 1
            rec.record_message(conv.id, "user", u)
            rec.record_message(conv.id, "assistant", a)
    return str(conv.id), evidence


def _fill(texts: Sequence[str], budget: int, count: Any) -> str:
    out, used = [], 0
    for t in texts:
        c = count(t)
        if used + c > budget:
            continue
        out.append(t)
        used += c
    return "\n".join(out)


def run_evidence(*, sessions: int = 36, per_session: int = 6, budget: int = 1000, url: str | None = None, facts: int | None = None) -> dict[str, Any]:
    """The evidence suite (module docstring): ``sessions`` sessions of ``per_session``
    exchanges (the facts in the first third), every question of
    :data:`EVIDENCE_FACTS` (the first ``facts``) asked at the end.

    Returns:
        ``{"kind": "evidence", "budget", "messages", "questions", "held": {fill: share},
        "r10": {mode: share}, "rows": [{"answer", fill: bool, "r10_" + mode: bool}]}``.

    Raises:
        EmbeddingsUnavailable: the ``retrieval`` extra is missing.
    """
    import json

    from contextledger.assembly.assembler import Assembler
    from contextledger.retrieval import search
    from contextledger.retrieval.embed import get_encoder
    from contextledger.tokens import count_tokens

    asked = list(EVIDENCE_FACTS[: facts or len(EVIDENCE_FACTS)])
    rows: list[dict[str, Any]] = []
    with _embeddings("auto"), tempfile.TemporaryDirectory() as tmp:
        encoder = get_encoder(required=True)
        ledger = _open(tmp, url)
        try:
            conv, evidence = _evidence_conversation(ledger, sessions, per_session)
            rec = ledger.recorder()
            scope = ledger.scope()
            for _, question, answer in asked:
                if answer not in evidence:
                    continue
                history = [m for m in ledger.store.messages(scope, conv)]
                texts = {m.id: "\n".join(p.text for p in m.parts if p.kind == "text" and p.text) for m in history}
                rec.record_message(conv, "user", question)
                rest = budget - count_tokens(question)
                row: dict[str, Any] = {"answer": answer}
                res = Assembler(ledger, ledger.policy).assemble(scope, conv, provider="openai-chat", budget_tokens=budget, persist=False, replay="estimate")
                row["assembled"] = answer in json.dumps(res.payload, ensure_ascii=False)
                row["recent"] = answer in _fill([texts[m.id] for m in reversed(history)], rest, count_tokens)
                for mode, route in (("bm25", "keyword"), ("semantic", "semantic")):
                    hits = search(ledger, scope, conv, question, routes=(route,), limit=200, encoder=encoder).hits
                    row[mode] = answer in _fill([texts.get(h.record_id, h.text) for h in hits], rest, count_tokens)
                for mode, chosen in SEARCH_MODES.items():
                    hits = search(ledger, scope, conv, question, routes=chosen, limit=10, encoder=encoder).hits
                    row["r10_" + mode] = any(h.record_id == evidence[answer] for h in hits)
                rec.record_message(conv, "assistant", "Melanie: let me think about that.")
                rows.append(row)
            messages = len(ledger.store.messages(scope, conv))
        finally:
            ledger.close()
    n = max(1, len(rows))
    return {
        "kind": "evidence", "budget": budget, "sessions": sessions, "messages": messages, "questions": len(rows),
        "held": {f: round(sum(r[f] for r in rows) / n, 3) for f in FILLS},
        "r10": {m: round(sum(r["r10_" + m] for r in rows) / n, 3) for m in SEARCH_MODES},
        "rows": rows,
    }


def paraphrase_markdown(report: dict[str, Any]) -> str:
    """The paraphrase tables (the cases, then the held-out cases when there are any):
    R@1 / R@10 per mode, R@10 per language, the misses."""
    modes = list(SEARCH_MODES)
    lines: list[str] = []
    for title, part in (("", report), (" held-out", report.get("heldout") or {"cases": 0})):
        if not part["cases"]:
            continue
        lines += [f"Paraphrase recall{title}, `search` ({part['cases']} cases, facts {report['filler']}+ exchanges back, model {report.get('model')}):", "",
                  "| | " + " | ".join(modes) + " |", "|---|" + "---:|" * len(modes)]
        for k in ("r1", "r10"):
            lines.append(f"| R@{k[1:]} | " + " | ".join(f"{part['summary'][m][k]:.2f}" for m in modes) + " |")
        for lang, by in part["by_lang"].items():
            lines.append(f"| R@10 {lang} | " + " | ".join(f"{by[m]:.2f}" for m in modes) + " |")
        lines += ["", "Missed at 10: " + "; ".join(f"{m}: {', '.join(part['misses'][m]) or 'none'}" for m in modes),
                  "Hybrid below the better single route: " + "; ".join(f"R@{k[1:]}: {', '.join(v) or 'none'}" for k, v in part["below_best"].items()), ""]
    return "\n".join(lines)


def evidence_markdown(report: dict[str, Any]) -> str:
    """The evidence table: the share of questions whose evidence each fill holds, and
    search R@10 per mode."""
    lines = [f"Evidence held at {report['budget']} tokens ({report['questions']} questions over {report['messages']} messages, no tool calls):", "",
             "| " + " | ".join(FILLS) + " | R@10 keyword | R@10 semantic | R@10 hybrid |", "|" + "---:|" * (len(FILLS) + 3),
             "| " + " | ".join(f"{report['held'][f]:.2f}" for f in FILLS) + " | " + " | ".join(f"{report['r10'][m]:.2f}" for m in SEARCH_MODES) + " |"]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def _embeddings(mode: str) -> Iterator[None]:
    """``CONTEXTLEDGER_EMBEDDINGS=mode`` for the body, the caller's value restored after."""
    previous = os.environ.get("CONTEXTLEDGER_EMBEDDINGS")
    os.environ["CONTEXTLEDGER_EMBEDDINGS"] = mode
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("CONTEXTLEDGER_EMBEDDINGS", None)
        else:
            os.environ["CONTEXTLEDGER_EMBEDDINGS"] = previous
