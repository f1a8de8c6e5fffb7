"""Hard edges of the command line on real file systems: a read-only ledger is readable, a
full disk and other OS errors name their cause, a forced ``--format`` that is plainly
another format refuses, UTF-16/32 transcripts are read, a symlink loop is named.

The read-only and full file systems are real mounts made in a private user and mount
namespace (``unshare -rm``): a read-only bind mount of the ledger's folder, a 512 KiB
tmpfs.  Where the namespace cannot be made, those tests skip with one line."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextledger.cli.common import EXIT_BACKEND, EXIT_INPUT
from contextledger.cli.main import app
from contextledger.errors import describe_os_error, os_error_cause

DATA = Path(__file__).parent / "data"
CLI = [sys.executable, "-m", "contextledger.cli.main"]
runner = CliRunner()


def _namespace_problem() -> str | None:
    if shutil.which("unshare") is None:
        return "unshare not installed: read-only and full file systems cannot be mounted"
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, text=True)
    return None if probe.returncode == 0 else f"unshare -rm refused ({probe.stderr.strip()}): no private mounts here"


def in_namespace(mount: str, *commands: list[str]) -> list[subprocess.CompletedProcess[str]]:
    """Run ``mount`` then each CLI command inside one private mount namespace; one result
    per command (the exit status and both streams, separated by a marker line)."""
    problem = _namespace_problem()
    if problem is not None:
        pytest.skip(problem)
    marker = "::contextledger-test-next::"
    script = "set -e\n" + mount + "\nset +e" + "".join(f"\n{shlex.join(c)}; echo \"rc=$?\"; echo {marker}; echo {marker} >&2" for c in commands)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    run = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr
    outs, errs = run.stdout.split(marker + "\n"), run.stderr.split(marker + "\n")
    results = []
    for i, c in enumerate(commands):
        out, _, rc = outs[i].rpartition("rc=")
        results.append(subprocess.CompletedProcess(c, int(rc), out, errs[i]))
    return results


def test_a_read_only_ledger_is_readable_and_a_write_says_why_not(tmp_path: Path) -> None:
    home = tmp_path / "home"
    res = runner.invoke(app, ["--home", str(home), "import", str(DATA / "airline_chat.json"), "--json"])
    assert res.exit_code == 0, res.output
    [imp] = json.loads(res.output)
    from contextledger.ledger import Ledger

    led = Ledger.open(home=home)
    art = max(led.store.artifacts(led.scope(), imp["conversation_id"]), key=lambda a: a.size_bytes)
    led.close()
    raw = tmp_path / "raw.bin"
    ro = f"mount --bind {shlex.quote(str(home))} {shlex.quote(str(home))}\nmount -o remount,bind,ro {shlex.quote(str(home))}"
    base = [*CLI, "--home", str(home)]
    conv, rehydrate, gc, write = in_namespace(
        ro,
        [*base, "conversations", "--json"],
        [*base, "rehydrate", art.id, "--out", str(raw)],
        [*base, "gc", "--dry-run"],
        [*base, "import", str(DATA / "claude_code_session.jsonl")],
    )
    assert conv.returncode == 0, conv.stderr
    assert [r["conversation_id"] for r in json.loads(conv.stdout)] == [imp["conversation_id"]]
    assert rehydrate.returncode == 0, rehydrate.stderr
    import hashlib

    assert "sha256:" + hashlib.sha256(raw.read_bytes()).hexdigest() == art.sha256
    assert gc.returncode == 0 and gc.stdout.startswith("would delete: 0 unreferenced blobs"), gc.stderr
    assert write.returncode == EXIT_BACKEND
    assert write.stderr.strip() == "error: database error: read-only ledger (attempt to write a readonly database)"


def test_a_full_disk_names_the_cause_and_leaves_nothing(tmp_path: Path) -> None:
    home = tmp_path / "full"
    home.mkdir()
    big = tmp_path / "many.json"
    big.write_text(json.dumps([{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + f"w{i} " * 700} for i in range(200)]))
    tmpfs = f"mount -t tmpfs -o size=512k tmpfs {shlex.quote(str(home))}"
    base = [*CLI, "--home", str(home / "h")]
    imp, conv = in_namespace(tmpfs, [*base, "import", str(big)], [*base, "conversations", "--json"])
    assert imp.returncode == EXIT_BACKEND
    assert imp.stderr.strip() == "error: database error: disk full (database or disk is full)"
    assert conv.returncode == 0 and json.loads(conv.stdout) == []


def test_os_errors_name_their_cause(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(loop)
    with pytest.raises(OSError) as info:
        loop.read_bytes()
    assert os_error_cause(info.value) == "symlink loop"
    assert describe_os_error(info.value) == f"symlink loop (Too many levels of symbolic links): {loop}"
    res = runner.invoke(app, ["--home", str(tmp_path / "h"), "import", str(loop)])
    assert res.exit_code == EXIT_INPUT and res.output.replace("\n", "") == f"error: {loop}: symlink loop (Too many levels of symbolic links)"
    missing = tmp_path / "missing.json"
    res = runner.invoke(app, ["--home", str(tmp_path / "h"), "import", str(missing)])
    assert res.exit_code == EXIT_INPUT and res.output.replace("\n", "") == f"error: {missing}: no such file"


@pytest.mark.parametrize(("forced", "fixture", "detected"), [
    ("aider-history", "claude_code_session.jsonl", "claude-code"),
    ("codex-rollout", "claude_code_session.jsonl", "claude-code"),
    ("openai-responses", "claude_code_session.jsonl", "claude-code"),
    ("gemini-cli", "airline_chat.json", "openai-chat"),
    ("aider-history", "airline_chat.json", "openai-chat"),
])
def test_a_forced_format_without_its_markers_refuses(tmp_path: Path, forced: str, fixture: str, detected: str) -> None:
    home = tmp_path / "h"
    res = runner.invoke(app, ["--home", str(home), "import", str(DATA / fixture), "--format", forced])
    assert res.exit_code == EXIT_INPUT
    assert res.output.replace("\n", "") == (
        f"error: {DATA / fixture}: --format {forced}: none of its markers found; the content is {detected} (use --format {detected} or auto)"
    )
    res = runner.invoke(app, ["--home", str(home), "conversations", "--json"])
    assert json.loads(res.output) == []
    res = runner.invoke(app, ["--home", str(home), "import", str(DATA / fixture), "--format", detected, "--json"])
    assert res.exit_code == 0 and json.loads(res.output)[0]["format"] == detected


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be", "utf-8-sig"])
def test_utf16_and_utf32_transcripts_are_read(tmp_path: Path, codec: str) -> None:
    messages = [{"role": "user", "content": "Größe of the café's menu?"}, {"role": "assistant", "content": "Zwölf items."}]
    path = tmp_path / f"chat-{codec}.json"
    path.write_bytes(json.dumps(messages, ensure_ascii=False).encode(codec))
    plain = tmp_path / "chat.json"
    plain.write_text(json.dumps(messages, ensure_ascii=False), encoding="utf-8")
    from contextledger.ingest.importers import parse_file

    wide, utf8 = parse_file(path), parse_file(plain)
    assert [(m.role, m.parts) for m in wide.messages] == [(m.role, m.parts) for m in utf8.messages]


def test_odd_length_utf16_is_named_not_called_binary(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    path.write_bytes(json.dumps([{"role": "user", "content": "hi"}]).encode("utf-16-le")[:-1])
    res = runner.invoke(app, ["--home", str(tmp_path / "h"), "import", str(path)])
    assert res.exit_code == EXIT_INPUT
    assert res.output.replace("\n", "") == f"error: {path}, byte 68: not valid UTF-16-LE (truncated data)"


def test_concurrent_imports_of_one_file_all_succeed_as_one_conversation(tmp_path: Path) -> None:
    """Four processes import one file at once: each exits 0 and names the same
    conversation; the ones that lost the race say "already imported", as a serial
    re-import does (each process checks first, so the race is the common case here)."""
    home = tmp_path / "home"
    runner.invoke(app, ["--home", str(home), "conversations"])  # nothing: no ledger yet
    procs = [subprocess.Popen([*CLI, "--home", str(home), "import", str(DATA / "airline_chat.json"), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [err for _, err in outputs]
    results = [json.loads(out)[0] for out, _ in outputs]
    assert len({r["conversation_id"] for r in results}) == 1
    assert sorted(r["created"] for r in results) == [False, False, False, True]
    for r in results:
        if not r["created"]:
            assert r["notes"][0].startswith("already imported: same content key")
    res = runner.invoke(app, ["--home", str(home), "conversations", "--json"])
    assert [c["conversation_id"] for c in json.loads(res.output)] == [results[0]["conversation_id"]]
