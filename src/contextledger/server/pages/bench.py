"""``/bench``: the benchmark's figures and tables from a report folder, as a page.

The folder is ``CONTEXTLEDGER_BENCH_DIR`` (``contextledger inspect --bench DIR`` sets it):
every ``*.png`` plot and every Markdown table of its ``*.md`` files (the folder and its
direct subfolders, as ``contextledger bench … --out DIR`` writes them).  Without a folder
the page says how to give one.  Files are served only from that folder, by name.
"""

from __future__ import annotations

import os
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, Response

from contextledger.server.html import render

__all__ = ["BENCH_DIR_ENV", "markdown_tables", "router"]

BENCH_DIR_ENV = "CONTEXTLEDGER_BENCH_DIR"
"""Environment variable naming the report folder shown on ``/bench``."""

router = APIRouter(include_in_schema=False)


def _folder() -> Path | None:
    value = os.environ.get(BENCH_DIR_ENV)
    return Path(value) if value and Path(value).is_dir() else None


def _files(folder: Path, suffix: str) -> list[Path]:
    found = [*folder.glob(f"*{suffix}"), *folder.glob(f"*/*{suffix}")]
    return sorted(p for p in found if p.is_file())


def markdown_tables(text: str) -> list[tuple[str, list[str], list[list[str]]]]:
    """Each Markdown pipe table of ``text`` as ``(heading above it, header, rows)``."""
    out: list[tuple[str, list[str], list[list[str]]]] = []
    heading, block = "", []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append([c.strip() for c in line.strip().strip("|").split("|")])
            continue
        if len(block) >= 2:
            rows = [r for r in block[1:] if not all(set(c) <= set(":- ") for c in r)]
            out.append((heading, block[0], rows))
        block = []
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
    return out


@router.get("/bench", response_class=HTMLResponse)
def bench_page(request: Request) -> HTMLResponse:
    folder = _folder()
    if folder is None:
        return render(request, "bench.html", title="Benchmark", folder=None, plots=[], tables=[], env=BENCH_DIR_ENV)
    plots = [str(p.relative_to(folder)) for p in _files(folder, ".png")]
    tables = [(str(p.relative_to(folder)), markdown_tables(p.read_text(encoding="utf-8", errors="replace"))) for p in _files(folder, ".md")]
    return render(request, "bench.html", title="Benchmark", folder=str(folder), plots=plots, tables=[t for t in tables if t[1]], env=BENCH_DIR_ENV)


@router.get("/bench/files/{name:path}")
def bench_file(name: str) -> Response:
    folder = _folder()
    if folder is None:
        return Response("not found", status_code=404, media_type="text/plain")
    allowed = {str(p.relative_to(folder)): p for p in _files(folder, ".png")}
    path = allowed.get(name)
    if path is None:
        return Response("not found", status_code=404, media_type="text/plain")
    return FileResponse(path, media_type="image/png")
