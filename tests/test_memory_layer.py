"""The memory layer's tokens against the raw payloads they stand for, on real files."""

from __future__ import annotations

from conftest import real_data_dir, require_real_data
from contextledger.bench.memory_layer import measure_memory_layer, memory_layer_markdown
from contextledger.bench.real import real_files


def test_memory_layer_is_a_fraction_of_raw_payloads() -> None:
    require_real_data()
    files = real_files(real_data_dir(), limit=None, max_bytes=None, match="getmoto__moto.694ce1f4")
    [row] = measure_memory_layer(files)
    assert row.artifacts == row.memories == 37  # 38 actions, the last (submit) never got an observation
    assert row.raw_tokens > 20_000
    assert 0 < row.memory_tokens < row.raw_tokens * 0.25
    table = memory_layer_markdown([row])
    assert "getmoto__moto.694ce1f4" in table and "**total**" in table
