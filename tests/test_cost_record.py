"""Cost figures in the ContextAssembly record, ``explain``, ``/api`` and the inspector.

A small fixed conversation (texts of ``" w" * k``: exactly ``k`` o200k tokens) assembled
twice with persistence: the second record's cost is estimated from the first stored
payload and its own, the replay side from the two replay token counts.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from contextledger.assembly.cost_record import replay_split
from contextledger.explain import render_explanation
from contextledger.ledger import Ledger
from contextledger.providers.cost import conversation_cost
from contextledger.providers.prices import load_prices
from contextledger.server.app import create_app
from contextledger.server.settings import ServerSettings

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def words(k: int) -> str:
    return " w" * k


def _two_assemblies(ledger: Ledger, provider: str) -> tuple[str, Any, Any]:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="cost", system_prompt="You review code.")
    rec.record_message(conv.id, "user", "Read the notes." + words(1500))
    first = ledger.assemble(conv.id, provider=provider, budget_tokens=20000, now=NOW)
    rec.record_message(conv.id, "assistant", "Noted." + words(50))
    rec.record_message(conv.id, "user", "Now summarise." + words(100))
    second = ledger.assemble(conv.id, provider=provider, budget_tokens=20000, now=NOW)
    return conv.id, first, second


def _automatic(payload: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "cache_control": {"type": "ephemeral"}}


def test_record_cost_anthropic(ledger: Ledger) -> None:
    _, first, second = _two_assemblies(ledger, "anthropic")
    one, two = first.record.cost, second.record.cost
    r1, r2 = first.record.replay_tokens, second.record.replay_tokens
    assert r1 > 1024 and r2 > r1
    # replay: the first request is written, the second reads it and writes the tail
    assert one["replay"] == {"total_tokens": r1, "cache_read_tokens": 0, "cache_write_tokens": r1, "uncached_tokens": 0,
                             "cache_write_1h_tokens": 0, "output_tokens": 0, "usd": round(r1 * 3.75 / 1e6, 9)}
    assert two["replay"]["cache_read_tokens"] == r1 and two["replay"]["cache_write_tokens"] == r2 - r1
    assert two["replay"]["usd"] == round((r1 * 0.3 + (r2 - r1) * 3.75) / 1e6, 9)
    # assembled: the provider cache after the first stored payload, the second priced
    expected = conversation_cost("anthropic", [_automatic(first.payload), _automatic(second.payload)])
    assert one["assembled"] == expected[0].as_dict() and two["assembled"] == expected[1].as_dict()
    assert two["assembled"]["total_tokens"] == second.record.assembled_tokens
    assert (one["previous_assembly_id"], two["previous_assembly_id"]) == (None, first.record.id)
    assert (two["price"], two["prices"], two["model"]) == ("default (unknown model)", load_prices().version, None)
    # stored and read back unchanged
    stored, _ = ledger.store.get_assembly(ledger.scope(), second.record.id)
    assert stored.cost == two


def test_record_cost_openai_rounds_replay_to_128_token_steps(ledger: Ledger) -> None:
    _, first, second = _two_assemblies(ledger, "openai-chat")
    r1, r2 = first.record.replay_tokens, second.record.replay_tokens
    cached = 1024 + (r1 - 1024) // 128 * 128
    assert second.record.cost["replay"]["cache_read_tokens"] == cached
    assert second.record.cost["replay"]["uncached_tokens"] == r2 - cached
    assert second.record.cost["price"] == "default (unknown model)"
    price = load_prices().price("openai-chat", None)
    assert replay_split(price, 1000, None) == {"cache_read_tokens": 0, "cache_write_tokens": 0, "uncached_tokens": 1000}
    assert replay_split(price, 3000, 1300) == {"cache_read_tokens": 1280, "cache_write_tokens": 0, "uncached_tokens": 1720}


def test_another_providers_request_is_no_previous_one(ledger: Ledger) -> None:
    conv, _, chat = _two_assemblies(ledger, "openai-chat")
    first_anthropic = ledger.assemble(conv, provider="anthropic", budget_tokens=20000, now=NOW)
    cost = first_anthropic.record.cost
    assert cost["previous_assembly_id"] is None and chat.record.cost["previous_assembly_id"] is not None
    assert cost["replay"]["cache_read_tokens"] == 0 and cost["assembled"]["cache_read_tokens"] == 0


def test_explain_shows_request_and_conversation_cost(ledger: Ledger) -> None:
    _, first, second = _two_assemblies(ledger, "anthropic")
    expl = ledger.explain(second.record.id)
    assert expl["cost"] == second.record.cost
    total = expl["conversation_cost"]
    a1, a2 = first.record.cost, second.record.cost
    assert total["requests"] == 2
    assert total["assembled"]["usd"] == round(a1["assembled"]["usd"] + a2["assembled"]["usd"], 9)
    assert total["replay"]["cache_read_tokens"] == first.record.replay_tokens
    assert total["ratio"] == round(total["assembled"]["usd"] / total["replay"]["usd"], 4)
    text = render_explanation(expl)
    replay = a2["replay"]
    assert (f"replay ${replay['usd']:.6f} ({replay['cache_read_tokens']:,} cached, {replay['cache_write_tokens']:,} written, 0 uncached)") in text
    assert f"conversation: 2 requests, ${total['assembled']['usd']:.6f} assembled vs ${total['replay']['usd']:.6f} replay" in text


def test_api_and_inspector_show_cost(ledger: Ledger) -> None:
    conv_id, first, second = _two_assemblies(ledger, "anthropic")
    with TestClient(create_app(ServerSettings(), ledger=ledger)) as client:
        res = client.get(f"/api/conversations/{conv_id}/cost")
        assert res.status_code == 200
        data = res.json()
        assert [r["assembly_id"] for r in data["requests"]] == [first.record.id, second.record.id]
        assert data["requests"][1]["cost"] == second.record.cost
        assert data["totals"] == ledger.explain(second.record.id)["conversation_cost"]
        assert client.get("/api/conversations/conv_missing/cost").status_code == 404
        explained = client.get(f"/api/assemblies/{second.record.id}/explain").json()
        assert explained["cost"] == second.record.cost
        page = client.get(f"/conversations/{conv_id}").text
        totals = data["totals"]
        assert f"Cost after prompt caching (estimated, 2 requests): ${totals['assembled']['usd']:.6f} sent; a plain replay ${totals['replay']['usd']:.6f}" in page
        detail = client.get(f"/assemblies/{second.record.id}").text
        assert f"Cost after prompt caching (estimated): ${second.record.cost['assembled']['usd']:.6f}; replay ${second.record.cost['replay']['usd']:.6f}" in detail
        assert f'href="/assemblies/{first.record.id}"' in detail


def test_a_bad_price_file_is_named_on_the_record_not_raised(ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "prices.toml"
    bad.write_text("version = \n", encoding="utf-8")
    monkeypatch.setenv("CONTEXTLEDGER_PRICES", str(bad))
    rec = ledger.recorder()
    conv = rec.start_conversation(title="cost")
    rec.record_message(conv.id, "user", "Hello.")
    result = ledger.assemble(conv.id, provider="anthropic", budget_tokens=4000, now=NOW)
    assert result.record.cost is not None and result.record.cost["basis"] == "estimate"
    assert result.record.cost["error"].startswith(f"price file {bad}: not valid TOML (")
    assert render_explanation(ledger.explain(result.record.id)).count(f"cost: not estimated (price file {bad}: not valid TOML") == 1


def test_assemble_says_on_stderr_that_a_bad_price_file_left_no_cost(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from contextledger.cli.main import app

    home = tmp_path / "home"
    led = Ledger.open(home=home)
    rec = led.recorder()
    conv = rec.start_conversation(title="cost")
    rec.record_message(conv.id, "user", "Hello.")
    led.close()
    bad = tmp_path / "prices.toml"
    bad.write_text("version = \n", encoding="utf-8")
    result = CliRunner().invoke(app, ["--home", str(home), "assemble", conv.id, "--provider", "anthropic", "--json"], env={"CONTEXTLEDGER_PRICES": str(bad)})
    assert result.exit_code == 0
    [line] = [x for x in result.stderr.splitlines() if x.startswith("warning:")]
    assert line.startswith("warning: no cost figures for asm_") and f"price file {bad}: not valid TOML (" in line
    assert json.loads(result.stdout)["cost"]["error"].startswith(f"price file {bad}")
