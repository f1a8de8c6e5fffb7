"""CLI error discipline: errors on stderr (one JSON object per line with ``--json``),
stdout holds only data, one documented exit status per kind of failure, and never a
Python traceback — also when run as a process on hostile transcripts."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextledger.cli.common import (
    EXIT_BACKEND,
    EXIT_CODES,
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_NOT_FOUND,
    EXIT_POLICY,
    EXIT_STORED_DATA,
)
from contextledger.cli.main import app

runner = CliRunner()
TAU = Path(__file__).parent / "data" / "airline_chat.json"  # an OpenAI-chat transcript of the project's own
README = Path(__file__).resolve().parents[1] / "README.md"


def invoke(home: Path, *args: str) -> tuple[int, str, str]:
    res = runner.invoke(app, ["--home", str(home), *args])
    return res.exit_code, res.stdout, res.stderr


def _json_errors(stderr: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stderr.splitlines() if line.strip()]


def test_each_kind_of_failure_has_its_exit_status_and_json_on_stderr(tmp_path: Path) -> None:
    home = tmp_path / "home"
    code, out, err = invoke(home, "import", str(TAU), "--json")
    assert code == 0 and err == ""
    conv = json.loads(out)[0]["conversation_id"]
    code, out, _ = invoke(home, "assemble", conv, "--json")
    asm = json.loads(out)["assembly_id"]
    bad_policy = tmp_path / "bad.toml"
    bad_policy.write_text("[budget.buckets]\nrecent_tail = 1.5\n")
    cases = [
        (["assemble", "conv_nope", "--json"], EXIT_NOT_FOUND, "NotFoundError"),
        (["explain", "asm_nope", "--json"], EXIT_NOT_FOUND, "NotFoundError"),
        (["explain", asm, "--record", "msg_nope", "--json"], EXIT_NOT_FOUND, "NotFoundError"),
        (["rehydrate", "art_nope", "--json"], EXIT_NOT_FOUND, "NotFoundError"),
        (["assemble", conv, "--now", "yesterday", "--json"], EXIT_INPUT, "InputError"),
        (["assemble", conv, "--policy", str(bad_policy), "--json"], EXIT_POLICY, "PolicyError"),
        (["policy", "validate", str(bad_policy), "--json"], EXIT_POLICY, "PolicyError"),
    ]
    for args, status, kind in cases:
        code, out, err = invoke(home, *args)
        assert (code, out) == (status, ""), (args, code, out, err)
        [error] = _json_errors(err)
        assert error["error"] == kind and error["exit_code"] == status and "Traceback" not in err, args

    # a backend that cannot be reached
    res = runner.invoke(app, ["--db", "postgresql+psycopg://postgres@127.0.0.1:1/none", "conversations", "--json"])
    assert (res.exit_code, res.stdout) == (EXIT_BACKEND, "")
    assert _json_errors(res.stderr)[0]["error"] == "BackendError"

    # stored data that fails its integrity check
    from contextledger.ledger import Ledger

    led = Ledger.open(home=home)
    rec = led.recorder()
    c = rec.start_conversation()
    rec.record_assistant(c.id, tool_calls=[{"call_id": "c1", "tool_name": "Bash"}])
    _, art, _ = rec.record_tool_result(c.id, "c1", "x" * 10_000)
    assert art.blob_key is not None
    blob = next(p for p in (home / "blobs").rglob("*") if p.is_file() and art.blob_key.split(":")[1] in p.name)
    led.close()
    blob.chmod(0o644)
    blob.write_bytes(b"tampered")
    code, out, err = invoke(home, "rehydrate", art.id, "--json")
    assert (code, out) == (EXIT_STORED_DATA, "") and _json_errors(err)[0]["error"] == "IntegrityError"


def test_a_failed_file_of_an_import_batch_goes_to_stderr_and_the_data_to_stdout(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('[{"role": "user", "content": "x"}, {"role": ')
    code, out, err = invoke(tmp_path / "home", "import", str(broken), str(TAU), "--json")
    assert code == EXIT_INPUT
    [ok] = json.loads(out)  # stdout: exactly the data of the file that was imported
    assert ok["created"] is True and ok["path"] == str(TAU)
    [error] = _json_errors(err)
    assert error["error"] == "ImportFormatError" and error["path"] == str(broken) and error["exit_code"] == EXIT_INPUT
    code, out, err = invoke(tmp_path / "home2", "import", str(broken))
    assert code == EXIT_INPUT and out == "" and err.startswith("error: ") and str(broken) in err
    # nothing imported: stdout stays empty (no "[]" next to the error), in either form
    for extra in (["--json"], []):
        code, out, err = invoke(tmp_path / "home3", "import", str(broken), str(tmp_path / "missing.json"), *extra)
        assert code == EXIT_INPUT and out == "" and str(broken) in err and "missing.json" in err


def test_readme_documents_every_exit_status() -> None:
    text = README.read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(\d)` \| (.+?) \|$", text, re.M))
    assert {int(k): v for k, v in rows.items()} == EXIT_CODES


def test_hostile_transcripts_as_a_process_never_print_a_traceback(tmp_path: Path) -> None:
    """The three inputs that crashed, through the console entry point as a user runs it."""
    files = {
        "deep.json": [{"role": "user", "content": "x"}, {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "[" * 5000 + "]" * 5000}}]}, {"role": "tool", "tool_call_id": "c1", "content": "ok"}],
        "surrogate.json": [{"role": "user", "content": "\ud800 title"}, {"role": "assistant", "content": "hi"}],
        "nul.json": [{"role": "user", "content": "a\x00b"}, {"role": "assistant", "content": "hi"}],
    }
    env = {**os.environ, "CONTEXTLEDGER_HOME": str(tmp_path / "home")}
    env.pop("CONTEXTLEDGER_DB", None)
    script = [sys.executable, "-c", "from contextledger.cli.main import main; main()"]
    paths = []
    for name, messages in files.items():
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(messages), encoding="utf-8")
    proc = subprocess.run([*script, "import", *map(str, paths), "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    imported = json.loads(proc.stdout)
    assert len(imported) == 3
    # one process assembles all three (each used to raise), for both providers
    assemble = "\n".join([
        "from contextledger.ledger import Ledger",
        "led = Ledger.open()",
        *(f"led.assemble({r['conversation_id']!r}, provider={p!r})" for r in imported for p in ("openai-chat", "anthropic")),
    ])
    proc = subprocess.run([sys.executable, "-c", assemble], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    # an unexpected failure (a defect) is one line and status 1 as well
    boom = [sys.executable, "-c", "import contextledger.cli.main as m\ndef f(*a, **k):\n    raise RuntimeError('boom')\nm.state.ledger = f\nm.main()"]
    # (``messages`` opens the ledger; ``conversations`` may list an SQLite ledger without it)
    proc = subprocess.run([*boom, "messages", imported[0]["conversation_id"]], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == EXIT_INTERNAL and "internal error (RuntimeError: boom)" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["assemble"], "Missing argument 'conversation'. (see 'contextledger assemble --help')"),
        (["assemble", "C", "--budget", "abc"], "Invalid value for '--budget': Input should be a valid integer, unable to parse string as an integer (see 'contextledger assemble --help')"),
        (["search", "C", "x", "--limit", "0"], "Invalid value for '--limit': Input should be greater than or equal to 1 (see 'contextledger search --help')"),
        (["encryption"], None),
    ],
)
def test_usage_errors_are_one_line_or_one_json_object_with_status_2(tmp_path: Path, args: list[str], message: str | None) -> None:
    """README: with --json each error is one JSON object on one line of stderr — typer's
    usage errors too (they printed a multi-line box); without --json one line."""
    env = {**os.environ, "CONTEXTLEDGER_HOME": str(tmp_path / "home")}
    env.pop("CONTEXTLEDGER_DB", None)
    script = [sys.executable, "-c", "from contextledger.cli.main import main; main()"]
    if message is None:  # a group without its subcommand: the help, as before, and --json is an unknown option
        proc = subprocess.run([*script, *args], capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 2 and "rotate" in proc.stdout and proc.stderr == ""
        message = f"No such option: --json (see 'contextledger {args[0]} --help')"
    for as_json in (True, False) if "No such option" not in message else (True,):
        proc = subprocess.run([*script, *args, *(["--json"] if as_json else [])], capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 2 and proc.stdout == "", proc.stderr
        if as_json:
            assert proc.stderr.count("\n") == 1
            assert json.loads(proc.stderr) == {"error": "UsageError", "message": message, "exit_code": 2}
        else:
            assert proc.stderr == f"error: {message}\n"


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ('{"path": "a.jsonl"}', "expected a list of entries, found a JSON dict"),
        ('["a.jsonl"]', "entry 0: expected an object, found a JSON str"),
        ('[{"path": "a.jsonl", "bytes": 3}]', "entry 0: missing field 'format'"),
        ('[{"path": "a.jsonl", "format": "claude-code", "bytes": 3}, {"path": 7, "format": "x", "bytes": 1}]', "entry 1: field 'path' must be a string, found 7"),
        ('[{"path": "a.jsonl", "format": "claude-code", "bytes": "3"}]', "entry 0: field 'bytes' must be a non-negative integer, found '3'"),
        ("[{", None),
    ],
)
def test_a_wrong_shaped_bench_manifest_is_one_line(tmp_path: Path, manifest: str, message: str | None) -> None:
    """Every bench command reading a manifest names the manifest, the entry and the field (exit 2)."""
    (tmp_path / "manifest.json").write_text(manifest)
    for args in (["bench", "secrets", "--data", str(tmp_path)], ["bench", "real", "--data", str(tmp_path), "--out", str(tmp_path / "out")]):
        res = runner.invoke(app, ["--home", str(tmp_path / "home"), *args])
        assert res.exit_code == EXIT_INPUT, (args, res.output)
        line = res.stderr.strip()
        assert "\n" not in line and "Traceback" not in res.output
        if message is None:
            assert line.startswith(f"error: {tmp_path / 'manifest.json'}: not valid JSON ("), line
        else:
            assert line == f"error: {tmp_path / 'manifest.json'}: {message}", line
