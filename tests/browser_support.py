"""A real browser for the page tests: Debian's chromium driven by Playwright.

The project's set-up installs chromium for tests and CI (``.ci/run``); ``playwright
install`` is never used.  Without chromium the browser tests fail in CI (``CI=true``) and
skip with one line elsewhere.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
"""Screenshots the browser tests write for a person to look at (git-ignored)."""
DOCS_SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "images" / "inspector-assembly.png"
"""The README's screenshot, rewritten by the tests with ``CONTEXTLEDGER_DOCS_SCREENSHOTS=1``."""


def chromium_path() -> str:
    """The chromium binary, or skip (fail in CI) with one line."""
    path = os.environ.get("CONTEXTLEDGER_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    problem = None if Path(path).is_file() else f"chromium not found at {path} (apt-get install chromium)"
    if problem is None:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            problem = "the playwright package is missing (pip install -e '.[dev]')"
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"browser tests need chromium in CI: {problem}")
        pytest.skip(f"browser tests skipped: {problem}")
    return path


def launch_browser() -> Iterator[Any]:
    """One headless chromium for a test module."""
    from playwright.sync_api import sync_playwright

    exe = chromium_path()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def new_page(browser: Any) -> Iterator[Any]:
    """A page in a fresh 1280×800 context (15 s default timeout), closed afterwards."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = ctx.new_page()
    pg.set_default_timeout(15_000)
    try:
        yield pg
    finally:
        ctx.close()


def screenshot(page: Any, name: str) -> Path:
    """Write a full-page screenshot under :data:`SCREENSHOTS`."""
    SCREENSHOTS.mkdir(exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path


def serious_violations(page: Any) -> list[str]:
    """axe-core's serious and critical violations on the current page, one line each."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    out = []
    for v in results.response.get("violations", []):
        if v.get("impact") in ("serious", "critical"):
            targets = [n.get("target") for n in v.get("nodes", [])][:3]
            out.append(f"{v['id']} ({v['impact']}): {v.get('help')} at {targets}")
    return out
