"""Hostile input, property-based: every registered importer (and automatic detection)
on inputs generated and mutated from real transcripts, the service's request-body parser,
and the recorder API on hostile text — a clear error or a recorded handling, never another exception, never a
half-written conversation.  Counts and cost: see ``tests/fuzzing.py`` (README
"Security").  A new importer is covered as soon as it is in ``SUPPORTED_FORMATS``."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import real_data_dir, require_real_data
from contextledger.errors import ContextLedgerError, ImportFormatError, InputError
from contextledger.ingest.importers import SUPPORTED_FORMATS, parse_file
from contextledger.ingest.importers.bodies import BODY_PROVIDERS, parse_request_body
from contextledger.ingest.loader import load_transcript
from contextledger.ledger import Ledger
from contextledger.limits import loads_json
from contextledger.security.crypto import Keyring
from fuzzing import (
    INPUTS_PER_EXAMPLE,
    examples,
    fuzz_settings,
    hostile_text,
    inputs,
    real_seeds,
    survives,
)

require_real_data()  # every test here reads ../shared/data/real: skip (or fail in CI) without it

SEEDS = real_seeds(real_data_dir(), SUPPORTED_FORMATS)
WORK = Path(tempfile.mkdtemp(prefix="cl-fuzz-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
LOAD_EVERY = 1000
"""One parsed input in this many is also loaded into a ledger (the all-or-nothing check)."""


@pytest.fixture(scope="module")
def scratch() -> Iterator[Ledger]:
    led = Ledger.open(f"sqlite:///{WORK / 'fuzz.db'}", blobs=WORK / "blobs", keys=Keyring((("k", bytes(32)),)))
    try:
        yield led
    finally:
        led.close()


def _load_or_nothing(led: Ledger, transcript: object, tenant: str) -> None:
    scope = led.scope(tenant)
    try:
        load_transcript(led, transcript, scope=scope)  # type: ignore[arg-type]
    except ContextLedgerError:
        assert led.store.list_conversations(scope) == []  # nothing half-written
        return
    [row] = led.store.list_conversations(scope)
    # a transcript with nothing to send (only runtime records) is one clear error too
    survives(lambda: led.assemble(row.conversation.id, scope=scope, persist=False), (ContextLedgerError,))


@pytest.mark.parametrize("fmt", SUPPORTED_FORMATS)
def test_importers_survive_mutated_and_generated_input(fmt: str, scratch: Ledger) -> None:
    """Each input goes through the importer of ``fmt``; one in four also through automatic
    detection (format sniffing rejects most mutated inputs at once)."""
    path = WORK / f"input-{fmt}.jsonl"

    @fuzz_settings(examples(per_example=INPUTS_PER_EXAMPLE))
    @given(batch=inputs(SEEDS))
    def run(batch: list[bytes]) -> None:
        for i, data in enumerate(batch):
            path.write_bytes(data)
            for chosen in (fmt, "auto") if i % 4 == 0 else (fmt,):
                result: list[object] = []
                error = survives(lambda c=chosen, out=result: out.append(parse_file(path, c)), (ImportFormatError,))
                if error is not None:
                    assert str(error).startswith(str(path)) and "\n" not in str(error)  # one line naming the file
                    continue
                digest = hashlib.sha256(data + chosen.encode()).digest()
                if int.from_bytes(digest[:4], "big") % LOAD_EVERY == 0:
                    _load_or_nothing(scratch, result[0], f"t{digest.hex()[:12]}")

    run()


_call = st.sampled_from(["message", "assistant", "result", "abandon", "title"])


@pytest.fixture(params=["sqlite", "postgresql"])
def recorder_ledger(request: pytest.FixtureRequest) -> Iterator[Ledger]:
    """A fresh ledger per backend for the recorder's hostile calls."""
    url = f"sqlite:///{WORK / f'recorder-{uuid.uuid4().hex[:8]}.db'}" if request.param == "sqlite" else str(request.getfixturevalue("pg_url"))
    led = Ledger.open(url, blobs=WORK / f"blobs-{uuid.uuid4().hex[:8]}", keys=Keyring((("k", bytes(32)),)))
    try:
        yield led
    finally:
        led.close()


RECORDER_CALLS = {"sqlite": int(os.environ.get("CONTEXTLEDGER_FUZZ_RECORDER", "200"))}
RECORDER_CALLS["postgresql"] = int(os.environ.get("CONTEXTLEDGER_FUZZ_RECORDER_POSTGRESQL", str(RECORDER_CALLS["sqlite"])))
"""Hostile recorder calls per backend (``make fuzz``: 10,000 on SQLite)."""


def test_recorder_api_survives_hostile_text(recorder_ledger: Ledger) -> None:
    """One shared conversation takes every call (a shared graph keeps examples cheap);
    each call succeeds or raises a contextledger error, and the conversation still
    assembles for both providers afterwards."""
    scratch = recorder_ledger
    rec = scratch.recorder(scratch.scope("recorder"))
    conv = rec.start_conversation(title="fuzz")
    counter = iter(range(10**9))

    @fuzz_settings(RECORDER_CALLS[scratch.store.dialect])
    @given(kind=_call, text=hostile_text(), name=hostile_text(), role=st.sampled_from(["user", "assistant", "system", "tool", "bogus", "\x00"]))
    def run(kind: str, text: str, name: str, role: str) -> None:
        n = next(counter)
        if kind == "message":
            survives(lambda: rec.record_message(conv.id, role, text), (ContextLedgerError, ValueError))
        elif kind == "assistant":
            survives(lambda: rec.record_assistant(conv.id, text=text, tool_calls=[{"call_id": f"c{n}{name[:8]}", "tool_name": name, "arguments": text}]), (ContextLedgerError,))
        elif kind == "result":
            survives(lambda: rec.record_tool_result(conv.id, f"c{n - 1}{name[:8]}", text, is_error=len(text) % 2 == 1), (ContextLedgerError,))
        elif kind == "abandon":
            survives(lambda: rec.mark_abandoned(conv.id, f"c{n - 1}{name[:8]}", text), (ContextLedgerError,))
        else:
            survives(lambda: rec.start_conversation(title=text, system_prompt=name), (ContextLedgerError,))

    run()
    for provider in ("openai-chat", "anthropic"):
        scratch.assemble(conv.id, provider=provider, scope=scratch.scope("recorder"), persist=False)


BODY_SEEDS = [
    json.dumps(b).encode() for b in (
        {"model": "gpt-4o", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "ok"}]},
        {"model": "claude", "system": "s", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}, {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]},
        {"model": "gpt-4o", "instructions": "s", "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}, {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}, {"type": "function_call_output", "call_id": "c1", "output": "ok"}]},
    )
]


@pytest.mark.parametrize("provider", BODY_PROVIDERS)
def test_request_body_parser_survives_mutated_bodies(provider: str) -> None:
    """The service's request parser (``parse_request_body``) on decoded bodies: a clear
    error or a transcript, never another exception."""

    @fuzz_settings(examples(per_example=INPUTS_PER_EXAMPLE))
    @given(batch=inputs(BODY_SEEDS + SEEDS[:4]))
    def run(batch: list[bytes]) -> None:
        for data in batch:
            try:
                body = loads_json(data.decode("utf-8", "replace"))
            except ValueError:
                continue
            survives(lambda b=body: parse_request_body(provider, b), (ImportFormatError, InputError))

    run()
