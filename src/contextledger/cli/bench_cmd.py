"""``contextledger bench scenarios | recall | pinning | real | cost | scale | record | startup | proxy``.

Each command runs one benchmark, writes ``bench-<kind>.json``, ``bench-<kind>.md`` and
its PNG plot into ``--out`` (default ``./bench-results``) and prints the Markdown tables,
or the JSON report with ``--json``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Protocol

import typer

from contextledger.cli.common import console, emit_error, emit_json, fail_cleanly

app = typer.Typer(help="Benchmark contextledger against replay and peer strategies.", no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print the JSON report instead of the Markdown tables.")]
OutOpt = Annotated[Path, typer.Option("--out", help="Folder for the JSON, Markdown and PNG outputs.")]
NoPeersOpt = Annotated[bool, typer.Option("--no-peers", help="Run contextledger only (no peer strategies).")]
ProvidersOpt = Annotated[str, typer.Option("--providers", help="Payload formats, comma separated: native (each case's own), openai-chat, anthropic, openai-responses.")]
_DEFAULT_PROVIDERS = "native,openai-responses"
_DEFAULT_OUT = Path("bench-results")


def _ints(text: str, option: str) -> list[int]:
    """Comma-separated positive whole numbers of ``option`` (at least one).

    Raises:
        InputError: anything else.
    """
    from contextledger.errors import InputError

    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"{option}: expected comma-separated whole numbers, got {text!r}") from None
    if not values or min(values) < 1:
        raise InputError(f"{option}: expected comma-separated whole numbers of at least 1, got {text!r}")
    return values


def _names(text: str) -> list[str]:
    """The comma-separated names of ``--providers`` (at least one; the runners check them).

    Raises:
        InputError: no name given.
    """
    from contextledger.errors import InputError

    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names:
        raise InputError(f"--providers: expected comma-separated provider names, got {text!r}")
    return names


@contextlib.contextmanager
def _extras() -> Iterator[None]:
    """Turn a missing optional dependency into a clear error: the benchmark's peer
    strategies and plots need ``pip install 'contextledger\\[bench]'``."""
    from contextledger.errors import InputError

    try:
        yield
    except ModuleNotFoundError as exc:
        raise InputError(f"contextledger bench needs the bench extras (missing module {exc.name!r}): pip install 'contextledger[bench]'") from None


def _finish(report: dict[str, Any], out: Path, as_json: bool) -> None:
    from contextledger.bench.report import markdown, write_report

    with fail_cleanly(as_json), _extras():
        paths = write_report(report, out)
    if as_json:
        emit_json(report)
    else:
        console.print(markdown(report), markup=False, soft_wrap=True)
        console.print("written: " + ", ".join(str(p) for p in paths), markup=False)


class _Report(Protocol):
    """A benchmark report that renders itself (``bench pinning``, ``bench secrets``)."""

    def markdown(self) -> str: ...

    def as_dict(self) -> dict[str, Any]: ...


def _save_report(report: _Report, path: Path, title: str) -> None:
    """Write ``report`` as Markdown under the heading ``title`` to ``path`` (its folder made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {title}\n\n" + report.markdown() + "\n", encoding="utf-8")


def _show_report(report: _Report, as_json: bool) -> None:
    """Print ``report``: its JSON with ``as_json``, else its Markdown."""
    if as_json:
        emit_json(report.as_dict())
    else:
        console.print(report.markdown(), markup=False, soft_wrap=True)


@app.command("scenarios")
def scenarios(
    scales: Annotated[str, typer.Option("--scales", help="History multipliers, comma separated.")] = "1,10,100",
    case: Annotated[list[str] | None, typer.Option("--case", help="Run only this scenario (repeatable).")] = None,
    no_peers: NoPeersOpt = False,
    providers: ProvidersOpt = _DEFAULT_PROVIDERS,
    as_json: JsonOpt = False,
    out: OutOpt = _DEFAULT_OUT,
) -> None:
    """The scenario suite: the six seed scenarios (seed-1 … seed-6), the recovery, provenance, privacy, branch and participant cases, and the coding-agent walk-through."""
    with fail_cleanly(as_json), _extras():
        from contextledger.bench.harness import run_scenarios
        from contextledger.bench.report import build_report

        rows = run_scenarios(_ints(scales, "--scales"), case or None, [] if no_peers else None, providers=_names(providers))
    _finish(build_report("scenarios", rows), out, as_json)


@app.command("recall")
def recall(
    scales: Annotated[str, typer.Option("--scales", help="History multipliers, comma separated.")] = "1,10",
    budget: Annotated[int, typer.Option("--budget", min=1, help="Tokens of the assembled request the question is answered from.")] = 400,
    case: Annotated[list[str] | None, typer.Option("--case", help="Run only this case (repeatable).")] = None,
    cost_records: Annotated[int, typer.Option("--cost-records", min=0, help="Exchanges recorded with and without embeddings for the cost table (0: skip).")] = 200,
    latency_artifacts: Annotated[int, typer.Option("--latency-artifacts", min=0, help="Artifacts of the history assembly p50 is timed at with and without the semantic route (0: skip; e.g. 10000).")] = 0,
    latency_runs: Annotated[int, typer.Option("--latency-runs", min=1, help="Timed assemblies per variant.")] = 30,
    latency_vectors: Annotated[str, typer.Option("--latency-vectors", help="model (embed the history) or random (random unit vectors: the search cost does not depend on their values).")] = "model",
    suites: Annotated[bool, typer.Option("--suites/--no-suites", help="Also run the evidence suite (long chat, fills at the same budget) and the paraphrase suite (51 cases).")] = True,
    as_json: JsonOpt = False,
    out: OutOpt = _DEFAULT_OUT,
) -> None:
    """The recall suite: older facts asked for in other words (English and Japanese, with
    distractors), recall from the assembled request at a fixed budget with the retrieval
    stage asking no route, the keyword routes, the semantic route, or all of them (needs
    the retrieval extra); optionally assembly p50 with and without the semantic route."""
    import json

    from contextledger.bench.recall import (
        measure_cost,
        measure_latency,
        recall_markdown,
        run_recall,
    )
    from contextledger.bench.report import machine_info, versions
    from contextledger.errors import InputError

    with fail_cleanly(as_json):
        report = run_recall(_ints(scales, "--scales"), budget=budget, cases=case or None)
        report = {**report, "machine": machine_info(), "versions": versions()}
        if cost_records:
            report["cost"] = measure_cost(cost_records)
        if latency_artifacts:
            if latency_vectors not in ("model", "random"):
                raise InputError(f"unknown --latency-vectors {latency_vectors!r}; expected model or random")
            report["latency"] = measure_latency(latency_artifacts, runs=latency_runs, vectors=latency_vectors)
        if suites:
            from contextledger.bench.recall_suites import run_evidence, run_paraphrase

            report["evidence"], report["paraphrase"] = run_evidence(), run_paraphrase()
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench-recall.json").write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n")
        (out / "bench-recall.md").write_text(recall_markdown(report))
    if as_json:
        emit_json(report)
    else:
        console.print(recall_markdown(report), markup=False, soft_wrap=True)
        console.print(f"written: {out / 'bench-recall.json'}, {out / 'bench-recall.md'}", markup=False)


