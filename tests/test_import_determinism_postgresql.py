"""Two imports of one transcript give the same assembly on PostgreSQL (the SQLite half and
the method: ``test_import_determinism.py``; a file of its own so that the two halves, the
slowest tests of the suite, run on two workers at once)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import _admin_exec
from test_import_determinism import _assemble_all, _compare


def test_two_imports_give_the_same_assembly_on_postgresql(real_data: Path, pg_admin: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    first = str(request.getfixturevalue("pg_url"))
    a = _assemble_all(first, tmp_path / "blobs-a", real_data)
    # a second fresh database (the fixture gives one per test): made and dropped here
    name = f"{first.rsplit('/', 1)[1]}_b"
    _admin_exec(pg_admin, f'CREATE DATABASE "{name}"')
    try:
        b = _assemble_all(f"{first.rsplit('/', 1)[0]}/{name}", tmp_path / "blobs-b", real_data)
    finally:
        _admin_exec(pg_admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _compare(a, b)
