"""Hostile input that used to crash: deeply nested JSON in tool-call arguments, lone
UTF-16 surrogates, NUL characters — on both backends, through the importers and the
recorder API.  Each case ends in a recorded handling (the data is stored, later
operations work) or one clear error, never a Python exception from the depths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextledger.errors import ImportFormatError, InputError
from contextledger.ledger import Ledger
from contextledger.limits import (
    MAX_JSON_DEPTH,
    JsonDepthError,
    json_depth_exceeds,
    loads_json,
    storable_text,
    utf8_bytes,
)
from contextledger.providers.registry import validate_payload
from contextledger.store.textguard import dumps_json

DEEP_ARRAY = "[" * 5000 + "]" * 5000
DEEP_OBJECT = '{"a":' * (MAX_JSON_DEPTH + 1) + "1" + "}" * (MAX_JSON_DEPTH + 1)


def _chat(path: Path, arguments: str, first_user: str = "run it") -> Path:
    path.write_text(json.dumps([
        {"role": "user", "content": first_user},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
        {"role": "assistant", "content": "finished"},
    ]), encoding="utf-8")
    return path


def _assemble_both(ledger: Ledger, conv_id: str) -> None:
    for provider in ("openai-chat", "anthropic"):
        res = ledger.assemble(conv_id, provider=provider, budget_tokens=2000)
        assert validate_payload(provider, res.payload) == []


# -- limits (pure) ---------------------------------------------------------------------------
def test_loads_json_refuses_depth_above_the_limit_at_any_stack_depth() -> None:
    assert loads_json('{"a": [1, {"b": 2}]}') == {"a": [1, {"b": 2}]}
    ok = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert json_depth_exceeds(loads_json(ok)) is False
    for text in ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), DEEP_ARRAY, DEEP_OBJECT):
        with pytest.raises(JsonDepthError) as info:
            loads_json(text)
        # a JSONDecodeError: code that treats invalid JSON as opaque text keeps doing so
        assert isinstance(info.value, json.JSONDecodeError) and f"deeper than {MAX_JSON_DEPTH}" in info.value.msg
    # brackets inside strings do not count
    assert loads_json(json.dumps({"code": "[" * 500})) == {"code": "[" * 500}


def test_storable_text_and_utf8_bytes() -> None:
    assert storable_text("plain") == ("plain", 0)
    assert storable_text("日本語 😀") == ("日本語 😀", 0)
    assert storable_text("a\x00b\ud800c\udfffd") == ("a\ufffdb\ufffdc\ufffdd", 3)
    assert utf8_bytes("a\x00\ud800") == "a\x00\ufffd".encode()  # NUL is valid UTF-8: kept
    # JSON bodies: NUL escapes and lone surrogates become U+FFFD; an escaped backslash
    # followed by "u0000" is text and stays
    assert json.loads(dumps_json({"t": "a\x00b", "s": "\ud800", "lit": "\\u0000", "pair": "😀"})) == {"t": "a\ufffdb", "s": "\ufffd", "lit": "\\u0000", "pair": "😀"}


# -- the three crashes -----------------------------------------------------------------------
def test_deeply_nested_tool_arguments_import_and_assemble(ledger: Ledger, tmp_path: Path) -> None:
    """Arguments nested 5,000 deep used to make the import (memory derivation) or every
    later assemble fail with RecursionError: now they are kept exact, as opaque text."""
    for args in (DEEP_ARRAY, DEEP_OBJECT):
        imp = ledger.import_file(_chat(tmp_path / f"deep{len(args)}.json", args))
        [call] = ledger.store.tool_calls(ledger.scope(), imp.conversation_id)
        assert call.arguments_json == args
        _assemble_both(ledger, imp.conversation_id)
        anthropic = ledger.assemble(imp.conversation_id, provider="anthropic", budget_tokens=200000).payload
        uses = [b for m in anthropic["messages"] if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_use"]
        assert uses and all(set(u["input"]) == {"_raw"} for u in uses)


def test_deeply_nested_record_in_a_jsonl_file_is_one_clear_error(ledger: Ledger, tmp_path: Path) -> None:
    """A Claude Code line whose tool input nests beyond the limit: one line naming file
    and line, nothing written."""
    deep: object = 1
    for _ in range(MAX_JSON_DEPTH + 5):
        deep = {"a": deep}
    lines = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s", "timestamp": "2026-01-01T00:00:00Z", "message": {"role": "user", "content": "go"}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "s", "timestamp": "2026-01-01T00:00:01Z",
         "message": {"id": "m1", "role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": deep}]}},
    ]
    path = tmp_path / "deep.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    with pytest.raises(ImportFormatError) as info:
        ledger.import_file(path)
    assert info.value.location == "line 2" and f"nesting deeper than {MAX_JSON_DEPTH} levels" in info.value.reason
    assert ledger.store.list_conversations(ledger.scope()) == []


def test_lone_surrogate_and_nul_in_first_user_message_and_results(ledger: Ledger, tmp_path: Path) -> None:
    """The title came from the first user message: a lone surrogate made the INSERT
    fail (UnicodeEncodeError), a NUL made PostgreSQL refuse it (DataError)."""
    path = tmp_path / "odd.json"
    path.write_text(json.dumps([
        {"role": "user", "content": "\ud800 fix the \x00 build"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "Bash\x00", "arguments": '{"command": "cat a\\u0000b \\ud800"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "out \x00 \udfff"},
    ]), encoding="utf-8")
    imp = ledger.import_file(path)
    assert any("lone UTF-16 surrogates" in n for n in imp.notes) and any("NUL characters" in n for n in imp.notes)
    [conv] = ledger.store.list_conversations(ledger.scope())
    assert conv.conversation.title == "\ufffd fix the \ufffd build"
    [art] = ledger.store.artifacts(ledger.scope(), imp.conversation_id)
    assert ledger.rehydrate(art.id) == "out \ufffd \ufffd".encode()
    _assemble_both(ledger, imp.conversation_id)


def test_recorder_api_takes_nul_surrogates_and_deep_arguments(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="t\x00\ud800", system_prompt="sys \x00")
    rec.record_message(conv.id, "user", "hi \ud83d there \x00")
    rec.record_assistant(conv.id, text="x", tool_calls=[{"call_id": "c1", "tool_name": "Bash", "arguments": DEEP_ARRAY}, {"call_id": "c2", "tool_name": "Read", "arguments": {"path": "a\x00\ud800"}}])
    _, art1, _ = rec.record_tool_result(conv.id, "c1", "bytes with NUL \x00 kept")
    _, art2, _ = rec.record_tool_result(conv.id, "c2", "lone \udc80 surrogate")
    # a NUL is valid UTF-8: the exact bytes are kept (in the blob store, never inline)
    assert ledger.rehydrate(art1.id) == b"bytes with NUL \x00 kept" and art1.blob_key is not None
    assert ledger.rehydrate(art2.id) == "lone \ufffd surrogate".encode()
    rec.mark_abandoned(conv.id, rec.record_assistant(conv.id, tool_calls=[{"call_id": "c3", "tool_name": "Bash"}])[1][0].call_id, "killed \ud800")
    _assemble_both(ledger, conv.id)
    [row] = ledger.store.list_conversations(ledger.scope())
    assert row.conversation.title == "t\ufffd\ufffd"


def test_size_limits_are_clear_errors(sqlite_ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import contextledger.limits as limits
    from contextledger.errors import InputError

    monkeypatch.setattr(limits, "MAX_TRANSCRIPT_BYTES", 100)
    monkeypatch.setattr(limits, "MAX_PAYLOAD_BYTES", 1000)
    path = _chat(tmp_path / "big.json", "{}", first_user="x" * 200)
    with pytest.raises(ImportFormatError, match="above the 100-byte limit of one transcript"):
        sqlite_ledger.import_file(path)
    rec = sqlite_ledger.recorder()
    conv = rec.start_conversation()
    rec.record_assistant(conv.id, tool_calls=[{"call_id": "c1", "tool_name": "Bash"}])
    with pytest.raises(InputError, match="tool result of c1 is 1,001 bytes, above the 1,000-byte limit"):
        rec.record_tool_result(conv.id, "c1", "y" * 1001)
    assert sqlite_ledger.store.tool_calls(sqlite_ledger.scope(), conv.id)[0].status.value == "pending"  # nothing written


def test_text_longer_than_a_bounded_column_is_one_input_error_on_both_backends(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="long names")
    rec.record_message(conv.id, "user", "go")
    with pytest.raises(InputError, match=r"^tool_calls\.tool_name is 300 characters, above its 200-character limit$"):
        rec.record_assistant(conv.id, text="calling", tool_calls=[{"call_id": "c1", "tool_name": "T" * 300, "arguments": {}}])
    with pytest.raises(InputError, match=r"^tool_calls\.call_id is 129 characters, above its 128-character limit$"):
        rec.record_assistant(conv.id, text="calling", tool_calls=[{"call_id": "c" * 129, "tool_name": "Bash", "arguments": {}}])
    # nothing of the refused turns was written; the conversation goes on
    assert [m.role.value for m in ledger.store.messages(ledger.scope(), conv.id)] == ["user"]
    rec.record_assistant(conv.id, text="calling", tool_calls=[{"call_id": "c" * 128, "tool_name": "T" * 200, "arguments": {}}])
    assert len(ledger.store.messages(ledger.scope(), conv.id)) == 2


def test_a_stream_is_read_only_up_to_the_transcript_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """/dev/zero, a FIFO or a process substitution has no size to check first: reading
    stops one byte past the limit with the same one-line error (exit 2), memory bounded."""
    import os
    import threading

    from typer.testing import CliRunner

    import contextledger.limits as limits
    from contextledger.cli.main import app

    monkeypatch.setattr(limits, "MAX_TRANSCRIPT_BYTES", 1 << 20)
    runner = CliRunner()
    res = runner.invoke(app, ["--home", str(tmp_path / "h"), "import", "/dev/zero"])
    assert res.exit_code == 2, res.output
    assert res.stderr.strip().splitlines() == ["error: /dev/zero: file is more than 1,048,576 bytes, above the 1,048,576-byte limit of one transcript"]
    fifo = tmp_path / "t.fifo"
    os.mkfifo(fifo)
    written: list[int] = []

    def writer() -> None:
        with fifo.open("wb") as fh:
            try:
                for _ in range(64):  # 4 MiB offered, far beyond the limit
                    fh.write(b"x" * 65536)
                    written.append(1)
            except BrokenPipeError:
                pass

    t = threading.Thread(target=writer)
    t.start()
    res = runner.invoke(app, ["--home", str(tmp_path / "h"), "import", str(fifo)])
    t.join(10)
    assert res.exit_code == 2 and "above the 1,048,576-byte limit of one transcript" in res.stderr
    assert len(written) < 64  # the reader stopped; the writer's pipe was closed early
    # a stream within the limit imports like a file
    good = _chat(tmp_path / "ok.json", "{}")
    fifo2 = tmp_path / "ok.fifo"
    os.mkfifo(fifo2)
    t = threading.Thread(target=lambda: fifo2.write_bytes(good.read_bytes()))
    t.start()
    res = runner.invoke(app, ["--home", str(tmp_path / "h"), "import", str(fifo2)])
    t.join(10)
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("layout", ["one line", "one line and a newline", "pretty-printed", "json lines"])
def test_auto_detection_reports_the_depth_limit_like_an_explicit_format(tmp_path: Path, layout: str) -> None:
    """A valid JSON document nested 203 levels deep, detected automatically: the error is
    the depth limit (as with ``--format openai-chat``), not "unrecognised JSON Lines
    record: found null"; a JSON Lines file whose records are all too deep names the line."""
    deep: object = "x"
    for _ in range(203):
        deep = {"a": deep}
    doc = {"messages": [{"role": "user", "content": "hi"}], "extra": deep}
    text = {
        "one line": json.dumps(doc), "one line and a newline": json.dumps(doc) + "\n",
        "pretty-printed": json.dumps(doc, indent=1), "json lines": "\n\n" + json.dumps(doc) + "\n" + json.dumps(doc) + "\n",
    }[layout]
    path = tmp_path / "deep2.json"
    path.write_text(text, encoding="utf-8")
    led = Ledger.open(home=tmp_path / "home")
    with pytest.raises(ImportFormatError) as auto:
        led.import_file(path)
    assert auto.value.reason == f"invalid JSON: nesting deeper than {MAX_JSON_DEPTH} levels"
    if layout == "json lines":
        assert auto.value.location == "line 3"
    else:
        assert auto.value.location is None
        with pytest.raises(ImportFormatError) as explicit:
            led.import_file(path, format="openai-chat")
        assert (explicit.value.location, explicit.value.reason) == (auto.value.location, auto.value.reason)
    led.close()