@app.command("real")
def real(
    data: Annotated[Path | None, typer.Option("--data", help="Folder with manifest.json (default: ../shared/data/real or $CONTEXTLEDGER_REAL_DATA).")] = None,
    budgets: Annotated[str, typer.Option("--budgets", help="Token budgets, comma separated.")] = "4000,16000",
    limit: Annotated[int | None, typer.Option("--limit", help="Only the first N supported files.")] = None,
    max_bytes: Annotated[int | None, typer.Option("--max-bytes", help="Only files of at most this many bytes.")] = None,
    match: Annotated[str | None, typer.Option("--match", help="Only files whose path contains this text.")] = None,
    no_peers: NoPeersOpt = False,
    providers: ProvidersOpt = _DEFAULT_PROVIDERS,
    as_json: JsonOpt = False,
    out: OutOpt = _DEFAULT_OUT,
) -> None:
    """Every supported real transcript, at each budget, with mechanically derived probes."""
    root = data or Path(os.environ.get("CONTEXTLEDGER_REAL_DATA", "../shared/data/real"))
    with fail_cleanly(as_json), _extras():
        budget_list, provider_names = _ints(budgets, "--budgets"), _names(providers)  # arguments before the data folder
        from contextledger.bench.memory_layer import measure_memory_layer, memory_layer_markdown
        from contextledger.bench.real import real_files, run_real
        from contextledger.bench.report import build_report

        files = real_files(root, limit=limit, max_bytes=max_bytes, match=match)
        rows = run_real(files, budget_list, [] if no_peers else None, providers=provider_names)
        layer = measure_memory_layer(files)
    out.mkdir(parents=True, exist_ok=True)
    (out / "memory-layer.md").write_text("# Memory layer vs raw tool payloads\n\n" + memory_layer_markdown(layer) + "\n", encoding="utf-8")
    _finish(build_report("real", rows, files=[f.rel for f in files], memory_layer=[r.as_dict() for r in layer]), out, as_json)
    if not as_json:
        console.print(memory_layer_markdown(layer), markup=False, soft_wrap=True)


