"""The assembly page reads right in a real browser (issue 25 item 16): each bar segment
has its bucket's legend colour, a bucket over its limit is flagged in text, a short
"sent / not sent" summary comes before the long tables, and ids, handles and numbers
are never cut mid-way."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from browser_support import launch_browser, new_page
from conftest import real_data_dir, require_real_data
from contextledger.ledger import Ledger
from contextledger.server.app import create_app
from contextledger.server.local import serve_in_thread
from contextledger.server.settings import ServerSettings

require_real_data()
SESSION = real_data_dir() / "claude-code-viewer-dkimuson" / "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
BUDGET = 1500  # system_rules stays empty and current_input_task_state goes over its limit


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launch_browser()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Ledger, str]]:
    led = Ledger.open(home=tmp_path_factory.mktemp("reading"))
    conv = led.import_file(SESSION).conversation_id
    asm = led.assemble(conv, provider="anthropic", budget_tokens=BUDGET).record.id
    with serve_in_thread(create_app(ServerSettings(), ledger=led)) as base:
        yield base, led, asm
    led.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    yield from new_page(browser)


def test_each_segment_has_its_buckets_legend_colour_and_an_over_limit_bucket_says_so(site: tuple[str, Ledger, str], page: Any) -> None:
    base, led, asm = site
    rec = led.store.get_assembly(led.scope(), asm)[0]
    buckets = {k: (int(v["used"]), int(v["limit"])) for k, v in rec.buckets.items()}
    assert buckets["system_rules"][0] == 0  # an empty bucket before the non-empty ones
    over = {k: u - lim for k, (u, lim) in buckets.items() if lim and u > lim}
    assert set(over) == {"current_input_task_state"}
    page.goto(f"{base}/assemblies/{asm}")
    colour = "el => getComputedStyle(el).backgroundColor"
    segments = page.locator(".bar .seg[data-bucket]")
    assert segments.evaluate_all("ss => ss.map(s => s.dataset.bucket)") == [k for k, (u, _) in buckets.items() if u]
    for i in range(segments.count()):
        seg = segments.nth(i)
        name = seg.get_attribute("data-bucket")
        assert seg.evaluate(colour) == page.locator(f'tr[data-bucket="{name}"] .swatch').evaluate(colour), name
    for name, excess in over.items():
        row = page.locator(f'tr[data-bucket="{name}"]')
        assert f"over by {excess:,}" in row.inner_text()
        title = page.locator(f'.bar .seg[data-bucket="{name}"]').get_attribute("title")
        assert title == f"{name.replace('_', ' ')}: {buckets[name][0]:,} — over its limit of {buckets[name][1]:,} by {excess:,}"
    for name in set(buckets) - set(over):
        assert "over by" not in page.locator(f'tr[data-bucket="{name}"]').inner_text()


def test_the_summary_says_what_was_sent_and_not_before_the_tables(site: tuple[str, Ledger, str], page: Any) -> None:
    base, led, asm = site
    expl = led.explain(asm)
    decisions = [d["decision"] for d in expl["decisions"]]
    page.goto(f"{base}/assemblies/{asm}")
    summary = page.locator("#summary")
    text = " ".join(summary.inner_text().split())
    sent = len(decisions) - decisions.count("omitted")
    assert f"Sent: {sent:,} records" in text and f"Not sent: {decisions.count('omitted'):,} records" in text
    rec = led.store.get_assembly(led.scope(), asm)[0]
    assert f"{rec.assembled_tokens:,} tokens of a {BUDGET:,} budget" in text
    assert "Over its limit: current input task state" in text
    # it comes first: above the token bar and the records table, inside the first screen
    top = summary.bounding_box()["y"]
    assert top < page.locator(".bar").bounding_box()["y"] < page.locator("#records").bounding_box()["y"]
    assert top + summary.bounding_box()["height"] < 800


def test_ids_and_numbers_never_wrap_mid_way_in_a_narrow_window(site: tuple[str, Ledger, str], browser: Any) -> None:
    base, _, asm = site
    ctx = browser.new_context(viewport={"width": 390, "height": 800})
    page = ctx.new_page()
    try:
        page.goto(f"{base}/assemblies/{asm}")
        # an element whose text wraps has more than one client rect per text node line
        wrapped = page.evaluate(
            """() => [...document.querySelectorAll('.id, .handle, td.n')].filter(el => {
                 const r = document.createRange(); r.selectNodeContents(el);
                 const tops = new Set([...r.getClientRects()].map(x => Math.round(x.top)));
                 return tops.size > 1;
               }).map(el => el.textContent)"""
        )
        assert wrapped == []
    finally:
        ctx.close()


def test_the_decision_table_is_in_transcript_order_with_handles_and_previews(site: tuple[str, Ledger, str], page: Any) -> None:
    base, led, asm = site
    rec = led.store.get_assembly(led.scope(), asm)[0]
    page.goto(f"{base}/assemblies/{asm}")
    rows = page.locator("#records tbody tr").evaluate_all(
        """rs => rs.map(r => ({id: r.querySelector('a.id').textContent, handle: (r.querySelector('.handle') || {}).textContent || '',
                              preview: (r.querySelector('.preview') || {}).textContent || ''}))"""
    )
    placed = [r for r in rows if r["handle"]]
    assert len(placed) > 10 and all(r["id"].startswith(("msg_", "art_", "mem_")) for r in placed)
    assert all(not r["handle"] for r in rows[len(placed):])  # records without a place come last
    seqs = [int(r["handle"].split()[-1].lstrip("ma")) for r in placed]
    assert seqs == sorted(seqs)
    messages = {m.id: m for m in led.store.messages(led.scope(), rec.conversation_id, ids=[r["id"] for r in placed if r["id"].startswith("msg_")])}
    memories = {m.id: m for m in led.store.memories(led.scope(), rec.conversation_id, ids=[r["id"] for r in placed if r["id"].startswith("mem_")])}
    assert messages and memories
    for r in placed:
        if r["id"] in messages:
            m = messages[r["id"]]
            assert r["handle"] == f"message {m.seq}"
            text = next((ln.strip() for p in m.parts if p.kind == "text" and p.text for ln in p.text.splitlines() if ln.strip()), "")
            if text:
                assert r["preview"] == text or (r["preview"].endswith("…") and text.startswith(r["preview"][:-1]) and len(r["preview"]) <= 80)
        elif r["id"] in memories:
            assert r["handle"] == f"m{memories[r['id']].seq}"
            assert memories[r["id"]].summary.startswith(r["preview"].rstrip("…"))
