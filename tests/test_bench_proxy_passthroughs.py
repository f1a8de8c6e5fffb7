"""``bench proxy`` counts the measured requests the proxy did not assemble and fails on
any: a latency that mixes in forwarded requests measures less than the proxy's work.

The proxy's responses are real (the service on loopback in front of the scripted
upstream, as the benchmark runs it); the report's arithmetic is checked on exact counts.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from contextledger.bench.proxy_load import Passthroughs, passthrough_failure
from service_support import serve


def test_a_response_without_assembly_or_with_the_passthrough_header_counts() -> None:
    tally = Passthroughs()
    tally.note({"x-contextledger-assembly-id": "asm_1"})
    tally.note({"x-contextledger-passthrough": "ImportFormatError: messages[1]: unknown role 'system'"})
    tally.note({})
    assert tally.as_dict() == {
        "requests": 3,
        "passthroughs": 2,
        "reasons": ["ImportFormatError: messages[1]: unknown role 'system'", "no x-contextledger-assembly-id header"],
    }


def test_the_report_fails_on_any_passthrough_in_a_measured_set() -> None:
    clean = {"passthroughs": {"requests": 160, "passthroughs": 0, "reasons": []},
             "sequential": [{"recorded_artifacts": 0, "passthroughs": {"requests": 40, "passthroughs": 0, "reasons": []}}]}
    assert passthrough_failure(clean) is None
    dirty = {**clean, "sequential": [*clean["sequential"], {"recorded_artifacts": 10_000, "passthroughs": {"requests": 40, "passthroughs": 20, "reasons": ["NotFoundError: tool call c1 not found"]}}]}
    assert passthrough_failure(dirty) == (
        "20 of 240 measured proxied requests were not assembled (sequential at 10,000 artifacts: 20 of 40); "
        "first reason: NotFoundError: tool call c1 not found"
    )


def test_the_benchmarks_agent_through_the_real_proxy_is_assembled(tmp_path: Path) -> None:
    """The benchmark's sequential agent (3 turns, whole history each time) through the
    service (SQLite) in front of the scripted upstream: every proxied answer carries an
    assembly id, and the tally counts each request once."""
    from contextledger.bench.proxy_load import _sequential
    from contextledger.ledger import Ledger
    from contextledger.server.app import create_app
    from contextledger.server.scripted import ScriptedUpstream
    from contextledger.server.settings import ServerSettings

    ledger = Ledger.open(home=tmp_path)
    upstream = ScriptedUpstream(keep_bodies=False)
    with serve(upstream.app) as up:
        settings = ServerSettings(home=str(tmp_path), openai_upstream=f"{up}/v1")
        with serve(create_app(settings, ledger=ledger)) as proxy:
            tally = Passthroughs()
            latencies, _ = asyncio.run(_sequential(f"{proxy}/v1/chat/completions", 3, headers={}, delta=False, tag="t", tally=tally))
    ledger.close()
    assert tally.as_dict() == {"requests": len(latencies), "passthroughs": 0, "reasons": []}
    assert len(latencies) == 6  # a tool call and a closing text per turn