@app.command("pinning")
def pinning(
    labels: Annotated[Path | None, typer.Option("--labels", help="Labelled set, JSON Lines of text/label/source/note (default: tests/data/pinning_labels.jsonl of the source tree).")] = None,
    as_json: JsonOpt = False,
    out: OutOpt = _DEFAULT_OUT,
) -> None:
    """Precision and recall of constraint pinning on a labelled set of user sentences
    (quoted from real transcripts, plus written Japanese and Chinese), overall and by
    language, with every mistake listed."""
    with fail_cleanly(as_json):
        from contextledger.bench.pinning import DEFAULT_SET, run_pinning

        report = run_pinning(labels or DEFAULT_SET)
        _save_report(report, out / "bench-pinning.md", "Constraint pinning")
    _show_report(report, as_json)


@app.command("secrets")
def secrets(
    data: Annotated[Path | None, typer.Option("--data", help="Folder with manifest.json (default: ../shared/data/real or $CONTEXTLEDGER_REAL_DATA).")] = None,
    as_json: JsonOpt = False,
    out: OutOpt = _DEFAULT_OUT,
) -> None:
    """The secret classifier on every real transcript: flagged texts by kind (redacted, for
    review) and its cost per MB next to the o200k token count of the same texts."""
    root = data or Path(os.environ.get("CONTEXTLEDGER_REAL_DATA", "../shared/data/real"))
    with fail_cleanly(as_json):
        from contextledger.bench.secrets import run_secrets

        report = run_secrets(root)
        _save_report(report, out / "bench-secrets.md", "Secret classifier on real transcripts")
    _show_report(report, as_json)


@app.command("scale")
def scale(
    sizes: Annotated[str, typer.Option("--sizes", help="Artifact counts, comma separated.")] = "100,1000,10000,100000",
    backend: Annotated[list[str] | None, typer.Option("--backend", help="sqlite and/or postgresql (repeatable).")] = None,
    pg: Annotated[str | None, typer.Option("--pg", help="URL of an empty PostgreSQL database for the postgresql backend.")] = None,
    runs: Annotated[int, typer.Option("--runs", help="Timed assemblies per point.")] = 30,
    shape: Annotated[str, typer.Option("--shape", help="History shape: pipeline, coding or all (one row per backend × shape × size).")] = "all",
    now_step: Annotated[float, typer.Option("--now-step", min=0, help="Seconds `now` moves forward before each assembly (0: a fixed now; e.g. 67 for a live agent whose ages change).")] = 0.0,
    as_json: JsonOpt = False,
    out: OutOpt = _DEFAULT_OUT,
) -> None:
    """Assembly latency p50/p95/p99 and peak memory vs history size; recording throughput."""
    from contextledger.errors import InputError

    with fail_cleanly(as_json), _extras():
        from contextledger.bench.report import build_report
        from contextledger.bench.scale import SHAPES, run_scale

        if shape != "all" and shape not in SHAPES:
            raise InputError(f"unknown --shape {shape!r}; expected {', '.join(SHAPES)} or all")
        shapes = list(SHAPES) if shape == "all" else [shape]
        points = run_scale(_ints(sizes, "--sizes"), backends=backend or ["sqlite"], pg_url=pg, runs=runs, shapes=shapes, now_step_s=now_step)
    _finish(build_report("scale", [], scale=[p.as_dict() for p in points]), out, as_json)


