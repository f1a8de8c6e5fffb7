"""Signing a browser in to the inspector's pages on a service that has API keys."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from contextledger.ledger import Ledger
from contextledger.server.app import create_app
from contextledger.server.deps import KEY_COOKIE
from contextledger.server.keys import create_key, list_keys, revoke_key
from contextledger.server.pages.signin import safe_next
from contextledger.server.settings import ServerSettings


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[tuple[TestClient, Ledger, str, str]]:
    led = Ledger.open(home=tmp_path)
    key, _ = create_key(led, "acme")
    with TestClient(create_app(ServerSettings(), ledger=led), follow_redirects=False) as c:
        cid = c.post("/api/conversations", json={"title": "acme's session"}, headers={"x-contextledger-key": key}).json()["id"]
        yield c, led, key, cid
    led.close()


def test_pages_without_a_key_go_to_sign_in_and_keep_where_they_were_going(keyed: tuple[TestClient, Ledger, str, str]) -> None:
    client, _, _, cid = keyed
    r = client.get(f"/conversations/{cid}?branch=b1")
    assert r.status_code == 303 and r.headers["location"] == f"/sign-in?next=%2Fconversations%2F{cid}%3Fbranch%3Db1"
    page = client.get("/sign-in", params={"next": f"/conversations/{cid}"})
    assert page.status_code == 200 and f'value="/conversations/{cid}"' in page.text
    # /api never redirects: it answers problem details
    api = client.get("/api/conversations")
    assert api.status_code == 401 and api.headers["content-type"] == "application/problem+json"


def test_sign_in_sets_an_httponly_strict_cookie_that_only_pages_accept(keyed: tuple[TestClient, Ledger, str, str]) -> None:
    client, led, key, cid = keyed
    bad = client.post("/sign-in", data={"key": "clk_wrong", "next": "/"})
    assert bad.status_code == 401 and "unknown or revoked API key" in bad.text and KEY_COOKIE not in bad.cookies
    ok = client.post("/sign-in", data={"key": key, "next": f"/conversations/{cid}"})
    assert ok.status_code == 303 and ok.headers["location"] == f"/conversations/{cid}"
    cookie = ok.headers["set-cookie"]
    assert cookie.startswith(f"{KEY_COOKIE}={key};") and "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    page = client.get(f"/conversations/{cid}")
    assert page.status_code == 200 and "acme&#39;s session" in page.text and "Sign out" in page.text
    assert client.get("/api/conversations").status_code == 401  # the cookie is not an /api credential
    out = client.post("/sign-out")
    assert out.status_code == 303 and f'{KEY_COOKIE}=""' in out.headers["set-cookie"]
    client.cookies.clear()
    assert client.get("/").status_code == 303
    # a revoked key stops working for a signed-in browser too
    client.cookies.set(KEY_COOKIE, key)
    assert client.get("/").status_code == 200
    revoke_key(led, list_keys(led, "acme")[0].id)
    assert client.get("/").status_code == 303


@pytest.mark.parametrize(("target", "expected"), [
    ("/conversations/c1?x=1", "/conversations/c1?x=1"),
    ("//evil.example/", "/"),
    ("https://evil.example/", "/"),
    ("/\\evil.example", "/"),
    ("", "/"),
    (None, "/"),
])
def test_sign_in_never_redirects_off_the_service(target: str | None, expected: str) -> None:
    assert safe_next(target) == expected
