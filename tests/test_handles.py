"""Handles (``m12``, ``a12``): what a payload shows instead of random ids, and how
``rehydrate``, ``explain`` and the MCP tools resolve them (:mod:`contextledger.handles`)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextledger.cli.main import app
from contextledger.errors import InputError, NotFoundError
from contextledger.handles import Handle, artifact_handle, memory_handle, parse_handle
from contextledger.ledger import Ledger

T0 = datetime(2026, 5, 1, 10, 0, tzinfo=UTC)
BIG = "\n".join(f"{n}\tdef f{n}(): return {n}" for n in range(1, 400))


def _record(led: Ledger) -> tuple[str, list[str]]:
    """A conversation with two reads of the same file, the first made stale by an edit."""
    rec = led.recorder()
    conv = rec.start_conversation(title="handles", system_prompt="You fix bugs.")
    rec.record_message(conv.id, "user", "Fix src/a.py")
    mems = []
    for i, (tool, args, out) in enumerate([
        ("Read", {"file_path": "src/a.py"}, BIG),
        ("Edit", {"file_path": "src/a.py", "old_string": "f1", "new_string": "g1"}, "The file src/a.py has been updated."),
        ("Read", {"file_path": "src/b.py"}, BIG.replace("def", "async def")),
    ]):
        rec.record_assistant(conv.id, tool_calls=[{"call_id": f"c{i}", "tool_name": tool, "arguments": args}])
        mems.append(rec.record_tool_result(conv.id, f"c{i}", out, observed_at=T0 + timedelta(seconds=i))[2].id)
    rec.record_message(conv.id, "user", "What next?")
    return conv.id, mems


def test_parse_and_format() -> None:
    assert parse_handle("m12") == Handle(kind="memory", seq=12) and str(Handle(kind="artifact", seq=7)) == "a7"
    assert [parse_handle(x) for x in ("a0", "m", "x12", "mem_01JD8X9Q4M6Z3K2B7N5R8T1V0W", "m12a")] == [None] * 5


def test_payload_names_records_by_handle_and_every_tool_resolves_them(ledger: Ledger) -> None:
    conv, mem_ids = _record(ledger)
    scope = ledger.scope()
    mems = [ledger.store.get_memory(scope, m) for m in mem_ids]
    arts = [ledger.store.get_artifact(scope, m.source_artifact_ids[0]) for m in mems]
    # a memory and the artifact it was derived from share the number: the result's seq
    assert [memory_handle(m) for m in mems] == [f"m{a.seq}" for a in arts] == [f"m{s}" for s in (4, 6, 8)]
    assert [artifact_handle(a) for a in arts] == ["a4", "a6", "a8"]
    assert mems[0].limits is not None and mems[0].limits.endswith("file changed later (m6)")
    res = ledger.assemble(conv, budget_tokens=1200, now=T0 + timedelta(minutes=5), trace=True)
    text = json.dumps(res.payload, ensure_ascii=False)
    assert re.search(r"\b(?:mem|art)_[0-9A-Z]{26}\b", text) is None
    assert "[stale memory m4 · Read · " in text and "[artifact a8, " in text
    # rehydrate: a handle needs its conversation; an id does not
    assert ledger.rehydrate("a8", conversation_id=conv) == ledger.rehydrate(arts[2].id) == BIG.replace("def", "async def").encode()
    assert ledger.rehydrate("m8", conversation_id=conv) == ledger.rehydrate(arts[2].id)
    with pytest.raises(InputError, match="a8 is a handle, numbered within one conversation"):
        ledger.rehydrate("a8")
    with pytest.raises(NotFoundError):
        ledger.rehydrate("a5", conversation_id=conv)  # seq 5 is an assistant turn
    # explain resolves a handle in the assembly's conversation
    by_handle = ledger.explain(res.record.id, record_id="m4")
    assert by_handle["record_id"] == mems[0].id and by_handle["handle"] == "m4"
    assert by_handle["decision"] == ledger.explain(res.record.id, record_id=mems[0].id)["decision"]


def test_cli_and_mcp_resolve_handles(tmp_path: Path) -> None:
    led = Ledger.open(home=tmp_path)
    try:
        conv, mem_ids = _record(led)
        res = led.assemble(conv, budget_tokens=1200, now=T0 + timedelta(minutes=5))
        raw = led.rehydrate("a8", conversation_id=conv)
        pytest.importorskip("mcp")
        from contextledger.adapters.mcp import rehydrate, why_not

        ev = rehydrate(led, "a8", conversation_id=conv)
        assert ev.text is not None and ev.text.encode() == raw[: len(ev.text.encode())] and not ev.refused
        assert why_not(led, res.record.id, "m4")["record_id"] == mem_ids[0]
    finally:
        led.close()
    runner = CliRunner()
    out = runner.invoke(app, ["--home", str(tmp_path), "rehydrate", "a8", "--conversation", conv, "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["text"] == raw.decode()
    bad = runner.invoke(app, ["--home", str(tmp_path), "rehydrate", "a8"])
    assert bad.exit_code != 0 and "--conversation" in bad.output and "Traceback" not in bad.output
    expl = runner.invoke(app, ["--home", str(tmp_path), "explain", res.record.id, "--record", "m4", "--json"])
    assert expl.exit_code == 0, expl.output
    assert json.loads(expl.output)["record_id"] == mem_ids[0]