@app.command("record")
def record(
    data: Annotated[Path | None, typer.Option("--data", help="Folder with manifest.json (default: ../shared/data/real or $CONTEXTLEDGER_REAL_DATA).")] = None,
    exchanges: Annotated[int, typer.Option("--exchanges", min=1, help="Real tool exchanges recorded by each system.")] = 5000,
    rounds: Annotated[int, typer.Option("--rounds", min=1, help="Alternating rounds (each system records every exchange once per round).")] = 3,
    system: Annotated[list[str] | None, typer.Option("--system", help="Only this system (repeatable): contextledger batched, contextledger live, contextledger first tier, openai-agents SQLiteSession, langgraph SqliteSaver, bare sqlite.")] = None,
    embeddings: Annotated[bool, typer.Option("--embeddings", help="Keep the semantic index's embeddings on while recording (default off: no peer embeds).")] = False,
    as_json: JsonOpt = False,
    out: OutOpt = _DEFAULT_OUT,
) -> None:
    """Recording throughput, live per-exchange latency and bytes on disk of real tool
    exchanges: contextledger's batched and live paths next to the OpenAI Agents SDK's
    SQLiteSession, LangGraph's SqliteSaver and a bare SQLite insert, on the same bytes."""
    import json

    root = data or Path(os.environ.get("CONTEXTLEDGER_REAL_DATA", "../shared/data/real"))
    if not embeddings:
        os.environ["CONTEXTLEDGER_EMBEDDINGS"] = "off"
    with fail_cleanly(as_json), _extras():
        from contextledger.bench.record import real_exchanges, record_markdown, run_record
        from contextledger.bench.report import machine_info, versions

        xs = real_exchanges(root, exchanges)
        rows = run_record(xs, rounds=rounds, systems=system or None)
        report = {"kind": "record", "exchanges": len(xs), "embeddings": embeddings, "rows": [r.as_dict() for r in rows], "machine": machine_info(), "versions": versions()}
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench-record.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        (out / "bench-record.md").write_text("# Recording\n\n" + record_markdown(rows, len(xs)), encoding="utf-8")
    if as_json:
        emit_json(report)
    else:
        console.print(record_markdown(rows, len(xs)), markup=False, soft_wrap=True)


@app.command("startup")
def startup(
    runs: Annotated[int, typer.Option("--runs", min=1, help="Timed runs of each command (interleaved).")] = 10,
    as_json: JsonOpt = False,
) -> None:
    """CLI start-up wall time: ``--help`` and ``conversations`` on an empty ledger against
    a bare ``python -c pass``, measured in the same run."""
    from contextledger.bench.startup import run_startup, startup_markdown

    with fail_cleanly(as_json):
        try:
            rows = run_startup(runs)
        except RuntimeError as exc:
            from contextledger.errors import InputError

            raise InputError(str(exc)) from None
    if as_json:
        emit_json({"kind": "startup", "rows": [r.as_dict() for r in rows]})
    else:
        console.print(startup_markdown(rows), markup=False, soft_wrap=True)


