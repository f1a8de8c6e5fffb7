"""The real-transcript guard of ``conftest.py``: with the folder switched off
(``CONTEXTLEDGER_REAL_DATA=none``) a guarded test skips with one line, even in CI, and a
test (or a test module at import) that reads the folder without the guard fails, naming
what it read."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PROBE = '''
import subprocess, sys
import pytest
from conftest import real_data_dir, real_params, require_real_data
from contextledger.ledger import Ledger

def test_guarded_by_fixture(real_data):
    (real_data / "a.json").read_text()

def test_guarded_by_call():
    require_real_data()
    (real_data_dir() / "a.json").read_text()

@pytest.mark.parametrize("path", real_params("tau/*.json"))
def test_guarded_params(path):
    path.read_text()

def test_reads_and_swallows_the_error():
    try:
        (real_data_dir() / "b.json").read_bytes()
    except OSError:
        pass

def test_hands_the_folder_to_a_subprocess():
    subprocess.run([sys.executable, "-c", "pass", str(real_data_dir() / "c.json")], check=True)

def test_imports_from_the_folder(tmp_path):
    led = Ledger.open(home=tmp_path)
    try:
        led.import_file(real_data_dir() / "d.jsonl")
    finally:
        led.close()

def test_never_reads_it():
    assert True
'''


def test_guarded_tests_skip_and_unguarded_reads_fail(tmp_path: Path) -> None:
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_probe.py").write_text(PROBE, encoding="utf-8")
    env = {**os.environ, "CONTEXTLEDGER_REAL_DATA": "none", "CI": "true"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-rfs", str(tmp_path / "test_probe.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    out = run.stdout
    assert run.returncode == 1, out
    assert "3 failed, 1 passed, 3 skipped" in out, out
    assert out.count("real transcripts switched off (CONTEXTLEDGER_REAL_DATA=none)") == 3
    failed = sorted(line.split("::")[1].split(" ")[0] for line in out.splitlines() if line.startswith("FAILED"))
    assert failed == ["test_hands_the_folder_to_a_subprocess", "test_imports_from_the_folder", "test_reads_and_swallows_the_error"]
    assert "reads the real-transcript folder without the guard (open /nonexistent/contextledger-real-data/b.json)" in out
    assert "(subprocess.Popen " in out and "/nonexistent/contextledger-real-data/c.json" in out
