"""The inspector's list of proxy requests forwarded without a recorded turn, in a real
browser (Debian's chromium through Playwright): a request the proxy could not assemble
and a side call each show as a row with why, and the page stays accessible (axe-core)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from browser_support import launch_browser, serious_violations
from contextledger.ledger import Ledger
from contextledger.server.app import create_app
from contextledger.server.local import serve_in_thread
from contextledger.server.scripted import Plan, ScriptedUpstream
from contextledger.server.settings import ServerSettings

HEADERS = {"content-type": "application/json", "anthropic-version": "2023-06-01", "x-api-key": "k"}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launch_browser()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    upstream = ScriptedUpstream(lambda kind, body: Plan(text="ok"))
    led = Ledger.open(home=tmp_path_factory.mktemp("forwarded"))
    with serve_in_thread(upstream.app) as up, serve_in_thread(create_app(ServerSettings(anthropic_upstream=up), ledger=led)) as base:
        led.recorder().start_conversation(title="an earlier session")
        for body in ({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": 3}]},
                     {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "quota"}]}):
            assert httpx.post(base + "/v1/messages", content=json.dumps(body), headers=HEADERS, timeout=60).status_code == 200
        yield base
    led.close()


def test_forwarded_requests_are_rows_of_the_list(site: str, browser: Any) -> None:
    page = browser.new_page()
    try:
        page.goto(site + "/")
        rows = page.locator("#forwarded tbody tr")
        assert rows.count() == 2
        cells = [[c.strip() for c in rows.nth(i).locator("td").all_inner_texts()] for i in range(2)]
        assert [c[1:] for c in cells] == [  # newest first
            ["side call", "anthropic", "/v1/messages", "probe: at most 1 output token(s)"],
            ["not assembled", "anthropic", "/v1/messages",
             "ImportFormatError: <request body>, messages[0].content: expected a string or an array of blocks, found a number"],
        ]
        assert page.locator("#forwarded caption").inner_text().startswith("2 newest proxy requests")
        assert serious_violations(page) == []
    finally:
        page.close()
