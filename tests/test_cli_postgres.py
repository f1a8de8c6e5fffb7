"""``contextledger import … --db postgresql+psycopg://…`` and ``assemble`` give the same
JSON as on SQLite, apart from ids and timings (issue: PostgreSQL as a first-class backend)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from conftest import real_data_dir, require_real_data
from contextledger.cli.main import app

runner = CliRunner()
ID = re.compile(r"\b(?:msg|art|mem|call|conv|br|part|run|asm|dec|skill|ckpt|rule)_[0-9A-Za-z]{16,26}\b")
FILES = [
    "tau-bench-airline-gpt4o/task002_trial2_idx102.json",
    "marot-spotter/tool_heavy.jsonl",
    "adp-nebius-swe-agent/marshmallow-code__apispec-811_21.json",
]


# token counts of texts that quote random ids may differ by a token or two
ID_SENSITIVE = ("timings_ms", "assembled_tokens", "buckets", "reduction", "token_delta", "payload_sha256")


IMPORTED_AT = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\dZ\b")


def normalise(data: Any) -> str:
    data = {k: v for k, v in data.items() if k not in ID_SENSITIVE}
    text = json.dumps(data, sort_keys=True, ensure_ascii=False)
    seen: dict[str, str] = {}
    # a transcript without timestamps is observed at import time: two imports may fall
    # in different minutes, which memory texts show ("observed 2026-…T05:52Z")
    text = IMPORTED_AT.sub("<minute>", text)
    return ID.sub(lambda m: seen.setdefault(m.group(0), f"<id{len(seen)}>"), text)


def run(db: str, home: Path, path: Path) -> dict[str, Any]:
    res = runner.invoke(app, ["--db", db, "--home", str(home), "import", str(path), "--json"])
    assert res.exit_code == 0, res.output
    cid = json.loads(res.output)[0]["conversation_id"]
    res = runner.invoke(app, ["--db", db, "--home", str(home), "assemble", cid, "--provider", "anthropic", "--budget", "8000", "--now", "2026-03-01T00:00:00Z", "--json"])
    assert res.exit_code == 0, res.output
    return dict(json.loads(res.stdout))


def test_postgresql_and_sqlite_give_the_same_assembly(pg_url: str, tmp_path: Path) -> None:
    require_real_data()
    for name in FILES:
        path = real_data_dir() / name
        lite = run(f"sqlite:///{tmp_path / 'lite.db'}", tmp_path / "lite", path)
        pg = run(pg_url, tmp_path / "pg", path)
        assert normalise(pg) == normalise(lite), name
        assert abs(pg["assembled_tokens"] - lite["assembled_tokens"]) <= 0.01 * lite["assembled_tokens"]