@app.command("proxy")
def proxy(
    pg: Annotated[str, typer.Option("--pg", envvar="CONTEXTLEDGER_TEST_PG", help="Admin URL of a PostgreSQL server (a fresh database is created and dropped).")] = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
    workers: Annotated[int, typer.Option("--workers", min=1, help="Service worker processes.")] = 4,
    agents: Annotated[int, typer.Option("--agents", min=1, help="Concurrent agents.")] = 32,
    turns: Annotated[int, typer.Option("--turns", min=1, help="Turns per agent (two model requests each).")] = 50,
    latency_sizes: Annotated[str, typer.Option("--latency-sizes", help="Recorded artifacts of the conversations the sequential latency is measured at (0: a fresh one).")] = "0,10000",
    latency_turns: Annotated[int, typer.Option("--latency-turns", min=1, help="Turns of the sequential latency runs.")] = 20,
    out: OutOpt = _DEFAULT_OUT,
) -> None:
    """The proxy under load on loopback: N workers over PostgreSQL, concurrent agents; the
    latency it adds over calling the scripted upstream directly; the ledger checked for
    lost or duplicated records (``pip install 'contextledger\\[server,postgres]'``)."""
    import json

    from contextledger.errors import InputError

    with fail_cleanly():
        sizes = [int(x) for x in latency_sizes.split(",") if x.strip().isdigit()]
        try:
            from contextledger.bench.proxy_load import (
                passthrough_failure,
                run_proxy_latency,
                run_proxy_load,
            )
        except ModuleNotFoundError as exc:
            raise InputError(f"contextledger bench proxy needs the server and postgres extras (missing module {exc.name!r})") from None
        try:
            report = run_proxy_load(pg_admin_url=pg, workers=workers, agents=agents, turns=turns).as_dict()
            out.mkdir(parents=True, exist_ok=True)  # the load run is kept if the sequential runs are cut short
            (out / "bench-proxy.json").write_text(json.dumps(report, indent=2) + "\n")
            report["sequential"] = run_proxy_latency(sizes=tuple(sizes), turns=latency_turns)
        except RuntimeError as exc:
            raise InputError(str(exc)) from None
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench-proxy.json").write_text(json.dumps(report, indent=2) + "\n")
    emit_json(report)
    problem = passthrough_failure(report)  # the figures are kept, but they do not count
    if problem is not None:
        raise typer.Exit(emit_error(RuntimeError(problem), False))


@app.command("fingerprint")
def fingerprint_cmd(
    ledgers: Annotated[Path, typer.Option("--ledgers", help="Folder of the fingerprint set's ledgers (built on first use, reused after).")],
    data: Annotated[Path | None, typer.Option("--data", help="Folder with manifest.json (default: ../shared/data/real or $CONTEXTLEDGER_REAL_DATA).")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Where to write the fingerprints (JSON).")] = None,
    compare_to: Annotated[Path | None, typer.Option("--compare", help="Fingerprints of an earlier run: list the differences, exit 1 when any.")] = None,
    match: Annotated[str | None, typer.Option("--match", help="Only cases whose label contains this text.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The sha256 of every payload of the fingerprint set (scenarios at 1x and 10x, real transcripts at 4,000 and 16,000 tokens, every provider) at a fixed now."""
    import json

    from contextledger.bench.fingerprint import MANIFEST, build_ledgers, compare, fingerprint

    root = data or Path(os.environ.get("CONTEXTLEDGER_REAL_DATA", "../shared/data/real"))
    differences: list[str] = []
    with fail_cleanly(as_json), _extras():
        say = (lambda _msg: None) if as_json else (lambda msg: console.print(msg, markup=False, soft_wrap=True))
        if not (ledgers / MANIFEST).exists():
            build_ledgers(ledgers, real_root=root if root.exists() else None, match=match, progress=say)
        prints = fingerprint(ledgers, match=match, progress=say)
        target = out or ledgers / "fingerprints.json"
        target.write_text(json.dumps(prints, indent=1) + "\n", encoding="utf-8")
        if compare_to is not None:
            differences = compare(json.loads(compare_to.read_text(encoding="utf-8")), prints)
    summary = {"payloads": len(prints), "written": str(target), "differences": differences}
    if as_json:
        emit_json(summary)
    else:
        for line in differences:
            console.print(line, markup=False, soft_wrap=True)
        same = "" if compare_to is None else f"; {len(prints) - len(differences)} identical to {compare_to}, {len(differences)} different"
        console.print(f"{len(prints)} payloads fingerprinted{same}; written: {target}", markup=False)
    if differences:
        raise typer.Exit(1)

