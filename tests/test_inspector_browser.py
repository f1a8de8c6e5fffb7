"""The inspector in a real browser (Debian's chromium through Playwright): a real Claude
Code session, one of its requests, omitted records and their reasons, a why-not search,
a memory followed to its artifact and raw bytes; accessibility (axe-core), a narrow
window, the keyboard and live updates.  Screenshots land in ``tests/screenshots``."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from browser_support import (
    DOCS_SCREENSHOT,
    launch_browser,
    new_page,
    screenshot,
    serious_violations,
)
from conftest import real_data_dir, require_real_data
from contextledger.ledger import Ledger
from contextledger.server.app import create_app
from contextledger.server.local import serve_in_thread
from contextledger.server.settings import ServerSettings

require_real_data()  # every test here imports a real Claude Code session
SESSION = real_data_dir() / "claude-code-viewer-dkimuson" / "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launch_browser()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Ledger, str, str]]:
    """One server for the module over a ledger holding the imported session and one
    request assembled without a trace."""
    led = Ledger.open(home=tmp_path_factory.mktemp("inspector"))
    conv = led.import_file(SESSION).conversation_id
    asm = led.assemble(conv, provider="anthropic", budget_tokens=4000).record.id
    with serve_in_thread(create_app(ServerSettings(), ledger=led)) as base:
        yield base, led, conv, asm
    led.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    yield from new_page(browser)


def test_from_the_list_to_an_omitted_record_a_why_not_and_raw_bytes(site: tuple[str, Ledger, str, str], page: Any) -> None:
    base, _, conv, asm = site
    page.goto(base + "/")
    screenshot(page, "01-conversations")
    page.get_by_role("link", name=re.compile("orchestrator")).first.click()
    page.wait_for_url(f"**/conversations/{conv}")
    page.get_by_role("heading", name="Branches").wait_for(state="visible")
    assert page.url.endswith(f"/conversations/{conv}")
    assert page.get_by_role("heading", name="Branches").is_visible()
    assert page.locator(".tag-abandoned").count() == 2 and page.get_by_text("subagent of").count() == 2
    assert page.locator(".msg").count() > 0 and page.get_by_text("thinking").count() == 0
    screenshot(page, "02-conversation")
    page.get_by_role("link", name=asm).first.click()
    page.wait_for_url(f"**/assemblies/{asm}")
    assert page.url.endswith(f"/assemblies/{asm}")
    assert "stored with the assembly" in page.locator(".source").inner_text()
    if os.environ.get("CONTEXTLEDGER_DOCS_SCREENSHOTS"):
        DOCS_SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copy(screenshot(page, "03-assembly"), DOCS_SCREENSHOT)
    screenshot(page, "03-assembly")
    # filter to omitted records (the select submits on change)
    page.get_by_label("Decision", exact=True).select_option("omitted")
    page.wait_for_url(re.compile(r"decision=omitted"))
    rows = page.locator("#records tbody tr")
    assert rows.count() > 0
    assert set(rows.evaluate_all("rs => rs.map(r => r.dataset.decision)")) == {"omitted"}
    screenshot(page, "04-omitted")
    # grouped by reason with the ids listed
    group = page.locator("#omitted-out_of_lineage")
    group.locator("summary").click()
    assert group.locator("li").count() == 36
    # open one omitted record and read its reason
    first = rows.first
    reason = first.get_attribute("data-reason")
    first.get_by_role("link").click()
    page.locator(".decision .badge").wait_for()
    assert page.locator(".decision .badge").inner_text() == "omitted"
    assert page.locator(".decision .reason").inner_text() == reason
    screenshot(page, "05-record")
    # why not?
    page.goto(f"{base}/assemblies/{asm}")
    page.get_by_label("Find a message, tool result or memory by text or id").fill("package.json")
    page.get_by_role("button", name="Why not?").click()
    page.wait_for_url("**why-not?q=package.json*")
    hits = page.locator("#hits tbody tr")
    hits.first.wait_for()
    assert hits.count() > 0 and "why-not?q=package.json" in page.url
    screenshot(page, "06-why-not")
    # a memory sent in the request: to its artifact and raw bytes, verified
    page.goto(f"{base}/assemblies/{asm}?decision=memory")
    page.locator("#records tbody tr a.id", has_text="mem_").first.click()
    page.get_by_role("heading", name="Memory").wait_for(state="visible")
    assert page.get_by_role("heading", name="Memory").is_visible()
    art = page.locator("section.artifact").first
    assert "sha256 verified" in art.locator(".verify-ok").inner_text()
    assert art.locator("pre.raw").inner_text().strip()
    screenshot(page, "07-provenance")


def test_pages_have_no_serious_accessibility_violations(site: tuple[str, Ledger, str, str], page: Any) -> None:
    base, led, conv, asm = site
    mem = next(r for r in led.explain(asm)["decisions"] if r["kind"] == "memory")["record_id"]
    for path in ("/", f"/conversations/{conv}", f"/assemblies/{asm}", f"/assemblies/{asm}/why-not?q=package", f"/records/{mem}?assembly={asm}"):
        page.goto(base + path)
        assert serious_violations(page) == [], path


def test_narrow_window_and_keyboard(site: tuple[str, Ledger, str, str], browser: Any) -> None:
    base, _, _, asm = site
    ctx = browser.new_context(viewport={"width": 390, "height": 800})
    page = ctx.new_page()
    try:
        page.goto(f"{base}/assemblies/{asm}")
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0
        screenshot(page, "08-narrow")
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "Skip to content"
        page.keyboard.press("Enter")
        assert page.evaluate("document.activeElement.id") == "main"
        # the decision filter is reachable and usable from the keyboard
        page.get_by_label("Decision", exact=True).focus()
        page.keyboard.press("ArrowDown")
        page.wait_for_url(re.compile(r"decision=raw"))
    finally:
        ctx.close()


def test_a_conversation_page_follows_new_requests(site: tuple[str, Ledger, str, str], page: Any) -> None:
    base, led, conv, _ = site
    page.goto(f"{base}/conversations/{conv}")
    before = page.locator(".timeline li").count()
    page.wait_for_timeout(500)  # the page has read its first version
    new = led.assemble(conv, provider="openai-chat", budget_tokens=3000).record.id
    page.get_by_role("link", name=new).first.wait_for()
    assert page.locator(".timeline li").count() == before + 1
    assert "Updated" in page.locator("#live-status").inner_text()


def test_a_keyed_service_signs_the_browser_in_and_out(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> None:
    from contextledger.server.keys import create_key

    led = Ledger.open(home=tmp_path_factory.mktemp("keyed"))
    try:
        conv = led.import_file(SESSION).conversation_id
        key, _ = create_key(led, "default")
        with serve_in_thread(create_app(ServerSettings(), ledger=led)) as base:
            ctx = browser.new_context(viewport={"width": 1280, "height": 800})
            pg = ctx.new_page()
            pg.goto(f"{base}/conversations/{conv}")
            assert "/sign-in?next=" in pg.url and pg.get_by_role("heading", name="Sign in").is_visible()
            pg.get_by_label("API key").fill("clk_not_a_key")
            pg.get_by_role("button", name="Sign in").click()
            assert pg.get_by_role("alert").inner_text() == "unknown or revoked API key"
            pg.get_by_label("API key").fill(key)
            pg.get_by_role("button", name="Sign in").click()
            pg.wait_for_url(f"{base}/conversations/{conv}")
            pg.get_by_role("heading", name="Branches").wait_for(state="visible")
            assert pg.url == f"{base}/conversations/{conv}" and pg.get_by_role("heading", name="Branches").is_visible()
            assert serious_violations(pg) == []
            pg.get_by_role("button", name="Sign out").click()
            pg.get_by_role("heading", name="Sign in").wait_for(state="visible")
            pg.goto(f"{base}/")
            assert "/sign-in" in pg.url
            ctx.close()
    finally:
        led.close()
