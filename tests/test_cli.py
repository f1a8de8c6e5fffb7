"""The command line: JSON shapes, clean errors (never a traceback) and no half-imported
conversation on malformed input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextledger.cli.common import EXIT_BACKEND, EXIT_INPUT, EXIT_NOT_FOUND
from contextledger.cli.main import app
from contextledger.providers.registry import validate_payload

runner = CliRunner()
TAU = Path(__file__).parent / "data" / "airline_chat.json"  # an OpenAI-chat transcript of the project's own


def cli(home: Path, *args: str) -> tuple[int, str]:
    res = runner.invoke(app, ["--home", str(home), *args])
    return res.exit_code, res.output


def conversations(home: Path) -> list[dict[str, object]]:
    code, out = cli(home, "conversations", "--json")
    assert code == 0
    return list(json.loads(out))


def test_import_assemble_explain_rehydrate_json(tmp_path: Path) -> None:
    code, out = cli(tmp_path, "import", str(TAU), "--json")
    assert code == 0, out
    [imp] = json.loads(out)
    assert imp["format"] == "openai-chat" and imp["created"] is True
    assert {"conversation_id", "messages", "tool_calls", "artifacts", "notes"} <= set(imp)
    [row] = conversations(tmp_path)
    assert row["conversation_id"] == imp["conversation_id"] and row["tool_calls"] == imp["tool_calls"]

    out_file = tmp_path / "asm.json"
    res = runner.invoke(app, ["--home", str(tmp_path), "assemble", imp["conversation_id"], "--provider", "anthropic", "--budget", "3000", "--now", "2024-05-15T12:00:00Z", "--json", "--out", str(out_file), "--trace"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)  # stderr: --now is before the import (the messages carry no times of their own)
    assert res.stderr.startswith("warning: --now 2024-05-15T12:00:00+00:00 is earlier than the conversation's newest message (")
    assert json.loads(out_file.read_text()) == data
    for key in ("assembly_id", "policy_version", "assembler_version", "replay_tokens", "assembled_tokens", "selected", "omitted", "timings_ms", "payload"):
        assert key in data
    assert set(data["payload"]) <= {"system", "messages", "tools"} and "messages" in data["payload"]
    assert validate_payload("anthropic", data["payload"]) == []
    assert data["assembled_tokens"] <= 3000 < data["replay_tokens"]
    assert data["trace"], "--trace keeps the per-record decision chain"

    code, out = cli(tmp_path, "explain", data["assembly_id"], "--json")
    assert code == 0
    expl = json.loads(out)
    assert expl["summary"] == data["omitted"]
    some = next(iter(expl["records"]))
    code, out = cli(tmp_path, "explain", data["assembly_id"], "--record", some)
    assert code == 0 and some in out

    code, out = cli(tmp_path, "import", str(TAU), "--json")
    assert json.loads(out)[0]["created"] is False

    # rehydrate: exact bytes of a large (blob) artifact
    from contextledger.ledger import Ledger

    led = Ledger.open(home=tmp_path)
    arts = led.store.artifacts(led.scope(), imp["conversation_id"])
    led.close()
    art = max(arts, key=lambda a: a.size_bytes)
    target = tmp_path / "raw.bin"
    code, out = cli(tmp_path, "rehydrate", art.id, "--out", str(target))
    assert code == 0
    import hashlib

    assert "sha256:" + hashlib.sha256(target.read_bytes()).hexdigest() == art.sha256


MALFORMED = {
    "truncated-middle.jsonl": (b'{"role":"user","content":"hi"}\n{"role":"assistant","content":"he\n{"role":"user","content":"x"}\n', "line 2"),
    "unknown-role.json": (json.dumps([{"role": "user", "content": "a"}, {"role": "wizard", "content": "b"}]).encode(), "unknown role 'wizard'"),
    "empty.jsonl": (b"", "file is empty"),
    "binary.json": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
    "wrong-shape.json": (json.dumps({"foo": [1, 2]}).encode(), "expected"),
    "no-messages.json": (json.dumps({"messages": []}).encode(), "holds no messages"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_input_gives_clear_error_and_leaves_nothing(tmp_path: Path, name: str) -> None:
    data, needle = MALFORMED[name]
    path = tmp_path / name
    path.write_bytes(data)
    home = tmp_path / "home"
    code, out = cli(home, "import", str(path))
    assert code == EXIT_INPUT
    assert "Traceback" not in out
    assert str(path) in out.replace("\n", "") and needle.lower() in out.lower()
    assert conversations(home) == []


def test_orphan_tool_result_is_kept_and_explained(tmp_path: Path) -> None:
    path = tmp_path / "orphan.json"
    path.write_text(json.dumps([
        {"role": "user", "content": "check"},
        {"role": "tool", "tool_call_id": "call_nowhere", "content": "stray output"},
        {"role": "assistant", "content": "done"},
    ]))
    code, out = cli(tmp_path / "home", "import", str(path), "--json")
    assert code == 0, out
    [imp] = json.loads(out)
    assert any("call_nowhere" in n for n in imp["notes"])


def test_truncated_last_line_is_skipped_with_a_note(tmp_path: Path) -> None:
    src = (Path(__file__).parent / "data" / "claude_code_session.jsonl").read_bytes()
    path = tmp_path / "cut.jsonl"
    path.write_bytes(src[: len(src) - 40])
    code, out = cli(tmp_path / "home", "import", str(path), "--json")
    assert code == 0, out
    [imp] = json.loads(out)
    assert any("truncated" in n for n in imp["notes"])


def test_fifty_megabyte_tool_output(tmp_path: Path) -> None:
    big = "x" * (50 * 1024 * 1024 - 17) + "\nERROR: disk full"
    msgs = [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_big", "type": "function", "function": {"name": "run", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_big", "content": big},
        {"role": "assistant", "content": "it failed"},
    ]
    path = tmp_path / "big.json"
    path.write_text(json.dumps(msgs))
    home = tmp_path / "home"
    code, out = cli(home, "import", str(path), "--json")
    assert code == 0, out
    [imp] = json.loads(out)
    code, out = cli(home, "assemble", imp["conversation_id"], "--json", "--budget", "2000")
    assert code == 0, out
    data = json.loads(out)
    assert data["assembled_tokens"] <= 2000
    assert validate_payload("openai-chat", data["payload"]) == []
    from contextledger.ledger import Ledger

    led = Ledger.open(home=home)
    [art] = led.store.artifacts(led.scope(), imp["conversation_id"])
    assert art.size_bytes == len(big.encode()) and art.blob_key is not None
    assert led.rehydrate(art.id) == big.encode()
    led.close()


def test_importing_the_same_file_again_reports_the_conversation_not_zero_counts(tmp_path: Path) -> None:
    code, first = cli(tmp_path, "import", str(TAU))
    assert code == 0 and first.startswith("imported: ")
    code, again = cli(tmp_path, "import", str(TAU))
    assert code == 0
    conv = conversations(tmp_path)
    assert len(conv) == 1 and f"already imported: {TAU}" in again.replace("\n", "") and str(conv[0]["conversation_id"]) in again.replace("\n", "")
    assert "0 messages" not in again and "note: already imported: same content key; nothing written" in again.replace("\n", " ")


def test_unknown_ids_are_clean_errors(tmp_path: Path) -> None:
    cli(tmp_path, "import", str(TAU))
    for args in (["assemble", "conv_nope"], ["explain", "asm_nope"], ["rehydrate", "art_nope"]):
        code, out = cli(tmp_path, *args)
        assert code == EXIT_NOT_FOUND and "not found" in out and "Traceback" not in out


def test_console_script_runs_as_a_process(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "contextledger.cli.main", "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and "assemble" in proc.stdout


def test_unreachable_database_and_unwritable_out_are_clean_errors(tmp_path: Path) -> None:
    res = runner.invoke(app, ["--db", "postgresql+psycopg://postgres@127.0.0.1:1/none", "conversations"])
    assert res.exit_code == EXIT_BACKEND and "cannot open the database" in res.output and "Traceback" not in res.output
    code, out = cli(tmp_path, "import", str(TAU), "--json")
    cid = json.loads(out)[0]["conversation_id"]
    code, out = cli(tmp_path, "assemble", cid, "--out", str(tmp_path))
    assert code == EXIT_INPUT and "cannot write" in out and "Traceback" not in out


def test_branch_of_another_conversation_is_refused(tmp_path: Path) -> None:
    from contextledger.ledger import Ledger

    led = Ledger.open(home=tmp_path)
    rec = led.recorder()
    a = rec.start_conversation()
    b = rec.start_conversation()
    rec.record_message(a.id, "user", "hi")
    led.close()
    code, out = cli(tmp_path, "assemble", a.id, "--branch", b.root_branch_id)
    assert code == EXIT_NOT_FOUND and "not found" in out


def test_lone_surrogates_are_replaced_with_a_note_and_the_batch_goes_on(tmp_path: Path) -> None:
    bad = tmp_path / "surrogate.json"
    bad.write_text(json.dumps([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": "{\"command\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "bad \ud800 text"},
    ]), encoding="utf-8")
    code, out = cli(tmp_path / "home", "import", str(bad), str(TAU), "--json")
    assert code == 0, out
    first, second = json.loads(out)
    assert first["created"] is True and "replaced lone UTF-16 surrogates (not storable as UTF-8) with U+FFFD in [2]" in first["notes"]
    assert second["created"] is True  # the next file of the batch was imported
    from contextledger.ledger import Ledger

    led = Ledger.open(home=tmp_path / "home")
    try:
        [art] = led.store.artifacts(led.scope(), first["conversation_id"])
        assert led.rehydrate(art.id) == "bad \ufffd text".encode()
    finally:
        led.close()


def test_database_and_folder_errors_are_clean_and_mask_passwords(tmp_path: Path) -> None:
    res = runner.invoke(app, ["--db", "postgresql+psycopg://postgres:s3cretPW@127.0.0.2:5433/test", "conversations"])
    assert res.exit_code == EXIT_BACKEND and "s3cretPW" not in res.output and "postgres:***@127.0.0.2:5433" in res.output
    (tmp_path / "afile").write_text("x")
    code, out = cli(tmp_path / "afile" / "home", "import", str(TAU), "--json")
    assert code == EXIT_BACKEND
    err = json.loads(out)
    assert err["error"] == "BackendError" and "Not a directory" in err["message"] and "Traceback" not in out


def test_bench_rejects_malformed_number_lists(tmp_path: Path) -> None:
    for args, option in ((["bench", "scale", "--sizes", "abc"], "--sizes"), (["bench", "scenarios", "--scales", "1,x"], "--scales"), (["bench", "real", "--budgets", "4k"], "--budgets")):
        res = runner.invoke(app, [*args, "--out", str(tmp_path / "out")])
        assert res.exit_code == EXIT_INPUT, res.output
        assert f"{option}: expected comma-separated whole numbers" in res.output
        assert "Traceback" not in res.output


def test_bench_scale_rejects_non_positive_sizes_and_runs(tmp_path: Path) -> None:
    for args, needle in (
        (["--sizes", "-5"], "--sizes: expected comma-separated whole numbers of at least 1"),
        (["--sizes", "0,10"], "--sizes: expected comma-separated whole numbers of at least 1"),
        (["--sizes", ","], "--sizes: expected comma-separated whole numbers of at least 1"),
        (["--sizes", "10", "--runs", "0"], "runs must be at least 1"),
        (["--sizes", "10", "--runs", "-3"], "runs must be at least 1"),
    ):
        res = runner.invoke(app, ["bench", "scale", "--shape", "pipeline", *args, "--out", str(tmp_path / "out")])
        assert res.exit_code == EXIT_INPUT, res.output
        assert needle in res.output and "Traceback" not in res.output
    assert not (tmp_path / "out").exists()


def test_demo_never_deletes_a_folder_it_did_not_make(tmp_path: Path) -> None:
    """``--home H``: the demo writes ``H/demo``; a ``H/demo`` the user made is left alone
    (clear error, nothing deleted); a folder an earlier demo made is replaced, and the
    data directory line says how to explain the printed assembly."""
    mine = tmp_path / "demo"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    code, out = cli(tmp_path, "demo")
    assert code == EXIT_INPUT and "was not made by `contextledger demo`" in out and "Traceback" not in out
    assert (mine / "notes.txt").read_text() == "mine"
    (mine / "notes.txt").unlink()
    mine.rmdir()
    code, out = cli(tmp_path, "demo", "--json")
    assert code == 0, out
    first = json.loads(out)
    assert first["data_dir"] == str(mine) and (mine / ".contextledger-demo").is_file()
    code, out = cli(tmp_path, "demo")
    assert code == 0, out
    assert f"contextledger --home {mine} explain asm_" in out.replace("\n", "")
    # the earlier demo's ledger was replaced: its assembly is gone, the new one explains
    code, out = cli(mine, "explain", first["assembly"]["assembly_id"])
    assert code == EXIT_NOT_FOUND and "Traceback" not in out


def test_bench_without_the_bench_extras_says_what_to_install(tmp_path: Path) -> None:
    """A missing optional dependency (here autogen-core, shadowed by a module that cannot
    be imported) gives one line naming the extra, exit status 1, no traceback."""
    shadow = tmp_path / "shadow" / "autogen_core"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'autogen_core'\", name='autogen_core')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "shadow")}
    proc = subprocess.run(
        [sys.executable, "-c", "from contextledger.cli.main import app; app()", "bench", "scale", "--sizes", "10", "--out", str(tmp_path / "o")],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert proc.returncode == EXIT_INPUT, proc.stdout + proc.stderr
    assert "pip install 'contextledger[bench]'" in proc.stdout + proc.stderr
    assert "autogen_core" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_read_only_commands_never_create_a_ledger(tmp_path: Path) -> None:
    """A mistyped --db / --home is "no ledger at …" (exit 3) for every command that only
    reads: no folder, no database file is created; import creates one."""
    db = tmp_path / "nonexistent" / "dir" / "x.db"
    for args in (["conversations"], ["messages", "conv_x"], ["assemble", "conv_x"], ["explain", "asm_x"], ["search", "conv_x", "q"],
                 ["rehydrate", "art_x"], ["inspect", "conv_x"], ["gc", "--dry-run"], ["keys", "list"], ["index"]):
        res = runner.invoke(app, ["--db", str(db), *args])
        assert res.exit_code == EXIT_NOT_FOUND, (args, res.output)
        assert res.stderr.strip() == f"error: no ledger at {db} (check --db / --home / CONTEXTLEDGER_DB; `contextledger import` creates one)", args
        assert not (tmp_path / "nonexistent").exists()
    res = runner.invoke(app, ["--db", str(db), "conversations", "--json"])
    assert json.loads(res.stderr) == {"error": "LedgerNotFoundError", "message": f"no ledger at {db} (check --db / --home / CONTEXTLEDGER_DB; `contextledger import` creates one)", "exit_code": EXIT_NOT_FOUND}
    code, _ = cli(tmp_path / "home", "conversations")
    assert code == EXIT_NOT_FOUND and not (tmp_path / "home").exists()
    res = runner.invoke(app, ["--db", str(db), "import", str(TAU)])
    assert res.exit_code == 0 and db.is_file()
    res = runner.invoke(app, ["--db", str(db), "conversations", "--json"])
    assert res.exit_code == 0 and len(json.loads(res.stdout)) == 1


def test_home_and_db_of_the_wrong_kind_are_named(tmp_path: Path) -> None:
    """--home naming a file, --db naming a directory or a file that is not SQLite: one line
    saying so (exit 2), for a read-only command and for import alike; nothing is written."""
    afile = tmp_path / "notes.txt"
    afile.write_text("hello\n")
    for args in (["conversations"], ["import", str(TAU)]):
        res = runner.invoke(app, ["--home", str(afile), *args])
        assert res.exit_code == EXIT_INPUT, (args, res.output)
        assert res.stderr.strip() == f"error: --home {afile} names a file, not a directory (give the folder that holds ledger.db)"
        res = runner.invoke(app, ["--db", str(tmp_path), *args])
        assert res.exit_code == EXIT_INPUT, (args, res.output)
        assert res.stderr.strip() == f"error: --db {tmp_path} is a directory, not an SQLite database file"
        res = runner.invoke(app, ["--db", str(afile), *args])
        assert res.exit_code == EXIT_INPUT, (args, res.output)
        assert res.stderr.strip() == f"error: --db {afile} is not an SQLite database (the file does not start with the SQLite header)"
    assert afile.read_text() == "hello\n"
