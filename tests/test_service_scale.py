"""Scale-out over PostgreSQL: several workers (each its own ledger, connection pool and
home folder) reconcile the same conversation at once and record each message once; blobs
written by one worker are read by another (no shared folder)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from contextledger.ledger import Ledger
from contextledger.server.app import create_app
from contextledger.server.scripted import ScriptedUpstream
from contextledger.server.settings import ServerSettings
from service_support import serve

pytestmark = pytest.mark.postgres

BIG = "line of a long build log\n" * 400  # above the inline threshold: a blob


@pytest.fixture
def workers(pg_url: str, tmp_path: Path) -> Iterator[tuple[list[str], list[Ledger], ScriptedUpstream]]:
    upstream = ScriptedUpstream()
    ledgers = [Ledger.open(pg_url, home=tmp_path / f"w{i}") for i in range(2)]
    with serve(upstream.app) as up, serve(create_app(ServerSettings(openai_upstream=f"{up}/v1"), ledger=ledgers[0])) as a, \
            serve(create_app(ServerSettings(openai_upstream=f"{up}/v1"), ledger=ledgers[1])) as b:
        yield [a, b], ledgers, upstream
    for led in ledgers:
        led.close()


def test_two_workers_record_each_message_once(workers: tuple[list[str], list[Ledger], ScriptedUpstream]) -> None:
    urls, ledgers, upstream = workers
    history = [
        {"role": "system", "content": "You are a build agent."},
        {"role": "user", "content": "Build the project. Never delete the cache."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_b1", "type": "function", "function": {"name": "run", "arguments": "{\"command\": \"make\"}"}}]},
        {"role": "tool", "tool_call_id": "call_b1", "content": BIG},
    ]
    body = {"model": "gpt-4o", "messages": history}
    # one request per app first: the two apps share this process (unlike real workers),
    # and FastAPI builds its routes lazily on the first request it matches
    for url in urls:
        assert httpx.get(f"{url}/api/conversations", timeout=60).status_code == 200
        assert httpx.get(f"{url}/v1/models", timeout=60).status_code == 200
    barrier = threading.Barrier(8)
    statuses: list[int] = []

    def send(url: str) -> None:
        with httpx.Client(timeout=60) as client:
            barrier.wait()
            statuses.append(client.post(f"{url}/v1/chat/completions", json=body, headers={"authorization": "Bearer sk-x"}).status_code)

    threads = [threading.Thread(target=send, args=(urls[i % 2],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [200] * 8 and upstream.invalid == 0
    scope = ledgers[0].scope()
    [conv] = ledgers[0].store.list_conversations(scope)
    messages = ledgers[0].store.messages(scope, conv.conversation.id)
    roles = [m.role.value for m in messages]
    # the history once; the 8 identical answers are one recorded answer
    assert roles == ["system", "user", "assistant", "tool", "assistant"], roles
    assert [c.call_id for c in ledgers[0].store.tool_calls(scope, conv.conversation.id)] == ["call_b1"]
    [art] = ledgers[0].store.artifacts(scope, conv.conversation.id)
    assert art.blob_key is not None
    # the other worker (another home folder) reads the blob from the database
    assert ledgers[1].rehydrate(art.id) == BIG.encode()
    assert not any((Path(str(ledgers[1].store.blobs.fallback.root))).rglob("*"))  # type: ignore[attr-defined]
